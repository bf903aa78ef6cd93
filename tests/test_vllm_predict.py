"""kvlib.vllm.predict: figures predicted from a log, against what real vLLM logs printed."""

import pytest

from kvlib import load_model, parse_config
from kvlib.vllm import parse_log, predict_from_log, read_bundled_log

# facebook/opt-125m (log 02's model, not bundled): 12 layers, 12 heads of 64, fp16 (02.json's model_kv)
OPT_125M = parse_config({"num_hidden_layers": 12, "num_attention_heads": 12, "hidden_size": 768,
                         "vocab_size": 50272, "ffn_dim": 3072, "model_type": "opt"}, name="facebook/opt-125m")


@pytest.mark.parametrize("log,index,spec,logged_cpu_blocks", [
    # V0 sizes the CPU pool from swap_space = 4 GiB: 4 x 2^30 // bytes per block. Each count as the log printed:
    # opt-125m: 16 x 12 layers x 2 x 12 x 64 x 2 B = 589,824 B; 4,294,967,296 // 589,824 = 7,281 (4 GB: 6,781)
    ("02", 0, OPT_125M, 7281),
    # Llama 3.1 8B: 2 MiB per block, 4 GiB / 2 MiB = 2,048 (4 GB would give 1,907)
    ("07", 0, load_model("llama-3.1-8b"), 2048),
    ("07", 1, load_model("llama-3.1-8b"), 2048),
    # Llama 2 7B: 16 x 32 x 2 x 32 x 128 x 2 B = 8 MiB per block, 4 GiB / 8 MiB = 512
    ("12", 0, load_model("llama-2-7b"), 512),
])
def test_v0_cpu_blocks_from_the_default_4_gib_swap_space(log, index, spec, logged_cpu_blocks):
    start = parse_log(read_bundled_log(log))[index]
    assert start.engine == "v0" and start.num_cpu_blocks == logged_cpu_blocks
    assert predict_from_log(start, spec).num_cpu_blocks_default_swap == logged_cpu_blocks


def test_v1_predicts_no_cpu_blocks():
    start = parse_log("Available KV cache memory: 3.81 GiB\nGPU KV cache size: 31,200 tokens")[0]
    assert start.engine == "v1"
    assert predict_from_log(start, load_model("llama-3.1-8b")).num_cpu_blocks_default_swap is None


# --- texts and rules of predict_from_log (gaps found by mutation testing, [mutation testing]) ----------------
# Expected figures are worked by hand in the comments (the window rule of the notes, 'Working
# backwards from the log': X GiB printed stands for [ceil((X - 0.005) 2^30), ceil((X + 0.005) 2^30) - 1]).
from kvlib.vllm import EngineStart, VllmLogError  # noqa: E402

LLAMA = load_model("llama-3.1-8b")
# a V1 start that prints no version: vLLM's default block through 0.33 is assumed, and said (0.34's is 64,
# config/cache.py DEFAULT_BLOCK_SIZE)
BLOCK_NOTE = ("version not printed: 16-token blocks assumed (vLLM's default through 0.33; 0.34 takes 64)")
# 10.00 GiB: lo = ceil(9.995 x 2^30) = ceil(10,732,049,530.88) = 10,732,049,531
#            hi = ceil(10.005 x 2^30) - 1 = ceil(10,742,786,949.12) - 1 = 10,742,786,949
# Llama 3.1 8B, 2 MiB per block: N in [5,117, 5,122]; tokens N x 16 in [81,872, 81,952]
WINDOW_10 = ("10.00 GiB printed = 10,732,049,531 to 10,742,786,949 B "
             "(10.73 GB (10.00 GiB) to 10.74 GB (10.00 GiB))")
COMBINED = "GPU KV cache size: {tokens} tokens, Maximum concurrency for 8,192 tokens per request: {conc}x\n"


def _start(text: str) -> EngineStart:
    return parse_log(text)[0]


@pytest.mark.parametrize("kwargs,message", [
    (dict(start="log"), "predict_from_log takes an EngineStart, not str"),
    (dict(spec={"num_hidden_layers": 1}), "predict_from_log takes a ModelSpec, not dict"),
    (dict(max_num_batched_tokens=0), "max_num_batched_tokens must be a positive integer, got 0"),
    (dict(max_num_batched_tokens="8192"), "max_num_batched_tokens must be a positive integer, got '8192'"),
])
def test_argument_errors_exact(kwargs, message):
    args = dict(start=_start("Available KV cache memory: 10.00 GiB\n"), spec=LLAMA) | kwargs
    with pytest.raises(VllmLogError) as info:
        predict_from_log(args.pop("start"), args.pop("spec"), **args)
    assert str(info.value) == message


def test_agreeing_log_07_reason():
    # 07.log run 1: 3.81 GiB -> [ceil(3.805 x 2^30), ceil(3.815 x 2^30) - 1] = [4,085,587,641, 4,096,325,058];
    # // 2 MiB -> [1,948, 1,953]; 1,952 logged (sidecar 07)
    p = predict_from_log(parse_log(read_bundled_log("07"))[0], LLAMA)
    assert p.reason == ("agrees: logged 1,952 blocks lies in the predicted 1,948 to 1,953 from 3.81 GiB printed = "
                        "4,085,587,641 to 4,096,325,058 B (4.09 GB (3.81 GiB) to 4.10 GB (3.81 GiB)) at 2,097,152 B "
                        "per block")
    assert (p.compared, p.logged, p.block_size_source, p.notes) == ("num_gpu_blocks", 1952, "default", ())


def test_log_14_nothing_to_compare_and_the_mla_note():
    # 14.log: DeepSeek V3 (MLA), 1.57 GiB, no count. B = 61 layers x 16 x 576 x 2 B = 1,124,352;
    # window [ceil(1.565 x 2^30), ceil(1.575 x 2^30) - 1] = [1,680,405,955, 1,691,143,372] -> N in [1,494, 1,504];
    # V0 CPU blocks 4 GiB // 1,124,352 = 3,819
    p = predict_from_log(parse_log(read_bundled_log("14"))[0], load_model("deepseek-v3"))
    assert p.reason == ("nothing to compare: the log prints no block count or token capacity for this start; from "
                        "1.57 GiB printed = 1,680,405,955 to 1,691,143,372 B (1.68 GB (1.57 GiB) to 1.69 GB (1.57 GiB)) "
                        "vLLM would report 1,494 to 1,504 blocks")
    assert p.notes == ("block size not printed: 16 assumed; MLA backends may force 64 (FlashMLA), 128 (CUTLASS MLA) "
                       "or 32 (FlashInfer MLA)",)
    assert (p.block_size_source, p.num_cpu_blocks_default_swap, p.kv_element_bytes) == ("default", 3_819, 2)


def test_what_a_bare_v1_log_leaves_open():
    p = predict_from_log(_start("Available KV cache memory: 10.00 GiB\nGPU KV cache size: 81,904 tokens\n"), LLAMA)
    assert p.notes == (
        BLOCK_NOTE,
        "version not printed: the token figure may follow the pre-0.20 or the 0.20+ formula; both allowed "
        "(pass version / --vllm-version)",
        "max_model_len not printed: no 0.20+ token or concurrency prediction")
    assert (p.tokens_min, p.tokens_max, p.concurrency_min) == (81_872, 81_952, None)
    assert p.reason == f"agrees: logged 81,904 tokens lies in the predicted 81,872 to 81,952 from {WINDOW_10} at " \
                       "2,097,152 B per block"
    assert (p.compared, p.logged, p.error_tokens) == ("gpu_kv_cache_tokens", 81_904, 0)


