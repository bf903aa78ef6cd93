"""kvlib.vllm.layout: bytes per block on one rank, worked by hand (notes/vllm-kv-accounting.md, "Block count")."""

import pytest

from kvlib import load_model
from kvlib.spec import ModelSpec
from kvlib.vllm import VllmLogError
from kvlib.vllm.layout import (
    KV_CACHE_DTYPES,
    MLA_PACKED_BYTES,
    bytes_per_block,
    kv_cache_groups,
    kv_element_bytes,
    layer_page_bytes,
    pp_layer_split,
    stage_layouts,
)

LLAMA_8B = load_model("llama-3.1-8b")       # 32 layers, 8 KV heads of 128
DEEPSEEK_V3 = load_model("deepseek-v3")     # MLA: latent 512 + rope 64
GPT_OSS = load_model("gpt-oss-20b")         # 24 layers, 8 KV heads of 64, sliding and full alternating
# 7 layers, 4 sliding + 3 full: largest / smallest bucket = 4 / 3 = 1.33, between the two thresholds
HYBRID_4_3 = ModelSpec(name="hybrid", model_type="test", num_layers=7, num_heads=8, num_kv_heads=8, head_dim=64,
                       hidden_size=None, vocab_size=None, intermediate_size=None,
                       layer_kinds=("sliding",) * 4 + ("full",) * 3, sliding_window=128)


def test_uniform_model_kv_dtype_and_tp():
    # 32 layers x 16 x 8 x (128 + 128) x 2 B = 2 MiB; fp8 halves it; tp = 4 keeps 2 KV heads per rank
    assert bytes_per_block(LLAMA_8B) == 2 * 2**20
    assert bytes_per_block(LLAMA_8B, kv_cache_dtype="fp8") == 2**20
    assert bytes_per_block(LLAMA_8B, tp=4) == 2**19
    assert bytes_per_block(LLAMA_8B, block_size=32) == 4 * 2**20
    # pp = 2: 16 layers per stage
    assert bytes_per_block(LLAMA_8B, pp=2) == 2**20


def test_hybrid_v1_groups_against_v0_full_attention():
    # page 16 x 8 x (64 + 64) x 2 B = 32,768 B. V1: 12 sliding + 12 full -> groups of 12 layers;
    # V0 sizes all 24 layers as full attention
    assert bytes_per_block(GPT_OSS) == 12 * 32768
    assert bytes_per_block(GPT_OSS, engine="v0") == 24 * 32768


def test_group_size_follows_the_release():
    # 4 and 3 layers (vllm/v1/core/kv_cache_utils.py of each release): from 0.18 (threshold 1.5) 4 < 4.5 -> the
    # largest, 4 layers; in 0.12-0.17 (1.25) 4 >= 3.75 -> the smallest, 3; through 0.11 always the smallest.
    # Page 32,768 B as above.
    assert bytes_per_block(HYBRID_4_3, version="0.18.0") == 4 * 32768
    assert bytes_per_block(HYBRID_4_3) == 4 * 32768
    assert bytes_per_block(HYBRID_4_3, version="0.17.1") == 3 * 32768
    assert bytes_per_block(HYBRID_4_3, version="0.11.0") == 3 * 32768


# --- the element and the page --------------------------------------------------------------------------


@pytest.mark.parametrize("kv,model,expected", [
    (None, None, 2), ("auto", None, 2), ("AUTO", "bfloat16", 2), ("auto", "float32", 4), ("auto", "torch.float16", 2),
    ("auto", "int4", 2),            # sub-byte weights: the cache stays 16-bit
    ("auto", "fp8", 1),
    ("bfloat16", None, 2), ("float16", "float32", 2), ("fp8", None, 1), ("fp8_e4m3", None, 1),
    ("fp8_e5m2", None, 1), ("torch.fp8_inc", None, 1), ("fp8_ds_mla", None, 1), ("nvfp4_ds_mla", None, 1),
    # the 'torch.' prefix is dropped for the packed MLA layouts too, which kvlib's dtype table does not know
    ("torch.fp8_ds_mla", None, 1), ("Torch.NVFP4_DS_MLA", None, 1),
])
def test_kv_element_bytes(kv, model, expected):
    assert kv_element_bytes(kv, model) == expected


def test_kv_element_bytes_refuses_unknown_and_sub_byte_names():
    with pytest.raises(VllmLogError, match=r"^unknown model dtype 'fp6'$"):
        kv_element_bytes("auto", "fp6")
    for bad in ("int4", "fp6"):
        with pytest.raises(VllmLogError, match=rf"^unknown kv_cache_dtype '{bad}' \(known: auto, bfloat16, "):
            kv_element_bytes(bad)
    assert KV_CACHE_DTYPES == ("auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc",
                               "fp8_ds_mla", "nvfp4_ds_mla")
    # vLLM's packed MLA entries: fp8_ds_mla 656 B per token per layer, nvfp4_ds_mla 352 B
    assert MLA_PACKED_BYTES == {"fp8_ds_mla": 656, "nvfp4_ds_mla": 352}


