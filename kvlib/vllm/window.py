"""vLLM's sliding-window and chunked-attention rules: the worst case it admits by, and the blocks a request holds.

A sliding-window layer group in vLLM's V1 engine is counted two ways:

- **at start-up and admission**, ``SlidingWindowSpec.max_admission_blocks_per_request``
  (``vllm/v1/kv_cache_interface.py``; ``max_memory_usage_bytes`` before 0.20) sizes one request's
  windowed group for the worst step: ``cdiv(min(W - 1 + extra + F, max_model_len), bs) + 1`` blocks,
  W the window, F the tokens in flight, ``extra`` the ``extra_retained_tokens`` kept below the window
  (0.28+, 0 without speculative decoding), the ``+ 1`` for a window that starts inside a block. A
  chunked-local group (Llama 4) takes ``cdiv(min(chunk + F, max_model_len), bs)``. The memory check, the
  admission gate and the printed "Maximum concurrency" divide the pool by this
  (``worst_case_window_blocks``, ``worst_case_chunk_blocks``);
- **while a request runs**, ``SlidingWindowManager.remove_skipped_blocks``
  (``vllm/v1/core/single_type_kv_cache_manager.py``) hands back every block wholly before the window:
  ``get_num_skipped_tokens`` is ``max(0, n - W + 1 - extra)`` for ``n`` computed tokens, and the first
  ``skipped // bs`` blocks go back to the pool. A request then holds ``ceil((n + new) / bs) - skipped // bs``
  blocks (``window_blocks_held``).

F, the tokens in flight, by release (``max_in_flight_tokens``): ``max_num_batched_tokens`` through 0.25;
from 0.26 ``VllmConfig.max_in_flight_tokens`` = ``max_concurrent_batches`` x ``max_num_batched_tokens``,
which is 2 x under async scheduling (on by default on GPU since 0.14; off with some speculative methods,
for pooling models, and in 0.31-0.32 with pipeline parallelism on the V1 runner) at PP 1, PP + 1 x on Model
Runner V2 and PP x without async scheduling (``config/vllm.py`` ``max_concurrent_batches``).

So the printed concurrency is an estimate from the worst case, not how many requests the scheduler holds:
a decoding request holds about ``W / bs + 1`` windowed blocks, not ``(W - 1 + F) / bs + 1``.

Taught in ch04_pool_paging (section 4).

>>> worst_case_window_blocks(128, 16, 8192, 8192)      # min(127 + 8192, 8192) = 8192 tokens: 512 + 1
513
>>> worst_case_window_blocks(128, 16, 8192, 32768, version="0.32.0")   # F = 2 x 8192: ceil(16,511 / 16) + 1
1033
>>> window_blocks_held(8191, 1, 128, 16)               # decoding token 8,192: blocks 504..511 kept
8
"""

from __future__ import annotations

from .engine import VllmLogError, checked_version, default_runner

__all__ = ["max_concurrent_batches", "max_in_flight_tokens", "in_flight_multiplier", "in_flight_multipliers",
           "worst_case_window_blocks",
           "worst_case_chunk_blocks", "window_blocks_held"]


def _positive(name: str, value) -> int:
    if type(value) is not int or value < 1:
        raise VllmLogError(f"{name} must be a positive integer, got {value!r}")
    return value


def _whole(name: str, value) -> int:
    if type(value) is not int or value < 0:
        raise VllmLogError(f"{name} must be a whole number, got {value!r}")
    return value


