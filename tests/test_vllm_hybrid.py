"""kvlib.vllm.hybrid: vLLM's pages for hybrids, worked by hand from the bundled configs and vLLM's source.

Rules (vLLM 0.32.0 / 0.34.0, paths under vllm/): the state page is sum(prod(shape) x bytes) over a layer's
state tensors (v1/kv_cache_interface.py MambaSpec.page_size_bytes); the attention block grows to
a x ceil(S / (a x P_token)) with a = max(kernel block, block size), lcm'd with the FlashInfer GDN checkpoint
alignment 64 in 'align' mode from 0.33 (platforms/interface.py _align_hybrid_block_size); the state page is
padded up to the attention page; a request holds 2 state pages per state group in 'align' mode, plus a
prefill-checkpoint page for Mamba2 (MambaMixer2.get_kv_cache_spec) and for Gated DeltaNet with FlashInfer
prefill from 0.33 (qwen_gdn_linear_attn.py), 1 in 'none' mode (MambaSpec.max_memory_usage_bytes).
Every expected figure below is worked from the config's numbers in the comment, not from kvlib.
"""

from __future__ import annotations

import pytest

from kvlib import load_model
from kvlib.vllm import VllmLogError
from kvlib.vllm.hybrid import (
    aligned_block_size,
    needs_plan,
    page_plan,
    state_page_bytes,
    state_pages_per_request,
    unify_pages,
)
from kvlib.vllm.layout import bytes_per_block, plan_layouts
from kvlib.vllm.tokens import Scenario

QWEN3_NEXT = load_model("qwen3-next-80b-a3b")     # 48 layers, full every 4th: 12 full + 36 GDN; K=2 of 256
NEMOTRON_H = load_model("nemotron-h-56b")         # 54 Mamba2 + 10 attention (+ 54 MLP); K=8 of 128
NEMOTRON_NANO = load_model("nemotron-3-nano")     # 23 Mamba2 + 6 attention (+ 23 MoE); K=2 of 128
GEMMA_4 = load_model("gemma-4-26b-a4b")           # sliding K=8 of 256, full K=2 of 512 (global_head_dim)


def test_qwen3_next_on_one_gpu_0_32():
    # GDN, TP 1: conv (3, 2 x 16 x 128 + 32 x 128 = 8,192) x 2 B = 49,152; recurrent (32, 128, 128) x 2 B
    # = 1,048,576; S = 1,097,728 B. Attention per token 2 x 2 x 256 x 2 = 2,048 B. 0.32: block 16, kernel 16:
    # 16 x ceil(1,097,728 / 32,768) = 16 x 34 = 544 tokens; page 544 x 2,048 = 1,114,112 B;
    # padding 16,384 / 1,097,728 = 1.4925% -> '1.49'. GDN in 0.32 exports no checkpoint: 2 pages a request.
    p = page_plan(QWEN3_NEXT, 16, version="0.32.0")
    assert (p.block_size, p.requested_block_size, p.page_bytes) == (544, 16, 1114112)
    assert (p.state_page_bytes, p.padding_text, p.grew) == (1097728, "1.49", True)
    assert (p.state_pages_per_request, p.checkpoint_pages, p.mamba_cache_mode) == (2, 0, "align")
    assert p.block_sizes == {"gated_deltanet": 544, "full": 544}


@pytest.mark.parametrize("tp, state, block", [
    # TP 4: conv (3, 8,192 / 4) x 2 = 12,288 + recurrent (8, 128, 128) x 2 = 262,144 -> 274,432 B; the 2 KV
    # heads replicate past TP 2: one head a rank, 2 x 1 x 256 x 2 = 1,024 B a token; 16 x ceil(274,432 /
    # 16,384) = 16 x 17 = 272
    (4, 274432, 272),
    # TP 8: conv 3 x 1,024 x 2 = 6,144 + recurrent 4 x 128 x 128 x 2 = 131,072 -> 137,216; 16 x ceil(137,216 /
    # 16,384) = 16 x 9 = 144
    (8, 137216, 144),
])
def test_qwen3_next_tp_0_32(tp, state, block):
    p = page_plan(QWEN3_NEXT, 16, tp=tp, version="0.32.0")
    assert (p.state_page_bytes, p.block_size, p.page_bytes) == (state, block, block * 1024)


