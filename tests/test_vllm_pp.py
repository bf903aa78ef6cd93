"""Pipeline parallelism to the block: each stage predicted from its own printed figure and its own layers.

No bundled log runs PP (every sidecar says pipeline_parallel_size 1), so the
logs here are BUILT for the test from the per-rank line format the bundled TP
logs use (17.log: "(VllmWorker rank=N pid=P) INFO mm-dd hh:mm:ss [file.py:line]
..." from each worker, "GPU KV cache size: N tokens" from the engine; 20.log
for the "Available KV cache memory: X GiB" line). Every expected value is
worked by hand in the comments from:

- vLLM's layer split, ``get_pp_indices`` in vllm/distributed/utils.py: each
  stage gets L // pp, the remainder goes one each to stages -2, -3, ...;
- vLLM's rank order: rank = stage x tp + tp_rank, so rank r is in stage r // tp;
- V1's ``unify_kv_cache_configs`` (vllm/v1/core/kv_cache_utils.py): every
  worker sizes its own blocks, the engine keeps the smallest count;
- a printed X GiB stands for bytes in [ceil((X - 0.005) 2^30), ceil((X + 0.005) 2^30) - 1].
"""

from __future__ import annotations

from kvlib import load_model
from kvlib.cli import main
from kvlib.vllm import parse_log, pp_layer_split, predict_from_log, report

# Qwen3-0.6B: 28 layers, 8 KV heads of 128, 16-bit; under TP 2 each rank keeps 4 heads:
# page per layer = 16 tokens x 4 heads x (128 + 128) x 2 B = 32,768 B.
# PP 3: 28 // 3 = 9, remainder 1 -> stage -2 gets one more: [9, 10, 9] layers,
# blocks of 9 x 32,768 = 294,912 B (stages 0 and 2) and 10 x 32,768 = 327,680 B (stage 1).
PAGE = 32_768
B_9, B_10 = 9 * PAGE, 10 * PAGE

# Per-rank available memory (built): ranks 0,1 = stage 0; 2,3 = stage 1; 4,5 = stage 2.
FIGURES = ["5.00", "4.80", "5.00", "4.90", "4.70", "4.75"]
# Each worker's own blocks at exactly X GiB (X x 2^30 // B) and the tokens it prints (x 16):
#   r0 5.00/B_9 -> 18,204 -> 291,264     r1 4.80/B_9 -> 17,476 -> 279,616
#   r2 5.00/B_10 -> 16,384 -> 262,144    r3 4.90/B_10 -> 16,056 -> 256,896
#   r4 4.70/B_9 -> 17,112 -> 273,792     r5 4.75/B_9 -> 17,294 -> 276,704
TOKENS = ["291,264", "279,616", "262,144", "256,896", "273,792", "276,704"]


def _pp_log(figures=FIGURES, tokens=TOKENS, tag=lambda r: f"(VllmWorker rank={r} pid={105 + r}) ") -> str:
    lines = ["INFO 04-29 00:57:50 [api_server.py:1043] vLLM API server version 0.8.5",
             "INFO 04-29 00:57:52 [core.py:58] Initializing a V1 LLM engine (v0.8.5) with config: "
             "model='Qwen/Qwen3-0.6B', dtype=torch.bfloat16, max_seq_len=8192, tensor_parallel_size=2, "
             "pipeline_parallel_size=3, kv_cache_dtype=auto, enforce_eager=False"]
    for r, x in enumerate(figures):
        lines.append(f"{tag(r)}INFO 04-29 01:07:41 [gpu_model_runner.py:1347] Model loading took 0.38 GiB "
                     f"and 3.1 seconds")
    for r, x in enumerate(figures):
        lines.append(f"{tag(r)}INFO 04-29 01:09:40 [gpu_worker.py:187] Available KV cache memory: {x} GiB")
    for t in tokens:
        lines.append(f"INFO 04-29 01:09:49 [kv_cache_utils.py:634] GPU KV cache size: {t} tokens")
    return "\n".join(lines) + "\n"


