"""kvlib.vllm.log: every line format the reader knows, and which rank's figure an engine start keeps.

The lines are the formats vLLM prints (the module docstring lists them, each from a bundled real log or
vLLM's source); the expected figures are read off the lines by eye.
"""

from pathlib import Path

import pytest

import kvlib
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


# --- what each line format says about the engine, word for word -------------------------------------
# engine_evidence is what `kvlib vllm log` prints beside the engine ("V1 (V1 line formats: ...)"): each format
# is named by the text vLLM prints with its numbers replaced by N (and M), so the wording is pinned here.
@pytest.mark.parametrize("lines,engine,evidence", [
    (["# cuda blocks: 7191, # CPU blocks: 512"],                                    # log 12
     "v0", "V0 line formats: '# cuda blocks: N, # CPU blocks: M'"),
    (["# GPU blocks: 4739"],                                                          # V1 of 0.7.3
     "v1", "V1 line formats: '# GPU blocks: N' without CPU blocks (0.7.x)"),
    (["Available KV cache memory: 1.00 GiB", "GPU KV cache size: 4,096 tokens"],
     "v1", "V1 line formats: 'Available KV cache memory'; 'GPU KV cache size: N tokens'"),
    (["reserved 5.00 GiB memory for KV Cache as specified by kv_cache_memory_bytes"],
     "v1", "V1 line formats: kv_cache_memory_bytes line"),
    (["CPU KV cache size: 240,941 tokens"],                                           # the gemma2 CPU start
     "v1", "V1 line formats: 'CPU KV cache size: N tokens'"),
    (["Estimated CUDA graph memory: 0.52 GiB"],
     "v1", "V1 line formats: CUDA-graph memory estimate"),
    (["Explicitly set (1.0/16.84) GiB for KV cache on node 0."],                      # the gemma2 CPU start
     "v1", "V1 line formats: CPU worker's KV-space line"),
    # the V1 error sizes nothing itself: it follows the available figure it quotes, in the same start
    (["Available KV cache memory: 1.50 GiB",
      "To serve at least one request with the models's max seq len (131072), (8.00 GiB KV cache is needed, "
      "which is larger than the available KV cache memory (1.5 GiB)."],
     "v1", "V1 line formats: 'Available KV cache memory'; 'KV cache is needed' error"),
    (["The model's max seq len (29000) is larger than the maximum number of tokens that can be stored in KV "
      "cache (23648)."],                                                              # log 07
     "v0", "V0 line formats: max-seq-len-larger-than-KV-cache error"),
    (["the current vLLM instance can use total_gpu_memory (79.19GiB) x gpu_memory_utilization (0.90) = 71.27GiB"],
     "v0", "V0 line formats: V0 memory-profiling summary"),                           # log 12
    (["model weights take 12.55GiB; non_torch_memory takes 0.16GiB; PyTorch activation peak memory takes "
      "2.38GiB; the rest of the memory reserved for KV Cache is 56.18GiB."],
     "v0", "V0 line formats: V0 memory-profiling summary"),                           # log 12
    (["Memory profiling results: total_gpu_memory=23.58GiB initial_memory_usage=15.34GiB "
      "peak_torch_memory=17.06GiB memory_usage_post_profile=15.35GiB non_torch_memory=0.35GiB "
      "kv_cache_size=3.81GiB gpu_memory_utilization=0.90"],                           # log 07
     "v0", "V0 line formats: V0 'Memory profiling results' line"),
    # a start whose lines carry no engine-specific format: no engine, and the evidence says so
    (["Maximum concurrency for 16 tokens per request: 1.00x"], None, "no engine-specific line"),
    # one V0 format and one V1 format: no verdict; both named
    (["Available KV cache memory: 1.00 GiB", "# GPU blocks: 100, # CPU blocks: 10"],
     None, "conflicting formats: V0 '# GPU blocks: N, # CPU blocks: M' / V1 'Available KV cache memory'"),
    # two formats of one engine, in the order printed, '; ' between (log 12: the summary, then the block line)
    (["the current vLLM instance can use total_gpu_memory (79.19GiB) x gpu_memory_utilization (0.90) = 71.27GiB",
      "# cuda blocks: 7191, # CPU blocks: 512"],
     "v0", "V0 line formats: V0 memory-profiling summary; '# cuda blocks: N, # CPU blocks: M'"),
    (["Estimated CUDA graph memory: 0.52 GiB", "Available KV cache memory: 1.00 GiB",
      "the current vLLM instance can use total_gpu_memory (79.19GiB) x gpu_memory_utilization (0.90) = 71.27GiB",
      "# GPU blocks: 100, # CPU blocks: 10"],
     None, "conflicting formats: V0 V0 memory-profiling summary; '# GPU blocks: N, # CPU blocks: M' / "
           "V1 CUDA-graph memory estimate; 'Available KV cache memory'"),
])
def test_engine_evidence_names_each_line_format(lines, engine, evidence):
    start = _one("\n".join(HEADER + line for line in lines))
    assert (start.engine, start.engine_evidence) == (engine, evidence)