def test_ranks_without_tp_are_noted():
    line = "(VllmWorker rank={r} pid={r}) INFO 01-01 00:00:00 [gpu_worker.py:1] Available KV cache memory: 10.00 GiB\n"
    p = predict_from_log(_start(line.format(r=0) + line.format(r=1)), LLAMA, version="0.20.2")
    assert p.notes[0] == ("2 processes printed figures but the log shows no tensor_parallel_size; TP=1 assumed "
                          "(pass tp / --tp)")
    assert predict_from_log(_start(line.format(r=0) + line.format(r=1)), LLAMA, tp=1, version="0.20.2").notes == (
        "max_model_len not printed: no 0.20+ token or concurrency prediction",)


def test_concurrency_range_and_a_mismatch():
    # 0.33's combined line fixes the 0.20+ formula; bpr = 8192 / 16 = 512:
    # concurrency in [5,117 / 512, 5,122 / 512] = [9.994, 10.004] -> printed [9.99, 10.00]
    ok = predict_from_log(_start("Available KV cache memory: 10.00 GiB\n" + COMBINED.format(tokens="81,904",
                                                                                           conc="10.00")), LLAMA)
    assert (ok.concurrency_min, ok.concurrency_max, ok.agrees, ok.notes) == (9.99, 10.0, True, (BLOCK_NOTE,))
    bad = predict_from_log(_start("Available KV cache memory: 10.00 GiB\n" + COMBINED.format(tokens="81,904",
                                                                                            conc="12.00")), LLAMA)
    cause = ("the count fits but the printed concurrency 12.00x lies outside the predicted 9.99x to 10.00x: a "
             "different max_model_len or KV-cache grouping than assumed")
    assert (bad.agrees, bad.cause, bad.reason) == (False, cause, f"does not agree: {cause}")


def test_one_block_past_the_window_is_put_down_to_rounding():
    # 5,123 blocks = 81,968 tokens: one block past N_max = 5,122
    p = predict_from_log(_start("Available KV cache memory: 10.00 GiB\n" + COMBINED.format(tokens="81,968",
                                                                                          conc="10.01")), LLAMA)
    assert (p.agrees, p.error_blocks, p.error_tokens) == (False, 1, 16)
    assert p.cause == ("the log's GiB figure rounded: the count lies 1 block(s) outside the +/-0.005 GiB window, so "
                       "the pool was not sized from exactly the printed figure (a float rounded for printing, memory "
                       "reserved after the line, or num_gpu_blocks_override)")
    assert p.alternatives == ()


def test_twice_the_blocks_names_tp_then_pp_then_fp8():
    # 163,840 tokens = 10,240 blocks: twice the count, i.e. half the 2 MiB block. Halving it: TP 2 (4 KV heads a
    # rank), PP 2 (16 layers a stage, [16, 16]) or fp8 (1 B elements); TP is named first when the log shows no TP.
    # With 1 MiB blocks N in [10,234, 10,245] (window // 1,048,576), so 10,240 fits.
    p = predict_from_log(_start("Available KV cache memory: 10.00 GiB\n" + COMBINED.format(tokens="163,840",
                                                                                          conc="20.00")), LLAMA)
    assert p.agrees is False and p.error_tokens == 163_840 - 81_952
    assert p.cause == ("TP not accounted: with tensor_parallel_size=2 (4 KV head(s) per rank) the logged count fits "
                       "(pass --tp 2)")
    assert p.alternatives == (
        "PP not accounted: with pipeline_parallel_size=2 (layers per stage [16, 16]) the logged count fits (pass --pp 2)",
        "a different KV dtype: with kv_cache_dtype=fp8 the logged count fits (pass --kv-dtype fp8)")
    assert p.reason == (f"does not agree: logged 163,840 tokens, predicted 81,872 to 81,952 from {WINDOW_10} at "
                        f"2,097,152 B per block; likely cause: {p.cause}")
    # with TP given (here by the caller), the KV dtype and PP come before a TP that contradicts it
    q = predict_from_log(_start("Available KV cache memory: 10.00 GiB\n" + COMBINED.format(tokens="163,840",
                                                                                          conc="20.00")), LLAMA, tp=1)
    assert q.cause.startswith("PP not accounted") and q.alternatives[-1].startswith("TP not accounted")


def test_wrong_model_text_names_the_implied_block():
    # 12.log ran Llama 2 7B (8 MiB blocks) and logged 7,191 blocks; read as Llama 3.1 8B (2 MiB) nothing halves
    # or doubles the block by 4: the implied block is the window's middle / 7,191.
    # middle = (60,317,446,964 + 60,328,184,381) / 2 = 60,322,815,672.5; / 7,191 = 8,388,654.66 -> 8,388,655 B
    # (rounded to a whole byte) = 4.00x 2,097,152
    p = predict_from_log(parse_log(read_bundled_log("12"))[0], LLAMA)
    assert p.cause.startswith("wrong model or dtype: the logged 7,191 blocks imply about 8,388,655 B per block, "
                              "4.00x the 2,097,152 B this model gives at block size 16 (meta-llama/Llama-3.1-8B, "
                              "kv_cache_dtype=auto)")


RANK_LINE = "(VllmWorker rank={r} pid={r}) INFO 01-01 00:00:00 [gpu_worker.py:1] Available KV cache memory: {x} GiB\n"


def test_pipeline_stages_each_from_their_own_figure():
    # Llama 3.1 8B over pp=2: 16 layers a stage, 16 x 65,536 = 1,048,576 B a block.
    # rank 0 (stage 0) printed 2.00 GiB: [2,142,114,939, 2,152,852,357] B -> [2,042, 2,053] blocks
    # rank 1 (stage 1) printed 1.50 GiB: [1,605,244,027, 1,615,981,445] B -> [1,530, 1,541] blocks
    # the engine keeps the smaller stage: N in [1,530, 1,541]
    log = RANK_LINE.format(r=0, x="2.00") + RANK_LINE.format(r=1, x="1.50")
    p = predict_from_log(_start(log), LLAMA, pp=2, version="0.20.2")
    assert (p.blocks_min, p.blocks_max, p.bytes_per_block) == (1_530, 1_541, 1_048_576)
    assert p.stages == (
        {"stage": 0, "num_layers": 16, "available_kv_cache_bytes_min": 2_142_114_939,
         "available_kv_cache_bytes_max": 2_152_852_357, "bytes_per_block": 1_048_576, "blocks_min": 2_042,
         "blocks_max": 2_053},
        {"stage": 1, "num_layers": 16, "available_kv_cache_bytes_min": 1_605_244_027,
         "available_kv_cache_bytes_max": 1_615_981_445, "bytes_per_block": 1_048_576, "blocks_min": 1_530,
         "blocks_max": 1_541})
    assert ("pipeline parallel: each of the 2 stages predicted from its own printed figure and its own layers "
            "[16, 16]; the engine keeps the smallest stage's block count") in p.notes
    # without rank tags the smallest figure (1.50) is set against every stage's block
    q = predict_from_log(_start("Available KV cache memory: 1.50 GiB\n"), LLAMA, pp=2, version="0.20.2")
    assert (q.blocks_min, q.blocks_max, q.stages) == (1_530, 1_541, ())
    assert ("pipeline parallel, but the log does not say which rank printed which figure: the smallest figure is "
            "set against every stage's block, so the range covers every split") in q.notes


