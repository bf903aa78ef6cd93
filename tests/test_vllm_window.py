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
from kvlib.vllm.window import window_blocks_held, worst_case_window_blocks

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


def test_the_printed_concurrency_uses_the_worst_case():
    """gpt-oss-20b (one full and one windowed group): predict_pool's concurrency = blocks / worst-case blocks."""
    oss = load_model("openai/gpt-oss-20b")
    f = predict_pool(oss, 80 * 2**30, activation_bytes=0, weights_bytes=0, utilization=1.0, version="0.20.0",
                     block_size=16, max_model_len=32768, max_num_batched_tokens=8192, cudagraph_bytes=0)
    per_request = -(-32768 // 16) + worst_case_window_blocks(oss.sliding_window, 16, 8192, 32768)
    assert f.max_concurrency == pytest.approx(f.num_gpu_blocks / per_request, rel=1e-9, abs=0.01)


def test_bad_input_names_the_field():
    with pytest.raises(VllmLogError, match="window"):
        worst_case_window_blocks(0, 16, 2048, 4096)
    with pytest.raises(VllmLogError, match="num_computed_tokens"):
        window_blocks_held(-1, 1, 128, 16)
