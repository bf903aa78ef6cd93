"""Parameter counts within 1% of the published counts (model cards / papers)."""

import pytest

import kvlib as kv

# Published totals: model cards and technical reports.
PUBLISHED = {
    "meta-llama/Llama-3.1-8B": 8.03e9,
    "meta-llama/Llama-3.3-70B-Instruct": 70.55e9,
    "meta-llama/Llama-2-7b-hf": 6.74e9,
    "meta-llama/Llama-2-70b-chat-hf": 68.98e9,
    "Qwen/Qwen2.5-7B": 7.62e9,
    "Qwen/Qwen2.5-32B": 32.76e9,
    "mistralai/Mistral-7B-v0.1": 7.24e9,
    "mistralai/Mixtral-8x7B-v0.1": 46.70e9,
    "deepseek-ai/DeepSeek-V3": 671e9,
    "openai/gpt-oss-20b": 20.9e9,
    "google/gemma-2-9b-it": 9.24e9,
    "microsoft/Phi-3-mini-4k-instruct": 3.82e9,
    "openai-community/gpt2-large": 774e6,
    "Qwen/Qwen3-0.6B": 0.6e9,
    "Qwen/Qwen2.5-3B": 3.09e9,                 # Qwen2.5-3B model card: 3.09B
    # the 2025-26 families
    "Qwen/Qwen3-30B-A3B": 30.5e9,              # model card: 30.5B in total, 3.3B activated
    "Qwen/Qwen3-Next-80B-A3B-Thinking": 80e9,  # model card: 80B in total, 3B activated
    "deepseek-ai/DeepSeek-V3.2": 671e9,        # 671B without the 14B MTP module (685B with it)
    "zai-org/GLM-5": 744e9,                    # GLM-5 release: 744B parameters, 40B active
    "google/gemma-4-26B-A4B": 25.2e9,          # model card: 25.2B total, 3.8B active (language model)
    "openai/gpt-oss-120b": 116.83e9,           # gpt-oss model card: 116.83B total, 5.13B active
    "nvidia/Nemotron-H-56B-Base-8K": 56e9,     # Nemotron-H report: the 56B model
    "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16": 31.6e9,          # model card: 31.6B total
    "nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16": 550e9,        # the model's name: 550B, 55B active
}

# Active parameters per token, where the publisher states them.
PUBLISHED_ACTIVE = {
    "mistralai/Mixtral-8x7B-v0.1": 12.9e9,   # Mixtral paper: 13B active
    "deepseek-ai/DeepSeek-V3": 37e9,         # DeepSeek-V3 report: 37B activated
    "openai/gpt-oss-20b": 3.6e9,             # gpt-oss model card: 3.6B active (excl. embeddings)
}


@pytest.mark.parametrize("model_id", sorted(PUBLISHED))
def test_total_within_one_percent(model_id):
    count = kv.load_model(model_id).num_params()
    assert abs(count / PUBLISHED[model_id] - 1) < 0.01, count


def test_llama_8b_by_hand():
    # embed 128256 x 4096 twice (untied) + 32 x (attn 4096*(4096+1024+1024+4096)
    # + mlp 3*4096*14336 + 2 norms 4096) + final norm 4096
    d, ff, V = 4096, 14336, 128256
    layer = d * (d + 1024 + 1024 + d) + 3 * d * ff + 2 * d
    assert kv.load_model("llama-3.1-8b").num_params() == 2 * V * d + 32 * layer + d


def test_active_parameters():
    mixtral = kv.load_model("mixtral-8x7b")
    assert abs(mixtral.num_params_active() / PUBLISHED_ACTIVE["mistralai/Mixtral-8x7B-v0.1"] - 1) < 0.01
    v3 = kv.load_model("deepseek-v3")
    assert abs(v3.num_params_active() / 37e9 - 1) < 0.03
    oss = kv.load_model("gpt-oss-20b")
    # the card's 3.6B excludes the embedding table (201,088 x 2,880 = 0.58B)
    assert abs((oss.num_params_active() - 201_088 * 2_880) / 3.6e9 - 1) < 0.03
    dense = kv.load_model("llama-3.1-8b")
    assert dense.num_params_active() == dense.num_params()