def test_layer_page_bytes_by_hand():
    # 16 x 8 x (128 + 128) x 2 = 65,536; fp8 32,768; tp 16 replicates 1 head: 8,192; block 32 doubles it
    assert layer_page_bytes(LLAMA_8B) == 65536
    assert layer_page_bytes(LLAMA_8B, kv_cache_dtype="fp8") == 32768
    assert layer_page_bytes(LLAMA_8B, tp=16) == 8192
    assert layer_page_bytes(LLAMA_8B, 32) == 131072
    assert layer_page_bytes(LLAMA_8B, model_dtype="float32") == 131072
    # MLA: 16 x (512 + 64) x 2 = 18,432 on every rank; padded to 256 B per token (V0 0.7.2-0.7.3): 1,152 -> 1,280
    assert layer_page_bytes(DEEPSEEK_V3) == layer_page_bytes(DEEPSEEK_V3, tp=8) == 18432
    assert layer_page_bytes(DEEPSEEK_V3, mla_pad_256=True) == 16 * 1280
    assert layer_page_bytes(DEEPSEEK_V3, kv_cache_dtype="fp8") == 16 * 576
    assert layer_page_bytes(DEEPSEEK_V3, kv_cache_dtype="fp8_ds_mla") == 16 * 656
    assert layer_page_bytes(DEEPSEEK_V3, kv_cache_dtype="FP8_DS_MLA", mla_pad_256=True) == 16 * 656


def test_layer_page_bytes_refuses_with_the_field():
    for bad in (0, -16, 16.0):
        with pytest.raises(VllmLogError, match=rf"^block_size must be a positive integer, got {bad!r}$"):
            layer_page_bytes(LLAMA_8B, bad)
        with pytest.raises(VllmLogError, match=rf"^tensor_parallel_size must be a positive integer, got {bad!r}$"):
            layer_page_bytes(LLAMA_8B, tp=bad)
    with pytest.raises(VllmLogError, match=r"^kv_cache_dtype fp8_ds_mla is for MLA models only$"):
        layer_page_bytes(LLAMA_8B, kv_cache_dtype="fp8_ds_mla")
    with pytest.raises(VllmLogError, match=r"^tensor_parallel_size: tp=3 must divide num_kv_heads=8"):
        layer_page_bytes(LLAMA_8B, tp=3)


def test_pp_layer_split_by_hand():
    # vLLM's get_pp_indices: L // pp each, the remainder one each to the stages before the last, from the second-last
    assert pp_layer_split(61, 2) == [31, 30]
    assert pp_layer_split(10, 4) == [2, 3, 3, 2]
    assert pp_layer_split(11, 4) == [3, 3, 3, 2]
    assert pp_layer_split(32, 1) == [32]
    assert pp_layer_split(4, 4) == [1, 1, 1, 1]
    for bad in (0, 2.0):
        with pytest.raises(VllmLogError, match=rf"^pipeline_parallel_size must be a positive integer, got {bad!r}$"):
            pp_layer_split(32, bad)
    with pytest.raises(VllmLogError, match=r"^pipeline_parallel_size=5 exceeds the 4 layers$"):
        pp_layer_split(4, 5)


def test_kv_cache_groups_at_the_threshold():
    # notes/vllm-kv-accounting.md: group_size = the smallest bucket, or the largest if largest < 1.5 x smallest.
    # 3 sliding + 2 full: 3 = 1.5 x 2, not below it -> the smallest, 2; full ceil(2 / 2) = 1 group,
    # sliding ceil(3 / 2) = 2 groups (the second padded)
    assert kv_cache_groups(["sliding"] * 3 + ["full"] * 2) == (2, ("full", "sliding", "sliding"))
    # under 1.25 (0.11-0.14): 5 + 4, 5 = 1.25 x 4 -> the smallest, 4: full 1 group, sliding ceil(5 / 4) = 2
    assert kv_cache_groups(["sliding"] * 5 + ["full"] * 4, "1.25") == (4, ("full", "sliding", "sliding"))
    # just below: 4 + 3 under 1.25 gives 4 >= 3.75 -> 3; under 1.5, 4 < 4.5 -> the largest, 4: one group each
    assert kv_cache_groups(["sliding"] * 4 + ["full"] * 3, "1.5") == (4, ("full", "sliding"))


def test_kv_cache_groups_refuses_a_rank_without_kv_layers():
    with pytest.raises(VllmLogError, match=r"^no layer keeps a KV cache$"):
        kv_cache_groups([])