def test_qwen3_next_0_33_and_0_34_flashinfer_checkpoints():
    # From 0.33 the FlashInfer GDN prefill (CUDA, Hopper / Blackwell) exports a checkpoint: alignment
    # lcm(a, 64) and one more page a request. 0.33: a = max(16, 16) = 16 -> lcm 64; 0.34: a = max(16, 64) = 64.
    # Both: 64 x ceil(1,097,728 / (64 x 2,048)) = 64 x 9 = 576 tokens, 3 pages a request.
    for version, block in (("0.33.0", 16), ("0.34.0", 64)):
        p = page_plan(QWEN3_NEXT, block, version=version)
        assert (p.block_size, p.state_pages_per_request, p.checkpoint_pages) == (576, 3, 1)
    # Without FlashInfer (an A100, say) 0.33 keeps the 16-token alignment: 544 again, 2 pages
    p = page_plan(QWEN3_NEXT, 16, version="0.33.0", gdn_flashinfer=False)
    assert (p.block_size, p.state_pages_per_request) == (544, 2)
    # 'none' mode (prefix caching off): one state page a request, no checkpoint alignment
    p = page_plan(QWEN3_NEXT, 16, version="0.33.0", mamba_cache_mode="none")
    assert (p.block_size, p.state_pages_per_request) == (544, 1)


def test_qwen3_next_groups_and_block():
    # 12 full + 36 GDN: 36 >= 1.5 x 12, so groups of 12 layers: 1 full + 3 GDN groups, all of 1,114,112 B
    # pages; a block of the pool is 12 x 1,114,112 = 13,369,344 B
    layouts, plan = plan_layouts(QWEN3_NEXT, "v1", 1, "1.5", block_size=16, version="0.32.0")
    (layout,) = layouts
    assert (layout.group_size, layout.groups, layout.bytes_per_block) == (
        12, ("full", "gated_deltanet", "gated_deltanet", "gated_deltanet"), 13369344)
    # vLLM prints groups in the order their layers first appear: layer 0 is GDN
    assert layout.printed_groups == ("gated_deltanet",) * 3 + ("full",)
    assert bytes_per_block(QWEN3_NEXT, 16, version="0.32.0") == 13369344
    # a 32,768-token request: full ceil(32,768 / 544) = 61 blocks, 3 GDN groups x 2 pages = 6: 67 blocks
    s = Scenario("v1", "concurrency", "1.5", 1, tuple(layouts), plan.block_size, 32768, None, QWEN3_NEXT)
    assert s.bpr() == 67


def test_nemotron_h_56b_mamba2_float32_ssm():
    # Mamba2: 256 heads x 64 = 16,384 wide, 8 groups, state 256, conv 4: conv (3, 16,384 + 2 x 8 x 256 =
    # 20,480) x 2 B = 122,880; ssm (256, 64, 256) x 4 B (float32, vLLM's Nemotron-H default) = 16,777,216;
    # S = 16,900,096 B. Attention 2 x 8 x 128 x 2 = 4,096 B a token: 16 x ceil(16,900,096 / 65,536) =
    # 16 x 258 = 4,128 tokens; page 16,908,288 B; padding 8,192 / 16,900,096 = 0.0485% -> '0.05'.
    p = page_plan(NEMOTRON_H, 16, version="0.32.0")
    assert (p.state_page_bytes, p.block_size, p.page_bytes, p.padding_text) == (16900096, 4128, 16908288, "0.05")
    # Mamba2 exports a prefill checkpoint in every release read: 3 pages a request in 'align' mode
    assert (p.state_pages_per_request, p.checkpoint_pages) == (3, 1)
    # 54 Mamba2 + 10 attention: groups of 10, ceil(54 / 10) = 6 Mamba groups (6 padding layers) + 1
    (layout,), _ = plan_layouts(NEMOTRON_H, "v1", 1, "1.5", block_size=16, version="0.32.0")
    assert (layout.group_size, len(layout.groups), layout.bytes_per_block) == (10, 7, 10 * 16908288)


def test_nemotron_3_nano_tp():
    # Mamba2: 64 heads x 64 = 4,096 wide, 8 groups, state 128: conv (3, 4,096 + 2 x 8 x 128 = 6,144) x 2 =
    # 36,864; ssm (64, 64, 128) x 4 = 2,097,152; S = 2,134,016. Attention K=2 of 128: 1,024 B a token.
    # TP 1, 0.32: 16 x ceil(2,134,016 / 16,384) = 16 x 131 = 2,096.
    assert page_plan(NEMOTRON_NANO, 16, version="0.32.0").block_size == 2096
    # TP 2: conv (3, 3,072) x 2 = 18,432 + ssm (32, 64, 128) x 4 = 1,048,576 -> 1,067,008; one KV head:
    # 512 B a token; 16 x ceil(1,067,008 / 8,192) = 16 x 131 = 2,096 again
    p = page_plan(NEMOTRON_NANO, 16, tp=2, version="0.32.0")
    assert (p.state_page_bytes, p.block_size) == (1067008, 2096)
    # 0.34's 64-token block: 64 x ceil(2,134,016 / 65,536) = 64 x 33 = 2,112; Mamba2 declares no checkpoint
    # alignment (MambaMixer2 leaves get_prefill_checkpoint_alignment None), so no lcm
    assert page_plan(NEMOTRON_NANO, 64, version="0.34.0").block_size == 2112