@pytest.mark.parametrize("tag,engine,evidence", [
    # the process tag of the printing worker says which engine printed the line (V0's multiprocessing
    # workers are 'VllmWorkerProcess', V1's 'VllmWorker', 'EngineCore...' and 'Worker': logs 05, 17, 20, CPU)
    ("(VllmWorkerProcess pid=6494)", "v0", "V0 line formats: '(VllmWorkerProcess pid=...)' prefix"),
    ("(VllmWorker rank=0 pid=105)", "v1", "V1 line formats: '(VllmWorker ...)' prefix"),
    ("(EngineCore_DP0 pid=643458)", "v1", "V1 line formats: '(EngineCore_DP0 ...)' prefix"),
    ("(Worker pid=1447)", "v1", "V1 line formats: '(Worker ...)' prefix"),
])
def test_the_process_tag_is_engine_evidence(tag, engine, evidence):
    # 'Model loading took' carries no engine format of its own: only the tag votes
    start = _one(f"{tag} {HEADER}Model loading took 14.2474 GiB and 558.868858 seconds")
    assert (start.engine, start.engine_evidence) == (engine, evidence)


def test_a_tagged_line_that_matches_no_format_votes_nothing():
    # log 12's V0 block line, then a V1 worker's line that has a keyword ('=') and an out-of-range block size
    # ('Setting attention block size to 0' is refused): neither counts, so the tag does not vote V1
    start = _one(f"{HEADER}# cuda blocks: 7191, # CPU blocks: 512\n"
                 f"(VllmWorker rank=0 pid=1) {HEADER}world_size=1 rank=0 local_rank=0\n"
                 f"(VllmWorker rank=0 pid=1) {HEADER}Setting attention block size to 0 tokens")
    assert (start.engine, start.block_size) == ("v0", None)
    assert start.engine_evidence == "V0 line formats: '# cuda blocks: N, # CPU blocks: M'"


def test_a_cpu_block_count_is_never_the_gpu_count():
    # only '# GPU/cuda blocks: N, # CPU blocks: M' gives the GPU count; a line naming CPU blocks twice gives none,
    # and a tag on it votes nothing
    start = _one(f"{HEADER}Available KV cache memory: 1.00 GiB\n"
                 f"(VllmWorkerProcess pid=5) {HEADER}CPU blocks: 512, # CPU blocks: 512")
    assert (start.num_gpu_blocks, start.num_cpu_blocks, start.engine) == (None, None, "v1")


# --- the sources and the per-rank figures ------------------------------------------------------------------
@pytest.mark.parametrize("line,source", [
    ("Available KV cache memory: 69.66 GiB", "Available KV cache memory line"),          # log 20
    ("reserved 5.00 GiB memory for KV Cache as specified by kv_cache_memory_bytes", "kv_cache_memory_bytes line"),
    ("Explicitly set (1.0/16.84) GiB for KV cache on node 0.", "VLLM_CPU_KVCACHE_SPACE line (CPU backend)"),
    ("Memory profiling results: total_gpu_memory=23.58GiB kv_cache_size=3.81GiB gpu_memory_utilization=0.90",
     "V0 'Memory profiling results' line"),                                                # log 07
])
def test_available_figure_names_its_line(line, source):
    # report() shows the source beside the figure; a tagged line keeps its tag as the rank
    start = _one(f"(VllmWorker rank=1 pid=7) {HEADER}{line}")
    assert start.available_kv_cache_source == source
    assert start.available_kv_cache_by_rank == (("VllmWorker rank=1 pid=7", start.available_kv_cache_text),)
    assert start.num_ranks_reporting == 1


def test_untagged_figures_are_one_rank_named_by_the_empty_string():
    # log 12's summary lines carry no process tag: one rank, ''
    start = _one(f"{HEADER}the current vLLM instance can use total_gpu_memory (79.19GiB) x gpu_memory_utilization "
                 f"(0.90) = 71.27GiB\n{HEADER}model weights take 12.55GiB; non_torch_memory takes 0.16GiB; PyTorch "
                 f"activation peak memory takes 2.38GiB; the rest of the memory reserved for KV Cache is 56.18GiB.")
    assert start.available_kv_cache_by_rank == (("", "56.18"),)
    assert start.num_ranks_reporting == 1


def test_one_rank_printing_several_figures_counts_once():
    # log 14 (V0, VllmWorkerProcess pid=507): the rank's summary lines; log 20 (EngineCore_DP0): the CUDA-graph
    # estimate and the available figure from one process
    start = _one("(VllmWorkerProcess pid=507) INFO 04-12 08:21:19 [worker.py:267] the current vLLM instance can "
                 "use total_gpu_memory (23.58GiB) x gpu_memory_utilization (0.99) = 23.35GiB\n"
                 "(VllmWorkerProcess pid=507) INFO 04-12 08:21:19 [worker.py:267] model weights take 21.21GiB; "
                 "non_torch_memory takes 0.20GiB; PyTorch activation peak memory takes 0.37GiB; the rest of the "
                 "memory reserved for KV Cache is 1.57GiB.")
    assert start.num_ranks_reporting == 1
    assert (start.total_gpu_memory_gib, start.model_weights_gib, start.available_kv_cache_text) == \
        (23.58, 21.21, "1.57")
    start = _one(f"(EngineCore_DP0 pid=1) {HEADER}Estimated CUDA graph memory: 0.52 GiB\n"
                 f"(EngineCore_DP0 pid=1) {HEADER}Available KV cache memory: 69.66 GiB")
    assert start.num_ranks_reporting == 1 and start.cudagraph_estimate_gib == 0.52


