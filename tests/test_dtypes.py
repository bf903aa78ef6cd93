"""kvlib.dtypes: the one dtype table, entry by entry.

Widths: IEEE 754 binary32 (4 B) and binary16 (2 B), bfloat16 (2 B, Google Brain float), OCP 8-bit floating point
spec (E4M3 / E5M2: 1 B), int8 (1 B), 4-bit formats (int4, FP4 E2M1, OCP MX FP4: half a byte per element).
"""

import pytest

from kvlib.dtypes import KV_DTYPES, WEIGHT_DTYPES, dtype_bytes, served_dtype_bytes

TABLE = {
    "float32": 4, "fp32": 4, "float": 4,
    "bfloat16": 2, "bf16": 2, "float16": 2, "fp16": 2, "half": 2,
    "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "float8_e4m3fn": 1, "fp8_inc": 1, "int8": 1,
    "int4": 0.5, "fp4": 0.5, "mxfp4": 0.5,
}


@pytest.mark.parametrize("name,size", sorted(TABLE.items()))
def test_every_entry(name, size):
    assert dtype_bytes(name) == size
    assert dtype_bytes(name.upper()) == size
    assert dtype_bytes("torch." + name) == size


def test_unknown_dtype_is_named_with_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown dtype 'fp6' \(known: bf16, bfloat16, float, "):
        dtype_bytes("fp6")


def test_cli_choices():
    assert KV_DTYPES == ("bf16", "fp16", "fp8")
    assert WEIGHT_DTYPES == ("bf16", "fp16", "fp8", "int8", "int4")


def test_served_dtype_is_16_bit_and_rejects_unknown_names():
    # vLLM's --dtype auto serves float32 checkpoints in 16 bits (its ModelConfig: float32 -> float16/bfloat16)
    assert [served_dtype_bytes(d) for d in ("float32", "bfloat16", "float16", "fp8", None)] == [2, 2, 2, 2, 2]
    with pytest.raises(ValueError, match="unknown dtype 'fp6'"):
        served_dtype_bytes("fp6")
