"""Byte units. Decimal (GB = 10^9) and binary (GiB = 2^30) are never mixed:
every printed figure says which one it is. Taught in ch01_kv_formula.

>>> GB, GiB
(1000000000, 1073741824)
>>> format_bytes(131072)
'131,072 B (128 KiB)'
>>> format_gb_gib(2**30)
'1.07 GB (1.00 GiB)'
>>> parse_bytes("80GB"), parse_bytes("79.18 GiB"), parse_bytes("1024")
(80000000000, 85018877624, 1024)

``count_text`` writes a count with its noun, singular for one ('1 node'), for every printed count.
"""

from __future__ import annotations

import re

KB, MB, GB, TB = 10**3, 10**6, 10**9, 10**12
KiB, MiB, GiB, TiB = 2**10, 2**20, 2**30, 2**40

_UNITS = {
    "b": 1, "kb": KB, "mb": MB, "gb": GB, "tb": TB,
    "kib": KiB, "mib": MiB, "gib": GiB, "tib": TiB,
}


def format_binary(n_bytes) -> str:
    """Largest binary unit with a value >= 1: '128 KiB', '2.5 GiB'."""
    for name, size in (("TiB", TiB), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if abs(n_bytes) >= size:
            value = n_bytes / size
            text = f"{value:,.2f}".rstrip("0").rstrip(".")
            return f"{text} {name}"
    return f"{n_bytes:,} B"


def format_bytes(n_bytes: int) -> str:
    """Exact byte count with its binary reading: '131,072 B (128 KiB)'."""
    if abs(n_bytes) < KiB:
        return f"{n_bytes:,} B"
    return f"{int(n_bytes):,} B ({format_binary(n_bytes)})"


def format_gb_gib(n_bytes) -> str:
    """Both readings, to two decimals: '1.07 GB (1.00 GiB)'."""
    return f"{n_bytes / GB:,.2f} GB ({n_bytes / GiB:,.2f} GiB)"


def count_text(n, word: str, plural: str | None = None) -> str:
    """A count with its noun, singular for one: '1 node', '3 nodes', '1,024 sequences', '1 replica'.

    ``plural`` for a noun that does not take an s ('1 batch', '2 batches').

    >>> count_text(1, "node"), count_text(3, "node"), count_text(1024, "sequence"), count_text(2, "batch", "batches")
    ('1 node', '3 nodes', '1,024 sequences', '2 batches')
    """
    return f"{n:,} {word if n == 1 else plural or word + 's'}"


def parse_bytes(text: str) -> int:
    """Parse '80GB', '79.18 GiB', '512 MiB' or a bare byte count into an int.

    Raises ValueError with the offending text for anything else.
    """
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?)\s*([a-zA-Z]*)\s*", str(text))
    if not match:
        raise ValueError(f"not a byte size: {text!r} (examples: 80GB, 79.18GiB, 1048576)")
    number, unit = match.groups()
    unit = unit.lower() or "b"
    if unit not in _UNITS:
        raise ValueError(f"unknown byte unit {match.group(2)!r} in {text!r} (use B, KB, MB, GB, KiB, MiB, GiB)")
    return int(round(float(number) * _UNITS[unit]))