def test_smallest_and_largest_rank_compare_numbers_not_text():
    # '10.25' sorts before '9.50' as text; as numbers 9.50 is the smaller available figure and 10.2 the larger weights
    log = (f"(VllmWorker rank=0 pid=1) {HEADER}Model loading took 9.5 GiB and 1.0 seconds\n"
           f"(VllmWorker rank=1 pid=2) {HEADER}Model loading took 10.2 GiB and 1.0 seconds\n"
           f"(VllmWorker rank=0 pid=1) {HEADER}Available KV cache memory: 9.50 GiB\n"
           f"(VllmWorker rank=1 pid=2) {HEADER}Available KV cache memory: 10.25 GiB\n")
    start = _one(log)
    assert (start.available_kv_cache_text, start.model_weights_text) == ("9.50", "10.2 GiB")


def test_smallest_concurrency_compares_numbers_not_text():
    # two concurrency lines for the same length: 9.50x is the smaller (as text '10.25' would sort first)
    start = _one(f"{HEADER}Maximum concurrency for 4,096 tokens per request: 10.25x\n"
                 f"{HEADER}Maximum concurrency for 4,096 tokens per request: 9.50x")
    assert (start.max_concurrency, start.max_concurrency_text, start.max_model_len) == (9.5, "9.50", 4096)


def test_the_weights_a_rank_printed_first_are_kept():
    # a V0 summary ('model weights take 12.55GiB', log 12) then a loading line from the same rank: the summary's stays
    start = _one(f"{HEADER}model weights take 12.55GiB; non_torch_memory takes 0.16GiB; PyTorch activation peak "
                 f"memory takes 2.38GiB; the rest of the memory reserved for KV Cache is 56.18GiB.\n"
                 f"{HEADER}Loading model weights took 14.9888 GB")
    assert start.model_weights_text == "12.55 GiB"


def test_a_start_without_optional_lines_leaves_them_unset():
    start = _one(f"{HEADER}GPU KV cache size: 158,656 tokens")      # log 16's capacity line alone
    assert start.block_size_line is None and start.combined_capacity_line is False
    assert start.kv_cache_group_block_sizes is None and start.attention_backend is None
    assert start.max_num_batched_tokens is None
    assert (start.device, start.gpu_kv_cache_tokens_source) == ("gpu", "GPU KV cache size line")