def test_layer_split_is_vllms():
    # get_pp_indices: 28 // 3 = 9, remainder 1 to stage -2; 10 // 4 = 2, remainder 2 to stages -2 and -3.
    assert pp_layer_split(28, 3) == [9, 10, 9]
    assert pp_layer_split(10, 4) == [2, 3, 3, 2]
    assert pp_layer_split(80, 3) == [27, 27, 26]


def test_pp_log_predicted_per_stage_as_narrow_as_the_rounding_allows():
    [start] = parse_log(_pp_log())
    assert start.pipeline_parallel_size == 3 and start.tensor_parallel_size == 2
    assert start.gpu_kv_cache_tokens == 256_896          # the smallest worker's line: the engine's count
    p = predict_from_log(start, load_model("Qwen/Qwen3-0.6B"))
    # Stage 0 (9 layers): smallest figure 4.80 -> bytes [5,148,592,047, 5,159,329,464] // 294,912 = [17,458, 17,494]
    # Stage 1 (10 layers): 4.90 -> [5,255,966,229, 5,266,703,646] // 327,680 = [16,039, 16,072]
    # Stage 2 (9 layers): 4.70 -> [5,041,217,864, 5,051,955,281] // 294,912 = [17,093, 17,130]
    # Engine: the smallest stage, [min 17,458 16,039 17,093, min 17,494 16,072 17,130] = [16,039, 16,072].
    assert (p.blocks_min, p.blocks_max) == (16_039, 16_072)
    assert (p.tokens_min, p.tokens_max) == (16_039 * 16, 16_072 * 16)
    assert p.agrees is True and p.tokens_min <= 256_896 <= p.tokens_max
    assert [(s["num_layers"], s["bytes_per_block"], s["blocks_min"], s["blocks_max"]) for s in p.stages] == [
        (9, B_9, 17_458, 17_494), (10, B_10, 16_039, 16_072), (9, B_9, 17_093, 17_130)]
    # The rounding of one printed figure (+/- 0.005 GiB) is 0.01 x 2^30 / 327,680 = 32.8 blocks wide:
    assert p.blocks_max - p.blocks_min <= 33


def test_without_rank_tags_the_range_covers_every_split():
    # V0-style tags carry no rank, so the stages cannot be told apart: the smallest figure (4.70) is set
    # against the largest block for the low end and the smallest block for the high end:
    # [5,041,217,864 // 327,680, 5,051,955,281 // 294,912] = [15,384, 17,130].
    text = _pp_log(tag=lambda r: f"(VllmWorkerProcess pid={105 + r}) ")
    [start] = parse_log(text)
    p = predict_from_log(start, load_model("Qwen/Qwen3-0.6B"), version="0.8.5")
    assert (p.blocks_min, p.blocks_max) == (15_384, 17_130)
    assert p.stages == ()
    assert any("covers every split" in note for note in p.notes)


def test_a_wrong_stage_fails_the_check():
    # Stage 1 printing 4.90 GiB fits 16,039-16,072 blocks; a logged 17,000 x 16 = 272,000 tokens
    # (what stage 0 or 2 alone would give) is outside the per-stage range: the check can fail.
    [start] = parse_log(_pp_log(tokens=["272,000"]))
    p = predict_from_log(start, load_model("Qwen/Qwen3-0.6B"))
    assert p.agrees is False


def test_pp_report_and_cli_show_the_stages(tmp_path, capsys):
    [start] = parse_log(_pp_log())
    r = report(start, predict_from_log(start, load_model("Qwen/Qwen3-0.6B")))
    assert [s["stage"] for s in r["stages"]] == [0, 1, 2]
    log = tmp_path / "pp.log"
    log.write_text(_pp_log())
    assert main(["vllm-log", str(log), "--model", "qwen3-0.6b"]) == 0
    out = capsys.readouterr().out
    assert "PP stage 1" in out and "10 layers" in out and "AGREES" in out
