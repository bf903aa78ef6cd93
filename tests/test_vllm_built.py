"""kvlib.vllm.built: a 0.34 start's lines built from the forecast -- in 0.34's own formats, and read back as measured.

The format strings below are copied from the vLLM 0.34.0 wheel (paths under ``vllm/``); a built line must be the
format filled in, nothing else. The arithmetic is worked by hand for Llama 3.1 8B (131,072 B a token, 8 MiB a
64-token block). A built start is never evidence for a prediction: these tests check the format and the reading.
"""

import re

import pytest

import kvlib as kv
from kvlib.vllm.built import built_start_lines

FORMATS_034 = [
    "Initializing a V1 LLM engine (v%s) with config: %s",                          # v1/engine/core.py
    "Chunked prefill is enabled with max_num_batched_tokens=%d.",                   # config/scheduler.py
    "Model loading took %s GiB memory and %.6f seconds",                            # v1/worker/gpu/model_runner.py
    "Available KV cache memory: %s GiB",                                            # v1/worker/gpu_worker.py
    "Memory after warmup: %s GiB free, %s GiB committed to the KV cache, %s GiB kept for transient activations "
    "(%s GiB allocated at peak, %s GiB of torch reservation growth); %d KV cache blocks (%s GiB) fit within the "
    "requested %s GiB. Torch may reserve up to %s GiB.",                           # v1/worker/extensible_kv_cache.py
    "%s KV cache size: %s tokens, Maximum concurrency for %s tokens per request: %.2fx",   # v1/core/kv_cache_utils.py
    "Extended KV cache to %d blocks (%.2f GiB).",                                   # v1/worker/extensible_kv_cache.py
]


def _regex(fmt: str) -> re.Pattern:
    out = re.escape(fmt)      # then each printf field, as re.escape wrote it, becomes what it prints
    for field, pattern in (("%\\.6f", r"\d+\.\d{6}"), ("%\\.2f", r"\d+\.\d{2}"), ("%d", r"\d+"), ("%s", r".+?")):
        out = out.replace(field, pattern)
    return re.compile(r"^\(EngineCore pid=\d+\) INFO \d\d-\d\d \d\d:\d\d:\d\d \[[\w.]+:\d+\] " + out + "$")


BUILT = built_start_lines("llama-3.1-8b", "H100-SXM", max_model_len=8192)


def test_each_line_is_a_0_34_format_filled_in():
    assert len(BUILT.lines) == len(FORMATS_034)
    for line, fmt in zip(BUILT.lines, FORMATS_034):
        assert _regex(fmt).match(line), (fmt, line)


def test_gib_figures_print_as_0_34s_format_gib():
    # format_gib is str(round(b / 2**30, 2)): '15.0', never '15.00'; extend_kv_cache's own figure is '%.2f'
    figures = re.findall(r"(\d+\.\d+) GiB", " ".join(BUILT.lines[2:5]))
    assert figures and all(not (f.endswith("0") and len(f.split(".")[1]) == 2) for f in figures)
    assert re.search(r"\(\d+\.\d\d GiB\)\.$", BUILT.lines[-1])


def test_read_back_as_a_measured_start_of_64_token_blocks():
    [start] = kv.vllm.parse_log("\n".join(BUILT.lines))
    assert (start.pool_sizing, start.vllm_version, start.max_model_len) == ("measured", "0.34.0", 8192)
    n = start.measured_kv_cache_blocks
    # one full-attention group: a request of 8,192 tokens needs 8,192 / 64 = 128 blocks; the pool is n blocks of
    # 8,388,608 B; the tokens printed are int(n / 128 x 8,192) = 64 n; the concurrency n / 128 to two decimals
    assert n == BUILT.forecast.num_gpu_blocks == BUILT.forecast.available_bytes // (2 * 32 * 8 * 128 * 2 * 64)
    assert start.gpu_kv_cache_tokens == 64 * n
    assert start.max_concurrency_text == f"{n / 128:.2f}"
    assert start.available_kv_cache_text == str(round(n * 8_388_608 / 2**30, 2))
    # the 'Available KV cache memory' line is the estimate at utilization 1.0, larger than what was measured
    assert float(start.estimated_kv_cache_text) > float(start.available_kv_cache_text)


def test_what_the_build_assumed_is_said():
    assert len(BUILT.assumptions) == 3 and "committed during warmup" in BUILT.assumptions[0]
    assert BUILT.forecast.pool_rule == "measured" and BUILT.estimate.pool_rule == "estimate"
    assert BUILT.estimate.utilization == 1.0


@pytest.mark.parametrize("kwargs,message", [
    (dict(max_model_len=8192, tp=2), r"^built_start_lines: TP 1 only"),
    (dict(max_model_len=0), r"^max_model_len must be a positive integer, got 0$"),
])
def test_refused_in_one_line(kwargs, message):
    with pytest.raises(kv.vllm.VllmLogError, match=message):
        built_start_lines("llama-3.1-8b", "H100-SXM", **kwargs)


def test_a_model_that_leaves_no_pool_is_refused():
    with pytest.raises(kv.vllm.VllmLogError, match=r"leaves no KV pool on one .*: nothing to build$"):
        built_start_lines("llama-3.3-70b", "H100-SXM", max_model_len=8192)