# --- where one engine start ends and the next begins (module docstring, 'Engine starts') --------------------
@pytest.mark.parametrize("lines,expected", [
    # a second capacity line (single rank: no engine config, so a world of 1)
    (["GPU KV cache size: 158,656 tokens", "GPU KV cache size: 198,784 tokens"],
     [("gpu_kv_cache_tokens", 158656), ("gpu_kv_cache_tokens", 198784)]),
    # a capacity line after a block line, and a block line after a capacity line
    (["# GPU blocks: 100, # CPU blocks: 10", "GPU KV cache size: 1,600 tokens"],
     [("num_gpu_blocks", 100), ("gpu_kv_cache_tokens", 1600)]),
    (["GPU KV cache size: 1,600 tokens", "# GPU blocks: 100, # CPU blocks: 10"],
     [("gpu_kv_cache_tokens", 1600), ("num_gpu_blocks", 100)]),
    # a second max-seq-len error (log 07's line, then the same with other figures)
    (["The model's max seq len (29000) is larger than the maximum number of tokens that can be stored in KV "
      "cache (23648).", "The model's max seq len (32768) is larger than the maximum number of tokens that can "
      "be stored in KV cache (31248)."],
     [("gpu_kv_cache_tokens", 23648), ("gpu_kv_cache_tokens", 31248)]),
    # a start-up figure the same rank already printed, with nothing sized between
    (["Available KV cache memory: 1.00 GiB", "Available KV cache memory: 2.00 GiB"],
     [("available_kv_cache_text", "1.00"), ("available_kv_cache_text", "2.00")]),
    (["the rest of the memory reserved for KV Cache is 56.18GiB.", "the rest of the memory reserved for KV Cache "
      "is 1.57GiB."], [("available_kv_cache_text", "56.18"), ("available_kv_cache_text", "1.57")]),
    (["total_gpu_memory (79.19GiB) x gpu_memory_utilization (0.90) = 71.27GiB",
      "total_gpu_memory (23.58GiB) x gpu_memory_utilization (0.99) = 23.35GiB"],
     [("total_gpu_memory_gib", 79.19), ("total_gpu_memory_gib", 23.58)]),
    (["Memory profiling results: total_gpu_memory=23.58GiB kv_cache_size=3.81GiB",
      "Memory profiling results: total_gpu_memory=23.58GiB kv_cache_size=2.89GiB"],
     [("available_kv_cache_text", "3.81"), ("available_kv_cache_text", "2.89")]),
    (["Memory profiling results: total_gpu_memory=23.58GiB gpu_memory_utilization=0.90",
      "Memory profiling results: total_gpu_memory=79.19GiB gpu_memory_utilization=0.90"],
     [("total_gpu_memory_gib", 23.58), ("total_gpu_memory_gib", 79.19)]),
    (["Loading model weights took 14.9888 GB", "Loading model weights took 14.9888 GB"],   # log 07, twice
     [("model_weights_text", "14.9888 GB"), ("model_weights_text", "14.9888 GB")]),
    (["Setting attention block size to 64 tokens", "Setting attention block size to 32 tokens"],
     [("block_size", 64), ("block_size", 32)]),
    (["Estimated CUDA graph memory: 0.52 GiB", "Estimated CUDA graph memory: 0.61 GiB"],
     [("cudagraph_estimate_gib", 0.52), ("cudagraph_estimate_gib", 0.61)]),
    (["Explicitly set (1.0/16.84) GiB for KV cache on node 0.", "Explicitly set (1.0/16.96) GiB for KV cache on "
      "node 0."], [("available_kv_cache_text", "1.0"), ("available_kv_cache_text", "1.0")]),
    # a start-up figure from another rank once the current start is sized
    (["Available KV cache memory: 1.00 GiB", "GPU KV cache size: 4,096 tokens",
      "(VllmWorker rank=1 pid=2) INFO 03-21 20:15:45 [gpu_worker.py:276] Available KV cache memory: 2.00 GiB",
      "GPU KV cache size: 8,192 tokens"],
     [("available_kv_cache_text", "1.00"), ("available_kv_cache_text", "2.00")]),
    # a version line once the current start has figures, or a second version line
    (["vLLM API server version 0.8.5", "GPU KV cache size: 100 tokens", "vLLM API server version 0.9.0",
      "GPU KV cache size: 200 tokens"], [("vllm_version", "0.8.5"), ("vllm_version", "0.9.0")]),
    (["GPU KV cache size: 100 tokens", "vLLM API server version 0.9.0", "GPU KV cache size: 200 tokens"],
     [("vllm_version", None), ("vllm_version", "0.9.0")]),
    # settings printed before the pool is sized, once the current start is sized
    (["GPU KV cache size: 100 tokens", "Chunked prefill is enabled with max_num_batched_tokens=4096.",
      "GPU KV cache size: 200 tokens"], [("max_num_batched_tokens", None), ("max_num_batched_tokens", 4096)]),
    (["GPU KV cache size: 100 tokens", "Using AMX_MLA backend.", "GPU KV cache size: 200 tokens"],
     [("attention_backend", None), ("attention_backend", "AMX_MLA")]),
    # a second engine-config line, even with no figure between
    (["Initializing an LLM engine (v0.6.4) with config: model='a', max_seq_len=2048",
      "Initializing an LLM engine (v0.6.4) with config: model='b', max_seq_len=4096"],
     [("model", "a"), ("model", "b")]),
])
def test_what_starts_a_new_engine_start(lines, expected):
    starts = parse_log("\n".join(HEADER + line for line in lines))
    assert [(field, getattr(s, field)) for s, (field, _) in zip(starts, expected)] == expected
    assert len(starts) == len(expected)


@pytest.mark.parametrize("lines,fields", [
    # TP 2 (engine config): both ranks' capacity lines are one start, the smallest kept
    (["Initializing an LLM engine (v0.8.5) with config: model='x', tensor_parallel_size=2",
      "GPU KV cache size: 200 tokens", "GPU KV cache size: 100 tokens"], {"gpu_kv_cache_tokens": 100}),
    # lines that never open a start of their own: the concurrency, the V1 error, the override, the group sizes
    (["the current vLLM instance can use total_gpu_memory (79.19GiB) x gpu_memory_utilization (0.90) = 71.27GiB",
      "Overriding num_gpu_blocks=7191 with num_gpu_blocks_override=512", "# cuda blocks: 512, # CPU blocks: 512"],
     {"num_gpu_blocks_computed": 7191, "num_gpu_blocks": 512, "total_gpu_memory_gib": 79.19}),
    (["CPU KV cache size: 240,941 tokens, Maximum concurrency for 1,000 tokens per request: 240.94x",
      "kv cache group sizes (128, 128)"],                                          # the gemma2 CPU start
     {"gpu_kv_cache_tokens": 240941, "kv_cache_group_block_sizes": (128, 128), "device": "cpu",
      "gpu_kv_cache_tokens_source": "CPU KV cache size line", "combined_capacity_line": True}),
    # an engine-config line, then the version line: one start
    (["Initializing an LLM engine with config: model='x', dtype=torch.float16", "vLLM API server version 0.8.5",
      "# GPU blocks: 100, # CPU blocks: 10"], {"model": "x", "vllm_version": "0.8.5", "num_gpu_blocks": 100}),
    # backend lines: the first one printed is the attention backend
    (["Using AMX_MLA backend.", "Using TORCH_SDPA backend.", "Chunked prefill is enabled with "
      "max_num_batched_tokens=4096.", "CPU KV cache size: 303,375 tokens"],
     {"attention_backend": "AMX_MLA", "max_num_batched_tokens": 4096, "gpu_kv_cache_tokens": 303375}),
])
def test_lines_that_join_the_current_start(lines, fields):
    start = _one("\n".join(HEADER + line for line in lines))
    assert {k: getattr(start, k) for k in fields} == fields


