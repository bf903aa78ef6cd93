"""kvdisplay.vllm_lab: the block-window view and the engine cell (ch08_vllm_lab).

Figures by hand: Llama 2 7B's block is 2 x 32 x 32 x 128 x 2 B x 16 = 8 MiB, so 12.log's
56.18 GiB (56.175 .. 56.185 GiB) allows 7,190 .. 7,191 blocks (its sidecar: 7,191 printed).
The committed CPU start (kvlib/data/vllm_cpu/llama_gqa/kv1g_len1000.json) printed 1,365,250
tokens at 1 GiB, max_model_len 1000; whole 128-token blocks hold 2^30 // (2 x 3 x 2 x 32 x 2 x 128)
x 128 = 10,922 x 128 = 1,398,016 tokens.
"""

from __future__ import annotations


import pytest

import kvdisplay as kd
import kvlib as kv
from kvlib.vllm import cpu_engine


def test_block_window_view_log12():
    view = kd.block_window_view(32, 32, 128, 2, 16, 1, "56.18", 7191)
    assert "blocks: 7,190 – 7,191" in view and "8,388,608 B" in view and "agrees" in view


def test_block_window_view_tp_and_cause():
    # two GPUs: 16 heads per rank, 4 MiB blocks, 56.175 .. 56.185 GiB -> 14,380 .. 14,383
    view = kd.block_window_view(32, 32, 128, 2, 16, 2, "56.18", 14382)
    assert "blocks: 14,380 – 14,383" in view and "✓" in view
    assert "wrong_model" in kd.block_window_view(32, 32, 128, 2, 16, 1, "56.18", 1000)