def test_an_unidentified_engine_allows_both():
    import dataclasses
    start = dataclasses.replace(_start("Available KV cache memory: 10.00 GiB\n"), engine=None)
    p = predict_from_log(start, LLAMA, version="0.10.1")
    assert "engine not identified from the log: V0 and V1 formulas both allowed" in p.notes
    # V0 counts tokens N x 16, V1 before 0.20 (N // 1 group) x 16: both [81,872, 81,952] here
    assert {s.split(",")[0] for s in p.scenarios} == {"V0", "V1"}
    assert (p.tokens_min, p.tokens_max, p.engine) == (81_872, 81_952, None)


V0_PROFILE = ("Memory profiling results: total_gpu_memory=23.58GiB kv_cache_size={x}GiB gpu_memory_utilization=0.90\n"
              "# GPU blocks: {n}, # CPU blocks: 2048\n")


def test_half_the_blocks_offers_a_larger_block_size():
    # 3.81 GiB = [4,085,587,641, 4,096,325,058] B. At block_size 32 a block is 4 MiB: N in [974, 976], so 975 fits;
    # TP, PP and fp8 all shrink the block (more blocks), none fits. A block size is a weak explanation (priority
    # below the wrong-model reading), so it is offered as an alternative.
    # implied block: (4,085,587,641 + 4,096,325,058) / 2 / 975 = 4,195,852.67 -> 4,195,853 B = 2.0007x 2 MiB
    p = predict_from_log(_start(V0_PROFILE.format(x="3.81", n=975)), LLAMA)
    assert p.cause == ("wrong model or dtype: the logged 975 blocks imply about 4,195,853 B per block, 2.00x the "
                       "2,097,152 B this model gives at block size 16 (meta-llama/Llama-3.1-8B, kv_cache_dtype=auto)")
    assert p.alternatives == ("a different block size: with block_size=32 the logged count fits (pass --block-size 32)",)
    # a block size the log printed is not second-guessed; the model the log names is quoted
    config = ("Initializing an LLM engine (v0.6.4) with config: model='x', dtype=torch.bfloat16, max_seq_len=4096, "
              "block_size=16, tensor_parallel_size=1, kv_cache_dtype=auto\n")
    printed = predict_from_log(_start(config + V0_PROFILE.format(x="3.81", n=975)), LLAMA)
    assert printed.block_size_source == "log" and printed.alternatives == ()
    assert printed.cause.endswith("kv_cache_dtype=auto); the log's engine config names 'x'")


def test_v0_mla_padding_is_named():
    # DeepSeek V3 on V0 0.6.6 (no padding by default): 576-element entries, 1,124,352 B a block -> [1,494, 1,504].
    # Padded to 640 elements (V0 0.7.2-0.7.x): 61 x 16 x 640 x 2 B = 1,249,280 B -> 1.57 GiB holds
    # [1,680,405,955 // 1,249,280, 1,691,143,372 // 1,249,280] = [1,345, 1,353] blocks: 1,350 fits only padded
    p = predict_from_log(_start(V0_PROFILE.format(x="1.57", n=1350)), load_model("deepseek-v3"), version="0.6.6")
    assert p.cause == ("V0's 256-byte MLA entry padding applied (576 -> 640 elements in 16-bit) makes the count fit")
    padded = predict_from_log(_start(V0_PROFILE.format(x="1.57", n=1350)), load_model("deepseek-v3"),
                              version="0.7.3")
    assert (padded.agrees, padded.blocks_min, padded.blocks_max) == (True, 1_345, 1_353)


def _window(text: str) -> tuple[int, int]:
    """The notes' rule, worked independently: [ceil((X - 0.005) 2^30), ceil((X + 0.005) 2^30) - 1]."""
    import math
    from fractions import Fraction
    x = Fraction(text)
    return math.ceil((x - Fraction(5, 1000)) * 2**30), math.ceil((x + Fraction(5, 1000)) * 2**30) - 1


def test_stage_windows_take_each_stages_smallest_figure():
    from kvlib.vllm.predict import stage_windows
    # ranks are stage-major: tp=2, pp=2 -> ranks 0, 1 are stage 0 and ranks 2, 3 stage 1
    log = "".join(RANK_LINE.format(r=r, x=x) for r, x in enumerate(["2.00", "1.90", "1.50", "1.60"]))
    start = _start(log)
    assert stage_windows(start, tp=2, pp=2) == [_window("1.90"), _window("1.50")]
    assert stage_windows(start, tp=1, pp=4) == [_window(x) for x in ("2.00", "1.90", "1.50", "1.60")]
    assert stage_windows(start, tp=4, pp=1) is None                  # one stage: nothing per stage
    assert stage_windows(start, tp=1, pp=2) is None                  # rank 3 cannot exist with 2 ranks
    only_first = _start(RANK_LINE.format(r=0, x="2.00") + RANK_LINE.format(r=1, x="1.90"))
    assert stage_windows(only_first, tp=2, pp=2) is None             # stage 1 printed nothing
    assert stage_windows(_start("Available KV cache memory: 2.00 GiB\n"), tp=1, pp=2) is None   # no rank tags


def test_tokens_only_log_derives_the_block_count_and_pool():
    # 81,904 tokens = 5,119 x 16 (pre-0.20 V1, one group); the pool it implies is [5,119 x 2 MiB, 5,120 x 2 MiB - 1]
    p = predict_from_log(_start("Available KV cache memory: 10.00 GiB\nGPU KV cache size: 81,904 tokens\n"), LLAMA)
    assert (p.derived_blocks_min, p.derived_blocks_max) == (5_119, 5_119)
    assert (p.implied_available_bytes_min, p.implied_available_bytes_max) == (10_735_321_088, 10_737_418_239)


ROUNDING = "the log's GiB figure rounded: the count lies {} block(s) outside the +/-0.005 GiB window"


@pytest.mark.parametrize("gib,logged,rounding,miss", [
    # 10.00 GiB -> N in [5,117, 5,122], middle 5,119.5: a miss of up to 0.5% of it (25.6 blocks) is rounding
    ("10.00", 5_122 + 25, True, 25),
    ("10.00", 5_122 + 26, False, 26),
    ("10.00", 5_117 - 25, True, 25),
    # 0.50 GiB -> [531,502,203, 542,239,621] B -> N in [253, 258]: 0.5% is 1.3 blocks, so the floor of 2 applies
    ("0.50", 258 + 2, True, 2),
    ("0.50", 258 + 3, False, 3),
])
def test_rounding_is_half_a_percent_or_two_blocks(gib, logged, rounding, miss):
    p = predict_from_log(_start(V0_PROFILE.format(x=gib, n=logged)), LLAMA)
    assert p.agrees is False and abs(p.error_blocks) == miss
    assert p.cause.startswith(ROUNDING.format(miss)) is rounding
    if not rounding:
        assert p.cause.startswith("wrong model or dtype")       # nothing else halves or doubles the block


def test_a_token_count_no_block_count_gives_rounds_up_to_a_block():
    # pre-0.20 V1 prints N x 16 tokens; 81,960 is no multiple of 16 (no N gives it), 8 tokens past 81,952:
    # the miss is ceil(8 / 16) = 1 block
    p = predict_from_log(_start("Available KV cache memory: 10.00 GiB\nGPU KV cache size: 81,960 tokens\n"), LLAMA,
                         version="0.10.1")
    assert (p.error_blocks, p.error_tokens) == (None, 8)
    assert p.cause.startswith(ROUNDING.format(1))


