"""vLLM's sliding-window rules (kvlib.vllm.window) against the engine's own code, re-enacted here.

The worst case is vLLM's ``SlidingWindowSpec.max_memory_usage_bytes`` (vllm/v1/kv_cache_interface.py),
written out in the test; the blocks held come from a block list driven the way
``SlidingWindowManager.remove_skipped_blocks`` / ``allocate_new_blocks``
(vllm/v1/core/single_type_kv_cache_manager.py) drive it: free the first
``max(0, n - W + 1) // bs`` blocks, then allocate up to ``ceil((n + new) / bs)``.
"""

import pytest

from kvlib import load_model
from kvlib.vllm import VllmLogError, predict_pool
from kvlib.vllm.window import max_concurrent_batches, max_in_flight_tokens, window_blocks_held, \
    worst_case_chunk_blocks, worst_case_window_blocks

NULL = None


def _replay(window, bs, prompt, output, chunk):
    """Blocks held at every step of one request: chunked prefill of ``chunk`` tokens, then decode."""
    blocks, held, n, live = [], [], 0, 0
    schedule = [min(chunk, prompt - i) for i in range(0, prompt, chunk)] + [1] * output
    for new in schedule:
        last_useful_block = (n - window + 1) // bs          # the engine's remove_skipped_blocks
        for i in range(last_useful_block - 1, -1, -1):
            if blocks[i] is NULL:
                break
            blocks[i] = NULL
            live -= 1
        need = -(-(n + new) // bs)                          # allocate_new_blocks
        live += max(0, need - len(blocks))
        blocks.extend(object() for _ in range(need - len(blocks)))
        assert live == sum(b is not NULL for b in blocks[-2 * (window // bs + 2) - chunk // bs:])
        held.append((n, new, live))
        n += new
    return held


@pytest.mark.parametrize("window,bs,prompt,output,chunk", [
    (128, 16, 3000, 300, 512), (4096, 16, 9000, 50, 2048), (10, 4, 37, 20, 8), (128, 64, 1000, 200, 100),
])
def test_blocks_held_match_the_managers_rule(window, bs, prompt, output, chunk):
    for n, new, held in _replay(window, bs, prompt, output, chunk):
        assert window_blocks_held(n, new, window, bs) == held


@pytest.mark.parametrize("window,bs,chunk", [(128, 16, 512), (512, 16, 256), (10, 4, 8), (128, 64, 100)])
def test_worst_case_is_vllms_formula_and_bounds_every_step(window, bs, chunk):
    mml = 1 << 20
    planned = worst_case_window_blocks(window, bs, chunk, mml)
    assert planned == -(-min(window - 1 + chunk, mml) // bs) + 1      # max_memory_usage_bytes / page
    peak = max(held for _, _, held in _replay(window, bs, 5 * window + 3 * chunk + 7, 3 * window, chunk))
    assert peak <= planned
    decoding = max(held for _, new, held in _replay(window, bs, 2 * window, 4 * window, chunk) if new == 1)
    assert decoding <= -(-window // bs) + 1 < planned                 # what a decoding request really holds


def test_capped_at_max_model_len():
    assert worst_case_window_blocks(128, 16, 8192, 8192) == 8192 // 16 + 1
    assert worst_case_window_blocks(128, 16, 8192, 1000) == -(-1000 // 16) + 1


@pytest.mark.parametrize("version,in_flight", [("0.20.0", 8192), ("0.32.0", 16384)])
def test_the_printed_concurrency_uses_the_worst_case(version, in_flight):
    """gpt-oss-20b (one full and one windowed group): predict_pool's concurrency = blocks / worst-case blocks,
    with the release's tokens in flight (0.20: max_num_batched_tokens; 0.32: twice it, async scheduling)."""
    oss = load_model("openai/gpt-oss-20b")
    f = predict_pool(oss, 80 * 2**30, activation_bytes=0, weights_bytes=0, utilization=1.0, version=version,
                     block_size=16, max_model_len=32768, max_num_batched_tokens=8192, cudagraph_bytes=0)
    per_request = -(-32768 // 16) + (-(-min(128 - 1 + in_flight, 32768) // 16) + 1)
    assert f.max_concurrency == pytest.approx(f.num_gpu_blocks / per_request, rel=1e-9, abs=0.01)


@pytest.mark.parametrize("version,pp,runner,async_scheduling,expected", [
    # config/vllm.py: max_in_flight_tokens from 0.26; max_concurrent_batches = PP + 1 on Model Runner V2 (and in 0.34)
    # under async scheduling, 2 at PP 1 on the V1 runner (PP past that), PP without async scheduling
    ("0.25.0", 1, None, None, 8192), ("0.25.0", 4, None, None, 8192),
    ("0.26.0", 1, None, None, 2 * 8192), ("0.26.0", 2, "v2", None, 3 * 8192), ("0.26.0", 2, "v1", None, 2 * 8192),
    ("0.26.0", 3, "v1", None, 3 * 8192), ("0.26.0", 1, None, False, 8192), ("0.30.0", 2, "v1", None, 2 * 8192),
    # 0.31-0.32 turn async scheduling off with PP on the V1 runner: PP x
    ("0.31.0", 2, "v1", None, 2 * 8192), ("0.32.0", 4, "v1", None, 4 * 8192), ("0.32.0", 4, "v2", None, 5 * 8192),
    ("0.34.0", 2, None, None, 3 * 8192), (None, 1, None, None, 2 * 8192),
])
def test_tokens_in_flight_by_release(version, pp, runner, async_scheduling, expected):
    assert max_in_flight_tokens(8192, version, pp=pp, runner=runner, async_scheduling=async_scheduling) == expected


def test_the_worst_cases_by_release_worked_by_hand():
    # Gemma-2-like window 4,096, 16-token blocks, 2,048 batched tokens, max_model_len 131,072
    assert worst_case_window_blocks(4096, 16, 2048, 131072, version="0.25.0") == -(-(4095 + 2048) // 16) + 1 == 385
    assert worst_case_window_blocks(4096, 16, 2048, 131072, version="0.26.0") == -(-(4095 + 4096) // 16) + 1 == 513
    # 0.28+: extra_retained_tokens inside the min (4 lookahead tokens -> 3 kept)
    assert worst_case_window_blocks(4096, 64, 2048, 131072, version="0.34.0", extra_retained_tokens=3) == \
        -(-(4095 + 3 + 4096) // 64) + 1 == 130
    with pytest.raises(VllmLogError, match="extra_retained_tokens"):
        worst_case_window_blocks(4096, 16, 2048, 131072, version="0.27.0", extra_retained_tokens=3)
    # Llama 4's chunked layers: chunk 8,192, 8,192 batched tokens: cdiv(min(chunk + F, mml), bs)
    assert worst_case_chunk_blocks(8192, 16, 8192, 131072, version="0.25.0") == (8192 + 8192) // 16 == 1024
    assert worst_case_chunk_blocks(8192, 64, 8192, 131072, version="0.34.0") == (8192 + 16384) // 64 == 384
    assert worst_case_chunk_blocks(8192, 16, 8192, 10000, version="0.34.0") == -(-10000 // 16) == 625
    # the admission worst case against what a decoding request holds, at 32K under 0.34 (gpt-oss: window 128)
    planned = worst_case_window_blocks(128, 64, 8192, 32768, version="0.34.0")
    # decoding token 32,768: skipped 32,767 - 128 + 1 = 32,640 = 510 whole blocks of 512: 2 held
    assert planned == -(-(127 + 16384) // 64) + 1 == 259 and window_blocks_held(32767, 1, 128, 64) == 2


def test_extra_retained_tokens_keep_blocks_below_the_window():
    # remove_skipped_blocks in 0.28+: skipped = max(0, n - W + 1 - extra): 1,000 computed, window 128, 64 kept below
    assert window_blocks_held(1000, 1, 128, 16, extra_retained_tokens=64) == -(-1001 // 16) - (1000 - 128 + 1 - 64) // 16
    assert window_blocks_held(1000, 1, 128, 16, extra_retained_tokens=64) == window_blocks_held(1000, 1, 192, 16)


def test_max_concurrent_batches_refuses_a_bad_runner():
    with pytest.raises(VllmLogError, match="runner"):
        max_concurrent_batches("0.30.0", runner="v3")


def test_bad_input_names_the_field():
    with pytest.raises(VllmLogError, match="window"):
        worst_case_window_blocks(0, 16, 2048, 4096)
    with pytest.raises(VllmLogError, match="num_computed_tokens"):
        window_blocks_held(-1, 1, 128, 16)
