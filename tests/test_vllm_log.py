"""kvlib.vllm.log: every line format the reader knows, and which rank's figure an engine start keeps.

The lines are the formats vLLM prints (the module docstring lists them, each from a bundled real log or
vLLM's source); the expected figures are read off the lines by eye.
"""

import pytest

from kvlib.vllm import parse_log, read_bundled_log
from kvlib.vllm.log import gib_window, rank_number

HEADER = "INFO 03-21 20:15:45 [worker.py:267] "


def _one(text):
    [start] = parse_log(text)
    return start


def test_weights_come_from_the_busiest_rank():
    # Log 17 (Qwen3-30B-A3B, TP 4): every rank printed 14.2474 GiB. With rank 2's figure raised and rank 1's
    # lowered, the start reports the largest: the busiest rank bounds what is left for the KV cache.
    log = read_bundled_log("17").replace("rank=2 pid=107) INFO 04-29 01:07:41 [gpu_model_runner.py:1347] "
                                         "Model loading took 14.2474", "rank=2 pid=107) INFO 04-29 01:07:41 "
                                         "[gpu_model_runner.py:1347] Model loading took 14.9000")
    log = log.replace("rank=1 pid=106) INFO 04-29 01:07:41 [gpu_model_runner.py:1347] Model loading took 14.2474",
                      "rank=1 pid=106) INFO 04-29 01:07:41 [gpu_model_runner.py:1347] Model loading took 13.1000")
    start = parse_log(log)[0]
    assert start.model_weights_gib == 14.9 and start.model_weights_text == "14.9000 GiB"
    assert start.num_ranks_reporting == 4


def test_available_memory_comes_from_the_smallest_rank_and_is_kept_per_rank():
    log = "\n".join(f"(VllmWorker rank={r} pid={10 + r}) {HEADER}Available KV cache memory: {x} GiB"
                    for r, x in enumerate(["2.50", "1.75", "2.25"])) + "\nGPU KV cache size: 100 tokens"
    start = _one(log)
    assert start.available_kv_cache_text == "1.75" and start.available_kv_cache_gib == 1.75
    assert start.available_kv_cache_by_rank == (("VllmWorker rank=0 pid=10", "2.50"),
                                                ("VllmWorker rank=1 pid=11", "1.75"),
                                                ("VllmWorker rank=2 pid=12", "2.25"))
    assert start.num_ranks_reporting == 3 and start.engine == "v1"


def test_v0_profiling_summary_lines():
    # log 12 (vLLM 0.8.1, V0): the summary's figures, the smallest total and the largest of the rest
    start = _one(
        f"{HEADER}the current vLLM instance can use total_gpu_memory (79.19GiB) x gpu_memory_utilization (0.90)"
        f" = 71.27GiB\n{HEADER}model weights take 12.55GiB; non_torch_memory takes 0.16GiB; PyTorch activation "
        f"peak memory takes 2.38GiB; the rest of the memory reserved for KV Cache is 56.18GiB.\n"
        f"INFO 03-21 20:15:46 [executor_base.py:111] # cuda blocks: 7191, # CPU blocks: 512")
    assert (start.total_gpu_memory_gib, start.gpu_memory_utilization) == (79.19, 0.90)
    assert (start.model_weights_gib, start.non_torch_gib, start.activation_peak_gib) == (12.55, 0.16, 2.38)
    assert start.available_kv_cache_text == "56.18"
    assert start.available_kv_cache_source == "V0 memory profiling summary"
    assert (start.num_gpu_blocks, start.num_cpu_blocks, start.engine) == (7191, 512, "v0")
    assert start.available_kv_cache_bytes == 60_322_815_672     # round(56.18 x 2^30) = round(...672.32)