def test_totals_published_only_roughly():
    # Llama 4 Scout: "17B active, 109B total" with the vision encoder (about 0.9B), which the trimmed bundled
    # config leaves out: the language model alone is 107.77B, 1.1% under.
    scout = kv.load_model("llama-4-scout")
    assert 0.985 < scout.num_params() / 109e9 < 1 and abs(scout.num_params_active() / 17e9 - 1) < 0.015
    # Kimi K2: "1T total, 32B activated", both rounded: 1,026.4B and 32.9B
    kimi = kv.load_model("kimi-k2")
    assert abs(kimi.num_params() / 1e12 - 1) < 0.03 and abs(kimi.num_params_active() / 32e9 - 1) < 0.03


@pytest.mark.parametrize("model,active", [
    ("qwen3-30b-a3b", 3.3e9),
    ("gemma-4-26b-a4b", 3.8e9),
    # the cards count without the input embedding (gpt-oss: 201,088 x 2,880) or with both tables (Nemotron 3 Nano:
    # "3.2B active, 3.6B including embeddings")
    ("gpt-oss-120b", 5.13e9 + 201_088 * 2_880),
    ("nemotron-3-nano", 3.6e9),
])
def test_active_parameters_of_the_2025_26_families(model, active):
    assert abs(kv.load_model(model).num_params_active() / active - 1) < 0.02      # the cards round to 0.1B


def test_llama_4_scout_counts_its_shared_expert():
    # d 5,120, 48 layers, all MoE (interleave_moe_layer_step 1): 16 routed experts of 8,192, top 1, and one
    # shared expert of 8,192 in every layer (vLLM llama4.py Llama4MoE.shared_expert); 40 heads / 8 KV of 128;
    # vocabulary 202,048, untied. Attention 2 x 5,120^2 + 2 x 5,120 x 1,024 = 62,914,560; expert
    # 3 x 5,120 x 8,192 = 125,829,120; router 5,120 x 16 = 81,920; norms 10,240.
    # Layer: 62,914,560 + 17 x 125,829,120 + 81,920 + 10,240 = 2,202,101,760, x 48 = 105,700,884,480;
    # + embed and head 2 x 202,048 x 5,120 = 2,068,971,520 + final norm 5,120 = 107,769,861,120
    # (without the shared expert: 48 x 125,829,120 = 6,039,797,760 less, the 101.7B kvlib used to print).
    # Active: 62,914,560 + 2 x 125,829,120 + 92,160 = 314,664,960, x 48 + 2,068,976,640 = 17,172,894,720.
    spec = kv.load_model("llama-4-scout")
    assert (spec.num_params(), spec.num_params_active()) == (107_769_861_120, 17_172_894_720)


def test_qwen3_next_gated_deltanet_and_gated_attention():
    # d 2,048, 48 layers: 12 full attention (16 heads / 2 KV of 256; q_proj also yields a gate per head, so
    # 2 x 16 x 256 wide; q_norm and k_norm 256 each) and 36 Gated DeltaNet (16 key heads and 32 value heads of 128,
    # conv 4): every layer an MoE of 512 experts of 512, top 10, a shared expert of 512 with its gate.
    # Attention: 2,048 x 8,192 + 2 x 2,048 x 512 + 4,096 x 2,048 + 512 = 27,263,488.
    # GDN: in_proj_qkvz 2,048 x (2 x 2,048 + 2 x 4,096) = 25,165,824; in_proj_ba 2,048 x 64 = 131,072;
    # conv (2 x 2,048 + 4,096) x 4 = 32,768; A and dt bias 64; gated norm 128; out 4,096 x 2,048 = 8,388,608:
    # 33,718,464. Expert 3 x 2,048 x 512 = 3,145,728; MoE 513 x 3,145,728 + gate 2,048 + router 2,048 x 512
    # = 1,614,809,088. Norms 4,096 per layer.
    # 12 x 1,642,076,672 + 36 x 1,648,531,648 + embed and head 2 x 151,936 x 2,048 + 2,048 = 79,674,391,296.
    spec = kv.load_model("qwen3-next")
    assert spec.num_params() == 79_674_391_296
    # top 10 + shared: 11 x 3,145,728 + 2,048 + 1,048,576 = 35,653,632 per layer's MoE
    assert spec.num_params_active() == 12 * (27_263_488 + 35_653_632 + 4_096) + 36 * (
        33_718_464 + 35_653_632 + 4_096) + 2 * 151_936 * 2_048 + 2_048 == 3_874_929_408


