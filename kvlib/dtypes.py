"""Bytes per element for the dtypes the course uses: kvlib's one dtype table.

Every reader of a dtype name goes through ``dtype_bytes``: model configs
(``torch_dtype``), the CLI's ``--kv-dtype`` / ``--weight-dtype``, and vLLM's
``kv_cache_dtype`` (``kvlib.vllm.kv_element_bytes``, which adds only
vLLM's 'auto' and its packed MLA layouts). Taught in ch01_kv_formula.

>>> dtype_bytes("bf16"), dtype_bytes("fp8_e4m3"), dtype_bytes("int4")
(2, 1, 0.5)
"""

from __future__ import annotations

_BYTES = {
    "float32": 4, "fp32": 4, "float": 4,
    "bfloat16": 2, "bf16": 2, "float16": 2, "fp16": 2, "half": 2,
    "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "float8_e4m3fn": 1, "fp8_inc": 1, "int8": 1,
    "int4": 0.5, "fp4": 0.5, "mxfp4": 0.5,
}

KV_DTYPES = ("bf16", "fp16", "fp8")      # what --kv-dtype offers on the CLI
WEIGHT_DTYPES = ("bf16", "fp16", "fp8", "int8", "int4")   # what --weight-dtype offers


def dtype_bytes(name: str):
    """Bytes per element of ``name`` (case-insensitive, 'torch.' prefix allowed)."""
    key = str(name).lower().removeprefix("torch.")
    if key not in _BYTES:
        raise ValueError(f"unknown dtype {name!r} (known: {', '.join(sorted(_BYTES))})")
    return _BYTES[key]


def served_dtype_bytes(checkpoint_dtype: str | None) -> int:
    """Bytes per element a 16-bit serving engine uses for a checkpoint dtype.

    vLLM's ``--dtype auto`` serves float32 checkpoints in 16 bits, so the KV
    cache of an 'auto' run is 2 bytes for every checkpoint dtype seen here.
    Quantized checkpoints (fp8 or int4 weights) keep a 16-bit KV cache too
    unless the KV dtype is set, so the answer is 2 whatever is passed.

    >>> served_dtype_bytes("float32"), served_dtype_bytes("bfloat16"), served_dtype_bytes(None)
    (2, 2, 2)
    """
    if checkpoint_dtype is not None:
        dtype_bytes(checkpoint_dtype)  # reject unknown names loudly
    return 2