def test_the_v1_error_gives_max_model_len():
    # 'max seq len (131072), (8.00 GiB KV cache is needed': the length asked for and the KV it needs
    start = _one(f"{HEADER}Available KV cache memory: 1.50 GiB\n{HEADER}To serve at least one request with the "
                 "models's max seq len (131072), (8.00 GiB KV cache is needed, which is larger than the available "
                 "KV cache memory (1.5 GiB).")
    assert (start.max_model_len, start.max_model_len_source, start.kv_cache_needed_gib) == \
        (131072, "KV cache needed error", 8.0)


def test_block_size_line_is_kept_as_printed():
    start = _one(f"{HEADER}Forcing kv cache block size to 64 for FlashMLA backend.\n{HEADER}# GPU blocks: 7")
    assert start.block_size_line == f"{HEADER}Forcing kv cache block size to 64 for FlashMLA backend."
    # at most 200 characters of it
    start = _one(f"{HEADER}Setting attention block size to 1 tokens, " + "x" * 300 + f"\n{HEADER}# GPU blocks: 7")
    assert start.block_size == 1 and start.block_size_line == (f"{HEADER}Setting attention block size to 1 "
                                                               "tokens, " + "x" * 300)[:200]
    assert len(start.block_size_line) == 200
    start = _one("Initializing an LLM engine (v0.6.4) with config: model='x', block_size=32\n# GPU blocks: 7")
    assert (start.block_size, start.block_size_line) == (32, "engine config")


def test_the_cpu_kv_space_line_alone_says_cpu():
    # the gemma2 CPU start's line 44; no capacity line after it here
    start = _one("(Worker pid=1447) INFO 12-01 11:01:47 [cpu_worker.py:260] Explicitly set (1.0/16.84) GiB for KV "
                 "cache on node 0.")
    assert (start.device, start.available_kv_cache_text) == ("cpu", "1.0")


def test_device_from_the_engine_config():
    # log 02's config prints device_config=cuda; a CPU build prints device_config=cpu, with no other CPU line here
    start = _one("Initializing an LLM engine with config: model='x', device_config=cpu\n# GPU blocks: 7")
    assert start.device == "cpu"
    start = _one("Initializing an LLM engine with config: model='x', device_config=cuda\n# GPU blocks: 7")
    assert start.device is None


@pytest.mark.parametrize("head,version,engine", [
    ("Initializing a V1 LLM engine with config:", None, "v1"),             # the label without a version
    ("Initializing an LLM engine (vdev) with config:", None, None),        # not a version: dropped
    ("Initializing an LLM engine (v0.6.4) with config:", "0.6.4", "v0"),   # nothing after 'config:'
])
def test_engine_config_head(head, version, engine):
    start = _one(f"{head}\nMaximum concurrency for 16 tokens per request: 1.00x")
    assert (start.vllm_version, start.engine) == (version, engine)


def test_a_bad_number_in_the_engine_config_skips_only_that_field():
    start = _one("Initializing an LLM engine with config: model='x', tensor_parallel_size=0, kv_cache_dtype=fp8, "
                 "block_size=16\n# GPU blocks: 7")
    assert (start.tensor_parallel_size, start.kv_cache_dtype, start.block_size) == (None, "fp8", 16)


# log 02's engine-config line (vLLM 0.3), wrapped after 'revision=None,' as a terminal or a paste wraps it
CONFIG_02_HEAD = ("INFO 02-29 19:21:40 llm_engine.py:79] Initializing an LLM engine with config: "
                  "model='facebook/opt-125m', tokenizer='facebook/opt-125m', tokenizer_mode=auto, revision=None,")
CONFIG_02_TAIL = ("tokenizer_revision=None, trust_remote_code=False, dtype=torch.float16, max_seq_len=2048, "
                  "download_dir=None, load_format=auto, tensor_parallel_size=1, disable_custom_all_reduce=False, "
                  "quantization=None, sparsity=None, enforce_eager=False, kv_cache_dtype=auto, device_config=cuda, "
                  "seed=0)")


def test_a_wrapped_engine_config_line_is_read_whole():
    # (max_seq_len=2048 sits in the tail: the wrapped line's max_model_len was lost before this test)
    start = _one(f"{CONFIG_02_HEAD}\n{CONFIG_02_TAIL}\n{HEADER}# GPU blocks: 76240, # CPU blocks: 7281")
    assert (start.model, start.dtype, start.max_model_len, start.tensor_parallel_size) == \
        ("facebook/opt-125m", "float16", 2048, 1)
    assert (start.enforce_eager, start.kv_cache_dtype, start.max_model_len_source) == (False, "auto", "engine config")
    # a block size in the tail counts when the head printed none; the head's fields win over the tail's
    start = _one(f"{CONFIG_02_HEAD} dtype=torch.bfloat16,\nblock_size=32, dtype=torch.float16\n# GPU blocks: 7")
    assert (start.block_size, start.block_size_line, start.dtype) == (32, "engine config", "bfloat16")
    start = _one(f"{CONFIG_02_HEAD} block_size=16,\nblock_size=32\n# GPU blocks: 7")
    assert start.block_size == 16