def test_nemotron_3_nano_mamba2_attention_and_moe_blocks():
    # d 2,688; 52 blocks, each one mixer and one norm: 23 Mamba2, 6 attention, 23 MoE (vLLM nemotron_h.py).
    # Mamba2 (64 heads of 64, 8 groups, state 128, conv 4 with bias): conv width 4,096 + 2 x 8 x 128 = 6,144;
    # in_proj 2,688 x (4,096 + 6,144 + 64) = 27,697,152; conv 6,144 x 4 + 6,144 = 30,720; A, D, dt 192;
    # norm 4,096; out 4,096 x 2,688 = 11,010,048: 38,742,208.
    # Attention (32 heads / 2 KV of 128): 2 x 2,688 x 4,096 + 2 x 2,688 x 256 = 23,396,352.
    # MoE: 128 experts up/down relu2 2 x 2,688 x 1,856 = 9,977,856 each; shared expert 2 x 2,688 x 3,712
    # = 19,955,712 (no gate); router 2,688 x 128 + a correction bias of 128 = 344,192: 1,297,465,472.
    # 23 x 38,744,896 + 6 x 23,399,040 + 23 x 1,297,468,160 + 2 x 131,072 x 2,688 + 2,688 = 31,577,940,288.
    spec = kv.load_model("nemotron-3-nano")
    assert spec.num_params() == 31_577_940_288
    assert spec.num_params_active() == 3_580_076_352      # 6 of 128 experts: 23 x 1,237,590,528 fewer


def test_gemma_4_per_layer_geometry_and_moe_beside_the_mlp():
    # d 2,816, 30 layers: 25 sliding (16 heads of 256, 8 KV heads), 5 full (16 heads of 512, 2 KV heads, K used as V:
    # no v_proj); q_norm and k_norm of the layer's head size. Every layer: a dense MLP of 2,112 and an MoE of 128
    # experts of 704 (top 8) beside it, 7 norms; vocabulary 262,144, tied.
    # Sliding: 2,816 x 4,096 + 2 x 2,816 x 2,048 + 4,096 x 2,816 + 512 = 34,603,520.
    # Full: 2,816 x 8,192 + 2,816 x 1,024 + 8,192 x 2,816 + 1,024 = 49,021,952.
    # MLP 3 x 2,816 x 2,112 = 17,842,176; expert 3 x 2,816 x 704 = 5,947,392; router 2,816 x 128 = 360,448.
    # (The router's two scale vectors, 2,816 + 128 a layer, are not counted: 3e-6 of the total.)
    d, mlp, expert, router = 2_816, 17_842_176, 5_947_392, 360_448
    total = (25 * (34_603_520 + mlp + 128 * expert + router + 7 * d) + 5 * (49_021_952 + mlp + 128 * expert + router
             + 7 * d) + 262_144 * d + d)
    spec = kv.load_model("gemma-4-26b-a4b")
    assert spec.num_params() == total == 25_233_053_440
    assert spec.num_params_active() == total - 30 * 120 * expert == 3_822_442_240


def test_deepseek_v3_2_adds_the_indexer():
    # per layer: wq_b 1,536 x 64 x 128 = 12,582,912; wk 7,168 x 128 = 917,504; k_norm 2 x 128; weights_proj
    # 7,168 x 64 = 458,752: 13,959,424, x 61 = 851,524,864 over DeepSeek-V3 (same widths otherwise)
    assert kv.load_model("deepseek-v3.2").num_params() == 671_026_404_352 + 851_524_864


def test_mtp_excluded_and_reported_apart():
    v3 = kv.load_model("deepseek-v3")
    # DeepSeek-V3 report: 671B main model + 14B MTP module (which shares the
    # 0.93B embedding and 0.93B head): about 11.5-12B of its own
    assert 11e9 < v3.num_params_mtp() < 12.5e9
    assert kv.load_model("llama-3.1-8b").num_params_mtp() == 0


