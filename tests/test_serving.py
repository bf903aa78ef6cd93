"""kvlib.serving, the request-side formulas: Little's law, prefill capacity, TTFT, disaggregation, EP, EAGLE, and the
MoE ridge and speculative verify. Every expected figure is worked by hand in its comment."""

import math

import pytest

from kvlib.roofline import RooflineError
from kvlib.serving import (
    disagg_transfer_bytes,
    disagg_transfer_seconds,
    draft_head_bytes,
    eagle_expected_tokens,
    eagle_speedup,
    ep_all_to_all_bytes,
    littles_law_concurrency,
    pd_ratio,
    prefill_steps,
    ridge_batch,
    speculative_expected_tokens,
    speculative_speedup,
    ttft_seconds,
    verify_cost_ratio,
)


def test_littles_law():
    # 5 requests/s, each 3 s to first token and 250 tokens at 20 ms: 5 x 8 = 40 in the system
    assert littles_law_concurrency(5, 3 + 250 * 0.020) == pytest.approx(40)
    assert littles_law_concurrency(0, 10) == 0
    with pytest.raises(ValueError, match="rate_per_s"):
        littles_law_concurrency(-1, 2)
    with pytest.raises(ValueError, match="seconds_in_system"):
        littles_law_concurrency(1, "2")


def test_prefill_steps_under_a_chunk_budget():
    assert prefill_steps(6144, 512) == 12               # 6,144 / 512
    assert prefill_steps(6145, 512) == 13               # one token over: one more step
    assert prefill_steps(6144, 512, decode_tokens=64) == 14   # 6,144 / 448 = 13.7
    assert prefill_steps(100, 8192) == 1
    with pytest.raises(ValueError, match="decode_tokens"):
        prefill_steps(100, 512, decode_tokens=512)
    with pytest.raises(ValueError, match="token_budget"):
        prefill_steps(100, 0)