def test_tp_candidates_skip_what_the_model_cannot_split():
    # opt-125m has 12 KV heads: TP 8 and 32 cannot split them (vLLM refuses); a count no setting explains must
    # not be put down to them. 10.00 GiB at 589,824 B a block -> [18,195, 18,213]; 5,000 logged fits nothing.
    p = predict_from_log(_start(V0_PROFILE.format(x="10.00", n=5_000)), OPT_125M)
    assert p.cause.startswith("wrong model or dtype") and p.alternatives == ()


def test_tp_8_named_for_a_70b_at_one_eighth():
    # Llama 3.3 70B, 8 KV heads: at TP 8 one head a rank, 80 x 16 x 2 x 1 x 128 x 2 B = 655,360 B a block;
    # 20.00 GiB -> [32,759, 32,776] blocks (window // 655,360); TP 16 would give the same (heads replicated),
    # the smaller TP is named
    p = predict_from_log(_start(V0_PROFILE.format(x="20.00", n=32_768)), load_model("llama-3.3-70b"))
    assert p.cause == ("TP not accounted: with tensor_parallel_size=8 (1 KV head(s) per rank) the logged count fits "
                       "(pass --tp 8)")


def test_mla_offers_deepseeks_fp8_layout():
    # DeepSeek V3, fp8_ds_mla: 656 B per token and layer (notes), 61 x 16 x 656 = 640,256 B a block;
    # 1.57 GiB -> [2,624, 2,641] blocks; plain fp8 (576 B) would give [2,989, 3,008]. 2,630 x 16 = 42,080 tokens.
    p = predict_from_log(_start("Available KV cache memory: 1.57 GiB\nGPU KV cache size: 42,080 tokens\n"),
                         load_model("deepseek-v3"), version="0.10.1")
    assert p.cause == ("a different KV dtype: with kv_cache_dtype=fp8_ds_mla the logged count fits "
                       "(pass --kv-dtype fp8_ds_mla)")


def _v1_config(tp=1, kv="auto", model="meta-llama/Llama-3.1-8B"):
    return (f"Initializing a V1 LLM engine (v0.10.1) with config: model='{model}', dtype=torch.bfloat16, "
            f"max_seq_len=8192, tensor_parallel_size={tp}, pipeline_parallel_size=1, kv_cache_dtype={kv}, "
            f"device_config=cuda\nAvailable KV cache memory: {{gib}} GiB\nGPU KV cache size: {{tokens}} tokens\n")


# Block counts a 10.00 GiB window holds for Llama 3.1 8B (window // bytes per block, worked above):
# 2 MiB [5,117, 5,122]; 1 MiB [10,234, 10,245]; 512 KiB [20,469, 20,490]; 256 KiB [40,939, 40,980].
@pytest.mark.parametrize("logged,cause,alternatives", [
    # 4x the blocks: TP 4 (2 KV heads a rank) or PP 4 (8 layers a stage)
    (20_480, "TP not accounted: with tensor_parallel_size=4 (2 KV head(s) per rank) the logged count fits "
             "(pass --tp 4)",
     ("PP not accounted: with pipeline_parallel_size=4 (layers per stage [8, 8, 8, 8]) the logged count fits "
      "(pass --pp 4)",)),
    # 8x: TP 8 (1 head) or PP 8 (4 layers a stage)
    (40_960, "TP not accounted: with tensor_parallel_size=8 (1 KV head(s) per rank) the logged count fits "
             "(pass --tp 8)",
     ("PP not accounted: with pipeline_parallel_size=8 (layers per stage [4, 4, 4, 4, 4, 4, 4, 4]) the logged "
      "count fits (pass --pp 8)",)),
])
def test_larger_tp_and_pp_candidates(logged, cause, alternatives):
    p = predict_from_log(_start(V0_PROFILE.format(x="10.00", n=logged)), LLAMA)
    assert (p.cause, p.alternatives) == (cause, alternatives)


@pytest.mark.parametrize("logged,tp,heads", [
    # Llama 2 7B, 32 KV heads, 8 MiB a block: 20.00 GiB holds [2,559, 2,560]; at TP 16 (2 heads, 512 KiB)
    # [40,949, 40,970], at TP 32 (1 head, 256 KiB) [81,899, 81,940]; no PP split (at most 8) or dtype goes that far
    (40_960, 16, 2),
    (81_920, 32, 1),
])
def test_tp_16_and_32(logged, tp, heads):
    p = predict_from_log(_start(V0_PROFILE.format(x="20.00", n=logged)), load_model("llama-2-7b"))
    assert p.cause == (f"TP not accounted: with tensor_parallel_size={tp} ({heads} KV head(s) per rank) the logged "
                       f"count fits (pass --tp {tp})")


def test_a_printed_tp_of_2_when_the_count_fits_tp_1():
    # the log says TP 2 (1 MiB blocks, [10,234, 10,245]) but 81,920 tokens = 5,120 x 16 fits TP 1's [5,117, 5,122]
    p = predict_from_log(_start(_v1_config(tp=2).format(gib="10.00", tokens="81,920")), LLAMA)
    assert (p.tensor_parallel_size, p.alternatives) == (2, ())
    assert p.cause == ("TP not accounted: with tensor_parallel_size=1 (8 KV head(s) per rank) the logged count fits "
                       "(pass --tp 1)")


def test_printed_fp8_against_a_16_bit_count():
    # fp8 printed: 1 MiB blocks [10,234, 10,245]; 81,920 tokens = 5,120 blocks of 2 MiB fits only 'auto'
    p = predict_from_log(_start(_v1_config(kv="fp8").format(gib="10.00", tokens="81,920")), LLAMA)
    assert (p.cause, p.alternatives) == ("a different KV dtype: with kv_cache_dtype=auto the logged count fits "
                                         "(pass --kv-dtype auto)", ())


def test_printed_fp8_is_kept_when_trying_pp_and_tp():
    # fp8 printed; 327,680 tokens = 20,480 blocks of 512 KiB = fp8 with PP 2 (16 layers) or with TP 2 (4 heads).
    # TP was printed (1), so PP comes first; both are tried with fp8 kept (at 16 bits neither would fit)
    p = predict_from_log(_start(_v1_config(kv="fp8").format(gib="10.00", tokens="327,680")), LLAMA)
    assert p.cause == ("PP not accounted: with pipeline_parallel_size=2 (layers per stage [16, 16]) the logged count "
                       "fits (pass --pp 2)")
    assert p.alternatives == ("TP not accounted: with tensor_parallel_size=2 (4 KV head(s) per rank) the logged "
                              "count fits (pass --tp 2)",)


@pytest.mark.parametrize("kv,tokens,named", [
    # DeepSeek V3, 1.57 GiB: 16-bit [1,494, 1,504] blocks, fp8 (576 B a token-layer, 562,176 B a block) [2,989, 3,008]
    ("auto", "48,000", "fp8"),        # 3,000 x 16
    ("fp8", "24,000", "auto"),        # 1,500 x 16
])
def test_mla_dtype_candidates(kv, tokens, named):
    p = predict_from_log(_start(_v1_config(kv=kv, model="deepseek-ai/DeepSeek-V3").format(gib="1.57", tokens=tokens)),
                         load_model("deepseek-v3"))
    text = f"a different KV dtype: with kv_cache_dtype={named} the logged count fits (pass --kv-dtype {named})"
    # halving the block is also PP 2 (31 + 30 layers), named first; doubling it only the 16-bit dtype does
    assert text == p.cause if named == "auto" else text in p.alternatives