def test_weight_bytes_by_precision():
    spec = kv.load_model("llama-3.1-8b")
    n = spec.num_params()
    assert spec.weight_bytes(2) == 2 * n
    assert spec.weight_bytes(1) == n
    assert spec.weight_bytes(0.5) == (n + 1) // 2


# --- exact counts, worked by hand from each config.json; each total is also the count Hugging Face publishes
# for the checkpoint (safetensors metadata), so the hand arithmetic and the published figure agree to the unit.
def test_gpt2_large_biases_learned_positions_and_a_tied_head():
    # d 1,280, 36 layers, 20 heads of 64, FFN 5,120 (ungated, GELU), vocabulary 50,257, 1,024 positions, tied.
    # wte 50,257 x 1,280 = 64,328,960 + wpe 1,024 x 1,280 = 1,310,720 = 65,639,680.
    # Per layer: c_attn 1,280 x 3,840 + 3,840 = 4,919,040; attn c_proj 1,280^2 + 1,280 = 1,639,680;
    # c_fc 1,280 x 5,120 + 5,120 = 6,558,720; mlp c_proj 5,120 x 1,280 + 1,280 = 6,554,880;
    # ln_1, ln_2 with biases 4 x 1,280 = 5,120: 19,677,440, x 36 = 708,387,840. ln_f 2,560.
    # 65,639,680 + 708,387,840 + 2,560 = 774,030,080 (GPT-2 large: 774M).
    spec = kv.load_model("gpt2-large")
    assert spec.num_params() == 774_030_080 == spec.num_params_active()


def test_qwen2_5_3b_tied_embeddings():
    # d 2,048, 36 layers, 16 heads / 2 KV of 128, FFN 11,008, vocabulary 151,936, tied (one embedding matrix).
    # Per layer: q, o 2 x 2,048^2 = 8,388,608; k, v 2 x 2,048 x 256 = 1,048,576; biases 2,048 + 512 = 2,560;
    # MLP 3 x 2,048 x 11,008 = 67,633,152; norms 4,096: 77,076,992 per layer; embed 151,936 x 2,048.
    layer = 8_388_608 + 1_048_576 + 2_560 + 67_633_152 + 4_096
    assert kv.load_model("qwen2.5-3b").num_params() == 36 * layer + 151_936 * 2_048 + 2_048 == 3_085_938_688


def test_qwen2_5_7b_qkv_biases():
    # d 3,584, 28 layers, 28 heads / 4 KV of 128, FFN 18,944, vocabulary 152,064, untied.
    # embed + head 2 x 152,064 x 3,584 = 1,089,994,752. Per layer: q, o 2 x 3,584^2 = 25,690,112;
    # k, v 2 x 3,584 x 512 = 3,670,016; q/k/v biases 3,584 + 1,024 = 4,608; MLP 3 x 3,584 x 18,944
    # = 203,685,888; norms 7,168: 233,057,792, x 28 = 6,525,618,176. Final norm 3,584.
    assert kv.load_model("qwen2.5-7b").num_params() == 1_089_994_752 + 6_525_618_176 + 3_584 == 7_615_616_512


def test_gemma_2_four_norms_per_layer_and_a_tied_head():
    # d 3,584, 42 layers, 16 heads / 8 KV of 256, FFN 14,336, vocabulary 256,000, tied.
    # embed 256,000 x 3,584 = 917,504,000. Per layer: q, o 2 x 3,584 x 4,096 = 29,360,128; k, v
    # 2 x 3,584 x 2,048 = 14,680,064; MLP 3 x 3,584 x 14,336 = 154,140,672; four norms 14,336:
    # 198,195,200, x 42 = 8,324,198,400. Final norm 3,584. Total 9,241,705,984.
    assert kv.load_model("gemma-2-9b").num_params() == 9_241_705_984