def max_concurrent_batches(version=None, *, pp: int = 1, async_scheduling: bool | None = None,
                           runner: str | None = None) -> int:
    """``VllmConfig.max_concurrent_batches``: the steps whose tokens may be in flight at once (0.26+).

    Async scheduling overlaps two steps: 2 on the V1 runner at PP 1 (PP past that), PP + 1 on Model
    Runner V2 (the only runner in 0.34); without it PP. ``async_scheduling`` None is vLLM's GPU default:
    on, except in 0.31-0.32 with PP > 1 on the V1 runner. ``runner`` None is the release's default for a
    dense model (``engine.default_runner``).

    >>> max_concurrent_batches("0.32.0"), max_concurrent_batches("0.32.0", pp=2), max_concurrent_batches(
    ...     "0.27.0", pp=2, runner="v1"), max_concurrent_batches("0.32.0", async_scheduling=False)
    (2, 3, 2, 1)
    """
    v = checked_version(version)
    pp = _positive("pp", pp)
    runner = default_runner(v) if runner is None else runner
    if runner not in ("v1", "v2"):
        raise VllmLogError(f"runner must be 'v1' or 'v2', got {runner!r}")
    if async_scheduling is None:
        async_scheduling = not (v is not None and (0, 31, 0) <= v < (0, 33, 0) and pp > 1 and runner == "v1")
    if not async_scheduling:
        return pp
    if runner == "v2" or (v is None or v >= (0, 34, 0)):
        return pp + 1
    return 2 if pp <= 1 else pp


def max_in_flight_tokens(max_num_batched_tokens: int, version=None, *, pp: int = 1,
                         async_scheduling: bool | None = None, runner: str | None = None) -> int:
    """F, the tokens a sliding-window or chunked group reserves for beyond its window, by release.

    ``max_num_batched_tokens`` through 0.25 (the specs read the scheduler's budget); from 0.26
    ``VllmConfig.max_in_flight_tokens`` = ``max_concurrent_batches`` x ``max_num_batched_tokens``.

    >>> max_in_flight_tokens(8192, "0.25.0"), max_in_flight_tokens(8192, "0.26.0"), max_in_flight_tokens(8192)
    (8192, 16384, 16384)
    """
    f = _positive("max_num_batched_tokens", max_num_batched_tokens)
    return f * in_flight_multiplier(version, pp=pp, async_scheduling=async_scheduling, runner=runner)


def in_flight_multiplier(version=None, *, pp: int = 1, async_scheduling: bool | None = None,
                         runner: str | None = None) -> int:
    """F / max_num_batched_tokens: 1 through 0.25, ``max_concurrent_batches`` from 0.26 (None = newest)."""
    v = checked_version(version)
    if v is not None and v < (0, 26, 0):
        return 1
    return max_concurrent_batches(v, pp=pp, async_scheduling=async_scheduling, runner=runner)


def in_flight_multipliers(version=None, *, pp: int = 1) -> tuple:
    """Every F / max_num_batched_tokens a start of this release may have used, its default first.

    For reading a log whose runner and async-scheduling setting are not printed: through 0.25 only 1; from
    0.26 the default (``in_flight_multiplier``), then each runner with and without async scheduling; an
    unknown release, every one of those.

    >>> in_flight_multipliers("0.25.0"), in_flight_multipliers("0.32.0"), in_flight_multipliers("0.32.0", pp=2)
    ((1,), (2, 1), (3, 2))
    """
    v = checked_version(version)
    if v is not None and v < (0, 26, 0):
        return (1,)
    found = [in_flight_multiplier(v, pp=pp)] if v is not None else [1]
    for runner in ("v2", "v1"):
        for asynchronous in (True, False):
            if v is not None and v >= (0, 34, 0) and runner == "v1":
                continue
            found.append(max_concurrent_batches(v, pp=pp, async_scheduling=asynchronous, runner=runner))
    return tuple(dict.fromkeys(found))


def _in_flight(tokens: int, version, pp, async_scheduling, runner) -> int:
    """The old call form (no version): the third argument is F itself."""
    tokens = _positive("max_num_batched_tokens", tokens)
    if version is None and pp == 1 and async_scheduling is None and runner is None:
        return tokens
    return max_in_flight_tokens(tokens, version, pp=pp, async_scheduling=async_scheduling, runner=runner)