@pytest.mark.parametrize("logged,agrees,error", [
    # 10.00 GiB -> N in [5,117, 5,122]: both ends inside; outside, the signed distance to the nearer end
    (5_117, True, 0), (5_122, True, 0), (5_087, False, -30), (5_148, False, 26),
])
def test_block_count_inside_or_how_far_out(logged, agrees, error):
    p = predict_from_log(_start(V0_PROFILE.format(x="10.00", n=logged)), LLAMA)
    assert (p.agrees, p.error_blocks, p.error_tokens) == (agrees, error, None)


@pytest.mark.parametrize("tokens,agrees,error_tokens,error_blocks", [
    # pre-0.20 V1, one group: tokens N x 16 in [81,872, 81,952]; outside, in tokens and in blocks
    (81_872, True, 0, 0), (81_952, True, 0, 0),
    (81_712, False, -160, -10),      # 5,107 blocks: 10 below 5,117
    (82_112, False, 160, 10),        # 5,132 blocks: 10 above 5,122
])
def test_token_count_inside_or_how_far_out(tokens, agrees, error_tokens, error_blocks):
    p = predict_from_log(_start(f"Available KV cache memory: 10.00 GiB\nGPU KV cache size: {tokens:,} tokens\n"),
                         LLAMA, version="0.10.1")
    assert (p.agrees, p.error_tokens, p.error_blocks) == (agrees, error_tokens, error_blocks)


WRONG = "wrong model or dtype: {} at block size 16 (meta-llama/Llama-3.1-8B, kv_cache_dtype=auto)"


@pytest.mark.parametrize("log,detail", [
    # 1,000,000 tokens = 62,500 blocks (12.2x the predicted count: no TP, PP or dtype change gives that);
    # window middle 10,737,418,240 / 62,500 = 171,798.69 -> 171,799 B, 0.08x 2 MiB
    ("Available KV cache memory: 10.00 GiB\nGPU KV cache size: 1,000,000 tokens\n",
     "the logged 1,000,000 tokens imply about 171,799 B per block, 0.08x the 2,097,152 B this model gives"),
    # 1,000,001 is no multiple of 16: no block count prints it; 1,000,001 - 81,952 = 918,049 tokens over
    ("Available KV cache memory: 10.00 GiB\nGPU KV cache size: 1,000,001 tokens\n",
     "the prediction misses by 918,049 tokens"),
    # zero blocks
    (V0_PROFILE.format(x="10.00", n=0), "the logged count is zero"),
])
def test_wrong_model_details(log, detail):
    p = predict_from_log(_start(log), LLAMA, version="0.10.1" if "GPU KV cache size" in log else None)
    assert p.cause == WRONG.format(detail)


def test_hybrid_manager_disabled_is_named():
    # gpt-oss-20b (12 sliding + 12 full layers, 32,768 B a layer-block), 0.20.2, max_model_len 8192, batch budget 2048.
    # Hybrid: groups of 12 -> B = 393,216, N in [27,293, 27,320]; blocks per request 512 (full) +
    # ceil(min(127 + 2048, 8192) / 16) + 1 = 137 (sliding) = 649 -> tokens int(N / 649 x 8192) in [344,505, 344,846].
    # Disabled (every layer full, one group of 24): B = 786,432, N in [13,646, 13,660], 512 blocks a request ->
    # tokens N x 16 in [218,336, 218,560]: the logged 218,400 (13,650 x 16) fits only that
    log = _v1_config(model="openai/gpt-oss-20b").replace("v0.10.1", "v0.20.2").format(gib="10.00", tokens="218,400")
    p = predict_from_log(_start(log), load_model("gpt-oss-20b"), max_num_batched_tokens=2048)
    assert (p.bytes_per_block, p.tokens_min, p.tokens_max) == (393_216, 344_505, 344_846)
    assert (p.cause, p.alternatives) == ("the hybrid KV-cache manager disabled (sliding-window layers sized as full "
                                         "attention) makes the count fit", ())


@pytest.mark.parametrize("version,tokens", [
    # gpt-oss-20b at 10.00 GiB, N in [27,293, 27,320], budget F = 2048. The sliding group's blocks per request
    # count F once through 0.25 (SlidingWindowSpec reads max_num_batched_tokens); from 0.26 max_in_flight_tokens,
    # twice under async scheduling (the default) or once without it, which the log does not say:
    #   once:  512 + ceil(2175 / 16) + 1 = 649 -> [int(27,293 / 649 x 8192), int(27,320 / 649 x 8192)] = [344,505, 344,846]
    #   twice: 512 + ceil(4223 / 16) + 1 = 777 -> [287,753, 288,037]
    ("0.20.2", (344_505, 344_846)),
    ("0.25.0", (344_505, 344_846)),
    ("0.26.0", (287_753, 344_846)),
    ("0.33.0", (287_753, 344_846)),
])
def test_batch_budget_counted_once_or_twice_by_release(version, tokens):
    log = ("Available KV cache memory: 10.00 GiB\nGPU KV cache size: 218,400 tokens\n"
           "Maximum concurrency for 8,192 tokens per request: 1.00x\n")
    p = predict_from_log(_start(log), load_model("gpt-oss-20b"), max_num_batched_tokens=2048, version=version)
    assert (p.tokens_min, p.tokens_max) == tokens


@pytest.mark.parametrize("version,blocks", [
    # V0 padded MLA entries to 640 elements in 0.7.2-0.7.x only: 1.57 GiB holds [1,494, 1,504] unpadded blocks
    # (1,124,352 B), [1,345, 1,353] padded (1,249,280 B)
    ("0.7.1", (1_494, 1_504)), ("0.7.2", (1_345, 1_353)), ("0.7.3", (1_345, 1_353)), ("0.8.0", (1_494, 1_504)),
])
def test_v0_mla_padding_releases(version, blocks):
    p = predict_from_log(_start(V0_PROFILE.format(x="1.57", n=1_400)), load_model("deepseek-v3"), version=version)
    assert (p.blocks_min, p.blocks_max) == blocks


def test_settings_from_the_log_and_overrides():
    log = _v1_config(tp=2, kv="fp8").replace("pipeline_parallel_size=1", "pipeline_parallel_size=2")
    start = _start(log.format(gib="10.00", tokens="81,920"))
    p = predict_from_log(start, LLAMA)
    assert (p.tensor_parallel_size, p.pipeline_parallel_size, p.kv_cache_dtype, p.kv_element_bytes) == (2, 2, "fp8", 1)
    # fp8, 4 heads a rank, 16 layers a stage: 2 x 16 x 4 x 128 x 1 B x 16 = 262,144 B a block
    assert (p.page_bytes, p.bytes_per_block) == (16_384, 262_144)
    q = predict_from_log(start, LLAMA, tp=1, pp=1, kv_cache_dtype="auto", block_size=32)
    assert (q.tensor_parallel_size, q.pipeline_parallel_size, q.kv_cache_dtype, q.kv_element_bytes) == (1, 1, "auto", 2)
    assert (q.block_size, q.block_size_source, q.bytes_per_block) == (32, "cli", 4_194_304)   # 2 MiB x 2


def test_the_fitting_formula_is_the_one_reported():
    # version unknown, max_model_len 1000 (printed apart): pre-0.20 tokens N x 16 in [81,872, 81,952]; 0.20+
    # int(N / 63 x 1000) (63 = ceil(1000 / 16)) in [81,222, 81,301]. 81,904 fits the first: no error reported
    log = ("Available KV cache memory: 10.00 GiB\nGPU KV cache size: 81,904 tokens\n"
           "Maximum concurrency for 1,000 tokens per request: 81.24x\n")
    p = predict_from_log(_start(log), LLAMA)
    assert (p.tokens_min, p.tokens_max) == (81_222, 81_952)
    assert (p.agrees, p.error_tokens, p.error_blocks) == (True, 0, 0)