def test_state_page_dtype_overrides():
    # The CPU build's float32 recurrent state (AVX-512 BF16): 49,152 + 32 x 128 x 128 x 4 = 2,146,304 B
    assert state_page_bytes(QWEN3_NEXT, ssm_dtype_bytes=4) == 2146304
    # A float32 engine (dtype=float32): the conv state and, for GDN, the recurrent state follow it
    assert state_page_bytes(QWEN3_NEXT, model_dtype="float32") == 2 * 1097728
    # Nemotron-H's SSM state stays float32 whatever the model dtype; only its conv state doubles
    assert state_page_bytes(NEMOTRON_H, model_dtype="float32") == 16900096 + 122880


def test_gemma_4_per_layer_pages_unify():
    # Sliding K=8 of 256: 2 x 8 x 256 x 2 = 8,192 B a token; full (global) K=2 of 512: 2 x 2 x 512 x 2 =
    # 4,096 B. At block 16: sliding page 131,072, full 65,536: the full layers' block doubles to 32 tokens.
    p = page_plan(GEMMA_4, 16, version="0.32.0")
    assert (p.page_bytes, p.block_sizes, p.block_size, p.state_page_bytes) == (
        131072, {"sliding": 16, "full": 32}, 16, None)
    # TP 8: sliding 8 heads -> 1 a rank, 1,024 B a token; the 2 global heads replicate -> 1, 2,048 B: now the
    # sliding page is the smaller one and its block doubles
    assert page_plan(GEMMA_4, 16, tp=8, version="0.32.0").block_sizes == {"sliding": 32, "full": 16}


def test_unify_pages_pads_what_does_not_divide():
    # 3 x 8,192 does not divide 4 x 8,192: that kind keeps its block and is padded to the largest page
    assert unify_pages({"a": 24576, "b": 32768}, {"a": 16, "b": 16}) == (32768, {"a": 16, "b": 16})


def test_aligned_block_size_edges():
    # The state already fits: the block stays (128 x 512 = 65,536 >= 17,536)
    assert aligned_block_size(512, 17536, 128, kernel_block=32) == 128
    # Exactly one page: ceil(65,536 / 65,536) = 1
    assert aligned_block_size(512, 65536, 128, kernel_block=32) == 128
    # MLA hybrids align to 128 tokens at least: 128 x ceil(100,000 / (128 x 576)) = 256
    assert aligned_block_size(576, 100000, 16, kernel_block=16, mla=True) == 256
    # a checkpoint alignment of 64 on a 16-token block: 64 x ceil(100,000 / (64 x 512)) = 256
    assert aligned_block_size(512, 100000, 16, kernel_block=16, checkpoint_alignment=64) == 256
    with pytest.raises(VllmLogError, match=r"^state_page must be a positive integer, got 0$"):
        aligned_block_size(512, 0, 16, kernel_block=16)


def test_state_pages_per_request_by_release():
    assert state_pages_per_request("mamba2", version="0.32.0") == (3, 1)
    assert state_pages_per_request("gated_deltanet", version="0.32.0") == (2, 0)
    assert state_pages_per_request("gated_deltanet", version="0.34.0") == (3, 1)
    assert state_pages_per_request("gated_deltanet", version="0.34.0", platform="cpu") == (2, 0)
    assert state_pages_per_request("mamba2", mamba_cache_mode="none") == (1, 0)
    with pytest.raises(VllmLogError, match=r"^mamba_cache_mode must be one of align, none, got 'all'$"):
        state_pages_per_request("mamba2", mamba_cache_mode="all")
    with pytest.raises(VllmLogError, match=r"^kind 'full' keeps no state$"):
        state_pages_per_request("full")


def test_ordinary_models_need_no_plan():
    assert not needs_plan(load_model("llama-3.1-8b")) and not needs_plan(load_model("gemma-2-9b"))
    assert needs_plan(QWEN3_NEXT) and needs_plan(NEMOTRON_H) and needs_plan(GEMMA_4)
    # its plan is the one page at the given block
    p = page_plan(load_model("llama-3.1-8b"), 16)
    assert (p.block_size, p.page_bytes, p.state_page_bytes, p.padding_text) == (16, 65536, None, None)