def test_gpt_oss_20b_sinks_biases_and_experts():
    # d 2,880, 24 layers, 64 heads / 8 KV of 64, 32 experts (FFN 2,880, gated, biased), top 4,
    # vocabulary 201,088, untied. embed + head 2 x 201,088 x 2,880 = 1,158,266,880.
    # Attention: q, o 2 x 2,880 x 4,096 = 23,592,960; k, v 2 x 2,880 x 512 = 2,949,120; q/k/v biases
    # 4,096 + 1,024 = 5,120; o bias 2,880; one sink per head 64: 26,550,144.
    # Expert 3 x 2,880^2 + biases 2 x 2,880 + 2,880 = 24,891,840; router 2,880 x 32 + 32 = 92,192; norms 5,760.
    # All 32 experts: 26,550,144 + 796,538,880 + 92,192 + 5,760 = 823,186,976 per layer, x 24 = 19,756,487,424;
    # + 1,158,266,880 + final norm 2,880 = 20,914,757,184.
    # Top 4: 26,550,144 + 99,567,360 + 92,192 + 5,760 = 126,215,456, x 24 = 3,029,170,944; + 1,158,269,760
    # = 4,187,440,704 (the card's 3.61B active leaves out the 579,133,440 embedding: 3,608,307,264).
    spec = kv.load_model("gpt-oss-20b")
    assert spec.num_params() == 20_914_757_184
    assert spec.num_params_active() == 4_187_440_704


def test_mixtral_all_experts_and_two_active():
    # d 4,096, 32 layers, 32 heads / 8 KV of 128, 8 experts of FFN 14,336, top 2, vocabulary 32,000, untied.
    # Attention 4,096 x 10,240 = 41,943,040; expert 3 x 4,096 x 14,336 = 176,160,768; router 4,096 x 8 = 32,768;
    # norms 8,192. All: 1,451,270,144 x 32 = 46,440,644,608 + embed/head 262,144,000 + 4,096 = 46,702,792,704.
    # Two: 394,305,536 x 32 = 12,617,777,152 + 262,148,096 = 12,879,925,248 (the paper: 13B active).
    spec = kv.load_model("mixtral-8x7b")
    assert (spec.num_params(), spec.num_params_active()) == (46_702_792_704, 12_879_925_248)


def test_deepseek_v3_mla_shared_expert_dense_layers_and_mtp():
    # d 7,168, 61 layers (first 3 dense, FFN 18,432; 58 MoE: 256 routed + 1 shared expert of 2,048, top 8),
    # 128 heads, q_lora 1,536, kv_lora 512, nope 128, rope 64, v 128, vocabulary 129,280, untied.
    # embed + head 2 x 129,280 x 7,168 = 1,853,358,080; final norm 7,168.
    # Attention: q 7,168 x 1,536 + norm 1,536 + 1,536 x 128 x 192 = 48,760,320; kv 7,168 x 576 + norm 512
    # + 512 x 128 x 256 = 20,906,496; o 128 x 128 x 7,168 = 117,440,512: 187,107,328. Norms 14,336.
    # Dense layer: + 3 x 7,168 x 18,432 = 396,361,728: 583,483,392.
    # Expert 3 x 7,168 x 2,048 = 44,040,192; router 7,168 x 256 = 1,835,008.
    # MoE layer, all: 187,107,328 + 257 x 44,040,192 + 1,835,008 + 14,336 = 11,507,286,016.
    # Total 1,853,365,248 + 3 x 583,483,392 + 58 x 11,507,286,016 = 671,026,404,352 (the report: 671B).
    # Active: 187,107,328 + 9 x 44,040,192 + 1,835,008 + 14,336 = 585,318,400 per MoE layer:
    # 1,853,365,248 + 1,750,450,176 + 58 x 585,318,400 = 37,552,282,624 (the report: 37B).
    # MTP: 3 norms 21,504 + projection 2 x 7,168^2 = 102,760,448 + one MoE layer = 11,610,067,968.
    # (Hugging Face lists 671,026,419,200 for the main model: 14,848 more, the 256 e_score_correction_bias
    # of each of the 58 routers, which kvlib does not count -- 2e-8 of the total.)
    spec = kv.load_model("deepseek-v3")
    assert spec.num_params() == 671_026_404_352
    assert spec.num_params_active() == 37_552_282_624
    assert spec.num_params_mtp() == 11_610_067_968


