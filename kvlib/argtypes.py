"""argparse value types shared by kvlib's subcommands (info, vllm-log, plan, drill).

Each raises ``argparse.ArgumentTypeError`` with a one-line message, which the
CLI prints as ``kvlib <command>: argument --flag: <message>`` and exits 2.
"""

from __future__ import annotations

import argparse

from .units import parse_bytes


def positive_int(text: str) -> int:
    """'8192' -> 8192; zero, negatives and non-integers are refused."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def fraction(text: str) -> float:
    """A number in (0, 1], e.g. a memory utilization or an efficiency."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {text!r}") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {text!r}")
    return value


def byte_size(text: str) -> int:
    """'80GB', '79.18GiB' or a byte count, as an int (see kvlib.units.parse_bytes)."""
    try:
        return parse_bytes(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def vllm_version(text: str) -> str:
    """A vLLM release such as '0.19.0' (kept as given; kvlib.vllm.engine reads it)."""
    from .vllm.engine import VllmLogError, as_version
    try:
        as_version(text)
    except VllmLogError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text
