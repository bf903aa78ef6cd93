"""What depends on vLLM's engine (V0 or V1) and release: one rule each.

- ``parse_version`` reads '0.8.3rc2.dev224+g49c0d11ec' as (0, 8, 3);
- ``default_utilization(version)``: ``gpu_memory_utilization``'s default;
- ``budget_rounds_up(engine, version)``: whether the memory request is
  ``ceil(T * u)`` (V1 from 0.14) or the float ``T * u``;
- ``group_rule(version)``: how V1 groups hybrid layers into KV-cache groups;
- ``DEFAULT_BLOCK_SIZE`` and V0's default swap space.

Taught in ch04_pool_paging and ch08_vllm_lab.
"""

from __future__ import annotations

import re

from ..units import GiB

__all__ = ["V0", "V1", "VllmLogError", "DEFAULT_BLOCK_SIZE", "V0_SWAP_SPACE_BYTES", "parse_version",
           "as_version", "default_utilization", "budget_rounds_up", "group_rule"]

V0, V1 = "v0", "v1"
DEFAULT_BLOCK_SIZE = 16  # CacheConfig.DEFAULT_BLOCK_SIZE, every release 0.2-0.33
V0_SWAP_SPACE_BYTES = 4 * GiB  # V0's default swap_space: CPU blocks = 4 GiB // bytes per block


class VllmLogError(ValueError):
    """A vLLM log (or a figure taken from one) cannot be used; the message says why."""


def parse_version(text) -> tuple[int, int, int] | None:
    """(major, minor, patch) of a vLLM version string, or None when it is not one.

    Pre-release and local parts are dropped: ``0.8.3rc2.dev224+g49c0d11ec``
    reads as (0, 8, 3).

    >>> parse_version("0.8.3rc2.dev224+g49c0d11ec"), parse_version("v0.10.1.1"), parse_version("main")
    ((0, 8, 3), (0, 10, 1), None)
    """
    if isinstance(text, tuple):
        return tuple(text[:3]) + (0,) * (3 - len(text[:3])) if all(type(x) is int for x in text) else None
    if not isinstance(text, str):
        return None
    match = re.match(r"\s*v?(\d{1,4})\.(\d{1,4})(?:\.(\d{1,4}))?", text)
    if not match:
        return None
    return int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)


def as_version(version) -> tuple[int, int, int] | None:
    """``parse_version`` for a version a caller passed in: None stays None, anything else must parse."""
    if version is None:
        return None
    parsed = parse_version(version)
    if parsed is None:
        raise VllmLogError(f"not a vLLM version: {version!r} (expected e.g. '0.8.5')")
    return parsed


def default_utilization(version=None) -> float:
    """vLLM's default ``gpu_memory_utilization``: 0.90 before 0.20, 0.92 from 0.20.

    ``version`` is a string such as '0.8.5' or a tuple; None means the newest
    release (0.92). The one definition of the default: ``kvlib info``, the
    planner, the drills and ``predict_pool`` take theirs from here.

    >>> default_utilization("0.19.1"), default_utilization("0.20.2"), default_utilization()
    (0.9, 0.92, 0.92)
    """
    v = as_version(version)
    return 0.90 if v is not None and v < (0, 20, 0) else 0.92


def budget_rounds_up(engine: str = V1, version=None) -> bool:
    """Whether vLLM requests ``ceil(T * u)`` bytes (V1 from 0.14; None = newest) or the float ``T * u``.

    >>> budget_rounds_up("v1", "0.13.0"), budget_rounds_up("v1", "0.14.0"), budget_rounds_up("v0")
    (False, True, False)
    """
    v = as_version(version)
    return engine == V1 and (v is None or v >= (0, 14, 0))


def group_rule(version) -> str:
    """V1's rule for the KV-cache group size of hybrid models, by release (see ``layout.kv_cache_groups``).

    'smallest' through 0.10, '1.25' in 0.11-0.14, '1.5' from 0.15 (and when unknown).
    """
    v = as_version(version)
    if v is None:
        return "1.5"
    if v < (0, 11, 0):
        return "smallest"
    if v < (0, 15, 0):
        return "1.25"
    return "1.5"