def test_log_presets_and_sources():
    presets = kd.log_presets()
    assert [p.logged_blocks for p in presets.values()] == [7191, 1952, 652144 // 16]
    assert kd.log_source_words("07") == "vLLM issue #10517"
    assert kd.log_source_words("02") == "vLLM pull request #3120"
    assert "gateway-api-inference-extension" in kd.log_source_words("12")


def test_engine_geometries_are_configs():
    for name in kd.ENGINE_GEOMETRIES:
        config = kd.engine_geometry(name)
        assert config["model_type"] and config["num_hidden_layers"] >= 1
    small = kd.engine_geometry("Llama 3.1 8B's KV shape at small width")
    assert (small["num_hidden_layers"], small["num_key_value_heads"], small["head_dim"]) == (32, 8, 128)
    with pytest.raises(KeyError, match="choose one of"):
        kd.engine_geometry("nope")


def _whole_blocks(config, space, max_model_len):
    per_block = 2 * config["num_hidden_layers"] * config["num_key_value_heads"] * config["head_dim"] * 2 * 128
    return space // per_block * 128


def test_engine_cell_default_never_starts_the_engine(monkeypatch):
    def no_start(*args, **kwargs):
        raise AssertionError("the engine cell started a process without START_ENGINE")
    monkeypatch.setattr(cpu_engine, "run_process", no_start)
    html = kd.engine_lab("tiny GQA (the committed log's model)", 1, 1000, _whole_blocks).data
    assert "START_ENGINE is False" in html and "1,365,250" in html and "1,398,016" in html
    assert "kvlib agrees with the engine" in html and "int(concurrency × max_model_len)" in html


def test_engine_cell_without_the_engine_says_so_in_one_line(monkeypatch, tmp_path):
    monkeypatch.setenv(cpu_engine.ENGINE_PYTHON_ENV, str(tmp_path / "no-python"))
    html = kd.engine_lab("tiny Gemma-2 (sliding-window hybrid)", 1, 1000, start_engine=True).data
    assert "not installed" in html and "240,941" in html      # gemma2_hybrid's committed start: 240,941 tokens
    gpu = kd.engine_lab("tiny MQA", 1, 1000, start_engine=True, device="gpu").data
    assert "not installed" in gpu


def test_engine_cell_shows_a_failing_prediction():
    html = kd.engine_lab("tiny GQA (the committed log's model)", 1, 1000, lambda *a: 1 // 0).data
    assert "ZeroDivisionError" in html


@pytest.mark.slow
def test_engine_lines_are_shown_without_colour_codes():
    """A live start's lines carry vLLM's terminal colours (seen running the engine cell:
    '\\x1b[0;36m(EngineCore pid=...)'); the page shows the lines as text, without the escapes."""
    import dataclasses
    import json

    config_path, text = cpu_engine.bundled_cpu_start("llama_gqa")
    committed = cpu_engine._bundled(json.loads(config_path.read_text()), "test")
    coloured = tuple(f"\x1b[0;36m(EngineCore pid=7)\x1b[0;0m {line}" for line in text.splitlines())
    html = kd.engine_lab_view(dataclasses.replace(committed, log_lines=coloured), 1_398_016)
    assert "CPU KV cache size" in html and "\x1b" not in html and "[0;36m" not in html


# The explorer's verdict judges the range it shows ([corrections 05-09]): one test per control. Llama 2 7B (32 layers,
# 32 KV heads of 128), 56.18 GiB = 56.175 .. 56.185 GiB. A block is 2 x 32 x (32 / tp) x 128 x dtype x bs bytes.
def _verdict(view):
    return view.split("the log printed")[1]


def test_verdict_at_the_tp_shown():
    # TP 2: 4 MiB blocks, 14,380 .. 14,383; log 12's 7,191 fits only at TP 1 (8 MiB: 7,190 .. 7,191)
    view = kd.block_window_view(32, 32, 128, 2, 16, 2, "56.18", 7191)
    assert "blocks: 14,380 – 14,383" in view and "✗ 7,191" in view
    assert "tensor_parallel" in _verdict(view) and "TP 1, not the TP 2" in _verdict(view)
    assert "agrees" not in _verdict(view)
    assert "✓" in kd.block_window_view(32, 32, 128, 2, 16, 2, "56.18", 14382)


def test_verdict_at_the_block_size_shown():
    # TP 4 with 64-token blocks: 2 x 32 x 8 x 128 x 2 x 64 = 8 MiB again, 7,190 .. 7,191; 7,192 is one block out
    view = kd.block_window_view(32, 32, 128, 2, 64, 4, "56.18", 7192)
    assert "blocks: 7,190 – 7,191" in view and "rounding" in _verdict(view) and "wrong_model" not in view
    # 16-token blocks shown, a count only 32-token blocks give (16 MiB at TP 1: 56.175 .. 56.185 x 64 -> 3,595)
    view = kd.block_window_view(32, 32, 128, 2, 16, 1, "56.18", 3595)
    assert "block_size" in _verdict(view) and "32-token blocks, not the 16 shown" in _verdict(view)


def test_verdict_at_the_dtype_shown():
    # fp8 shown at TP 1: 4 MiB blocks, 14,380 .. 14,383; log 12's 7,191 needs 2-byte elements
    view = kd.block_window_view(32, 32, 128, 1, 16, 1, "56.18", 7191)
    assert "✗" in view and "kv_cache_dtype" in _verdict(view) and "2-byte elements, not the 1 shown" in view
    # bf16 shown, a count of 1-byte elements -- TP is tried first: 14,382 is TP 2 at bf16 as well
    assert "tensor_parallel" in _verdict(kd.block_window_view(32, 32, 128, 2, 16, 1, "56.18", 14382))


def test_verdict_at_the_printed_gib_shown():
    # moving the printed figure to 40.00 GiB: 39.995 .. 40.005 x 128 = 5,119.36 .. 5,120.64 -> 5,119 .. 5,120
    view = kd.block_window_view(32, 32, 128, 2, 16, 1, "40.00", 7191)
    assert "blocks: 5,119 – 5,120" in view and "wrong_model" in _verdict(view)
    assert "agrees" in _verdict(kd.block_window_view(32, 32, 128, 2, 16, 1, "40.00", 5120))


def test_engine_cell_names_the_start_it_shows_instead():
    # tiny MHA has no committed start: the GQA one is shown, and both predictions are for its config
    html = kd.engine_lab("tiny MHA", 1, 1000, _whole_blocks).data
    assert "no committed start for &#x27;tiny MHA&#x27;" in html and "&#x27;llama_gqa&#x27;" in html
    assert "3 layers, 2 KV heads of 32" in html and "1,398,016" in html      # the GQA config's whole blocks


def test_engine_cell_explains_gemma2_groups_and_mla_latent():
    # Gemma-2 tiny: 4 sliding + 3 full layers -> two groups of 4, one padding layer; a block is 4 pages of
    # 2 x 2 x 64 x 2 x 128 = 65,536 B = 262,144 B, 2^30 / 262,144 = 4,096 blocks; 8 + 9 = 17 blocks a request
    gemma = kd.engine_lab("tiny Gemma-2 (sliding-window hybrid)", 1, 1000, _whole_blocks).data
    assert "2 KV-cache groups of 4 layers" in gemma and "1 padding layer" in gemma
    assert "262,144 B" in gemma and "4,096 blocks" in gemma and "17 in all" in gemma
    assert "recheck bytes per block" not in gemma
    # MLA tiny: 512 + 64 = 576 numbers a token a layer, 128 x 576 x 2 B x 3 layers = 442,368 B, 2,427 blocks
    mla = kd.engine_lab("tiny DeepSeek (MLA)", 1, 1000, _whole_blocks).data
    assert "512 + 64 = 576" in mla and "442,368 B" in mla and "2,427 blocks" in mla
    assert "recheck bytes per block" not in mla


def test_the_pool_sizing_table_names_the_rule_and_its_line():
    # a measured 0.34 start (the warmup line's 58.98 GiB is the pool, 61.72 GiB the estimate beside it) and log 12
    # (V0): the rows read by eye from the lines
    measured = kv.vllm.parse_log(
        "INFO 12-01 09:00:21 [gpu_worker.py:795] Available KV cache memory: 61.72 GiB\n"
        "INFO 12-01 09:00:48 [extensible_kv_cache.py:693] Memory after warmup: 61.31 GiB free, 1.0 GiB committed "
        "to the KV cache, 1.9 GiB kept for transient activations (1.9 GiB allocated at peak, 0.0 GiB of torch "
        "reservation growth); 7549 KV cache blocks (58.98 GiB) fit within the requested 79.18 GiB. Torch may "
        "reserve up to 19.12 GiB.\n"
        "INFO 12-01 09:00:48 [kv_cache_utils.py:1168] GPU KV cache size: 483,136 tokens, Maximum concurrency for "
        "8,192 tokens per request: 58.98x")[0]
    v0 = kv.vllm.parse_log(kv.vllm.read_bundled_log("12"))[0]
    text = kd.pool_sizing_table([("built", measured), ("12.log", v0)]).data.splitlines()
    assert text[2].startswith("| built | not printed | V1 | **measured** | 'Memory after warmup'")
    assert text[2].endswith("| 61.72 | 58.98 | 483,136 tokens |")
    assert text[3] == "| 12.log | not printed | V0 | **estimate** | V0 engine | — | 56.18 | 7,191 blocks |"


def test_the_stats_lines_table_reads_each_line():
    # kvlib/data/vllm_stats/vllm-37307.log, first line by eye: 10 running, 90 waiting, 23998.2 and 18.1 tokens/s,
    # GPU KV cache usage 19.3%, hit rate 0.0%, tag loggers.py:259 (0.16.0 to 0.19.1 log from that line)
    rows = kd.stats_lines_table(["vllm-37307"]).data.splitlines()[2:]
    assert len(rows) == 3
    assert rows[0] == ("| vLLM pull request #37307, 2026-03-17 | 0.16–0.19 | 10 | 90 | — | 23,998.2 | 18.1 | "
                       "GPU 19.3% | 0.0% |")
    v0 = kd.stats_lines_table(["vllm-6206"]).data.splitlines()[2]
    assert v0 == "| vLLM issue #6206, 2024-07-08 | V0 (its metrics.py) | 4 | 0 | 0 | 6,501.4 | 69.1 | GPU 15.6% | — |"