# DeepSeek-V2-Lite's config.json (deepseek-ai/DeepSeek-V2-Lite): MLA without a query LoRA.
V2_LITE = dict(architectures=["DeepseekV2ForCausalLM"], model_type="deepseek_v2", hidden_size=2048,
               intermediate_size=10944, moe_intermediate_size=1408, n_routed_experts=64, n_shared_experts=2,
               num_experts_per_tok=6, first_k_dense_replace=1, moe_layer_freq=1, num_attention_heads=16,
               num_key_value_heads=16, num_hidden_layers=27, vocab_size=102400, kv_lora_rank=512, q_lora_rank=None,
               qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128, tie_word_embeddings=False,
               max_position_embeddings=163840, torch_dtype="bfloat16")


def test_deepseek_v2_lite_mla_without_query_lora():
    # embed + head 2 x 102,400 x 2,048 = 419,430,400; final norm 2,048.
    # Attention: q 2,048 x 16 x 192 = 6,291,456; kv 2,048 x 576 + 512 + 512 x 16 x 256 = 3,277,312;
    # o 16 x 128 x 2,048 = 4,194,304: 13,763,072. Norms 4,096.
    # Layer 0 dense: + 3 x 2,048 x 10,944 = 67,239,936: 81,007,104.
    # Expert 3 x 2,048 x 1,408 = 8,650,752; router 2,048 x 64 = 131,072.
    # MoE layer: 13,763,072 + 66 x 8,650,752 + 131,072 + 4,096 = 584,847,872, x 26 = 15,206,044,672.
    # Total 15,706,484,224 (the model card: 15.7B). Active: 8 experts (6 routed + 2 shared)
    # 13,763,072 + 69,206,016 + 131,072 + 4,096 = 83,104,256, x 26 = 2,160,710,656 + 81,007,104 + 419,432,448
    # = 2,661,150,208 (the card's 2.4B leaves out the 209,715,200 embedding: 2,451,435,008).
    spec = kv.load_model(V2_LITE, name="deepseek-v2-lite")
    assert (spec.num_params(), spec.num_params_active()) == (15_706_484_224, 2_661_150_208)
    assert spec.num_params_mtp() == 0


# Qwen1.5-MoE-A2.7B's config.json (Qwen/Qwen1.5-MoE-A2.7B): a shared expert of its own width, with a gate.
QWEN_MOE = dict(architectures=["Qwen2MoeForCausalLM"], model_type="qwen2_moe", hidden_size=2048,
                intermediate_size=5632, moe_intermediate_size=1408, shared_expert_intermediate_size=5632,
                num_experts=60, num_experts_per_tok=4, num_attention_heads=16, num_key_value_heads=16,
                num_hidden_layers=24, vocab_size=151936, tie_word_embeddings=False, decoder_sparse_step=1,
                mlp_only_layers=[], max_position_embeddings=8192, use_sliding_window=False, torch_dtype="bfloat16")


def test_qwen_moe_shared_expert_with_its_own_width():
    # embed + head 2 x 151,936 x 2,048 = 622,329,856; final norm 2,048.
    # Attention 4 x 2,048^2 = 16,777,216 + q/k/v biases 3 x 2,048 = 16,783,360; norms 4,096.
    # Expert 3 x 2,048 x 1,408 = 8,650,752; shared 3 x 2,048 x 5,632 = 34,603,008 + its gate 2,048;
    # router 2,048 x 60 = 122,880. All 60: 519,045,120 + 34,605,056 + 122,880 = 553,773,056;
    # layer 570,560,512, x 24 = 13,693,452,288. Total 14,315,784,192 (the card: 14.3B).
    # Top 4: 34,603,008 + 34,605,056 + 122,880 + 16,783,360 + 4,096 = 86,118,400, x 24 = 2,066,841,600
    # + 622,331,904 = 2,689,173,504 (the card: A2.7B).
    spec = kv.load_model(QWEN_MOE, name="qwen1.5-moe-a2.7b")
    assert (spec.num_params(), spec.num_params_active()) == (14_315_784_192, 2_689_173_504)


