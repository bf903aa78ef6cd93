"""A vLLM block count against a printed GiB figure, by hand: the range it allows, and why a count misses it.

The plain-geometry version of ``predict.predict_from_log`` that a learner can
redo with pencil and paper (one full-attention group, no hybrid layers, no
MLA): a printed ``X`` GiB stands for whole bytes in ``[lo, hi]`` (``gib_window``,
half a unit of the last printed decimal either side), and

    B = L * 2 * max(1, K // tp) * D * b * bs          bytes per block on one rank
    N in [lo // B, hi // B]

``classify_block_mismatch`` names the first explanation, in a fixed order, that
brings a logged count into that range (``MISMATCH_CAUSES``).

Taught in ch08_vllm_lab.
"""

from __future__ import annotations

from ..formulas import kv_bytes_per_token, kv_heads_per_gpu
from .engine import VllmLogError
from .log import gib_window

__all__ = ["MISMATCH_CAUSES", "LARGER_BLOCK_SIZES", "ROUNDING_SLACK_BLOCKS", "block_bytes", "block_range",
           "classify_block_mismatch"]

#: The causes ``classify_block_mismatch`` can name, in the order they are tried.
MISMATCH_CAUSES = ("agrees", "rounding", "tensor_parallel", "kv_cache_dtype", "block_size", "wrong_model")
#: Block sizes an attention backend may force instead of 16 (MLA kernels: 64, 128; FlashInfer-MLA 32).
LARGER_BLOCK_SIZES = (32, 64, 128, 256)
#: A count this many blocks outside the window is put down to the printed figure's rounding.
ROUNDING_SLACK_BLOCKS = 2


def _positive(name: str, value) -> int:
    if type(value) is not int or value < 1:
        raise VllmLogError(f"{name} must be a positive integer, got {value!r}")
    return value


def block_bytes(layers: int, kv_heads: int, head_dim: int, dtype_bytes: int, block_size: int, tp: int = 1) -> int:
    """Bytes one block takes on one tensor-parallel rank: ``L * 2 * max(1, K // tp) * D * b * bs`` [B].

    Llama 2 7B (32 layers, 32 KV heads of 128, 16-bit), block 16: 8 MiB.

    >>> block_bytes(32, 32, 128, 2, 16)
    8388608
    """
    for name, value in (("layers", layers), ("kv_heads", kv_heads), ("head_dim", head_dim),
                        ("dtype_bytes", dtype_bytes), ("block_size", block_size), ("tp", tp)):
        _positive(name, value)
    return kv_bytes_per_token(layers, kv_heads_per_gpu(kv_heads, tp), head_dim, dtype_bytes) * block_size


def block_range(available_gib: str, layers: int, kv_heads: int, head_dim: int, dtype_bytes: int,
                block_size: int, tp: int = 1) -> tuple[int, int]:
    """(fewest, most) blocks a printed available-KV figure allows: ``(lo // B, hi // B)`` [blocks].

    ``available_gib`` is the figure as the log prints it (a str, e.g. ``"56.18"``):
    it stands for bytes in ``[(X - 0.005) * 2^30, (X + 0.005) * 2^30)``.
    Log 12 (Llama 2 7B, 56.18 GiB, vLLM printed 7191 blocks):

    >>> block_range("56.18", 32, 32, 128, 2, 16)
    (7190, 7191)
    """
    if not isinstance(available_gib, str):
        raise VllmLogError(f"available_gib must be the printed figure as a str, got {available_gib!r}")
    try:
        lo, hi = gib_window(available_gib.strip())
    except (ValueError, ZeroDivisionError, IndexError):
        raise VllmLogError(f"available_gib: not a GiB figure: {available_gib!r}") from None
    b = block_bytes(layers, kv_heads, head_dim, dtype_bytes, block_size, tp)
    return lo // b, hi // b


def _inside(n: int, span: tuple[int, int], slack: int = 0) -> bool:
    return span[0] - slack <= n <= span[1] + slack


def classify_block_mismatch(available_gib: str, logged_blocks: int, layers: int, kv_heads: int, head_dim: int,
                            dtype_bytes: int, block_size: int, gpus: int = 1) -> str:
    """Why a logged block count does (not) match a prediction made at TP 1: one of ``MISMATCH_CAUSES``.

    Tried in this order, the first that brings ``logged_blocks`` into the range wins:

    1. ``agrees``: inside ``block_range`` at TP 1, the given dtype and block size;
    2. ``rounding``: at most ``ROUNDING_SLACK_BLOCKS`` outside it;
    3. ``tensor_parallel``: ``gpus`` > 1 and inside the range with the KV heads split over them;
    4. ``kv_cache_dtype``: a 16-bit cache assumed, and inside with 1-byte (fp8) elements;
    5. ``block_size``: inside with one of ``LARGER_BLOCK_SIZES``;
    6. ``wrong_model``: nothing above fits.

    Log 12 as printed, then the same log had it come from two GPUs (heads split, twice the blocks):

    >>> classify_block_mismatch("56.18", 7191, 32, 32, 128, 2, 16)
    'agrees'
    >>> classify_block_mismatch("56.18", 14382, 32, 32, 128, 2, 16, gpus=2)
    'tensor_parallel'
    """
    if type(logged_blocks) is not int or logged_blocks < 0:
        raise VllmLogError(f"logged_blocks must be a non-negative integer, got {logged_blocks!r}")
    _positive("gpus", gpus)
    geometry = (layers, kv_heads, head_dim)
    base = block_range(available_gib, *geometry, dtype_bytes, block_size)
    if _inside(logged_blocks, base):
        return "agrees"
    if _inside(logged_blocks, base, ROUNDING_SLACK_BLOCKS):
        return "rounding"
    # (at gpus = 1 this is the range just tried)
    if _inside(logged_blocks, block_range(available_gib, *geometry, dtype_bytes, block_size, gpus)):
        return "tensor_parallel"
    if dtype_bytes == 2 and _inside(logged_blocks, block_range(available_gib, *geometry, 1, block_size)):
        return "kv_cache_dtype"
    for size in LARGER_BLOCK_SIZES:
        if size > block_size and _inside(logged_blocks, block_range(available_gib, *geometry, dtype_bytes, size)):
            return "block_size"
    return "wrong_model"
