"""vLLM's two sliding-window rules: the worst case it plans with, and the blocks a request holds.

A sliding-window layer group in vLLM's V1 engine is counted two ways:

- **at start-up**, ``SlidingWindowSpec.max_memory_usage_bytes``
  (``vllm/v1/kv_cache_interface.py``) sizes one request's windowed group for
  the worst step: ``ceil(min(W - 1 + F, max_model_len) / bs) + 1`` blocks, W
  the window, F the tokens one step may schedule (``max_num_batched_tokens``;
  from vLLM 0.33 twice that under async scheduling), the ``+ 1`` for a window
  that starts inside a block. The memory check and the printed "Maximum
  concurrency" divide the pool by this (``worst_case_window_blocks``);
- **while a request runs**, ``SlidingWindowManager.remove_skipped_blocks``
  (``vllm/v1/core/single_type_kv_cache_manager.py``) hands back every block
  wholly before the window: ``get_num_skipped_tokens`` is
  ``max(0, n - W + 1)`` for ``n`` computed tokens, and the first
  ``skipped // bs`` blocks go back to the pool. A request then holds
  ``ceil((n + new) / bs) - skipped // bs`` blocks (``window_blocks_held``).

So the printed concurrency is an estimate from the worst case, not how many
requests the scheduler admits: a decoding request holds about ``W / bs + 1``
windowed blocks, not ``(W - 1 + F) / bs + 1``.

Taught in ch04_pool_paging (section 4).

>>> worst_case_window_blocks(128, 16, 8192, 8192)      # min(127 + 8192, 8192) = 8192 tokens: 512 + 1
513
>>> window_blocks_held(8191, 1, 128, 16)               # decoding token 8,192: blocks 504..511 kept
8
"""

from __future__ import annotations

from .engine import VllmLogError

__all__ = ["worst_case_window_blocks", "window_blocks_held"]


def _positive(name: str, value) -> int:
    if type(value) is not int or value < 1:
        raise VllmLogError(f"{name} must be a positive integer, got {value!r}")
    return value


def worst_case_window_blocks(window: int, block_size: int, max_num_batched_tokens: int,
                             max_model_len: int) -> int:
    """Blocks vLLM plans for one request's sliding-window group: ``ceil(min(W - 1 + F, mml) / bs) + 1``.

    ``SlidingWindowSpec.max_memory_usage_bytes`` divided by the page: the
    last ``W - 1`` computed tokens plus ``F`` new ones in one step, capped at
    ``max_model_len``, plus one block because the window need not start at a
    block boundary. vLLM's start-up memory check and its "Maximum concurrency"
    line use this figure.

    >>> worst_case_window_blocks(4096, 16, 2048, 131072)   # gpt-oss's 128 or Gemma 2's 4,096 window
    385
    """
    w, bs = _positive("window", window), _positive("block_size", block_size)
    f, mml = _positive("max_num_batched_tokens", max_num_batched_tokens), _positive("max_model_len", max_model_len)
    return -(-min(w - 1 + f, mml) // bs) + 1


def window_blocks_held(num_computed_tokens: int, num_new_tokens: int, window: int, block_size: int) -> int:
    """Blocks one request's sliding-window group holds in a step, after vLLM frees the skipped ones.

    ``ceil((n + new) / bs) - max(0, n - W + 1) // bs``: slots for every token
    so far and the ``new`` ones scheduled now, less the blocks wholly before
    the window (``SlidingWindowManager.remove_skipped_blocks`` replaces them
    by the null block and returns them to the pool).

    >>> window_blocks_held(0, 2000, 128, 16)      # a 2,000-token prefill step: nothing skipped yet
    125
    >>> window_blocks_held(100_000, 1, 128, 16)   # decoding deep into a long sequence
    9
    """
    if type(num_computed_tokens) is not int or num_computed_tokens < 0:
        raise VllmLogError(f"num_computed_tokens must be a whole number, got {num_computed_tokens!r}")
    new = _positive("num_new_tokens", num_new_tokens)
    w, bs = _positive("window", window), _positive("block_size", block_size)
    skipped = max(0, num_computed_tokens - w + 1)
    return -(-(num_computed_tokens + new) // bs) - skipped // bs