def _spec(kinds, **extra):
    return ModelSpec(name="pattern", model_type="test", num_layers=len(kinds), num_heads=8, num_kv_heads=8,
                     head_dim=64, hidden_size=None, vocab_size=None, intermediate_size=None, layer_kinds=kinds,
                     **extra)


def test_pp_stages_take_consecutive_layers():
    # 6 layers over pp = 3: 2 + 2 + 2 (6 // 3, no remainder). Kinds full, none, none, full, full, full: stage 1
    # holds layers 0-1 (1 KV layer), stage 2 layers 2-3 (1), stage 3 layers 4-5 (2). V0 (which sizes
    # layers without KV out, unlike V1's refusal of Mamba hybrids): the busiest stage's block is
    # 2 layers x 16 x 8 x (64 + 64) x 2 B = 2 x 32,768 = 65,536 B
    assert bytes_per_block(_spec(("full", "none", "none", "full", "full", "full")), pp=3, engine="v0") == 65536


def test_block_size_one_and_mla_in_the_model_dtype():
    # a block of one token is a valid block: 1 x 8 x (128 + 128) x 2 = 4,096 B
    assert layer_page_bytes(LLAMA_8B, 1) == 4096
    # 'auto' caches in the model's dtype for MLA too: 16 x (512 + 64) x 4 B = 36,864 in float32
    assert layer_page_bytes(DEEPSEEK_V3, model_dtype="float32") == 36864


def test_stage_layouts_refusals_name_the_case():
    # pp = 2 over none, none, full, full: stage 1 (layers 0-1) keeps no KV cache
    with pytest.raises(VllmLogError, match=r"^pipeline stage without a KV-cache layer \(pp=2\); not modelled$"):
        bytes_per_block(_spec(("none", "none", "full", "full")), pp=2, engine="v0")
    # A layer that keeps nothing (an MLP-only block) has no page: V0 and V1 size the one full layer
    assert bytes_per_block(_spec(("full", "none")), engine="v1") == 32768        # 1 layer x 32,768 B
    assert bytes_per_block(_spec(("full", "none")), engine="v0") == 32768
    # State layers need V1's hybrid page plan: V0 (which had its own Mamba cache) is refused in one line
    mamba = dict(mamba_num_heads=8, mamba_head_dim=64, mamba_intermediate_size=512, mamba_n_groups=1,
                 mamba_state_size=64, mamba_conv_kernel=4)
    with pytest.raises(VllmLogError, match=r"^pattern: V0 with state layers or per-layer geometry is not modelled$"):
        bytes_per_block(_spec(("full", "mamba2"), **mamba), engine="v0")
    # ... and so is a stage layout asked for without the plan (kvlib.vllm.hybrid.page_plan)
    with pytest.raises(VllmLogError, match=r"^pattern: layers of different pages .* need vLLM's page plan"):
        stage_layouts(_spec(("full", "mamba2"), **mamba), "v1", 1, "1.5", 32768)
    # pp = 2 over sliding, full | sliding, sliding: stage 1 has groups (full, sliding) of 1 layer, stage 2 one
    # sliding group of 2 -- two different group sets
    with pytest.raises(VllmLogError, match=r"^pipeline stages with different KV-cache groups are not modelled$"):
        bytes_per_block(_spec(("sliding", "full", "sliding", "sliding"), sliding_window=128), pp=2)


def test_mla_pad_256_rounds_up_to_the_next_256_bytes():
    # latent 450 + rope 64 = 514 elements x 2 B = 1,028 B per token, 4 B past 4 x 256 = 1,024: padded to
    # 5 x 256 = 1,280 B; a block of 16 tokens 20,480 B. An exact multiple stays: 448 + 64 = 512 x 2 = 1,024 B
    assert layer_page_bytes(_spec(("full",), kv_lora_rank=450, qk_rope_head_dim=64), mla_pad_256=True) == 20480
    assert layer_page_bytes(_spec(("full",), kv_lora_rank=448, qk_rope_head_dim=64), mla_pad_256=True) == 16384


def test_fp8_ds_mla_token_bytes_from_the_layout():
    """vLLM's flashmla_sparse.py: 512 fp8 latent bytes + 4 float32 scales (one per 128) + 64 bf16 RoPE numbers."""
    from kvlib.vllm.layout import MLA_PACKED_BYTES, fp8_ds_mla_token_bytes
    assert fp8_ds_mla_token_bytes(512, 64) == 512 * 1 + 4 * 4 + 64 * 2 == 656
    assert MLA_PACKED_BYTES["fp8_ds_mla"] == 656
    from kvlib.vllm.layout import layer_page_bytes
    v3 = load_model("deepseek-v3")
    assert layer_page_bytes(v3, 64, "fp8_ds_mla") == 64 * 656
    assert layer_page_bytes(v3, 64, "fp8") == 64 * (512 + 64)