@pytest.mark.parametrize("before", [
    "",                                                  # right after a line that is not the engine config
    "\n",                                                # after a blank line
    f"{HEADER}Using model weights format ['*.bin']\n",   # after a logged line without a keyword
    f"{CONFIG_02_HEAD}\n{HEADER}Using model weights format ['*.bin']\n",   # two lines after the config
])
def test_only_the_line_after_the_engine_config_is_its_tail(before):
    starts = parse_log(f"# GPU blocks: 100, # CPU blocks: 10\n{before}kv_cache_dtype=fp8_e5m2, block_size=32")
    assert [(s.kv_cache_dtype, s.block_size) for s in starts] == [(None, None)] * len(starts)


def test_a_header_line_after_the_engine_config_is_not_its_tail():
    start = _one(f"{CONFIG_02_HEAD}\n{HEADER}kv_cache_dtype=fp8_e5m2, block_size=32\n# GPU blocks: 7")
    assert (start.kv_cache_dtype, start.block_size) == (None, None)


# --- prefixes and process tags -----------------------------------------------------------------------------
@pytest.mark.parametrize("prefix,rank", [
    (">> (VllmWorker rank=1 pid=7) ", "VllmWorker rank=1 pid=7"),     # log 02's pasted '>> ', then a tag
    (">>  (VllmWorker rank=1 pid=7) ", "VllmWorker rank=1 pid=7"),    # ... with a second space
    ("qwen3-1  |   (VllmWorker rank=1 pid=7) ", "VllmWorker rank=1 pid=7"),   # log 17's compose prefix, padded
    ("[rank1]: ", "rank=1"),                                           # torchrun's rank prefix
    ("[rank1]: (VllmWorker rank=1 pid=7) ", "VllmWorker rank=1 pid=7"),   # nested: the innermost tag printed it
    ("(A pid=1) (B pid=2) (C pid=3) (VllmWorker rank=1 pid=7) ", "VllmWorker rank=1 pid=7"),
])
def test_the_tag_under_the_prefixes_names_the_rank(prefix, rank):
    start = _one(f"{prefix}{HEADER}Available KV cache memory: 1.00 GiB")
    assert start.available_kv_cache_by_rank == ((rank, "1.00"),)
    assert rank_number(rank) == 1


def test_a_continuation_line_keeps_the_rank_of_the_line_above():
    # a message printed over two lines: the second has no log header and no tag of its own
    start = _one(f"(VllmWorker rank=1 pid=7) {HEADER}Memory profiling takes 17.56 seconds\n"
                 "Available KV cache memory: 1.00 GiB\n"
                 f"{HEADER}Available KV cache memory: 2.00 GiB")
    assert start.available_kv_cache_by_rank == (("", "2.00"), ("VllmWorker rank=1 pid=7", "1.00"))
    # a tagged line without a header is its own rank's
    start = _one(f"(VllmWorker rank=1 pid=7) {HEADER}Memory profiling takes 17.56 seconds\n"
                 "(VllmWorker rank=2 pid=8) Available KV cache memory: 1.00 GiB")
    assert start.available_kv_cache_by_rank == (("VllmWorker rank=2 pid=8", "1.00"),)


def test_parse_log_names_what_it_was_given():
    with pytest.raises(ValueError, match=r"^parse_log takes the log as a str, not bytes$"):
        parse_log(b"# GPU blocks: 7")


def test_weights_in_mib_are_kept_as_text():
    start = _one(f"{HEADER}Loading model weights took 244.61 MiB\n{HEADER}# GPU blocks: 7")
    assert (start.model_weights_text, start.model_weights_gib) == ("244.61 MiB", None)


def test_the_bundled_cpu_start_of_the_mla_model():
    # kvlib/data/vllm_cpu/deepseek_mla/kv1g_len1000.log (vLLM 0.32.0 CPU build), read by eye: line 5 'Chunked
    # prefill is enabled with max_num_batched_tokens=4096.', line 14 'Initializing a V1 LLM engine (v0.32.0)',
    # line 33 '(Worker pid=16878) ... Using AMX_MLA backend.', line 47 '(Worker pid=16878) ... Explicitly set
    # (1.0/18.09) GiB for KV cache on node 0.', line 48 'CPU KV cache size: 303,375 tokens, Maximum concurrency
    # for 1,000 tokens per request: 303.38x'
    log = (Path(kvlib.__file__).parent / "data" / "vllm_cpu" / "deepseek_mla" / "kv1g_len1000.log").read_text()
    start = _one(log)
    assert (start.engine, start.engine_evidence, start.vllm_version) == \
        ("v1", "engine-config line names V1", "0.32.0")
    assert (start.device, start.attention_backend, start.max_num_batched_tokens) == ("cpu", "AMX_MLA", 4096)
    assert start.available_kv_cache_by_rank == (("Worker pid=16878", "1.0"),)
    assert start.available_kv_cache_source == "VLLM_CPU_KVCACHE_SPACE line (CPU backend)"
    assert (start.gpu_kv_cache_tokens, start.gpu_kv_cache_tokens_source) == (303375, "CPU KV cache size line")
    assert (start.max_concurrency, start.max_model_len, start.combined_capacity_line) == (303.38, 1000, True)


