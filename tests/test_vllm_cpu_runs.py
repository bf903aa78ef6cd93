"""kvlib.vllm.cpu_runs: the bundled vLLM CPU-engine starts (kvlib/data/vllm_cpu, PROVENANCE.md there).

Expected lines are read off the logs by eye; expected figures come from the sidecar records' own fields.
"""

import pytest

from kvlib.vllm import VllmLogError
from kvlib.vllm.cpu_runs import CpuEngineRun, cpu_engine_runs, read_cpu_engine_run


def test_runs_of_each_geometry():
    # PROVENANCE.md: gemma2_hybrid was also started at max_model_len 6000; the others once, at 1000
    assert cpu_engine_runs() == ["kv1g_len1000", "kv1g_len6000"]
    assert cpu_engine_runs("llama_gqa") == ["kv1g_len1000"]
    with pytest.raises(VllmLogError) as err:
        cpu_engine_runs("qwen")
    assert str(err.value) == ("no bundled CPU-engine geometry 'qwen' (have: deepseek_mla, gemma2_hybrid, llama_gqa, "
                              "nemotron_h_pattern, qwen3_next_gdn)")


def test_read_a_run():
    r = read_cpu_engine_run()       # the default: the Gemma 2 hybrid at max_model_len 6000
    assert isinstance(r, CpuEngineRun) and (r.geometry, r.run) == ("gemma2_hybrid", "kv1g_len6000")
    assert r.config["architectures"] == ["Gemma2ForCausalLM"]
    assert r.record["settings"]["max_model_len"] == 6000 and r.record["engine_reported"]["num_gpu_blocks"] == 4096
    # line 46 of its log
    assert ("CPU KV cache size: 299,707 tokens, Maximum concurrency for 6,000 tokens per request: 49.95x"
            in r.log.splitlines()[45])
    other = read_cpu_engine_run("llama_gqa", "kv1g_len1000")
    assert (other.geometry, other.run, other.record["settings"]["max_model_len"]) == ("llama_gqa", "kv1g_len1000", 1000)
    with pytest.raises(VllmLogError) as err:
        read_cpu_engine_run("gemma2_hybrid", "kv2g")
    assert str(err.value) == "no bundled CPU-engine run 'kv2g' of gemma2_hybrid (have: kv1g_len1000, kv1g_len6000)"


def test_kv_lines_are_the_kv_cache_messages():
    # gemma2_hybrid/kv1g_len1000.log lines 44 to 48, message part (after '[file.py:N] ')
    assert read_cpu_engine_run("gemma2_hybrid", "kv1g_len1000").kv_lines() == (
        "Explicitly set (1.0/16.84) GiB for KV cache on node 0.",
        "Add 1 padding layers, may waste at most 33.33% KV cache memory",
        "CPU KV cache size: 240,941 tokens, Maximum concurrency for 1,000 tokens per request: 240.94x",
        "kv cache group sizes (128, 128)",
        "kv lcm block sizes 128",
    )


def test_kv_lines_of_a_line_without_a_source_tag():
    # a line with no '] ' is kept whole (stripped); only the first '] ' ends the prefix
    run = CpuEngineRun("g", "r", {}, "  CPU KV cache size: 10 tokens  \nother line\n"
                                     "INFO [kv.py:1] kv cache group sizes [a] (128, 128)\n", {})
    assert run.kv_lines() == ("CPU KV cache size: 10 tokens", "kv cache group sizes [a] (128, 128)")
