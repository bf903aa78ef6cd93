"""The 2025-26 families, one bundled config each, worked by hand at TP 1, 4 and 8.

For each model the test first reads the raw config.json (``bundled_config``, the published fields, no kvlib
arithmetic) and checks the fields the hand arithmetic below uses; the expected figures are then worked from
those numbers with vLLM's rules (vLLM 0.32.0 and 0.34.0 alike; source files named per rule):

- attention KV per token per GPU: 2 x layers x max(1, K // tp) x head size x 2 B (QKVParallelLinear; MLA's
  latent whole on every rank);
- the DSA indexer (vllm/models/deepseek_v32/attention.py): 128 fp8 values + one fp32 scale per 128 = 132 B per
  token per layer, whole on every rank;
- Mamba2 state (mamba_utils.py mamba2_state_shape): conv (kernel - 1) x (heads x head dim + 2 x groups x state) / tp
  in the model dtype, SSM heads / tp x head dim x state in fp32 (Nemotron-H's default, models/config.py);
- Gated DeltaNet state (gated_delta_net_state_shape): conv (kernel - 1) x (2 x Kh x Kd + Vh x Vd) / tp and
  recurrent Vh / tp x Vd x Kd, both bf16.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

import kvlib as kv
from kvlib.config import ConfigError
from kvlib.info import info_report
from kvlib.spec import SpecError

FIXTURES = Path(__file__).parent / "fixtures" / "configs"


def _text(model):
    raw = kv.bundled_config(model)
    return raw.get("text_config") or raw


def _check(model, **fields):
    raw = _text(model)
    for name, value in fields.items():
        assert raw.get(name) == value, (model, name, raw.get(name))


def _figures(model, tp):
    s = kv.load_model(model)
    return s.kv_bytes_per_token(tp=tp), s.state_bytes_per_sequence(tp), s.indexer_bytes_per_token(tp)


# --- Gated DeltaNet: Qwen3-Next ---------------------------------------------------------------------------------
def test_qwen3_next_gated_deltanet():
    m = "qwen3-next-80b-a3b"
    _check(m, num_hidden_layers=48, full_attention_interval=4, num_key_value_heads=2, head_dim=256,
           linear_num_key_heads=16, linear_key_head_dim=128, linear_num_value_heads=32, linear_value_head_dim=128,
           linear_conv_kernel_dim=4, torch_dtype="bfloat16")
    # 48 / 4 = 12 full-attention layers, 36 GDN layers; conv width 2 x 16 x 128 + 32 x 128 = 8,192
    expected = {
        1: (2 * 12 * 2 * 256 * 2, 36 * (3 * 8_192 * 2 + 32 * 128 * 128 * 2), 0),
        4: (2 * 12 * 1 * 256 * 2, 36 * (3 * 2_048 * 2 + 8 * 128 * 128 * 2), 0),      # 2 KV heads: 1 per GPU
        8: (2 * 12 * 1 * 256 * 2, 36 * (3 * 1_024 * 2 + 4 * 128 * 128 * 2), 0),
    }
    assert expected[1] == (24_576, 39_518_208, 0) and expected[8] == (12_288, 4_939_776, 0)
    for tp, figures in expected.items():
        assert _figures(m, tp) == figures
    s = kv.load_model(m)
    assert s.layer_kinds[:4] == ("gated_deltanet",) * 3 + ("full",)
    assert s.state_tensor_shapes("gated_deltanet", 4) == {"conv": (3, 2_048), "recurrent": (8, 128, 128)}
    assert s.state_dtype_bytes("gated_deltanet") == {"conv": 2, "recurrent": 2}


# --- Mamba2: Nemotron-H, both config forms ----------------------------------------------------------------------
def test_nemotron_h_56b_hybrid_override_pattern():
    m = "nemotron-h-56b"
    raw = _text(m)
    pattern = raw["hybrid_override_pattern"]
    assert (len(pattern), pattern.count("M"), pattern.count("*"), pattern.count("-")) == (118, 54, 10, 54)
    _check(m, num_key_value_heads=8, attention_head_dim=128, mamba_num_heads=256, mamba_head_dim=64, n_groups=8,
           ssm_state_size=256, conv_kernel=4)
    assert "mamba_ssm_cache_dtype" not in raw          # so vLLM's Nemotron-H default: float32
    conv_width = 256 * 64 + 2 * 8 * 256                 # 20,480
    expected = {
        1: (2 * 10 * 8 * 128 * 2, 54 * (3 * conv_width * 2 + 256 * 64 * 256 * 4)),
        4: (2 * 10 * 2 * 128 * 2, 54 * (3 * conv_width // 4 * 2 + 64 * 64 * 256 * 4)),
        8: (2 * 10 * 1 * 128 * 2, 54 * (3 * conv_width // 8 * 2 + 32 * 64 * 256 * 4)),
    }
    assert expected[1] == (40_960, 912_605_184)
    for tp, (per_token, state) in expected.items():
        assert _figures(m, tp) == (per_token, state, 0)
    assert kv.load_model(m).state_dtype_bytes("mamba2") == {"conv": 2, "ssm": 4}


def test_nemotron_3_nano_pattern_with_moe_blocks():
    m = "nemotron-3-nano"
    pattern = _text(m)["hybrid_override_pattern"]
    assert (len(pattern), pattern.count("M"), pattern.count("*"), pattern.count("E")) == (52, 23, 6, 23)
    _check(m, num_key_value_heads=2, head_dim=128, mamba_num_heads=64, mamba_head_dim=64, n_groups=8,
           ssm_state_size=128, conv_kernel=4, mamba_ssm_cache_dtype="float32")
    conv_width = 64 * 64 + 2 * 8 * 128                  # 6,144
    expected = {
        1: (2 * 6 * 2 * 128 * 2, 23 * (3 * conv_width * 2 + 64 * 64 * 128 * 4)),
        4: (2 * 6 * 1 * 128 * 2, 23 * (3 * conv_width // 4 * 2 + 16 * 64 * 128 * 4)),
        8: (2 * 6 * 1 * 128 * 2, 23 * (3 * conv_width // 8 * 2 + 8 * 64 * 128 * 4)),
    }
    assert expected[1] == (6_144, 49_082_368)
    for tp, (per_token, state) in expected.items():
        assert _figures(m, tp) == (per_token, state, 0)


ULTRA_STATE = {   # 48 Mamba2 layers, 256 heads x 64, 8 groups, state 128: conv width 16,384 + 2,048 = 18,432
    1: 48 * (3 * 18_432 * 2 + 256 * 64 * 128 * 4),
    4: 48 * (3 * 4_608 * 2 + 64 * 64 * 128 * 4),
    8: 48 * (3 * 2_304 * 2 + 32 * 64 * 128 * 4),
}


def test_nemotron_3_ultra_layers_block_type_without_num_hidden_layers():
    m = "nemotron-3-ultra"
    raw = _text(m)
    types = raw["layers_block_type"]
    assert "num_hidden_layers" not in raw
    assert (len(types), types.count("mamba"), types.count("attention"), types.count("moe")) == (108, 48, 12, 48)
    _check(m, num_key_value_heads=2, head_dim=128, mamba_num_heads=256, mamba_head_dim=64, n_groups=8,
           ssm_state_size=128, conv_kernel=4, mamba_ssm_cache_dtype="float32")
    assert ULTRA_STATE[1] == 407_961_600
    for tp, heads in ((1, 2), (4, 1), (8, 1)):
        assert _figures(m, tp) == (2 * 12 * heads * 128 * 2, ULTRA_STATE[tp], 0)
    assert kv.load_model(m).num_layers == 108


def test_layers_block_type_in_transformers_5_names_reads_the_same():
    # transformers >= 5 renames "mamba" to "linear_attention" and "attention" to "full_attention"
    # (configuration_utils._LEGACY_LAYER_TYPE_REMAP); NemotronHConfig saves the list as layers_block_type
    cfg = copy.deepcopy(kv.bundled_config("nemotron-3-ultra"))
    names = {"mamba": "linear_attention", "attention": "full_attention", "moe": "moe"}
    cfg["layers_block_type"] = [names[t] for t in cfg["layers_block_type"]]
    s = kv.parse_config(cfg)
    assert (s.kv_bytes_per_token(), s.state_bytes_per_sequence(8)) == (2 * 12 * 2 * 128 * 2, ULTRA_STATE[8])


def test_nemotron_3_5_lightning_saved_by_transformers_5():
    # tests/fixtures/configs/PROVENANCE.md: a config saved by transformers 5.8.1, layers_block_type and
    # num_hidden_layers both given
    raw = json.loads((FIXTURES / "nvidia__NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4.json").read_text())
    types = raw["layers_block_type"]
    assert raw["transformers_version"] == "5.8.1" and raw["num_hidden_layers"] == len(types) == 52
    attention, mamba = types.count("attention"), types.count("mamba")
    assert (attention, mamba, raw["num_key_value_heads"], raw["head_dim"]) == (6, 23, 2, 128)
    assert (raw["mamba_num_heads"], raw["mamba_head_dim"], raw["n_groups"], raw["ssm_state_size"]) == (64, 64, 8, 128)
    s = kv.parse_config(raw)
    assert s.kv_bytes_per_token(tp=4) == 2 * 6 * 1 * 128 * 2
    assert s.state_bytes_per_sequence(4) == 23 * (3 * (64 * 64 + 2 * 8 * 128) // 4 * 2 + 16 * 64 * 128 * 4)


# --- the DSA indexer: DeepSeek-V3.2 and GLM-5 -------------------------------------------------------------------
@pytest.mark.parametrize("model,layers,index_heads", [("deepseek-v3.2", 61, 64), ("glm-5", 78, 32)])
def test_indexer_whole_on_every_rank(model, layers, index_heads):
    _check(model, num_hidden_layers=layers, kv_lora_rank=512, qk_rope_head_dim=64, index_head_dim=128,
           index_n_heads=index_heads, index_topk=2048)
    indexer = layers * (128 + 128 // 128 * 4)           # 132 B a layer, no index_topk_freq: every layer
    per_token = layers * (512 + 64) * 2 + indexer
    for tp in (1, 4, 8):
        assert _figures(model, tp) == (per_token, 0, indexer)
    assert kv.load_model(model).kv_bytes_per_sequence(1_000) == per_token * 1_000


def test_indexer_skip_rules():
    base = copy.deepcopy(kv.bundled_config("deepseek-v3.2"))
    # index_topk_freq 4, offset 2: layer i builds one when max(i - 1, 0) % 4 == 0: i = 0, 1, 5, 9, ..., 57 (16 layers)
    every4 = kv.parse_config(dict(base, index_topk_freq=4))
    assert every4.indexer_layers[:4] == (0, 1, 5, 9) and len(every4.indexer_layers) == 16
    assert every4.indexer_bytes_per_token() == 16 * 132
    # index_topk_pattern: "S" shares, anything else builds
    pattern = kv.parse_config(dict(base, num_hidden_layers=61, index_topk_pattern="FS" * 30 + "F"))
    assert len(pattern.indexer_layers) == 31
    # vLLM 0.34's indexer_types wins over the pattern
    types = kv.parse_config(dict(base, indexer_types=["full"] + ["shared"] * 60, index_topk_freq=4))
    assert types.indexer_layers == (0,)
    with pytest.raises(ConfigError, match=r"^field indexer_types\[1\] is 'dense' \(full or shared\)$"):
        kv.parse_config(dict(base, indexer_types=["full", "dense"] + ["full"] * 59))


# --- per-layer geometry: Gemma 4 --------------------------------------------------------------------------------
def test_gemma_4_full_layers_have_their_own_geometry():
    m = "gemma-4-26b-a4b"
    _check(m, num_hidden_layers=30, num_key_value_heads=8, head_dim=256, global_head_dim=512,
           num_global_key_value_heads=2, attention_k_eq_v=True, sliding_window=1024, top_k_experts=8)
    kinds = _text(m)["layer_types"]
    assert (kinds.count("sliding_attention"), kinds.count("full_attention")) == (25, 5)
    expected = {   # 25 sliding x 2 x K x 256 x 2 + 5 full x 2 x K_global x 512 x 2
        1: 25 * 2 * 8 * 256 * 2 + 5 * 2 * 2 * 512 * 2,
        4: 25 * 2 * 2 * 256 * 2 + 5 * 2 * 1 * 512 * 2,      # the 2 global heads replicate past tp 2
        8: 25 * 2 * 1 * 256 * 2 + 5 * 2 * 1 * 512 * 2,
    }
    assert expected == {1: 225_280, 4: 61_440, 8: 35_840}
    for tp, per_token in expected.items():
        assert _figures(m, tp) == (per_token, 0, 0)
    s = kv.load_model(m)
    # 32K: sliding layers hold 1,024 tokens, full ones all 32,768
    assert s.kv_bytes_per_sequence(32_768) == 25 * 8_192 * 1_024 + 5 * 4_096 * 32_768
    assert s.kv_bytes_per_sequence(32_768, tp=8) == 25 * 1_024 * 1_024 + 5 * 2_048 * 32_768
    assert (s.kv_heads_per_gpu(4, "full"), s.kv_heads_per_gpu(4, "sliding")) == (1, 2)


def test_gemma_4_kv_shared_layers_keep_no_cache():
    # num_kv_shared_layers: the last n layers read an earlier layer's cache (vllm gemma4.py) and keep none
    cfg = copy.deepcopy(kv.bundled_config("gemma-4-26b-a4b"))
    cfg["text_config"]["num_kv_shared_layers"] = 6       # layers 24-29: 5 sliding, 1 full
    s = kv.parse_config(cfg)
    assert s.layer_kinds[24:] == ("none",) * 6
    assert s.kv_bytes_per_token() == 20 * 2 * 8 * 256 * 2 + 4 * 2 * 2 * 512 * 2
    with pytest.raises(kv.ParamsError, match="KV-shared"):
        s.num_params()


def test_gemma_4_per_layer_config_is_refused_not_guessed():
    # transformers' newer Gemma 4 form keeps the global layers' geometry in per_layer_config; read as the older form
    # it would take the 512-wide default silently (a tiny model saved so started with 309,132 tokens where that
    # reading predicted 113,777), so it is refused in one line naming the field
    cfg = copy.deepcopy(kv.bundled_config("gemma-4-26b-a4b"))
    cfg["text_config"]["per_layer_config"] = [{"head_dim": 256}] * 30
    with pytest.raises(ConfigError, match=r"^text_config\.per_layer_config: Gemma 4's per-layer geometry"):
        kv.parse_config(cfg)


# --- attention-only MoEs, for the per-GPU figures -----------------------------------------------------------------
@pytest.mark.parametrize("model,fields,per_gpu", [
    # Llama 4 Scout: 48 layers (36 chunked, 12 full), 8 KV heads x 128
    ("llama-4-scout", dict(num_hidden_layers=48, num_key_value_heads=8, head_dim=128, attention_chunk_size=8192),
     {1: 2 * 48 * 8 * 128 * 2, 4: 2 * 48 * 2 * 128 * 2, 8: 2 * 48 * 1 * 128 * 2}),
    ("gpt-oss-120b", dict(num_hidden_layers=36, num_key_value_heads=8, head_dim=64, sliding_window=128),
     {1: 2 * 36 * 8 * 64 * 2, 4: 2 * 36 * 2 * 64 * 2, 8: 2 * 36 * 1 * 64 * 2}),
    ("kimi-k2", dict(num_hidden_layers=61, kv_lora_rank=512, qk_rope_head_dim=64),
     {1: 61 * 576 * 2, 4: 61 * 576 * 2, 8: 61 * 576 * 2}),
    # 4 KV heads: one per GPU at tp 4, replicated at tp 8
    ("qwen3-30b-a3b", dict(num_hidden_layers=48, num_key_value_heads=4, head_dim=128),
     {1: 2 * 48 * 4 * 128 * 2, 4: 2 * 48 * 1 * 128 * 2, 8: 2 * 48 * 1 * 128 * 2}),
])
def test_moe_families_per_gpu(model, fields, per_gpu):
    _check(model, **fields)
    for tp, per_token in per_gpu.items():
        assert _figures(model, tp) == (per_token, 0, 0)


# --- kvlib info for the new families ----------------------------------------------------------------------------
def test_info_json_has_every_figure_per_gpu_at_tp_1():
    r = info_report("qwen3-next", context=4_096)
    assert (r["tp"], r["kv_bytes_per_token"], r["kv_bytes_per_token_per_gpu"]) == (1, 24_576, 24_576)
    assert (r["state_bytes_per_sequence"], r["state_bytes_per_sequence_per_gpu"]) == (39_518_208, 39_518_208)
    assert (r["indexer_bytes_per_token"], r["indexer_bytes_per_token_per_gpu"]) == (0, 0)
    assert r["kv_bytes_per_sequence_per_gpu"] == 24_576 * 4_096
    assert "planned_bytes_per_sequence_per_gpu" in r
    assert r["state_layers"]["gated_deltanet"] == {
        "layers": 36, "shapes_per_gpu": {"conv": [3, 8_192], "recurrent": [32, 128, 128]},
        "dtype_bytes": {"conv": 2, "recurrent": 2}, "bytes_per_layer_per_gpu": 3 * 8_192 * 2 + 32 * 128 * 128 * 2}


def test_info_names_the_indexer_and_the_geometry():
    v32 = info_report("deepseek-v3.2", tp=8)
    assert (v32["indexer_bytes_per_token"], v32["indexer_bytes_per_token_per_gpu"]) == (61 * 132, 61 * 132)
    gemma = info_report("gemma-4-26b-a4b")
    assert gemma["kv_geometry"] == {"full": [2, 512], "sliding": [8, 256]}
    assert "kv_geometry" not in info_report("llama-3.1-8b")


def test_info_text_says_which_layers_hold_what(capsys):
    from kvlib.cli import main
    assert main(["info", "nemotron-h-56b", "--tp", "4"]) == 0
    out = capsys.readouterr().out
    assert "layers holding KV                 10  {'full': 10}" in out
    assert "layers holding state (Mamba2)     54, each" in out and "ssm 64 x 64 x 256 x 4 B" in out
    assert "layers holding nothing            54 (no KV, no state)" in out


# --- bad input: one line naming the field and the value -----------------------------------------------------------
def test_a_pattern_character_kvlib_cannot_read():
    cfg = dict(kv.bundled_config("nemotron-3-nano"))
    cfg["hybrid_override_pattern"] = "MEM?" + cfg["hybrid_override_pattern"][4:]
    with pytest.raises(ConfigError, match=r"^field hybrid_override_pattern\[3\] is '\?', which kvlib cannot "
                                          r"interpret \(M Mamba2, \* attention, - MLP, E MoE\)$"):
        kv.parse_config(cfg)


def test_a_block_type_kvlib_cannot_read():
    cfg = dict(kv.bundled_config("nemotron-3-ultra"))
    cfg["layers_block_type"] = ["hybrid"] + cfg["layers_block_type"][1:]
    with pytest.raises(ConfigError, match=r"^field layers_block_type\[0\] is 'hybrid', which kvlib cannot interpret$"):
        kv.parse_config(cfg)


def test_a_layer_count_that_disagrees_with_the_pattern():
    cfg = dict(kv.bundled_config("nemotron-3-nano"), num_hidden_layers=50)
    with pytest.raises(ConfigError, match=r"^field hybrid_override_pattern lists 52 layers but num_hidden_layers "
                                          r"is 50$"):
        kv.parse_config(cfg)


def test_a_state_kvlib_does_not_model_is_refused_never_zero():
    # a short-convolution layer (LFM2's "conv"): its KV figure stays exact, its state is refused in one line
    cfg = {"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
           "hidden_size": 256, "vocab_size": 100, "intermediate_size": 512, "layer_types": ["conv", "full_attention"]}
    s = kv.parse_config(cfg)
    assert s.kv_bytes_per_token() == 2 * 1 * 2 * 64 * 2
    message = r"^field layer_types\[0\] is 'conv': kvlib does not model that layer's state"
    with pytest.raises(SpecError, match=message):
        s.state_bytes_per_sequence()
    with pytest.raises(kv.ParamsError, match=message):
        s.num_params()
    r = info_report(cfg)
    assert r["state_bytes_per_sequence"] is None and r["state_error"].startswith("field layer_types[0] is 'conv'")


def test_jamba_mamba1_layers_refuse_the_state():
    cfg = {"num_hidden_layers": 8, "num_attention_heads": 4, "num_key_value_heads": 2, "hidden_size": 256,
           "vocab_size": 100, "intermediate_size": 512, "attn_layer_period": 4, "attn_layer_offset": 1}
    s = kv.parse_config(cfg)
    assert s.num_kv_layers == 2
    with pytest.raises(SpecError, match="^field attn_layer_period is 4: the other layers are Mamba1 layers"):
        s.state_bytes_per_sequence()


def test_a_tp_the_mamba_groups_cannot_take():
    # mamba_mixer2.py: tp must divide n_groups (8) unless it is 1
    with pytest.raises(SpecError, match=r"^tp=16 must divide mamba_n_groups=8 \(or the groups be 1\)$"):
        kv.load_model("nemotron-h-56b").state_bytes_per_sequence(16)
    with pytest.raises(SpecError, match=r"^tp=3 must divide mamba_num_heads=256$"):
        kv.load_model("nemotron-h-56b").state_bytes_per_sequence(3)


def test_a_gdn_config_missing_a_width():
    cfg = dict(kv.bundled_config("qwen3-next"))
    del cfg["linear_key_head_dim"]
    with pytest.raises(ConfigError, match=r"^missing field linear_key_head_dim$"):
        kv.parse_config(cfg)


# --- weights as stored, per rank: the blocks each family has ------------------------------------------------------
def test_llama_4_scout_weights_hold_the_shared_expert():
    # tp 4: an expert's 3 x 5,120 x (8,192 / 4) x 2 B = 62,914,560 B per rank; 16 routed + 1 shared, router
    # 5,120 x 16 x 2 B = 163,840 B, 48 layers. The shared expert alone: 48 x 62,914,560 B = 2.81 GiB per rank.
    from kvlib.weights import stored_weights
    parts = {p.name: p.bytes for p in stored_weights("llama-4-scout", tp=4).parts}
    assert parts["experts"] == 48 * (17 * 62_914_560 + 163_840)


def test_nemotron_h_weights_by_block():
    # tp 1, bf16. Mamba2 mixer: in_proj 8,192 x (16,384 + 20,480 + 256) = 304,087,040; conv 20,480 x 4 + 20,480;
    # A, D, dt 768; norm 16,384; out 16,384 x 8,192 = 134,217,728: 438,424,320 parameters, 54 of them.
    # MLP blocks: up and down 2 x 8,192 x 32,768, 54 of them. Attention blocks: 10 x (2 x 8,192^2 + 2 x 8,192 x 1,024).
    from kvlib.weights import stored_weights
    parts = {p.name: p.bytes for p in stored_weights("nemotron-h-56b").parts}
    assert parts["Mamba2 / Gated DeltaNet mixers"] == 54 * 438_424_320 * 2
    assert parts["mlp"] == 54 * 2 * 8_192 * 32_768 * 2
    assert parts["attention"] == 10 * (2 * 8_192**2 + 2 * 8_192 * 1_024) * 2
    assert parts["norms"] == 118 * 8_192 * 2


def test_check_deployment_splits_the_state_as_vllm_does():
    # Nemotron-H 56B: TP 16 cannot split the 8 Mamba2 groups (mamba_mixer2.py); at TP 4 one sequence of 8,192
    # holds 10 x 2 x 2 x 128 x 2 x 8,192 = 83,886,080 B of KV and 54 x 4,225,024 = 228,151,296 B of state per GPU
    assert kv.check_deployment("nemotron-h-56b", "H100-SXM", tp=16, seq_len=8_192).reasons == (
        "TP 16: tp=16 must divide mamba_n_groups=8 (or the groups be 1) (vLLM: mamba_mixer2.py)",)
    check = kv.check_deployment("nemotron-h-56b", "H100-SXM", tp=4, seq_len=8_192)
    assert check.fits and check.kv_bytes_per_gpu == 83_886_080 + 228_151_296


def test_glm_5_2_index_cache_two_ways():
    # tests/fixtures/configs/PROVENANCE.md: indexer_types lists 21 "full" layers; index_topk_freq 4 with
    # index_skip_topk_offset 3 says the same (max(i - 2, 0) % 4 == 0: 0, 1, 2, 6, 10, ..., 74)
    raw = json.loads((FIXTURES / "zai-org__GLM-5.2.json").read_text())
    assert (raw["index_topk_freq"], raw["index_skip_topk_offset"], raw["indexer_types"].count("full")) == (4, 3, 21)
    by_types = kv.parse_config(raw)
    by_freq = kv.parse_config({k: v for k, v in raw.items() if k != "indexer_types"})
    assert by_types.indexer_layers == by_freq.indexer_layers == (0, 1, 2) + tuple(range(6, 78, 4))
    for tp in (1, 4, 8):
        assert by_types.kv_bytes_per_token(tp=tp) == 78 * 576 * 2 + 21 * 132 == 92_628
        assert by_types.indexer_bytes_per_token(tp) == 21 * 132


def test_an_indexer_without_mla_is_refused():
    # DeepSeek-V4's compressed sparse attention names index_topk over caches that are not MLA's
    cfg = {"num_hidden_layers": 2, "num_attention_heads": 4, "head_dim": 64, "hidden_size": 256,
           "index_topk": 512, "index_head_dim": 128}
    with pytest.raises(ConfigError, match=r"^field index_topk: a sparse-attention indexer on a model without MLA "
                                          r"\(no kv_lora_rank\) is not modelled$"):
        kv.parse_config(cfg)


def test_qwen3_5_keeps_its_recurrent_state_in_the_dtype_it_names():
    # tests/fixtures/configs/PROVENANCE.md: mamba_ssm_dtype "float32" (vLLM's Qwen3_5ForConditionalGenerationConfig
    # makes it the mamba_ssm_cache_dtype); the conv state stays bf16. 40 layers, every 4th full: 30 GDN layers.
    raw = json.loads((FIXTURES / "Qwen__Qwen3.5-35B-A3B.json").read_text())
    text = raw["text_config"]
    assert (text["num_hidden_layers"], text["full_attention_interval"], text["mamba_ssm_dtype"]) == (40, 4, "float32")
    assert (text["linear_num_key_heads"], text["linear_num_value_heads"], text["linear_key_head_dim"]) == (16, 32, 128)
    s = kv.parse_config(raw)
    assert s.state_dtype_bytes("gated_deltanet") == {"conv": 2, "recurrent": 4}
    assert s.state_bytes_per_sequence() == 30 * (3 * 8_192 * 2 + 32 * 128 * 128 * 4) == 64_389_120
    assert s.state_bytes_per_sequence(8) == 30 * (3 * 1_024 * 2 + 4 * 128 * 128 * 4)