def test_refusals_are_one_line():
    with pytest.raises(VllmLogError, match=r"^platform must be 'cpu' or 'gpu', got 'tpu'$"):
        page_plan(QWEN3_NEXT, 16, platform="tpu")
    with pytest.raises(VllmLogError, match=r"^block_size must be a positive integer, got 0$"):
        page_plan(QWEN3_NEXT, 0)
    # TP 12 replicates the 2 attention KV heads but splits neither the 16 key heads nor the 32 value heads of
    # Qwen3-Next's GDN (vLLM divides them exactly): the state is refused, naming the field
    with pytest.raises(VllmLogError, match=r"^Qwen/Qwen3-Next-80B-A3B-Thinking: tp=12 must divide "
                                           r"linear_num_key_heads=16$"):
        page_plan(QWEN3_NEXT, 16, tp=12)
    with pytest.raises(VllmLogError, match=r"^llama-3.1-8b: no Mamba2 or Gated DeltaNet layer, so no state page$"):
        state_page_bytes(load_model("llama-3.1-8b", name="llama-3.1-8b"))


def test_older_release_is_named_in_a_note():
    p = page_plan(QWEN3_NEXT, 16, version="0.20.2")
    assert p.block_size == 544
    assert p.notes == ("vLLM 0.20.2: the hybrid page rules (state page, block alignment, page unification) are "
                       "read in vLLM 0.32.0, 0.33.0, 0.34.0; this release's are not checked",)


def test_a_release_past_the_newest_read_warns():
    from kvlib.vllm.engine import UncheckedReleaseWarning
    with pytest.warns(UncheckedReleaseWarning, match="0.34.0"):
        assert page_plan(QWEN3_NEXT, 64, version="0.35.0").block_size == 576


def _gpu_log(tokens: str, concurrency: str, block_line: bool = True) -> str:
    head = "(EngineCore pid=1) INFO 01-01 00:00:00 [core.py:1] "
    worker = "(Worker rank=0 pid=2) INFO 01-01 00:00:01 [interface.py:1] "
    lines = [head + "Initializing a V1 LLM engine (v0.32.0) with config: model='Qwen/Qwen3-Next-80B-A3B-Thinking', "
                    "dtype=torch.bfloat16, max_seq_len=32768, tensor_parallel_size=4, pipeline_parallel_size=1, "
                    "kv_cache_dtype=auto, enable_prefix_caching=True"]
    if block_line:
        lines += [worker + "Setting attention block size to 272 tokens to ensure that attention page size is >= "
                           "mamba page size.",
                  worker + "Padding mamba page size by 1.49% to ensure that mamba page size and attention page size "
                           "are exactly equal."]
    lines += [worker + "Available KV cache memory: 20.00 GiB",
              head + f"GPU KV cache size: {tokens} tokens, Maximum concurrency for 32,768 tokens per request: "
                     f"{concurrency}x"]
    return "\n".join(lines)


def test_a_gpu_log_of_a_hybrid_is_predicted():
    # Qwen3-Next at TP 4 on vLLM 0.32.0: 272-token blocks, 12 x 278,528 = 3,342,336 B a block, 127 blocks a
    # 32,768-token request (worked above). 20.00 GiB printed stands for [19.995, 20.005) x 2^30 B:
    # 21,469,163,766 .. 21,479,901,184 B (ceil of each end), so N = 6,423 .. 6,426 blocks. N = 6,424 prints
    # int(6,424 / 127 x 32,768) = 1,657,493 tokens and 50.58x.
    from fractions import Fraction
    from kvlib.vllm import parse_log, predict_from_log
    lo = -(-Fraction(19995, 1000) * 2**30 // 1)
    hi = -(-Fraction(20005, 1000) * 2**30 // 1) - 1
    assert (lo // 3342336, hi // 3342336) == (6423, 6426)
    assert (int(6424 / 127 * 32768), f"{6424 / 127:.2f}") == (1657493, "50.58")
    [start] = parse_log(_gpu_log("1,657,493", "50.58"))
    p = predict_from_log(start, QWEN3_NEXT)
    assert (p.block_size, p.bytes_per_block, p.kv_cache_groups, p.blocks_min, p.blocks_max) == (
        272, 3342336, 4, 6423, 6426)
    assert p.agrees is True
    assert p.hybrid["state_page_bytes"] == 274432 and p.hybrid["mamba_padding_percent"] == "1.49"
    # Without the block line the log's block is unknown: the release's 16 is aligned to the same 272
    [start] = parse_log(_gpu_log("1,657,493", "50.58", block_line=False))
    p = predict_from_log(start, QWEN3_NEXT)
    assert (p.block_size, p.block_size_source, p.agrees) == (272, "hybrid alignment", True)
    # A full-attention reading of the same model (no state, 16-token blocks) would not fit the count
    [start] = parse_log(_gpu_log("1,000,000", "30.52"))
    assert predict_from_log(start, QWEN3_NEXT).agrees is False
