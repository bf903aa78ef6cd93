"""kvlib.argtypes: the CLI's value types, their bounds and their one-line messages (in-process)."""

import argparse

import pytest

from kvlib.argtypes import byte_size, fraction, positive_int


@pytest.mark.parametrize("text, value", [("1", 1), ("2", 2), ("8192", 8192), (" 7 ", 7)])
def test_positive_int_accepts_one_and_up(text, value):
    # 1 is the smallest positive integer: the bound is "at least 1", not "more than 1"
    assert positive_int(text) == value and isinstance(positive_int(text), int)


@pytest.mark.parametrize("text", ["0", "-1", "-8192", "abc", "1.5", "", "1e3"])
def test_positive_int_refuses_with_one_line(text):
    with pytest.raises(argparse.ArgumentTypeError) as info:
        positive_int(text)
    assert str(info.value) == f"expected a positive integer, got {text!r}"
    # the ValueError from int() is not chained into the message the CLI prints
    assert info.value.__cause__ is None


@pytest.mark.parametrize("text, value", [("1", 1.0), ("1.0", 1.0), ("0.92", 0.92), ("0.5", 0.5), ("1e-3", 0.001)])
def test_fraction_accepts_the_half_open_interval(text, value):
    # (0, 1]: 1 itself is allowed (utilization 1.0 in [kv-math] s8), any positive number below it too
    assert fraction(text) == value and isinstance(fraction(text), float)


@pytest.mark.parametrize("text", ["0", "0.0", "-0.5", "1.0001", "2", "abc", "", "nan"])
def test_fraction_refuses_with_one_line(text):
    with pytest.raises(argparse.ArgumentTypeError) as info:
        fraction(text)
    assert str(info.value) == f"expected a number in (0, 1], got {text!r}"
    assert info.value.__cause__ is None


@pytest.mark.parametrize("text, value", [
    ("80GB", 80 * 10**9),                      # decimal GB: 80 x 10^9
    ("512MiB", 512 * 2**20),                   # binary MiB: 512 x 2^20 = 536,870,912
    # an H100 as CUDA reports it: 79 x 2^30 = 84,825,604,096, + 0.18 x 2^30 = 193,273,528.32 -> 85,018,877,624
    ("79.18GiB", 85_018_877_624),
    ("1048576", 1_048_576),                    # a bare byte count
])
def test_byte_size_parses_units(text, value):
    assert byte_size(text) == value


@pytest.mark.parametrize("text, message", [
    ("3 parsecs", "unknown byte unit 'parsecs' in '3 parsecs' (use B, KB, MB, GB, KiB, MiB, GiB)"),
    ("lots", "not a byte size: 'lots' (examples: 80GB, 79.18GiB, 1048576)"),
])
def test_byte_size_refuses_with_the_parser_message(text, message):
    with pytest.raises(argparse.ArgumentTypeError) as info:
        byte_size(text)
    assert str(info.value) == message
    assert info.value.__cause__ is None