def test_ttft_queue_and_attention_by_hand():
    # Llama 3.1 8B, 4,096 tokens, H100 at 40% MFU (395.6e12 FLOP/s): linear 2 x 7,504,924,672 x 4,096
    # = 61,480,342,913,024; attention 2 x 32 layers x 32 heads x 256 x 4,096 x 4,097 / 2 = 4,399,120,252,928;
    # 65,879,463,165,952 / 395.6e12 = 166.53 ms; 0.25 s in the queue on top
    flops = 2 * 7_504_924_672 * 4096 + 2 * 32 * 32 * 256 * (4096 * 4097 // 2)
    assert flops == 65_879_463_165_952
    assert ttft_seconds("llama-3.1-8b", 4096, mfu=0.4) == pytest.approx(flops / (0.4 * 989e12))
    assert ttft_seconds("llama-3.1-8b", 4096, mfu=0.4, queue_seconds=0.25) == pytest.approx(0.25 + flops / 395.6e12)
    # leaving the attention out (the 2 P T estimate) understates it by 4.4e12 / 65.9e12 = 6.7%
    assert flops / (2 * 7_504_924_672 * 4096) == pytest.approx(1.0715, abs=1e-4)


def test_ttft_chunks_and_prefix_hits():
    # chunks of 1,024 of a 4,096 prompt do the same FLOPs in all (the causal pairs add up), each above the weight read
    one = ttft_seconds("llama-3.1-8b", 4096, mfu=0.4)
    assert ttft_seconds("llama-3.1-8b", 4096, mfu=0.4, token_budget=1024) == pytest.approx(one)
    # 64-token chunks: each does 2 x 7.505e9 x 64 = 9.6e11 FLOP (2.43 ms at 395.6e12) but reads the weights,
    # 16,060,522,496 - (128,256 - 64) x 8,192 = 15,010,373,632 B (4.48 ms at 3.35e12): the read sets each step
    small = ttft_seconds("llama-3.1-8b", 640, mfu=0.4, token_budget=64)
    pairs = [(i + 1) * 64 * ((i + 1) * 64 + 1) // 2 - i * 64 * (i * 64 + 1) // 2 for i in range(10)]
    per_chunk = [max((2 * 7_504_924_672 * 64 + 524_288 * p) / 395.6e12, 15_010_373_632 / 3.35e12) for p in pairs]
    assert small == pytest.approx(sum(per_chunk))
    assert per_chunk[0] == pytest.approx(15_010_373_632 / 3.35e12)
    # 2,048 of 4,096 tokens cached: linear 2 x 7,504,924,672 x 2,048, attention over pairs 2,049..4,096:
    # 4,096 x 4,097 / 2 - 2,048 x 2,049 / 2 = 8,390,656 - 2,098,176 = 6,292,480
    hit = ttft_seconds("llama-3.1-8b", 4096, mfu=0.4, cached_tokens=2048)
    assert hit == pytest.approx((2 * 7_504_924_672 * 2048 + 524_288 * 6_292_480) / 395.6e12)
    with pytest.raises(ValueError, match="cached_tokens"):
        ttft_seconds("llama-3.1-8b", 10, cached_tokens=10)
    with pytest.raises(ValueError, match="mfu"):
        ttft_seconds("llama-3.1-8b", 10, mfu=0)


def test_disaggregated_transfer():
    # Qwen3-30B-A3B: 48 layers x 4 KV heads x 128 x 2 (K, V) x 2 B = 98,304 B a token; 8,000 tokens: 786,432,000 B
    assert disagg_transfer_bytes("qwen3-30b-a3b", 8000) == 48 * 4 * 128 * 2 * 2 * 8000 == 786_432_000
    # over 50 GB/s: 15.73 ms
    assert disagg_transfer_seconds(786_432_000, 50e9) == pytest.approx(0.01572864)
    with pytest.raises(ValueError, match="link_bytes_per_s"):
        disagg_transfer_seconds(1, 0)


def test_pd_ratio():
    # 4,000-token prompts at 20,000 tokens/s of prefill per GPU: 0.2 GPU-s; 500 tokens out at 2,500/s: 0.2 GPU-s -> 1
    assert pd_ratio(4000, 500, prefill_tokens_per_gpu_s=20_000, decode_tokens_per_gpu_s=2_500) == pytest.approx(1)
    # twice the prompt: two prefill GPUs per decode GPU
    assert pd_ratio(8000, 500, prefill_tokens_per_gpu_s=20_000, decode_tokens_per_gpu_s=2_500) == pytest.approx(2)
    with pytest.raises(ValueError, match="output_tokens"):
        pd_ratio(1, 0, prefill_tokens_per_gpu_s=1, decode_tokens_per_gpu_s=1)


def test_ep_all_to_all():
    # Qwen3-30B-A3B (d 2,048, top 8), 64 tokens a GPU, EP 4, bf16: 2 x 64 x 8 x 3/4 x 2,048 x 2 = 3,145,728 B a layer
    assert ep_all_to_all_bytes(64, 2048, 8, 4) == 3_145_728
    # fp8 dispatch alone (one way, 1 byte): a quarter of it
    assert ep_all_to_all_bytes(64, 2048, 8, 4, dtype_bytes=1) / 2 == 786_432
    with pytest.raises(ValueError, match="ep"):
        ep_all_to_all_bytes(64, 2048, 8, 0)


def test_eagle_per_position_acceptance():
    # 1 + 0.9 + 0.9 x 0.7 + 0.9 x 0.7 x 0.5 = 1 + 0.9 + 0.63 + 0.315 = 2.845
    assert eagle_expected_tokens([0.9, 0.7, 0.5]) == pytest.approx(2.845)
    assert eagle_expected_tokens([]) == 1
    # constant acceptance: Leviathan et al.'s (1 - 0.7^4) / 0.3 = 2.533
    assert eagle_expected_tokens([0.7] * 3) == pytest.approx(speculative_expected_tokens(0.7, 3)) == pytest.approx(
        (1 - 0.7 ** 4) / 0.3)
    with pytest.raises(ValueError, match=r"acceptance_per_position\[1\]"):
        eagle_expected_tokens([0.5, 1.5])


def test_eagle_speedup_by_hand():
    # E = 2.845 (above); three drafts at 0.1 of a step and a dense verify: 2.845 / (3 x 0.1 + 1) = 2.18846;
    # a verify of 2.5 steps: 2.845 / 2.8 = 1.01607
    assert eagle_speedup([0.9, 0.7, 0.5], 0.1) == pytest.approx(2.845 / 1.3)
    assert math.isclose(eagle_speedup([0.9, 0.7, 0.5], 0.1, 2.5), 1.01607, abs_tol=1e-5)
    # one position: DeepSeek-V3's single MTP token at 0.85, a free draft and a plain verify: 1.85
    assert eagle_speedup([0.85], 0, 1) == pytest.approx(1.85)
    with pytest.raises(ValueError, match="^acceptance_per_position"):
        eagle_speedup([], 0.1)
    with pytest.raises(ValueError, match="^cost_ratio"):
        eagle_speedup([0.8], -0.1)
    with pytest.raises(ValueError, match="^verify_ratio"):
        eagle_speedup([0.8], 0, 0)


def test_draft_head_bytes_by_hand():
    # a 2d -> d projection, one decoder layer as one token reads it, the shared LM head V d
    # Llama 3.1 8B: attention 4,096^2 x 2 + 4,096 x 1,024 x 2 = 41,943,040; MLP 3 x 4,096 x 14,336 = 176,160,768;
    # 2 norms 8,192 -> layer 218,112,000; projection 33,554,432; head 128,256 x 4,096 = 525,336,576;
    # 777,003,008 parameters, bf16
    assert draft_head_bytes("llama-3.1-8b") == 1_554_006_016
    # Mixtral 8x7B: attention 41,943,040 + 2 of its experts 352,321,536 + router 4,096 x 8 = 32,768 + norms 8,192
    # = 394,305,536; + 33,554,432 + 32,000 x 4,096 = 131,072,000 -> 558,931,968 parameters, bf16
    assert draft_head_bytes("mixtral-8x7b") == 1_117_863_936
    # DeepSeek-V3's MTP module: MLA 187,107,328 + 8 routed and 1 shared expert of 3 x 7,168 x 2,048 = 44,040,192
    # + router 7,168 x 256 = 1,835,008 + norms 14,336 = 585,318,400; + 2 x 7,168^2 = 102,760,448 + 129,280 x 7,168
    # = 926,679,040. At TP 8 vLLM splits the layer and the head (1,511,997,440 fp8 bytes / 8 = 188,999,680) but
    # builds the projection whole on every GPU (vLLM 0.34.0 deepseek_mtp.py: eh_proj = nn.Linear(2 d, d)):
    # 188,999,680 + 102,760,448 = 291,760,128 B each (not 1,614,757,888 / 8 = 201,844,736)
    assert draft_head_bytes("deepseek-v3", dtype_bytes=1, tp=8) == 291_760_128
    # tp = 1 is unchanged by the replication: the whole head on one GPU
    assert draft_head_bytes("deepseek-v3", dtype_bytes=1) == 1_614_757_888
    with pytest.raises(ValueError, match="^tp"):
        draft_head_bytes("llama-3.1-8b", tp=0)


def test_verify_cost_ratio_by_hand():
    # dense: Llama 3.1 8B verifying 4 tokens at 4,096 tokens of context reads 3 more embedding rows of 8,192 B
    w1, kv = 16_060_522_496 - 128_255 * 4096 * 2, 131_072 * 4096
    assert verify_cost_ratio("llama-3.1-8b", 4, context=4096) == pytest.approx((w1 + 3 * 8192 + kv) / (w1 + kv))
    # Mixtral 8x7B verifying 6 tokens at 1,024: 8 (1 - 0.75^6) = 8 - 8 x 729 / 4,096 = 6.576171875 experts a layer;
    # 1,605,636,096 dense parameters, 32 x 176,160,768 per expert slot, the rows of 6 tokens against 1; cache 131,072 B
    dense, expert, kv = 1_605_636_096, 32 * 176_160_768, 131_072 * 1024
    by_hand = (((dense + 6.576171875 * expert - (32_000 - 6) * 4096) * 2 + kv)
               / ((dense + 2 * expert - (32_000 - 1) * 4096) * 2 + kv))
    assert verify_cost_ratio("mixtral-8x7b", 6, context=1024) == pytest.approx(by_hand, rel=1e-9)
    assert 2.9 < by_hand < 3.1                               # about three plain steps
    # a verify of 1,024 tokens does 2 x 1,024 FLOPs per weight, over an H100's ridge of 295: refused
    with pytest.raises(RooflineError, match="^tokens: a verify of 1024 tokens is compute-bound in its matmuls"):
        verify_cost_ratio("llama-3.1-8b", 1024, context=4096)
    with pytest.raises(ValueError, match="^tokens"):
        verify_cost_ratio("llama-3.1-8b", 0, context=4096)


def test_moe_ridge_batch_by_hand():
    # Mixtral (8 experts, top 2) on an H100, bf16: the dense ridge 296; the experts need 2 k B >= I* b E_B:
    # once E_B ~ 8, B >= 295.22 x 2 x 8 / 4 = 1,180.9 -> 1,181
    assert ridge_batch(989 * 10**12, 3_350_000_000_000, 2) == 296
    assert ridge_batch(989 * 10**12, 3_350_000_000_000, 2, 8, 2) == 1181
    # gpt-oss-120b (128 experts, top 4) with 4-bit experts (b = 0.5): 295.22 x 0.5 x 128 / 8 = 2,361.8 -> 2,362
    assert ridge_batch(989 * 10**12, 3_350_000_000_000, 0.5, 128, 4) == 2362


def test_speculative_verify_of_a_moe_target():
    # E(0.7, 3) = 2.533; draft cost 0.1; dense: 2.533 / 1.3 = 1.949; a verify costing 2.5 steps: 2.533 / 2.8 = 0.9046
    e = (1 - 0.7 ** 4) / 0.3
    assert speculative_speedup(0.7, 3, 0.1) == pytest.approx(e / 1.3)
    assert speculative_speedup(0.7, 3, 0.1, verify_ratio=2.5) == pytest.approx(e / 2.8)
    assert math.isclose(e / 2.8, 0.9046, abs_tol=1e-4)


# --- a verify, a short prefill and the ridge of the MoEs of 2026 read the experts their tokens touch ----------------
# Qwen3-30B-A3B: 1,541,093,376 dense parameters, 48 layers of 128 experts of 4,718,592 (top 8), vocabulary 151,936 x
# d 2,048 untied, cache 98,304 B a token. DeepSeek-V3: 17,117,633,536 dense, 58 layers of 256 experts of 44,040,192
# (top 8), vocabulary 129,280 x d 7,168 untied, MLA cache 70,272 B a token. gpt-oss-120b: 2,127,557,952 dense, 36
# layers of 128 experts of 24,891,840 (top 4), vocabulary 201,088 x d 2,880 untied, 73,728 B a token (128 tokens
# fit every sliding window). bf16 weights; a verify of B tokens reads the rows of B tokens, one step's of 1.
def _verify_by_hand(dense, layers, expert, e, k, tokens, vocab, d, kv):
    touched = e * (1 - (1 - k / e) ** tokens)
    return (((dense + layers * touched * expert - (vocab - tokens) * d) * 2 + kv)
            / ((dense + layers * k * expert - (vocab - 1) * d) * 2 + kv))


def test_verify_cost_ratio_of_the_moes_of_2026_by_hand():
    # Qwen3 verifying 4 tokens at 4,096: 128 (1 - (15/16)^4) = 29.12 experts a layer against 8 -> 2.475 plain steps
    qwen = _verify_by_hand(1_541_093_376, 48, 4_718_592, 128, 8, 4, 151_936, 2048, 98_304 * 4096)
    assert verify_cost_ratio("qwen3-30b-a3b", 4, context=4096) == pytest.approx(qwen, rel=1e-9)
    assert round(qwen, 3) == 2.475
    # DeepSeek-V3's one MTP token (a verify of 2) on an H200: 256 (1 - (31/32)^2) = 15.75 experts against 8 -> 1.538
    ds = _verify_by_hand(17_117_633_536, 58, 44_040_192, 256, 8, 2, 129_280, 7168, 70_272 * 4096)
    assert verify_cost_ratio("deepseek-v3", 2, context=4096, gpu="H200") == pytest.approx(ds, rel=1e-9)
    assert round(ds, 3) == 1.538
    # gpt-oss-120b verifying 4 tokens at 128: 128 (1 - (31/32)^4) = 15.27 experts against 4 -> 2.965
    oss = _verify_by_hand(2_127_557_952, 36, 24_891_840, 128, 4, 4, 201_088, 2880, 73_728 * 128)
    assert verify_cost_ratio("gpt-oss-120b", 4, context=128) == pytest.approx(oss, rel=1e-9)
    assert round(oss, 3) == 2.965


def test_a_short_moe_prefill_is_held_to_the_experts_it_reads():
    # Qwen3-30B-A3B, a 16-token prompt on an H100 at 50% MFU: 2 x 3,041,867,776 x 16 + 2 x 48 x 32 x 256 x 136 FLOPs
    # take 0.197 ms; reading the 82.42 experts the 16 tokens touch in each layer, 2 x 1,541,093,376 +
    # 2 x 48 x 4,718,592 x 82.42 less the 151,920 unread embedding rows, takes 11.88 ms: the TTFT
    touched = 128 * (1 - (15 / 16) ** 16)
    read = 2 * 1_541_093_376 + 2 * 48 * 4_718_592 * touched - (151_936 - 16) * 2048 * 2
    flops = 2 * 3_041_867_776 * 16 + 2 * 48 * 32 * 256 * 16 * 17 // 2
    assert flops / (0.5 * 989e12) < read / 3.35e12
    assert ttft_seconds("qwen3-30b-a3b", 16) == pytest.approx(read / 3.35e12, rel=1e-9)
    assert round(read / 3.35e12 * 1e3, 2) == 11.88


def test_qwen3_moe_ridge_batch_by_hand():
    # Qwen3-30B-A3B (128 experts, top 8) on an H100, bf16: 989 / 3.35 x 2 x 128 / (2 x 8) = 4,723.6 -> 4,724
    assert ridge_batch(989 * 10**12, 3_350_000_000_000, 2, 128, 8) == 4724