# --- 0.34's measured pool: the lines of vllm/v1/worker/extensible_kv_cache.py, filled in by hand -----------------
# measure_kv_cache_blocks' format: "Memory after warmup: %s GiB free, %s GiB committed to the KV cache, %s GiB kept
# for transient activations (%s GiB allocated at peak, %s GiB of torch reservation growth); %d KV cache blocks (%s
# GiB) fit within the requested %s GiB. Torch may reserve up to %s GiB."; extend_kv_cache's: "Extended KV cache to
# %d blocks (%.2f GiB)."
WARMUP = ("Memory after warmup: {free} GiB free, 1.0 GiB committed to the KV cache, 1.9 GiB kept for transient "
          "activations (1.9 GiB allocated at peak, 0.0 GiB of torch reservation growth); {n} KV cache blocks "
          "({gib} GiB) fit within the requested 79.18 GiB. Torch may reserve up to 19.12 GiB.")
MEASURED_START = (
    "(EngineCore pid=9) INFO 12-01 09:00:01 [core.py:153] Initializing a V1 LLM engine (v0.34.0) with config: "
    "model='m', dtype=torch.bfloat16, max_seq_len=8192, tensor_parallel_size=1, kv_cache_dtype=auto\n"
    f"(EngineCore pid=9) {HEADER}Available KV cache memory: 61.72 GiB\n"
    f"(EngineCore pid=9) {HEADER}" + WARMUP.format(free="61.31", n=7549, gib="58.98") + "\n"
    f"(EngineCore pid=9) {HEADER}GPU KV cache size: 483,136 tokens, Maximum concurrency for 8,192 tokens per "
    "request: 58.98x\n"
    f"(EngineCore pid=9) {HEADER}Extended KV cache to 7549 blocks (58.98 GiB).")


def test_a_measured_start_reports_the_figure_its_blocks_were_counted_from():
    start = _one(MEASURED_START)
    assert (start.pool_sizing, start.vllm_version, start.engine) == ("measured", "0.34.0", "v1")
    # the estimate that sized the reservation is kept apart; the pool is the warmup line's 58.98 GiB, 7,549 blocks
    assert (start.estimated_kv_cache_text, start.available_kv_cache_text) == ("61.72", "58.98")
    assert start.available_kv_cache_source == "'Memory after warmup' line (measured after warmup, 0.34)"
    assert (start.measured_kv_cache_blocks, start.requested_memory_gib) == (7549, 79.18)
    assert (start.gpu_kv_cache_tokens, start.max_concurrency, start.max_model_len) == (483_136, 58.98, 8192)


def test_a_measured_start_is_predicted_at_0_34s_64_token_blocks():
    # Llama 3.1 8B: 2 x 32 layers x 8 heads x 128 x 2 B = 131,072 B a token, 8,388,608 B a 64-token block;
    # 58.98 GiB -> [ceil(58.975 x 2^30), ceil(58.985 x 2^30) - 1] // 8 MiB = [7,548, 7,550]; 7,549 x 64 = 483,136
    p = kvlib.vllm.predict_from_log(_one(MEASURED_START), kvlib.load_model("llama-3.1-8b"))
    assert (p.block_size, p.block_size_source, p.blocks_min, p.blocks_max) == (64, "default", 7548, 7550)
    assert p.agrees and p.tokens_min <= 483_136 <= p.tokens_max


def test_the_ranks_of_a_measured_start_keep_the_smallest_pool():
    lines = [f"(Worker_TP{r} pid={r}) {HEADER}Available KV cache memory: 30.0 GiB\n"
             f"(Worker_TP{r} pid={r}) {HEADER}" + WARMUP.format(free="30.0", n=n, gib=g) for r, n, g in
             ((0, 3000, "23.44"), (1, 2990, "23.36"))]
    start = _one("\n".join(lines))
    assert (start.available_kv_cache_text, start.measured_kv_cache_blocks) == ("23.36", 2990)
    assert start.estimated_kv_cache_text == "30.0"


@pytest.mark.parametrize("log,sizing,why", [
    (MEASURED_START, "measured", "'Memory after warmup' / 'Extended KV cache to' lines (0.34's extensible KV cache)"),
    # extensible_kv_cache.py prints the extension even where an excerpt left out the warmup line
    (f"{HEADER}Extended KV cache to 100 blocks (0.78 GiB).", "measured",
     "'Memory after warmup' / 'Extended KV cache to' lines (0.34's extensible KV cache)"),
    # v1/executor/abstract.py disable_extensible_kv_cache
    (f"{HEADER}Disabling the extensible KV cache: it is only supported on CUDA and ROCm. The KV cache will be sized "
     "from profiling estimates instead of measured memory.\nGPU KV cache size: 100 tokens", "estimate",
     "extensible KV cache off: it is only supported on CUDA and ROCm"),
    (f"{HEADER}reserved 5.00 GiB memory for KV Cache as specified by kv_cache_memory_bytes\nGPU KV cache size: "
     "100 tokens", "estimate", "--kv-cache-memory (kv_cache_memory_bytes) set"),
    (f"{HEADER}# GPU blocks: 7191, # CPU blocks: 512", "estimate", "V0 engine"),
    (f"{HEADER}vLLM API server version 0.33.0\n{HEADER}Available KV cache memory: 1.00 GiB", "estimate",
     "vLLM 0.33.0 predates the measured pool (0.34)"),
    (f"{HEADER}Available KV cache memory: 1.00 GiB\n{HEADER}GPU KV cache size: 100 tokens", "estimate",
     "a capacity line with no 'Memory after warmup' line before it"),
    (f"{HEADER}Available KV cache memory: 1.00 GiB", None, None),      # no version, no capacity: either rule
])
def test_which_rule_sized_the_pool(log, sizing, why):
    start = _one(log)
    assert (start.pool_sizing, start.pool_sizing_evidence) == (sizing, why)