def test_full_attention_scenarios_are_not_doubled_by_the_batch_budget():
    # the budget only changes sliding or chunked groups; for Llama the two releases' ways of counting it are
    # one scenario: version unknown leaves the two token formulas, nothing more
    log = ("Available KV cache memory: 10.00 GiB\nGPU KV cache size: 81,904 tokens\n"
           "Maximum concurrency for 8,192 tokens per request: 10.00x\n")
    p = predict_from_log(_start(log), LLAMA, max_num_batched_tokens=2048)
    assert p.scenarios == ("V1, tokens = (N // groups) x bs", "V1, tokens = int(N / blocks_per_request x max_model_len)")


def test_log_16_without_a_figure_implies_a_pool():
    # 16.log prints 158,656 tokens and no available figure: 158,656 / 16 = 9,916 blocks of 2 MiB (sidecar 16:
    # num_gpu_blocks_derived 9916), so the pool lay in [9,916 x 2 MiB, 9,917 x 2 MiB - 1]
    # = [20,795,359,232, 20,797,456,383] B = 20.80 GB (19.37 GiB) both ends, rounded
    p = predict_from_log(parse_log(read_bundled_log("16"))[0], LLAMA)
    assert p.reason == ("the log prints no available-KV-memory figure, so there is nothing to predict from; the logged "
                        "count implies a pool of 20.80 GB (19.37 GiB) to 20.80 GB (19.37 GiB) per rank")
    assert (p.implied_available_bytes_min, p.implied_available_bytes_max) == (20_795_359_232, 20_797_456_383)
    assert (p.model, p.engine, p.agrees, p.blocks_min) == ("meta-llama/Llama-3.1-8B", "v1", None, None)
    assert p.notes == (BLOCK_NOTE, "version not printed: the token figure may follow the pre-0.20 or the 0.20+ "
                                   "formula; both allowed (pass version / --vllm-version)")


def test_a_log_with_neither_figure_nor_count():
    config = ("Initializing a V1 LLM engine (v0.10.1) with config: model='m', dtype=torch.float32, max_seq_len=8192, "
              "tensor_parallel_size=1, pipeline_parallel_size=1, kv_cache_dtype=auto, device_config=cuda\n")
    p = predict_from_log(_start(config), LLAMA)
    assert p.reason == "the log prints no available-KV-memory figure, so there is nothing to predict from"
    assert (p.implied_available_bytes_min, p.implied_available_bytes_max, p.notes) == (None, None, ())
    # 'auto' follows the model dtype the log printed: float32, 4 B an element -> 2 x 16 x 8 x 128 x 4 = 131,072 B
    assert (p.kv_element_bytes, p.page_bytes) == (4, 131_072)


def test_packed_mla_layouts_have_no_element_size():
    # fp8_ds_mla packs 656 B per token and layer (notes): no per-element size to report
    p = predict_from_log(_start(_v1_config(kv="fp8_ds_mla", model="deepseek-ai/DeepSeek-V3").format(
        gib="1.57", tokens="42,080")), load_model("deepseek-v3"))
    assert (p.kv_cache_dtype, p.kv_element_bytes, p.page_bytes) == ("fp8_ds_mla", 0, 16 * 656)


HYBRID_8_11 = parse_config({"num_hidden_layers": 19, "num_attention_heads": 8, "num_key_value_heads": 8,
                            "head_dim": 64, "hidden_size": 512, "vocab_size": 1000, "intermediate_size": 1024,
                            "sliding_window": 128,
                            "layer_types": ["full_attention"] * 8 + ["sliding_attention"] * 11})


@pytest.mark.parametrize("version,blocks", [
    # 8 full + 11 sliding layers, 32,768 B a layer-block: groups of 8 (the smallest bucket through 0.11; 0.12-0.17
    # because 11 >= 1.25 x 8; B = 262,144) or of 11 (0.18+: 11 < 1.5 x 8; B = 360,448); 10.00 GiB ->
    # [40,939, 40,980] or [29,774, 29,803] blocks; unknown version: either
    ("0.11.0", (40_939, 40_980)), ("0.17.1", (40_939, 40_980)), ("0.18.0", (29_774, 29_803)),
    (None, (29_774, 40_980)),
])
def test_group_rule_by_release_or_every_rule(version, blocks):
    p = predict_from_log(_start("Available KV cache memory: 10.00 GiB\n"), HYBRID_8_11, version=version)
    assert (p.blocks_min, p.blocks_max) == blocks


def test_release_boundaries_of_the_token_formula():
    log = ("Available KV cache memory: 10.00 GiB\nGPU KV cache size: 218,400 tokens\n"
           "Maximum concurrency for 8,192 tokens per request: 1.00x\n")
    gpt_oss = load_model("gpt-oss-20b")
    # 0.20.0 already uses the 0.20+ formula
    assert predict_from_log(_start(log), LLAMA, version="0.20.0").scenarios == (
        "V1, tokens = int(N / blocks_per_request x max_model_len)",)
    # 0.21: the batch budget counts once (as 0.25 above)
    p = predict_from_log(_start(log), gpt_oss, max_num_batched_tokens=2048, version="0.21.0")
    assert (p.tokens_min, p.tokens_max) == (344_505, 344_846)


def test_smallest_figure_compared_as_numbers_not_text():
    from kvlib.vllm.predict import stage_windows
    # ranks 0 and 1 are stage 0 at tp=2: '10.00' < '9.50' as text, but 9.50 GiB is the smaller pool
    log = "".join(RANK_LINE.format(r=r, x=x) for r, x in enumerate(["10.00", "9.50", "8.00", "8.00"]))
    assert stage_windows(_start(log), tp=2, pp=2)[0] == _window("9.50")


def test_log_02_blocks_imply_a_pool_and_a_budget_of_one_is_allowed():
    # 02.log (opt-125m, V0): 76,240 blocks of 589,824 B, no available figure: the pool lay in
    # [76,240 x 589,824, 76,241 x 589,824 - 1] = [44,968,181,760, 44,968,771,583] B (sidecar 02: 41.88 GiB)
    p = predict_from_log(parse_log(read_bundled_log("02"))[0], OPT_125M, max_num_batched_tokens=1)
    assert (p.implied_available_bytes_min, p.implied_available_bytes_max) == (44_968_181_760, 44_968_771_583)


@pytest.mark.parametrize("version,tokens", [
    # the once/either boundary is 0.26.0, where max_in_flight_tokens appears (figures as in the test above)
    ("0.25.99", (344_505, 344_846)), ("0.26.0", (287_753, 344_846)),
])
def test_batch_budget_boundary_at_0_26(version, tokens):
    log = ("Available KV cache memory: 10.00 GiB\nGPU KV cache size: 218,400 tokens\n"
           "Maximum concurrency for 8,192 tokens per request: 1.00x\n")
    p = predict_from_log(_start(log), load_model("gpt-oss-20b"), max_num_batched_tokens=2048, version=version)
    assert (p.tokens_min, p.tokens_max) == tokens


