"""kvlib.units: the unit constants, parse_bytes and the byte formats, against hand-worked values."""

import pytest

from kvlib.units import GB, KB, MB, TB, GiB, KiB, MiB, TiB, format_binary, format_bytes, format_gb_gib, parse_bytes


def test_unit_constants():
    # SI prefixes (decimal) against IEC binary prefixes: 10^3n and 2^10n
    assert (KB, MB, GB, TB) == (1000, 1_000_000, 1_000_000_000, 1_000_000_000_000)
    assert (KiB, MiB, GiB, TiB) == (1024, 1_048_576, 1_073_741_824, 1_099_511_627_776)


@pytest.mark.parametrize("text,expected", [
    ("80GB", 80_000_000_000),
    ("80 gb", 80_000_000_000),
    (" 1.5 KiB ", 1536),
    ("512 MiB", 536_870_912),
    ("2 TiB", 2_199_023_255_552),
    ("3 TB", 3_000_000_000_000),
    ("7 kb", 7000),
    ("7 MB", 7_000_000),
    ("1024", 1024),
    ("1024 B", 1024),
    ("1e3 KiB", 1_024_000),
    # log 20's 69.66 GiB: 69 x 1,073,741,824 = 74,088,185,856 plus 0.66 x 1,073,741,824 = 708,669,603.84,
    # so 74,796,855,459.84 B: rounded to the nearest byte, not truncated
    ("69.66 GiB", 74_796_855_460),
    ("1.7 B", 2),
])
def test_parse_bytes(text, expected):
    assert parse_bytes(text) == expected
    assert type(parse_bytes(text)) is int


@pytest.mark.parametrize("text", ["", "GB", "80 parsecs", "-1 GB", "1,000 B", "eighty"])
def test_parse_bytes_refuses_with_the_text(text):
    with pytest.raises(ValueError) as info:
        parse_bytes(text)
    assert repr(text) in str(info.value)


def test_parse_bytes_unknown_unit_names_it():
    with pytest.raises(ValueError, match=r"unknown byte unit 'parsecs'"):
        parse_bytes("80 parsecs")


@pytest.mark.parametrize("n,expected", [
    (1023, "1,023 B"),
    (1024, "1 KiB"),                       # exactly one unit switches up
    (1536, "1.5 KiB"),
    (2**20, "1 MiB"),
    (2**30, "1 GiB"),
    (2**40, "1 TiB"),
    (5 * 2**40, "5 TiB"),
    (-2048, "-2 KiB"),
    (1_288_490_189, "1.2 GiB"),            # 1.2000000002 GiB: trailing zeros dropped
    (1_234_567_890, "1.15 GiB"),           # 1.1498 GiB to two decimals
])
def test_format_binary(n, expected):
    assert format_binary(n) == expected


def test_format_bytes_and_both_readings():
    assert format_bytes(1023) == "1,023 B"
    assert format_bytes(-1023) == "-1,023 B"
    assert format_bytes(1024) == "1,024 B (1 KiB)"
    assert format_bytes(131_072) == "131,072 B (128 KiB)"   # Llama 3.1 8B's bytes per token
    # 80 GB = 80 / 1.073741824 = 74.51 GiB
    assert format_gb_gib(80 * GB) == "80.00 GB (74.51 GiB)"
    assert format_gb_gib(1_500 * GB) == "1,500.00 GB (1,396.98 GiB)"


def test_count_text_is_singular_for_one():
    from kvlib.units import count_text
    assert [count_text(n, "node") for n in (0, 1, 2, 1000)] == ["0 nodes", "1 node", "2 nodes", "1,000 nodes"]
    assert count_text(1, "batch", "batches") == "1 batch" and count_text(3, "batch", "batches") == "3 batches"