def test_memory_profiling_results_line():
    # log 07 (V0 0.6.x): 'Memory profiling results: ... kv_cache_size=3.81GiB ...'
    start = _one("Memory profiling results: total_gpu_memory=23.58GiB initial_memory_usage=15.23GiB "
                 "peak_torch_memory=16.42GiB memory_usage_post_profile=15.29GiB non_torch_memory=0.11GiB "
                 "kv_cache_size=3.81GiB gpu_memory_utilization=0.90\nGPU blocks: 1952, # CPU blocks: 2048")
    assert start.available_kv_cache_text == "3.81"
    assert (start.total_gpu_memory_gib, start.gpu_memory_utilization) == (23.58, 0.90)
    assert (start.peak_torch_gib, start.non_torch_gib) == (16.42, 0.11)
    assert (start.num_gpu_blocks, start.num_cpu_blocks, start.engine) == (1952, 2048, "v0")


@pytest.mark.parametrize("line,field,value", [
    ("Loading model weights took 14.9888 GB", "model_weights_gib", 14.9888),      # 'GB' is really GiB
    ("Loading model weights took 244.61 MB", "model_weights_gib", None),          # MB: not a GiB figure
    ("Loading model weights took 244.61 MB", "model_weights_text", "244.61 MB"),
    ("Model loading took 14.9889 GiB and 3.652170 seconds", "model_weights_gib", 14.9889),
    ("Available KV cache memory: 69.66 GiB", "available_kv_cache_text", "69.66"),
    ("reserved 5.00 GiB memory for KV Cache as specified by kv_cache_memory_bytes", "available_kv_cache_text",
     "5.00"),
    ("GPU KV cache size: 158,656 tokens", "gpu_kv_cache_tokens", 158656),
    ("# GPU blocks: 4739", "num_gpu_blocks", 4739),
    ("# CUDA blocks: 76240, # CPU blocks: 7281", "num_gpu_blocks", 76240),
    ("Estimated CUDA graph memory: 0.52 GiB", "cudagraph_estimate_gib", 0.52),
    ("Overriding num_gpu_blocks=7191 with num_gpu_blocks_override=512", "num_gpu_blocks_computed", 7191),
    ("Setting attention block size to 64 tokens", "block_size", 64),
    ("Forcing kv cache block size to 64 for FlashMLA backend.", "block_size", 64),
    ("vLLM API server version 0.8.5", "vllm_version", "0.8.5"),
    ("The model's max seq len (29000) is larger than the maximum number of tokens that can be stored in KV "
     "cache (23648).", "gpu_kv_cache_tokens", 23648),
    ("To serve at least one request with the models's max seq len (131072), (8.00 GiB KV cache is needed, "
     "which is larger than the available KV cache memory (1.5 GiB).", "kv_cache_needed_gib", 8.0),
])
def test_each_line_format(line, field, value):
    # a line that sizes nothing makes a start only with a figure after it
    start = parse_log(f"{HEADER}{line}\n{HEADER}Maximum concurrency for 16 tokens per request: 1.00x")[0]
    assert getattr(start, field) == value


def test_engine_config_line():
    start = _one("Initializing an LLM engine (v0.6.4) with config: model='meta-llama/Llama-3.1-8B', "
                 "dtype=torch.bfloat16, max_seq_len=8192, tensor_parallel_size=4, pipeline_parallel_size=2, "
                 "kv_cache_dtype=fp8, block_size=32, enforce_eager=True\n# GPU blocks: 100, # CPU blocks: 10")
    assert (start.model, start.dtype, start.max_model_len, start.kv_cache_dtype) == \
        ("meta-llama/Llama-3.1-8B", "bfloat16", 8192, "fp8")
    assert (start.tensor_parallel_size, start.pipeline_parallel_size, start.block_size) == (4, 2, 32)
    assert start.enforce_eager is True and start.vllm_version == "0.6.4"
    assert start.engine == "v0" and "0.6.4" in start.engine_evidence


