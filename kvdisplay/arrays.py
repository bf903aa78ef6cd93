"""A KV cache as a numpy array, so its ``.nbytes`` can be set beside the formula.

The layout is ``[layers, 2, batch, kv_heads, seq_len, head_dim]``: axis 1 holds the
key (index 0) and the value (index 1). Engines lay their caches out differently (vLLM
keeps one tensor per layer, in blocks of tokens); the byte count is the same.

Used in: ch01_kv_formula (section "The cache as an array").
"""

from __future__ import annotations

KV_CACHE_AXES = ("layers", "K and V", "batch", "kv_heads", "seq_len", "head_dim")

#: numpy has no bf16 or fp8: these stand-ins have the same width, which is all ``.nbytes`` sees.
_STAND_INS = {1: "uint8", 2: "float16", 4: "float32"}


def numpy_dtype(dtype_bytes: int):
    """A numpy dtype of ``dtype_bytes`` bytes per number (a stand-in for bf16 or fp8).

    >>> numpy_dtype(2).itemsize, numpy_dtype(1).itemsize
    (2, 1)

    Used in: (none yet; ``kv_cache_array`` calls it).
    """
    import numpy as np

    if dtype_bytes not in _STAND_INS:
        raise ValueError(f"dtype_bytes must be one of {sorted(_STAND_INS)}, got {dtype_bytes!r}")
    return np.dtype(_STAND_INS[dtype_bytes])


def kv_cache_array(layers: int, kv_heads: int, head_dim: int, seq_len: int, batch_size: int,
                   dtype_bytes: int = 2):
    """A zero-filled KV cache of shape ``[layers, 2, batch_size, kv_heads, seq_len, head_dim]``.

    Its ``.nbytes`` is ``2 * layers * kv_heads * head_dim * dtype_bytes * seq_len *
    batch_size`` bytes [B]: kvlib's ``kv_bytes_total(kv_bytes_per_token(...), seq_len,
    batch_size)``. Keep the dimensions small: the array is really allocated.

    >>> cache = kv_cache_array(layers=2, kv_heads=4, head_dim=8, seq_len=10, batch_size=3)
    >>> cache.shape, cache.nbytes          # 2 * 2 * 4 * 8 * 2 B * 10 * 3
    ((2, 2, 3, 4, 10, 8), 7680)

    Used in: ch01_kv_formula, ch02_gqa_tp, ch03_mla, ch06_crossover, ch07_capacity_plan, ch09_interview_drills.
    """
    import numpy as np

    dims = dict(layers=layers, kv_heads=kv_heads, head_dim=head_dim, seq_len=seq_len, batch_size=batch_size)
    for name, value in dims.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"kv_cache_array: {name} must be a positive int, got {value!r}")
    return np.zeros((layers, 2, batch_size, kv_heads, seq_len, head_dim), dtype=numpy_dtype(dtype_bytes))