def test_a_missing_width_is_named():
    # Llama 3.1 8B without intermediate_size: the MLP cannot be counted, and the error says which field
    config = dict(kv.bundled_config("llama-3.1-8b"))
    del config["intermediate_size"]
    spec = kv.load_model(config, name="no-ffn")
    with pytest.raises(kv.ParamsError) as info:
        spec.num_params()
    assert str(info.value).startswith("missing field intermediate_size")
    assert str(info.value).endswith(": the parameter count needs it")
    config = dict(kv.bundled_config("llama-3.1-8b"))
    del config["vocab_size"]
    with pytest.raises(kv.ParamsError, match="^missing field vocab_size"):
        kv.load_model(config, name="no-vocab").num_params_active()


def test_mtp_layer_is_like_the_last_layer():
    # DeepSeek V3 with only its last layer MoE (first_k_dense_replace 60): the MTP module still holds one MoE
    # layer, 3 norms 21,504 + 2 x 7,168^2 = 102,760,448 + 11,507,286,016 (above) = 11,610,067,968.
    config = dict(kv.bundled_config("deepseek-v3"), first_k_dense_replace=60)
    assert kv.load_model(config, name="v3-last-moe").num_params_mtp() == 11_610_067_968
    # all 61 layers dense: the MTP layer is dense too, 21,504 + 102,760,448 + 583,483,392 = 686,265,344
    config = dict(kv.bundled_config("deepseek-v3"), first_k_dense_replace=61)
    assert kv.load_model(config, name="v3-dense").num_params_mtp() == 686_265_344


def test_shared_experts_by_count_and_by_width_add_up():
    # Qwen1.5-MoE-A2.7B (above) given one DeepSeek-style shared expert as well (n_shared_experts 1): each of the
    # 24 layers gains one more expert of 3 x 2,048 x 1,408 = 8,650,752, 207,618,048 in all, on top of the
    # Qwen-style shared expert: 14,315,784,192 + 207,618,048 = 14,523,402,240.
    spec = kv.load_model(dict(QWEN_MOE, n_shared_experts=1), name="qwen-moe-plus-one")
    assert spec.num_params() == 14_523_402_240


def test_ungated_mlp_without_biases():
    # Falcon-7B's MLP (its config.json: bias false; modelling_falcon: dense_h_to_4h 4,544 -> 18,176 and
    # dense_4h_to_h back, GELU, no gate): 2 x 4,544 x 18,176 = 165,183,488 per layer.
    from kvlib.params import _mlp_params
    falcon = kv.load_model({"model_type": "falcon", "architectures": ["FalconForCausalLM"], "hidden_size": 4544,
                            "n_head": 71, "n_layer": 32, "vocab_size": 65024, "multi_query": True,
                            "parallel_attn": True, "bias": False}, name="falcon-7b")
    assert (falcon.mlp_gated, falcon.mlp_bias, falcon.intermediate_size) == (False, False, 18_176)
    assert _mlp_params(falcon, falcon.intermediate_size) == 165_183_488


def test_embedding_count():
    # Llama 3.1 8B: 128,256 x 4,096 = 525,336,576 (the head is apart); GPT-2 large: token table 50,257 x 1,280
    # = 64,328,960 + 1,024 learned positions x 1,280 = 1,310,720 -> 65,639,680
    from kvlib.params import count_params
    assert count_params(kv.load_model("llama-3.1-8b")).embedding == 525_336_576
    assert count_params(kv.load_model("gpt2-large")).embedding == 65_639_680


def test_a_spec_built_by_hand_names_the_missing_width():
    # a ModelSpec made directly (no config reader, so no list of config names): the spec field is named
    spec = kv.ModelSpec(name="bare", model_type="llama", num_layers=2, num_heads=4, num_kv_heads=4, head_dim=64,
                        hidden_size=256, vocab_size=None, intermediate_size=512)
    with pytest.raises(kv.ParamsError) as info:
        spec.num_params()
    assert str(info.value) == "missing field vocab_size: the parameter count needs it"


def test_a_dense_spec_needs_no_top_k():
    # no experts, top-k unknown: the count does not ask for it. 2 layers of d 256, 4 heads of 64, FFN 512,
    # vocabulary 100, untied: 2 x 100 x 256 = 51,200 + 2 x (4 x 256^2 + 3 x 256 x 512 + 2 x 256) + 256
    # = 51,200 + 2 x 655,872 + 256 = 1,363,200
    spec = kv.ModelSpec(name="bare", model_type="llama", num_layers=2, num_heads=4, num_kv_heads=4, head_dim=64,
                        hidden_size=256, vocab_size=100, intermediate_size=512, num_experts_per_tok=None)
    assert spec.num_params() == spec.num_params_active() == 1_363_200