# --- the periodic stats line: each format built from its release's format string, values read back by eye --------
V0_FORMAT = ("Avg prompt throughput: %.1f tokens/s, Avg generation throughput: %.1f tokens/s, Running: %d reqs, "
             "Swapped: %d reqs, Pending: %d reqs, GPU KV cache usage: %.1f%%, CPU KV cache usage: %.1f%%.")   # 0.7.3
V1_0_8 = ("Avg prompt throughput: %.1f tokens/s, Avg generation throughput: %.1f tokens/s, Running: %d reqs, "
          "Waiting: %d reqs, GPU KV cache usage: %.1f%%, Prefix cache hit rate: %.1f%%")      # v1 loggers.py 0.8.0
V1_0_34 = ", ".join(["Avg prompt throughput: %.1f tokens/s", "Avg generation throughput: %.1f tokens/s",
                     "Running: %d reqs", "Waiting: %d reqs", "Deferred: %d reqs", "Preemptions: %d",
                     "%s KV cache usage: %.1f%%", "Prefix cache hit rate: %.1f%%",
                     "External prefix cache hit rate: %.1f%%"])                            # loggers.py 0.34.0 log()


def test_the_v0_stats_line():
    s = kvlib.vllm.parse_stats_line("INFO 07-08 07:17:34 metrics.py:334] " + V0_FORMAT % (6501.4, 69.1, 4, 1, 7,
                                                                                         15.6, 0.5))
    assert (s.engine, s.running, s.swapped, s.waiting) == ("v0", 4, 1, 7)
    assert (s.kv_cache_device, s.kv_cache_usage_percent, s.cpu_kv_cache_usage_percent) == ("GPU", 15.6, 0.5)
    assert (s.prompt_tokens_per_s, s.generation_tokens_per_s) == (6501.4, 69.1)
    assert (s.prefix_cache_hit_rate_percent, s.source, s.releases, s.engine_index) == (None, "metrics.py:334", (),
                                                                                         None)


def test_the_first_v1_stats_line_and_the_engine_index():
    s = kvlib.vllm.parse_stats_line(f"{HEADER}" + V1_0_8 % (0.0, 239.2, 8, 3, 91.2, 12.5))
    assert (s.engine, s.running, s.waiting, s.kv_cache_usage_percent, s.prefix_cache_hit_rate_percent) == \
        ("v1", 8, 3, 91.2, 12.5)
    s = kvlib.vllm.parse_stats_line("INFO 07-28 06:40:59 [loggers.py:118] Engine 002: "
                                    + V1_0_8 % (0.0, 239.2, 8, 3, 91.2, 12.5))
    assert (s.engine_index, s.source, s.releases) == (2, "loggers.py:118", ("0.9.2",))


def test_the_0_34_stats_line_with_every_optional_part():
    s = kvlib.vllm.parse_stats_line("(APIServer pid=1) INFO 12-01 09:10:00 [loggers.py:335] Engine 000: " + V1_0_34 % (
        12068.8, 734.9, 18, 33, 2, 5, "XPU", 87.7, 41.2, 3.5))
    assert (s.running, s.waiting, s.deferred, s.preemptions) == (18, 33, 2, 5)
    assert (s.kv_cache_device, s.kv_cache_usage_percent) == ("XPU", 87.7)
    assert (s.prefix_cache_hit_rate_percent, s.external_prefix_cache_hit_rate_percent) == (41.2, 3.5)
    assert s.releases == ("0.32.0", "0.33.0", "0.34.0")


def test_from_0_31_the_hit_rate_can_be_absent():
    line = ", ".join(["Avg prompt throughput: 0.0 tokens/s", "Avg generation throughput: 1.0 tokens/s",
                      "Running: 1 reqs", "Waiting: 0 reqs", "GPU KV cache usage: 3.0%"])
    s = kvlib.vllm.parse_stats_line(line)
    assert (s.prefix_cache_hit_rate_percent, s.kv_cache_usage_percent) == (None, 3.0)


def test_lines_that_are_not_stats_lines():
    assert kvlib.vllm.parse_stats_line("Available KV cache memory: 1.00 GiB") is None
    assert kvlib.vllm.parse_stats_line("Avg prompt throughput: 1.0 tokens/s") is None     # cut short
    assert kvlib.vllm.stats_lines("Running: 1 reqs\n" + V1_0_8 % (1, 2, 3, 4, 5, 6)) != []
    with pytest.raises(ValueError, match=r"^parse_stats_line takes one line as a str, not bytes$"):
        kvlib.vllm.parse_stats_line(b"x")


def test_the_stats_source_lines_are_the_releases_log_calls():
    # each release read appears once, in release order, and the lines only grow (code is added above log())
    releases = [r for rs in kvlib.vllm.log.STATS_SOURCE_LINES.values() for r in rs]
    assert len(releases) == len(set(releases)) and "0.34.0" in releases
    assert list(kvlib.vllm.log.STATS_SOURCE_LINES) == sorted(kvlib.vllm.log.STATS_SOURCE_LINES)