def test_unknown_version_counts_the_batch_budget_once_or_twice():
    # A V1 config line without a release, the combined capacity line (0.20+ format: the concurrency formula only).
    # gpt-oss-20b, 10.00 GiB, N in [27,293, 27,320], F = 2048 (worked in test_batch_budget_counted_once_or_twice):
    # once [344,505, 344,846], twice [287,753, 288,037] -> either: [287,753, 344,846]. (Three times would give
    # 512 + ceil(6271 / 16) + 1 = 905 blocks a request, int(27,293 / 905 x 8192) = 247,054 at the low end.)
    log = ("Initializing a V1 LLM engine with config: model='openai/gpt-oss-20b', dtype=torch.bfloat16, "
           "max_seq_len=8192, tensor_parallel_size=1, pipeline_parallel_size=1, kv_cache_dtype=auto\n"
           "Available KV cache memory: 10.00 GiB\n" + COMBINED.format(tokens="218,400", conc="26.66"))
    p = predict_from_log(_start(log), load_model("gpt-oss-20b"), max_num_batched_tokens=2048)
    assert p.engine == "v1"
    assert (p.tokens_min, p.tokens_max) == (287_753, 344_846)


def test_v1_block_count_without_tokens_uses_the_block_formula():
    # a V1 log printing '# GPU blocks: N' and no token figure: the count is compared as blocks, tokens N x bs
    log = _v1_config().replace("GPU KV cache size: {tokens} tokens\n", "# GPU blocks: 5,120\n").format(gib="10.00")
    p = predict_from_log(_start(log), LLAMA)
    assert p.scenarios == ("V1, tokens = N x bs",)
    # 2 MiB a block, N in [5,117, 5,122] (worked above): 5,120 inside
    assert (p.blocks_min, p.blocks_max, p.agrees) == (5_117, 5_122, True)


def test_v0_sizes_sliding_layers_as_full_attention():
    # V0 has no hybrid manager: HYBRID_8_11's 19 layers are one group, 19 x 32,768 = 622,592 B a block.
    # 10.00 GiB: floor(10,732,049,531 / 622,592) = 17,237 (17,237 x 622,592 = 10,731,618,304),
    #            floor(10,742,786,949 / 622,592) = 17,254 (17,255 x 622,592 = 10,742,824,960 > hi)
    p = predict_from_log(_start(V0_PROFILE.format(x="10.00", n=17_240)), HYBRID_8_11)
    assert (p.engine, p.bytes_per_block, p.blocks_min, p.blocks_max) == ("v0", 622_592, 17_237, 17_254)


def test_token_count_over_two_groups_implies_a_pool_from_the_lowest_block_count():
    # gpt-oss-20b on V1 0.10.1 (pre-0.20: tokens = (N // 2 groups) x 16), no available figure, 218,400 tokens:
    # N // 2 = 13,650 -> N in {27,300, 27,301}; B = 12 x 32,768 = 393,216 B. Pool in
    # [27,300 x 393,216, 27,302 x 393,216 - 1] = [10,734,796,800, 10,735,583,231] B
    # = 10.73 GB (10.00 GiB: 9.9976) to 10.74 GB (10.00 GiB: 9.9983)
    log = _v1_config(model="openai/gpt-oss-20b").replace("Available KV cache memory: {gib} GiB\n", "")
    p = predict_from_log(_start(log.format(tokens="218,400")), load_model("gpt-oss-20b"))
    assert (p.implied_available_bytes_min, p.implied_available_bytes_max) == (10_734_796_800, 10_735_583_231)
    assert p.reason == ("the log prints no available-KV-memory figure, so there is nothing to predict from; the logged "
                        "count implies a pool of 10.73 GB (10.00 GiB) to 10.74 GB (10.00 GiB) per rank")


def test_a_block_size_fit_follows_the_stronger_causes():
    # 10,240 blocks on V0 = twice the 2 MiB count: TP 2, PP 2, fp8 (priority order) and block_size 8 (1 MiB blocks,
    # [10,234, 10,245]) all fit; the block size, the weakest reading, comes last
    p = predict_from_log(_start(V0_PROFILE.format(x="10.00", n=10_240)), LLAMA)
    assert p.cause.startswith("TP not accounted: with tensor_parallel_size=2")
    assert p.alternatives[-1] == "a different block size: with block_size=8 the logged count fits (pass --block-size 8)"
    # a block size given by the caller (32) is second-guessed too, 16 included: 5,120 blocks of 2 MiB fit at 16
    q = predict_from_log(_start(V0_PROFILE.format(x="10.00", n=5_120)), LLAMA, block_size=32)
    assert q.alternatives[-1] == ("a different block size: with block_size=16 the logged count fits "
                                  "(pass --block-size 16)")


@pytest.mark.parametrize("logged,block_size", [
    # a quarter, an eighth, a sixteenth of the 2 MiB count: 10.00 GiB over 8, 16, 32 MiB blocks
    # 10,732,049,531 // 8,388,608 = 1,279, 10,742,786,949 // 8,388,608 = 1,280
    # // 16,777,216: [639, 640]; // 33,554,432: [319, 320]
    (1_280, 64), (640, 128), (320, 256),
])
def test_larger_block_sizes_are_offered(logged, block_size):
    p = predict_from_log(_start(V0_PROFILE.format(x="10.00", n=logged)), LLAMA)
    assert p.alternatives == (f"a different block size: with block_size={block_size} the logged count fits "
                              f"(pass --block-size {block_size})",)


def test_mla_block_size_is_a_primary_cause():
    # DeepSeek V3 on V0 0.6.6, 1.57 GiB = [1,680,405,955, 1,691,143,372] B; at block_size 32 a block is
    # 2 x 1,124,352 = 2,248,704 B -> [747, 752]: 750 fits. For MLA a block size is not the weakest reading
    # (priority 2, below the wrong-model text), so it is the cause
    p = predict_from_log(_start(V0_PROFILE.format(x="1.57", n=750)), load_model("deepseek-v3"), version="0.6.6")
    assert (p.cause, p.alternatives) == ("a different block size: with block_size=32 the logged count fits "
                                         "(pass --block-size 32)", ())
    # twice the count with the KV dtype given: block_size 8 (562,176 B, priority 2) comes before fp8 (562,176 B,
    # priority 3 when the dtype was given)
    q = predict_from_log(_start(V0_PROFILE.format(x="1.57", n=3_000)), load_model("deepseek-v3"), version="0.6.6",
                         kv_cache_dtype="auto")
    assert q.alternatives[-2:] == (
        "a different block size: with block_size=8 the logged count fits (pass --block-size 8)",
        "a different KV dtype: with kv_cache_dtype=fp8 the logged count fits (pass --kv-dtype fp8)")


def test_v0_mla_padding_not_applied_is_named():
    # V0 0.7.3 pads MLA entries ([1,345, 1,353] blocks at 1.57 GiB, worked above); 1,500 blocks fit only the
    # unpadded 576-element entry ([1,494, 1,504])
    p = predict_from_log(_start(V0_PROFILE.format(x="1.57", n=1_500)), load_model("deepseek-v3"), version="0.7.3")
    assert (p.cause, p.alternatives) == ("V0's 256-byte MLA entry padding not applied (576 -> 640 elements in "
                                         "16-bit) makes the count fit", ())