def test_qwen3_counts_its_query_and_key_norms():
    # Qwen3-0.6B (its config.json): d 1,024, 28 layers, 16 heads / 8 KV of 128, FFN 3,072, vocabulary 151,936,
    # tied. transformers' Qwen3Attention adds q_norm and k_norm, one RMSNorm weight of head_dim (128) each.
    # embed 151,936 x 1,024 = 155,582,464. Per layer: q, o 2 x 1,024 x 2,048 = 4,194,304; k, v 2 x 1,024 x 1,024
    # = 2,097,152; q/k norms 256; MLP 3 x 1,024 x 3,072 = 9,437,184; norms 2,048: 15,730,944, x 28 = 440,466,432.
    # Final norm 1,024. Total 596,049,920 (the card: 0.6B, 0.44B without the embedding: 440,467,456).
    assert kv.load_model("qwen3-0.6b").num_params() == 596_049_920


def test_deepseek_v3_attention_split_by_hand():
    """DeepSeek-V3's config.json: hidden 7168, 128 heads, q_lora_rank 1536, qk_nope/rope 128/64,
    kv_lora_rank 512, v_head_dim 128, 61 layers, 256 routed experts of width 2048 in layers 3-60.
    The per-layer terms are written out here from those fields, not taken from kvlib."""
    from kvlib.params import mla_attention_params_per_rank, split_params
    v3 = kv.load_model("deepseek-v3")
    q_a, q_norm, q_b = 7168 * 1536, 1536, 1536 * 128 * (128 + 64)
    kv_a, kv_norm, kv_b = 7168 * (512 + 64), 512, 512 * 128 * (128 + 128)
    o = 128 * 128 * 7168
    split = split_params(v3)
    assert split.attention == 61 * (q_a + q_norm + q_b + kv_a + kv_norm + kv_b + o) == 11_413_547_008
    assert split.routed_experts == 58 * 256 * 3 * 7168 * 2048
    assert split.total == v3.num_params()
    # vLLM keeps q_a / kv_a (fused_qkv_a_proj, disable_tp=True) and their norms whole on every rank
    per_rank8 = mla_attention_params_per_rank(v3, 8)
    assert per_rank8 == 61 * (q_a + q_norm + kv_a + kv_norm + (q_b + kv_b + o) // 8)
    # data-parallel attention: every rank holds all of it, about 9.2 B parameters (9.2 GB in FP8) more than TP 8
    assert 9.1e9 < split.attention - per_rank8 < 9.25e9


def test_mla_attention_per_rank_refuses_gqa_and_bad_tp():
    from kvlib.params import mla_attention_params_per_rank
    with pytest.raises(kv.ParamsError, match="MLA"):
        mla_attention_params_per_rank(kv.load_model("llama-3.1-8b"), 1)
    with pytest.raises(kv.ParamsError, match="tp"):
        mla_attention_params_per_rank(kv.load_model("deepseek-v3"), 3)


def test_ch03_question4_dp_attention_count():
    """ch03 Question 4: 50 GB per GPU under TP 8; DP attention copies the attention weights (FP8, 1 B each).
    Independent arithmetic: 61 x 187,107,328 attention parameters whole, 61 x (15,140,864 + 171,966,464 / 8)
    per TP-8 rank; a 32,768-token sequence is 70,272 x 32,768 B."""
    from kvlib.params import mla_attention_params_per_rank, split_params
    v3 = kv.load_model("deepseek-v3")
    extra = split_params(v3).attention - mla_attention_params_per_rank(v3, 8)
    assert extra == 61 * 187_107_328 - 61 * (15_140_864 + 171_966_464 // 8) == 9_178_710_016
    per_seq = 70_272 * 32_768
    assert kv.max_concurrency(50 * 10**9, kv.kv_bytes_per_sequence(v3.kv_bytes_per_token(2), 32_768)) == 21
    assert 8 * kv.max_concurrency(50 * 10**9 - extra, per_seq) == 8 * 17 == 136