def test_concurrency_and_capacity_error_give_max_model_len():
    start = _one("GPU KV cache size: 158,656 tokens\nMaximum concurrency for 32,768 tokens per request: 4.84x")
    assert (start.max_concurrency, start.max_concurrency_text, start.max_model_len) == (4.84, "4.84", 32768)
    assert start.max_model_len_source == "concurrency line"
    start = _one("The model's max seq len (29000) is larger than the maximum number of tokens that can be stored "
                 "in KV cache (23648).")
    assert (start.max_model_len, start.gpu_kv_cache_tokens, start.engine) == (29000, 23648, "v0")
    assert start.gpu_kv_cache_tokens_source == "max seq len error"


def test_combined_capacity_line_of_0_33():
    start = _one("GPU KV cache size: 652,144 tokens, Maximum concurrency for 4,096 tokens per request: 159.21x")
    assert (start.gpu_kv_cache_tokens, start.max_model_len, start.max_concurrency) == (652144, 4096, 159.21)
    assert start.combined_capacity_line is True


def test_prefixes_are_stripped():
    for prefix in ["qwen3-1  | ", ">> ", "\x1b[32m", "(EngineCore_DP0 pid=7) ", "[rank1]: "]:
        start = _one(f"{prefix}{HEADER}GPU KV cache size: 1,024 tokens")
        assert start.gpu_kv_cache_tokens == 1024, prefix


def test_a_second_block_line_starts_a_new_engine_start():
    starts = parse_log("# GPU blocks: 1952, # CPU blocks: 2048\n# GPU blocks: 1478, # CPU blocks: 2048")
    assert [(s.index, s.num_gpu_blocks, s.first_line) for s in starts] == [(0, 1952, 1), (1, 1478, 2)]


def test_gib_window_is_the_rounding_window():
    # 3.81 printed: [3.805, 3.815) GiB = [4,085,587,640.3..., 4,096,325,058.5...) -> whole bytes
    assert gib_window("3.81") == (4_085_587_641, 4_096_325_058)
    # one decimal less is still half of the second decimal (vLLM prints %.2f)
    assert gib_window("2") == gib_window("2.00")
    # three decimals: half a unit of the third, 0.0005 GiB = 536,870.912 B each side
    lo, hi = gib_window("1.000")
    assert (lo, hi) == (1_073_741_824 - 536_870, 1_073_741_824 + 536_870)
    assert gib_window("0.00")[0] == 0


def test_rank_number():
    assert rank_number("VllmWorker rank=3 pid=7") == 3
    assert rank_number("rank=12") == 12
    assert rank_number("VllmWorkerProcess pid=7") is None
    assert rank_number(None) is None


@pytest.mark.parametrize("version,engine,evidence", [
    # vLLM 0.7.0 shipped the V1 engine (opt-in) beside V0, and 0.11.0 removed V0 (release notes): before 0.7.0 the
    # version decides (V0); from 0.7.0 to 0.10.x the line formats decide; from 0.11.0 the version decides (V1)
    ("0.6.9", "v0", "version 0.6.9 predates the V1 engine"),
    ("0.7.0", "v0", "V0 line formats: "),
    ("0.10.9", "v0", "V0 line formats: "),
    ("0.11.0", "v1", "version 0.11.0 has no V0 engine"),
])
def test_engine_from_the_version_or_the_line_formats(version, engine, evidence):
    log = (f"Initializing an LLM engine (v{version}) with config: model='x', dtype=torch.bfloat16, max_seq_len=4096\n"
           "# GPU blocks: 100, # CPU blocks: 50\n")
    start = parse_log(log)[0]
    assert start.engine == engine and start.engine_evidence.startswith(evidence)


def test_engine_evidence_lists_every_format_seen():
    # two V1-only lines (the available figure and the token capacity): both named, '; ' between them
    start = parse_log("Available KV cache memory: 1.00 GiB\nGPU KV cache size: 4,096 tokens\n")[0]
    assert start.engine == "v1" and start.engine_evidence.startswith("V1 line formats: ")
    assert start.engine_evidence.count("; ") == 1