def worst_case_window_blocks(window: int, block_size: int, max_num_batched_tokens: int, max_model_len: int, *,
                             version=None, pp: int = 1, async_scheduling: bool | None = None,
                             runner: str | None = None, extra_retained_tokens: int = 0) -> int:
    """Blocks vLLM plans for one request's sliding-window group: ``cdiv(min(W - 1 + extra + F, mml), bs) + 1``.

    ``SlidingWindowSpec.max_admission_blocks_per_request``: the last ``W - 1`` computed tokens, the
    ``extra_retained_tokens`` kept below the window (0.28+: ``num_prefill_lookahead_tokens - 1`` with
    speculative decoding, else 0) and ``F`` new ones, capped at ``max_model_len``, plus one block because the
    window need not start at a block boundary. vLLM's start-up memory check, its admission gate and its
    "Maximum concurrency" line use this figure. With ``version`` F is ``max_in_flight_tokens`` of that
    release; without, the third argument is F itself (the rule through 0.25, where F is
    ``max_num_batched_tokens``).

    >>> worst_case_window_blocks(4096, 16, 2048, 131072)   # gpt-oss's 128 or Gemma 2's 4,096 window
    385
    >>> worst_case_window_blocks(4096, 16, 2048, 131072, version="0.26.0")   # F = 4,096: cdiv(8,191, 16) + 1
    513
    """
    w, bs = _positive("window", window), _positive("block_size", block_size)
    mml = _positive("max_model_len", max_model_len)
    extra = _whole("extra_retained_tokens", extra_retained_tokens)
    f = _in_flight(max_num_batched_tokens, version, pp, async_scheduling, runner)
    if extra and version is not None and checked_version(version) < (0, 28, 0):
        raise VllmLogError(f"extra_retained_tokens: vLLM {version} keeps none (from 0.28)")
    return -(-min(w - 1 + extra + f, mml) // bs) + 1


def worst_case_chunk_blocks(chunk: int, block_size: int, max_num_batched_tokens: int, max_model_len: int, *,
                            version=None, pp: int = 1, async_scheduling: bool | None = None,
                            runner: str | None = None) -> int:
    """Blocks vLLM plans for one request's chunked-local group (Llama 4): ``cdiv(min(chunk + F, mml), bs)``.

    ``ChunkedLocalAttentionSpec.max_admission_blocks_per_request`` (``max_memory_usage_bytes`` before
    0.20): one attention chunk plus the tokens in flight (F as in ``worst_case_window_blocks``), capped at
    ``max_model_len``.

    >>> worst_case_chunk_blocks(8192, 16, 8192, 131072), worst_case_chunk_blocks(8192, 16, 8192, 131072,
    ...                                                                            version="0.34.0")
    (1024, 1536)
    """
    c, bs = _positive("chunk", chunk), _positive("block_size", block_size)
    mml = _positive("max_model_len", max_model_len)
    f = _in_flight(max_num_batched_tokens, version, pp, async_scheduling, runner)
    return -(-min(c + f, mml) // bs)


def window_blocks_held(num_computed_tokens: int, num_new_tokens: int, window: int, block_size: int, *,
                       extra_retained_tokens: int = 0) -> int:
    """Blocks one request's sliding-window group holds in a step, after vLLM frees the skipped ones.

    ``ceil((n + new) / bs) - max(0, n - W + 1 - extra) // bs``: slots for every token so far and the
    ``new`` ones scheduled now, less the blocks wholly before the window and the ``extra_retained_tokens``
    below it (``SlidingWindowManager.remove_skipped_blocks`` replaces them by the null block and returns
    them to the pool).

    >>> window_blocks_held(0, 2000, 128, 16)      # a 2,000-token prefill step: nothing skipped yet
    125
    >>> window_blocks_held(100_000, 1, 128, 16)   # decoding deep into a long sequence
    9
    """
    n = _whole("num_computed_tokens", num_computed_tokens)
    new = _positive("num_new_tokens", num_new_tokens)
    w, bs = _positive("window", window), _positive("block_size", block_size)
    extra = _whole("extra_retained_tokens", extra_retained_tokens)
    skipped = max(0, n - w + 1 - extra)
    return -(-(n + new) // bs) - skipped // bs