def test_a_printed_auto_dtype_is_not_a_given_one():
    # 'kv_cache_dtype=auto' printed is the default, not a choice: fp8 keeps priority 1 and comes before
    # block_size 8 (priority 2). DeepSeek V3 on V1, 1.57 GiB, '# GPU blocks: 3,000': fp8 (562,176 B a block)
    # [2,989, 3,008] and block_size 8 (1,124,352 / 2 = 562,176 B) both fit; PP 2 is named first
    log = _v1_config(model="deepseek-ai/DeepSeek-V3").replace("GPU KV cache size: {tokens} tokens\n",
                                                              "# GPU blocks: 3,000\n").format(gib="1.57")
    p = predict_from_log(_start(log), load_model("deepseek-v3"))
    assert p.cause.startswith("PP not accounted: with pipeline_parallel_size=2")
    assert p.alternatives == (
        "a different KV dtype: with kv_cache_dtype=fp8 the logged count fits (pass --kv-dtype fp8)",
        "a different block size: with block_size=8 the logged count fits (pass --block-size 8)")


def test_hybrid_manager_disabled_comes_before_a_printed_dtype():
    # gpt-oss-20b on V1 with fp8 printed: 12 x 16,384 = 196,608 B a block. '# GPU blocks: 27,300' is half that
    # count: 16-bit (12 x 32,768 = 393,216 B) or the hybrid manager disabled (24 x 16,384 = 393,216 B) both give
    # [27,293, 27,320] at 10.00 GiB. The printed dtype is a given (priority 3), the manager setting is not (2)
    log = _v1_config(kv="fp8", model="openai/gpt-oss-20b").replace("GPU KV cache size: {tokens} tokens\n",
                                                                   "# GPU blocks: 27,300\n").format(gib="10.00")
    p = predict_from_log(_start(log), load_model("gpt-oss-20b"))
    assert p.cause == ("the hybrid KV-cache manager disabled (sliding-window layers sized as full attention) makes "
                       "the count fit")
    assert p.alternatives[0] == ("a different KV dtype: with kv_cache_dtype=auto the logged count fits "
                                 "(pass --kv-dtype auto)")


def test_wrong_model_block_from_the_lowest_count_of_a_token_span():
    # gpt-oss-20b, V1 0.10.1 (tokens = (N // 2) x 16), 10.00 GiB predicts [218,336, 218,560]; 655,200 tokens
    # = 40,950 x 16 -> N in {81,900, 81,901}: the first, 81,900, is read. Window middle
    # (10,732,049,531 + 10,742,786,949) / 2 = 10,737,418,240; / 81,900 = 131,104.01 -> 131,104 B, 0.33x 393,216
    log = _v1_config(model="openai/gpt-oss-20b").format(gib="10.00", tokens="655,200")
    p = predict_from_log(_start(log), load_model("gpt-oss-20b"))
    assert p.cause.startswith("wrong model or dtype: the logged 655,200 tokens imply about 131,104 B per block, "
                              "0.33x the 393,216 B this model gives at block size 16")


def test_candidates_are_tried_with_the_batch_budget():
    # gpt-oss-20b, 0.20.2, F = 2048, 10.00 GiB. PP 2 (12 layers a stage: 6 + 6), fp8 and TP 2 (4 KV heads a rank)
    # each halve the block to 6 x 32,768 = 12 x 16,384 = 196,608 B: N in [54,586, 54,640]
    # (196,608 x 54,641 = 10,742,857,728 > 10,742,786,949); with 649 blocks a request (512 + 137, worked in
    # test_hybrid_manager_disabled_is_named) tokens int(N / 649 x 8192) in [689,011, 689,693]: 689,300 fits each.
    # TP was printed (1), so it comes last
    log = _v1_config(model="openai/gpt-oss-20b").replace("v0.10.1", "v0.20.2").format(gib="10.00", tokens="689,300")
    p = predict_from_log(_start(log), load_model("gpt-oss-20b"), max_num_batched_tokens=2048)
    assert p.cause == ("PP not accounted: with pipeline_parallel_size=2 (layers per stage [12, 12]) the logged count "
                       "fits (pass --pp 2)")
    assert p.alternatives == (
        "a different KV dtype: with kv_cache_dtype=fp8 the logged count fits (pass --kv-dtype fp8)",
        "TP not accounted: with tensor_parallel_size=2 (4 KV head(s) per rank) the logged count fits (pass --tp 2)")


SLIDING_4 = parse_config({"num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 8, "head_dim": 64,
                          "hidden_size": 512, "vocab_size": 1000, "intermediate_size": 1024, "sliding_window": 128,
                          "layer_types": ["sliding_attention"] * 4})


def test_a_model_of_one_attention_kind_is_never_blamed_on_the_hybrid_manager():
    # vLLM only converts sliding layers to full attention when kinds are mixed (a uniform model has one spec), so
    # the manager setting is not a candidate here. 4 sliding layers, 32,768 B a layer-block: B = 131,072 B,
    # 10.00 GiB -> N in [81,879, 81,960] (131,072 x 81,961 = 10,742,792,192 > hi). 0.20.2, F = 2048: 137 blocks a
    # request, tokens about N / 137 x 8192 = 4.9 M; 1,310,720 = 81,920 x 16 is what full-attention sizing
    # (512 blocks a request, tokens N x 16) would give, which this model never uses
    log = _v1_config(model="m").replace("v0.10.1", "v0.20.2").format(gib="10.00", tokens="1,310,720")
    p = predict_from_log(_start(log), SLIDING_4, max_num_batched_tokens=2048)
    assert p.cause.startswith("wrong model or dtype") and not any("hybrid" in a for a in p.alternatives)


def test_tp_named_for_an_mla_model_keeps_one_latent_a_rank():
    # DeepSeek V3 (MLA, 61 layers) under PP 2, TP not printed (assumed 1). An MLA latent is whole on every rank, so
    # TP changes only which stage a tagged rank belongs to (rank // tp), and the cause says "1 KV head(s) per rank".
    # Per token and layer (512 + 64) x 2 B = 1,152 B; a block of 16: 18,432 B a layer. vLLM's split of 61 layers
    # in 2 stages: [31, 30] -> 571,392 B and 552,960 B a block.
    # TP 1: rank 0 = stage 0 (2.00 GiB), rank 1 = stage 1 (1.00 GiB); stage 1 binds:
    #   [ceil(0.995 x 2^30) // 552,960, (ceil(1.005 x 2^30) - 1) // 552,960] = [1,068,373,115 // 552,960,
    #   1,079,110,533 // 552,960] = [1,932, 1,951].
    # TP 2: ranks 0 and 1 both in stage 0, stage 1 printed nothing: the range covers every split from the smallest
    #   figure, 1.00 GiB: [1,068,373,115 // 571,392, 1,951] = [1,869, 1,951].
    # Logged 30,080 tokens = 1,880 blocks x 16: 52 blocks under 1,932 (not rounding), inside TP 2's range.
    lines = ["INFO 04-29 00:57:52 [core.py:58] Initializing a V1 LLM engine (v0.8.5) with config: "
             "model='deepseek-ai/DeepSeek-V3', dtype=torch.bfloat16, max_seq_len=8192, pipeline_parallel_size=2, "
             "kv_cache_dtype=auto, enforce_eager=False"]
    lines += [f"(VllmWorker rank={r} pid={105 + r}) INFO 04-29 01:09:40 [gpu_worker.py:187] Available KV cache "
              f"memory: {x} GiB" for r, x in enumerate(["2.00", "1.00"])]
    lines.append("INFO 04-29 01:09:49 [kv_cache_utils.py:634] GPU KV cache size: 30,080 tokens")
    p = predict_from_log(parse_log("\n".join(lines))[0], load_model("deepseek-v3"))
    assert (p.agrees, p.blocks_min, p.blocks_max) == (False, 1_932, 1_951)
    assert p.cause == ("TP not accounted: with tensor_parallel_size=2 (1 KV head(s) per rank) the logged count fits "
                       "(pass --tp 2)")
