"""Reading real configs: every bundled config, field variants, bad input.

Expected KV figures come from kvlib/data/configs/PROVENANCE.md, where each
is worked by hand from the published config.
"""

import json

import pytest

import kvlib as kv
from kvlib.config import ConfigError, parse_config

C = 131_072

# model id -> (attention, KV-holding layers, KV bytes/token bf16 all layers,
#              KV bytes per sequence at C with windows capped)   [PROVENANCE.md]
BUNDLED = {
    "meta-llama/Llama-3.1-8B": ("gqa", 32, 131_072, 17_179_869_184),
    "meta-llama/Llama-3.3-70B-Instruct": ("gqa", 80, 327_680, 42_949_672_960),
    "meta-llama/Llama-2-7b-hf": ("mha", 32, 524_288, 68_719_476_736),
    "meta-llama/Llama-2-70b-chat-hf": ("gqa", 80, 327_680, 327_680 * C),
    "Qwen/Qwen2.5-7B": ("gqa", 28, 57_344, 7_516_192_768),
    "Qwen/Qwen2.5-3B": ("gqa", 36, 36_864, 4_831_838_208),
    "Qwen/Qwen2.5-32B": ("gqa", 64, 262_144, 34_359_738_368),
    "mistralai/Mistral-7B-v0.1": ("gqa", 32, 131_072, 536_870_912),
    "mistralai/Mixtral-8x7B-v0.1": ("gqa", 32, 131_072, 17_179_869_184),
    "google/gemma-2-9b-it": ("gqa", 42, 344_064, 23_253_221_376),
    "microsoft/Phi-3-mini-4k-instruct": ("mha", 32, 393_216, 804_913_152),
    "openai-community/gpt2-large": ("mha", 36, 184_320, 24_159_191_040),
    "openai/gpt-oss-20b": ("gqa", 24, 49_152, 3_224_371_200),
    "deepseek-ai/DeepSeek-V3": ("mla", 61, 70_272, 9_210_691_584),
    "Qwen/Qwen3-0.6B": ("gqa", 28, 114_688, 114_688 * C),
    # the 2025-26 families (PROVENANCE.md; per family at TP 1, 4, 8 in tests/test_families.py)
    "Qwen/Qwen3-30B-A3B": ("gqa", 48, 2 * 48 * 4 * 128 * 2, 98_304 * C),
    # 12 of 48 layers are full attention (every 4th), 2 KV heads of 256; the 36 Gated DeltaNet layers keep none
    "Qwen/Qwen3-Next-80B-A3B-Thinking": ("gqa", 12, 2 * 12 * 2 * 256 * 2, 24_576 * C),
    # MLA 512 + 64 in bf16 on 61 layers, plus the indexer's 128 fp8 + one fp32 scale on each
    "deepseek-ai/DeepSeek-V3.2": ("mla", 61, 61 * (576 * 2 + 132), 78_324 * C),
    "zai-org/GLM-5": ("mla", 78, 78 * (576 * 2 + 132), 100_152 * C),
    "moonshotai/Kimi-K2-Instruct": ("mla", 61, 61 * 576 * 2, 70_272 * C),
    "moonshotai/Kimi-K2.5": ("mla", 61, 61 * 576 * 2, 70_272 * C),   # text_config: Kimi K2's geometry
    # 25 sliding layers (8 KV heads x 256, window 1024) and 5 full ones (2 x 512)
    "google/gemma-4-26B-A4B": ("gqa", 30, 25 * 2 * 8 * 256 * 2 + 5 * 2 * 2 * 512 * 2,
                               25 * 8_192 * 1_024 + 5 * 4_096 * C),
    # 36 chunked layers (chunk 8192) and 12 full ones, 8 KV heads x 128
    "meta-llama/Llama-4-Scout-17B-16E-Instruct": ("gqa", 48, 48 * 4_096, 12 * 4_096 * C + 36 * 4_096 * 8_192),
    "openai/gpt-oss-120b": ("gqa", 36, 36 * 2_048, 18 * 2_048 * C + 18 * 2_048 * 128),
    # Nemotron-H: only the '*' blocks keep KV (10, 6, 12 of 118, 52, 108 layers)
    "nvidia/Nemotron-H-56B-Base-8K": ("gqa", 10, 10 * 2 * 8 * 128 * 2, 40_960 * C),
    "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16": ("gqa", 6, 6 * 2 * 2 * 128 * 2, 6_144 * C),
    "nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16": ("gqa", 12, 12 * 2 * 2 * 128 * 2, 12_288 * C),
}


def test_every_bundled_config_is_tested():
    assert sorted(BUNDLED) == kv.bundled_models()


@pytest.mark.parametrize("model_id", sorted(BUNDLED))
def test_bundled_kv_geometry(model_id):
    attention, layers, per_token, per_seq_capped = BUNDLED[model_id]
    spec = kv.load_model(model_id)
    assert spec.attention == attention
    assert spec.num_kv_layers == layers
    assert spec.kv_bytes_per_token() == per_token
    assert spec.kv_bytes_per_sequence(C) == per_seq_capped


def test_traps_from_provenance():
    # gemma-2: explicit head_dim 256, not 3584/16 = 224 (trap 301,056)
    assert kv.load_model("gemma-2-9b").head_dim == 256
    # gpt-oss: head_dim 64 explicit, not 2880/64 = 45
    assert kv.load_model("gpt-oss-20b").head_dim == 64
    # Qwen3-0.6B: head_dim 128 explicit, not 1024/16 = 64
    assert kv.load_model("qwen3-0.6b").head_dim == 128
    # Llama-2-70B is GQA-8 (trap: 2,621,440 with kv = heads = 64)
    assert kv.load_model("llama-2-70b").num_kv_heads == 8


def test_window_layouts():
    gemma = kv.load_model("gemma-2-9b")
    assert gemma.layer_kinds[:2] == ("sliding", "full")  # even layers local
    assert gemma.layer_kinds.count("sliding") == 21
    oss = kv.load_model("gpt-oss-20b")
    assert oss.layer_kinds.count("sliding") == 12 and oss.sliding_window == 128
    qwen = kv.load_model("qwen2.5-7b")  # use_sliding_window false: no windows
    assert set(qwen.layer_kinds) == {"full"} and qwen.sliding_window is None
    assert set(kv.load_model("mistral-7b").layer_kinds) == {"sliding"}
    assert set(kv.load_model("mixtral-8x7b").layer_kinds) == {"full"}


def test_aliases_and_ids_case_insensitive():
    assert kv.load_model("LLAMA-3.1-8B").name == "meta-llama/Llama-3.1-8B"
    assert kv.load_model("Llama-3.1-8B").name == "meta-llama/Llama-3.1-8B"
    assert kv.load_model("meta-llama/llama-3.1-8b").name == "meta-llama/Llama-3.1-8B"


def test_path_and_folder(tmp_path):
    cfg = kv.bundled_config("llama-3.1-8b")
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    assert kv.load_model(tmp_path).kv_bytes_per_token() == 131_072
    assert kv.load_model(str(tmp_path / "config.json")).kv_bytes_per_token() == 131_072


def _base(**over):
    cfg = {"num_hidden_layers": 4, "num_attention_heads": 8, "hidden_size": 512,
           "vocab_size": 1000, "intermediate_size": 1024}
    cfg.update(over)
    return {k: v for k, v in cfg.items() if v is not ...}


def test_kv_heads_absent_or_null_means_mha():
    # 2 x 4 layers x 8 heads x 64 dims x 2 B = 8,192
    assert parse_config(_base()).kv_bytes_per_token() == 8_192
    assert parse_config(_base(num_key_value_heads=None)).kv_bytes_per_token() == 8_192
    assert parse_config(_base(num_key_value_heads=2)).kv_bytes_per_token() == 2_048


def test_falcon_semantics():
    falcon7b = {"model_type": "falcon", "num_hidden_layers": 32, "num_attention_heads": 71,
                "hidden_size": 4544, "vocab_size": 65024, "multi_query": True,
                "new_decoder_architecture": False}
    spec = parse_config(falcon7b)
    assert spec.num_kv_heads == 1 and spec.attention == "mqa"
    # 2 x 32 x 1 x 64 x 2 = 8,192 B
    assert spec.kv_bytes_per_token() == 8_192
    falcon40b = {"model_type": "falcon", "num_hidden_layers": 60, "num_attention_heads": 128,
                 "hidden_size": 8192, "vocab_size": 65024, "num_kv_heads": 8, "multi_query": True,
                 "new_decoder_architecture": True}
    assert parse_config(falcon40b).num_kv_heads == 8  # new decoder ignores multi_query
    rw = {"model_type": "RefinedWeb", "n_layer": 60, "n_head": 128, "hidden_size": 8192,
          "vocab_size": 65024, "n_head_kv": 8, "new_decoder_architecture": True}
    assert parse_config(rw).num_kv_heads == 8
    no_mq = dict(falcon7b, multi_query=False)
    assert parse_config(no_mq).num_kv_heads == 71


def test_text_config_read_not_vision_config():
    cfg = {"model_type": "llava",
           "vision_config": {"num_hidden_layers": 24, "num_attention_heads": 16, "hidden_size": 1024,
                             "intermediate_size": 4096, "vocab_size": 1},
           "text_config": kv.bundled_config("llama-3.1-8b")}
    assert parse_config(cfg).kv_bytes_per_token() == 131_072


def test_mla_and_chunked_and_hybrid():
    v3 = kv.load_model("deepseek-v3")
    assert (v3.cache_heads, v3.cache_head_dim) == (1, 576)
    llama4 = _base(num_hidden_layers=8, attention_chunk_size=8192)
    spec = parse_config(llama4)
    assert spec.layer_kinds.count("full") == 2 and spec.layer_kinds.count("chunked") == 6
    # at 16K: 2 full layers hold 16,384 tokens, 6 chunked hold 8,192; per layer 2 x 8 x 64 x 2 = 2,048 B
    assert spec.kv_bytes_per_sequence(16_384) == 2_048 * (2 * 16_384 + 6 * 8_192)
    hybrid = _base(num_hidden_layers=8, full_attention_interval=4)
    assert parse_config(hybrid).num_kv_layers == 2
    typed = _base(num_hidden_layers=4, layer_types=["linear_attention", "full_attention"] * 2)
    assert parse_config(typed).num_kv_layers == 2


def test_tensor_parallel_per_gpu():
    llama70 = kv.load_model("llama-3.3-70b")
    assert llama70.kv_bytes_per_token(tp=8) == 327_680 // 8  # [kv-math]: 40 KiB per GPU
    assert llama70.kv_heads_per_gpu(16) == 1  # replicated past 8
    assert llama70.kv_bytes_per_token(tp=16) == 327_680 // 8
    assert kv.load_model("deepseek-v3").kv_bytes_per_token(tp=8) == 70_272  # MLA replicated
    with pytest.raises(ValueError, match="tp=3"):
        llama70.kv_heads_per_gpu(3)


BAD_CONFIGS = [
    (_base(num_hidden_layers=...), "num_hidden_layers"),
    (_base(num_attention_heads=0), "num_attention_heads"),
    (_base(num_attention_heads=-8), "num_attention_heads"),
    (_base(num_key_value_heads=3), "num_key_value_heads"),
    (_base(num_hidden_layers="32"), "num_hidden_layers"),
    (_base(num_hidden_layers=32.5), "num_hidden_layers"),
    (_base(num_hidden_layers=True), "num_hidden_layers"),
    (_base(hidden_size=500), "hidden_size"),
    (_base(layer_types=["full_attention"] * 3), "layer_types"),
    (_base(layer_types=["weird"] * 4), "layer_types"),
    (_base(text_config=[1, 2]), "text_config"),
    (_base(kv_lora_rank=512), "qk_rope_head_dim"),
]


@pytest.mark.parametrize("cfg,field", BAD_CONFIGS)
def test_bad_config_names_the_field(cfg, field):
    with pytest.raises(ConfigError) as info:
        parse_config(cfg)
    message = str(info.value)
    assert field in message and "\n" not in message


@pytest.mark.parametrize("content,needle", [
    (b"[1, 2, 3]", "JSON object"),
    (b"{\"num_hidden_layers\": ", "not valid JSON"),
    (b"\xff\xfe\x00", "UTF-8"),
])
def test_bad_files(tmp_path, content, needle):
    path = tmp_path / "config.json"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=needle):
        kv.load_model(path)


def test_unknown_model_and_no_hub_offline():
    with pytest.raises(ConfigError, match="unknown model"):
        kv.load_model("nobody/nothing")
    assert issubclass(ConfigError, ValueError)


def test_hub_degrades_with_one_line(monkeypatch):
    import builtins
    real_import = builtins.__import__

    def no_hub(name, *args, **kwargs):
        if name == "huggingface_hub":
            raise ImportError("no")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_hub)
    with pytest.raises(ConfigError, match="huggingface_hub"):
        kv.load_model("someone/unbundled-model", hub=True)


# --- gaps found by mutation testing (benchmarks/mutation.py, [mutation testing]) -------------------------
# Expected values below are written by hand from the inputs each test builds (the arithmetic
# is in the comments); none is read back from kvlib.

def test_short_name_without_org_is_case_insensitive():
    # 'mistral-7b-v0.1' is no alias (ALIASES has 'mistral-7b'): only the name-after-the-slash
    # match can resolve it, and the lookup lower-cases both sides.
    from kvlib.config import resolve_model_id
    assert resolve_model_id("MISTRAL-7B-v0.1") == "mistralai/Mistral-7B-v0.1"
    assert resolve_model_id("  Mistral-7B-V0.1 ") == "mistralai/Mistral-7B-v0.1"
    assert resolve_model_id("Mistral-7B") == "mistralai/Mistral-7B-v0.1"        # via the alias table
    assert resolve_model_id("mistralai") is None


def test_name_and_source_of_each_kind_of_input(tmp_path):
    cfg = kv.bundled_config("llama-3.1-8b")
    spec = kv.load_model(cfg)
    assert (spec.name, spec.source) == ("<dict>", "dict")
    assert kv.load_model(cfg, name="mine").name == "mine"
    bundled = kv.load_model("llama-3.1-8b")
    assert (bundled.name, bundled.source) == ("meta-llama/Llama-3.1-8B", "bundled:meta-llama/Llama-3.1-8B")
    assert kv.load_model("llama-3.1-8b", name="x").name == "x"
    folder = tmp_path / "my-llama"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg))
    from_folder = kv.load_model(folder)
    assert (from_folder.name, from_folder.source) == ("my-llama", str(folder / "config.json"))
    assert kv.load_model(folder, name="y").name == "y"
    # a file named like the bundled ones: 'org__name.json' reads as 'org/name'
    flat = tmp_path / "some-org__some-model.json"
    flat.write_text(json.dumps(cfg))
    from_file = kv.load_model(flat)
    assert (from_file.name, from_file.source) == ("some-org/some-model", str(flat))


def test_load_model_refuses_other_types_by_name():
    with pytest.raises(ConfigError) as info:
        kv.load_model(3.5)
    assert str(info.value) == "load_model takes an id, a path or a dict, not float"


def test_folder_without_config_json(tmp_path):
    with pytest.raises(ConfigError) as info:
        kv.load_model(tmp_path)
    assert str(info.value) == f"{tmp_path}: folder holds no config.json"


def test_exact_file_errors(tmp_path):
    from kvlib.config import _read_json
    missing = tmp_path / "nope.json"
    with pytest.raises(ConfigError) as info:
        _read_json(missing)
    assert str(info.value) == f"{missing}: cannot read (No such file or directory)"
    listed = tmp_path / "list.json"
    listed.write_text("[1, 2]")
    with pytest.raises(ConfigError) as info:
        _read_json(listed)
    assert str(info.value) == f"{listed}: a config.json must hold a JSON object, not list"
    broken = tmp_path / "broken.json"
    broken.write_text('{\n  "a": \n')
    with pytest.raises(ConfigError) as info:
        _read_json(broken)
    assert str(info.value) == f"{broken}: not valid JSON (line 3: Expecting value)"
    with pytest.raises(ConfigError) as info:
        kv.bundled_config("nobody/nothing")
    assert str(info.value) == "unknown model 'nobody/nothing': not a bundled id (see 'kvlib models')"


def test_unknown_model_message_offers_hub():
    with pytest.raises(ConfigError) as info:
        kv.load_model("nobody/nothing")
    assert str(info.value) == ("unknown model 'nobody/nothing': not a bundled id (see 'kvlib models'), a config.json "
                               "or a folder holding one; add --hub to fetch it from the Hugging Face Hub")


class _FakeHub:
    """Stands in for huggingface_hub (no network in tests): records the call, returns a file or raises."""

    def __init__(self, path=None, error=None):
        self.path, self.error, self.calls = path, error, []

    def hf_hub_download(self, *args, **kwargs):
        self.calls.append((args, kwargs))
        if self.error is not None:
            raise self.error
        return str(self.path)


def test_hub_fetch_reads_config_json(tmp_path, monkeypatch):
    import sys
    file = tmp_path / "downloaded.json"
    file.write_text(json.dumps(kv.bundled_config("llama-3.1-8b")))
    hub = _FakeHub(path=file)
    monkeypatch.setitem(sys.modules, "huggingface_hub", hub)
    spec = kv.load_model("someone/unbundled-model", hub=True)
    assert hub.calls == [(("someone/unbundled-model", "config.json"), {})]
    assert (spec.name, spec.source) == ("someone/unbundled-model", "hub:someone/unbundled-model")
    assert spec.kv_bytes_per_token() == 131_072      # 2 x 32 x 8 x 128 x 2 B, Llama 3.1 8B
    assert kv.load_model("someone/unbundled-model", hub=True, name="z").name == "z"


@pytest.mark.parametrize("error,first", [
    (OSError("offline\nsecond line of detail"), "offline"),
    (OSError(""), "OSError"),
])
def test_hub_failure_is_one_line(monkeypatch, error, first):
    import sys
    monkeypatch.setitem(sys.modules, "huggingface_hub", _FakeHub(error=error))
    with pytest.raises(ConfigError) as info:
        kv.load_model("someone/gated", hub=True)
    assert str(info.value) == ("could not fetch someone/gated/config.json from the Hugging Face Hub "
                               f"(offline or gated?): {first}")


def test_hub_missing_message(monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)   # import then raises ImportError
    with pytest.raises(ConfigError) as info:
        kv.load_model("someone/unbundled-model", hub=True)
    assert str(info.value) == ("fetching from the Hugging Face Hub needs huggingface_hub "
                               "(pip install huggingface_hub)")


def _moe(**over):
    return _base(num_local_experts=8, num_experts_per_tok=2, **over)


@pytest.mark.parametrize("over,layers", [
    ({}, (0, 1, 2, 3)),                              # every layer of 4
    ({"first_k_dense_replace": 0}, (0, 1, 2, 3)),    # 0 dense layers first is allowed
    ({"first_k_dense_replace": 1}, (1, 2, 3)),       # DeepSeek's rule: layers >= 1
    ({"moe_layer_freq": 2}, (0, 2)),                 # i % 2 == 0
    ({"decoder_sparse_step": 2}, (0, 2)),            # Qwen2-MoE's name for it
    ({"mlp_only_layers": [0, 3]}, (1, 2)),           # Qwen's dense-only list
])
def test_moe_layer_rules(over, layers):
    assert parse_config(_moe(**over)).moe_layers == layers


# Every error is one line naming the field; these are the exact texts a learner reads.
EXACT_ERRORS = [
    (_base(num_hidden_layers=...), "missing field num_hidden_layers / n_layer / num_layers / n_layers"),
    (_base(num_hidden_layers="32"), "field num_hidden_layers must be an integer, got '32' (a string)"),
    (_base(num_hidden_layers=32.5), "field num_hidden_layers must be an integer, got 32.5 (float)"),
    (_base(num_attention_heads=0), "field num_attention_heads must be at least 1, got 0"),
    (_base(attention_bias="yes"), "field attention_bias must be true or false, got 'yes'"),
    (_base(hidden_size=500), "field hidden_size (500) is not divisible by num_attention_heads (8) and no head_dim "
                             "is given"),
    (_base(num_key_value_heads=3), "field num_key_value_heads (3) must divide num_attention_heads (8)"),
    (_base(layer_types=["full_attention"] * 3), "field layer_types must list one type per layer (4)"),
    (_base(layer_types="full_attention"), "field layer_types must list one type per layer (4)"),
    (_base(layer_types=["full_attention", "weird"] * 2), "field layer_types[1] is 'weird', which kvlib cannot "
                                                         "interpret"),
    (_base(layer_types=["sliding_attention"] * 4), "field layer_types has sliding layers but sliding_window is not "
                                                   "set"),
    (_base(layer_types=["chunked_attention"] * 4), "field layer_types has chunked layers but attention_chunk_size "
                                                   "is not set"),
    (_base(text_config=[1]), "field text_config must be an object, got list"),
    (_base(torch_dtype=16), "field torch_dtype must be a string, got 16"),
    ({"text_config": {"num_hidden_layers": 2}},
     "missing field text_config.num_attention_heads / text_config.n_head / text_config.num_heads"),
    (_base(hidden_size=...), "missing field hidden_size / n_embd / d_model / model_dim"),
    (_base(first_k_dense_replace=-1, num_local_experts=8, num_experts_per_tok=2),
     "field first_k_dense_replace must be at least 0, got -1"),
    # bug found while checking which errors the reader can raise (random configs): a non-list
    # mlp_only_layers raised a bare TypeError (a traceback, not a one-line error)
    (_base(num_experts=8, num_experts_per_tok=2, mlp_only_layers=True),
     "field mlp_only_layers must list layer indices, got True"),
    (_base(num_experts=8, num_experts_per_tok=2, mlp_only_layers=[[1]]),
     "field mlp_only_layers must list layer indices, got [[1]]"),
    (_base(intermediate_size=..., ffn_config={"ffn_hidden_size": "10752"}),      # DBRX's nesting
     "field ffn_config.ffn_hidden_size must be an integer, got '10752' (a string)"),
    ({"text_config": _base(intermediate_size=..., ffn_config={"ffn_hidden_size": 0})},
     "field text_config.ffn_config.ffn_hidden_size must be at least 1, got 0"),
]


@pytest.mark.parametrize("cfg,message", EXACT_ERRORS)
def test_exact_error_text(cfg, message):
    with pytest.raises(ConfigError) as info:
        parse_config(cfg)
    assert str(info.value) == message


def test_default_name_and_source_of_a_dict():
    spec = parse_config(_base())
    assert (spec.name, spec.source) == ("<config>", "")


def test_non_object_config_names_the_model():
    with pytest.raises(ConfigError) as info:
        parse_config([1], name="m")
    assert str(info.value) == "m: a config must be a JSON object, not list"


def test_name_of_a_config_json_at_the_filesystem_root():
    from pathlib import Path
    from kvlib.config import _name_from_path
    assert _name_from_path(Path("/config.json")) == "/config.json"     # no folder name to use
    assert _name_from_path(Path("/models/tiny/config.json")) == "tiny"
    assert _name_from_path(Path("/models/org__tiny.json")) == "org/tiny"


def test_missing_parameter_fields_are_named():
    spec = parse_config({"num_hidden_layers": 4, "num_attention_heads": 8, "hidden_size": 512,
                         "num_local_experts": 8})
    assert spec.missing_fields == (
        ("vocab_size", "vocab_size / n_vocab / padded_vocab_size"),
        ("intermediate_size", "intermediate_size / n_inner / ffn_dim / d_ff / ffn_hidden_size / inner_hidden_size"
                              " / hidden_dim / ffn_config.ffn_hidden_size"),
        ("num_experts_per_tok", "num_experts_per_tok / experts_per_token / num_experts_per_token"))


def test_dtype_drops_the_torch_prefix():
    assert parse_config(_base(torch_dtype="torch.float16")).dtype == "float16"
    assert parse_config(_base(dtype="float32")).dtype == "float32"          # transformers >= 4.56 name
    assert parse_config(_base()).dtype == "bfloat16"                        # neither given


# --- which layers keep which cache: every branch of the layer-kind reader ---------------------
# Sources: the transformers configuration docs of each family (quoted per case); the
# expected layer lists are worked by hand from the rule quoted.
F, S, Ch, N = "full", "sliding", "chunked", "none"


@pytest.mark.parametrize("over,kinds", [
    # Jamba: "attn_layer_period: once in this many layers, an attention layer";
    # "attn_layer_offset: the index of the first attention layer" -> layers 1, 5 of 8
    (dict(num_hidden_layers=8, attn_layer_period=4, attn_layer_offset=1), (N, F, N, N, N, F, N, N)),
    (dict(num_hidden_layers=8, attn_layer_period=4), (F, N, N, N, F, N, N, N)),       # offset defaults to 0
    (dict(num_hidden_layers=8, attn_layer_period=4, attn_layer_offset=0), (F, N, N, N, F, N, N, N)),
    # Qwen3-Next: every full_attention_interval-th layer (the 4th, 8th) is full attention
    (dict(num_hidden_layers=8, full_attention_interval=4), (N, N, N, F, N, N, N, F)),
    # Gemma 3: every sliding_window_pattern-th layer is global (default 6)
    (dict(model_type="gemma3_text", num_hidden_layers=6, sliding_window=512), (S, S, S, S, S, F)),
    (dict(model_type="gemma3", num_hidden_layers=6, sliding_window=512, sliding_window_pattern=3),
     (S, S, F, S, S, F)),
    (dict(model_type="cohere2", num_hidden_layers=4, sliding_window=512, sliding_window_pattern=2), (S, F, S, F)),
    # Gemma 2: alternating, local first
    (dict(model_type="gemma2", num_hidden_layers=4, sliding_window=512), (S, F, S, F)),
    # Qwen2: "the first max_window_layers layers use full attention, later ones SWA", only with
    # use_sliding_window; max_window_layers defaults to all layers (no sliding)
    (dict(model_type="qwen2", num_hidden_layers=4, sliding_window=512, use_sliding_window=True,
          max_window_layers=1), (F, S, S, S)),
    (dict(model_type="qwen3", num_hidden_layers=4, sliding_window=512, use_sliding_window=True), (F, F, F, F)),
    (dict(model_type="qwen2_moe", num_hidden_layers=4, sliding_window=512), (F, F, F, F)),
    (dict(model_type="qwen3_moe", num_hidden_layers=4, sliding_window=512, use_sliding_window=True,
          max_window_layers=0), (S, S, S, S)),
    (dict(model_type="qwen3_moe", num_hidden_layers=4, sliding_window=512, use_sliding_window=True,
          max_window_layers=2), (F, F, S, S)),
    (dict(model_type="qwen2_moe", num_hidden_layers=4, sliding_window=512, use_sliding_window=True,
          max_window_layers=3), (F, F, F, S)),
    (dict(model_type="qwen3", num_hidden_layers=4, sliding_window=512, use_sliding_window=True,
          max_window_layers=1), (F, S, S, S)),
    # Mistral-style: the window applies to every layer unless use_sliding_window is false
    (dict(model_type="mistral", num_hidden_layers=4, sliding_window=512), (S, S, S, S)),
    (dict(model_type="mistral", num_hidden_layers=4, sliding_window=512, use_sliding_window=False), (F, F, F, F)),
    # Llama 4: no_rope_layers[i] = 1 -> RoPE layer (chunked), 0 -> NoPE (global); without the list,
    # every no_rope_layer_interval-th layer (default 4) is global
    (dict(num_hidden_layers=4, attention_chunk_size=8192, no_rope_layers=[0, 1, 1, 0]), (F, Ch, Ch, F)),
    (dict(num_hidden_layers=4, attention_chunk_size=8192, no_rope_layers=[0, 1]), (Ch, Ch, Ch, F)),  # wrong length
    (dict(num_hidden_layers=4, attention_chunk_size=8192, no_rope_layer_interval=2), (Ch, F, Ch, F)),
    # layer_types, every name transformers uses
    (dict(num_hidden_layers=4, sliding_window=64, layer_types=["attention", "global", "local", "sliding_attention"]),
     (F, F, S, S)),
    (dict(num_hidden_layers=4, layer_types=["mamba", "conv", "recurrent", "full_attention"]), (N, N, N, F)),
    (dict(num_hidden_layers=2, attention_chunk_size=64, layer_types=["chunked_attention", "full_attention"]),
     (Ch, F)),
])
def test_layer_kinds_by_family(over, kinds):
    assert parse_config(_base(**over)).layer_kinds == kinds


def test_window_and_chunk_kept_with_layer_types():
    spec = parse_config(_base(num_hidden_layers=2, sliding_window=64, attention_chunk_size=32,
                              layer_types=["sliding_attention", "chunked_attention"]))
    assert (spec.sliding_window, spec.attention_chunk_size) == (64, 32)
    gemma = parse_config(_base(model_type="gemma2", num_hidden_layers=2, sliding_window=512))
    assert (gemma.sliding_window, gemma.attention_chunk_size) == (512, None)
    hybrid = parse_config(_base(num_hidden_layers=4, sliding_window=512, full_attention_interval=2))
    assert hybrid.sliding_window is None          # Qwen3-Next's linear layers: no window applies


@pytest.mark.parametrize("over,kv_heads", [
    # Falcon 7B (RW): multi_query defaults to true when absent -> 1 KV head
    (dict(model_type="falcon"), 1),
    (dict(model_type="RefinedWebModel", multi_query=True), 1),
    (dict(model_type="RefinedWeb", multi_query=False), 8),
    # Falcon 40B: new_decoder_architecture reads num_kv_heads / n_head_kv, ignores multi_query
    (dict(model_type="falcon", new_decoder_architecture=True, multi_query=True, n_head_kv=2), 2),
    (dict(model_type="falcon", new_decoder_architecture=True, num_key_value_heads=4), 4),
    (dict(model_type="falcon", new_decoder_architecture=True), 8),       # none given: one per query head
    # GPT-BigCode: multi_query true -> one KV head; false or absent -> MHA
    (dict(model_type="gpt_bigcode", multi_query=True), 1),
    (dict(model_type="gpt_bigcode", multi_query=False), 8),
    # Falcon family: its own field num_kv_heads (legacy n_head_kv) is read, not num_key_value_heads
    # (transformers' FalconConfig takes num_kv_heads only); the original RW 40B config gives n_head_kv
    # without multi_query: only 'falcon' defaults multi_query to true
    (dict(model_type="RefinedWeb", num_kv_heads=2, num_key_value_heads=4), 2),
    (dict(model_type="RefinedWebModel", num_kv_heads=2, num_key_value_heads=4), 2),
    (dict(model_type="RefinedWeb", n_head_kv=4), 4),
    (dict(model_type="falcon", new_decoder_architecture=True, num_kv_heads=2, num_key_value_heads=4), 2),
    (dict(model_type="x", new_decoder_architecture=True, num_kv_heads=2, num_key_value_heads=4), 2),
    (dict(model_type="llama", num_kv_heads=2), 2),                       # other names of the field
    (dict(model_type="llama", n_head_kv=4), 4),
])
def test_kv_heads_by_family(over, kv_heads):
    assert parse_config(_base(**over)).num_kv_heads == kv_heads


def test_ffn_config_without_a_width_leaves_the_count_unknown():
    # DBRX nests the width as ffn_config.ffn_hidden_size; a nested object without it is no error:
    # the KV figures stand and intermediate_size is listed as missing
    cfg = _base(intermediate_size=..., ffn_config={"moe_top_k": 4})
    spec = parse_config(cfg)
    assert spec.intermediate_size is None and spec.kv_bytes_per_token() == 8_192   # 2 x 4 x 8 x 64 x 2 B
    assert [name for name, _ in spec.missing_fields] == ["intermediate_size"]


def test_model_type_from_text_config_first_then_the_wrapper():
    assert parse_config(_base()).model_type == "unknown"                          # none given
    inner = dict(_base(), model_type="llama")
    assert parse_config({"model_type": "llava", "text_config": inner}).model_type == "llama"
    assert parse_config({"model_type": "llava", "text_config": _base()}).model_type == "llava"
    assert parse_config(_base(model_type=7)).model_type == "unknown"              # not a string: ignored


def test_head_dim_given_makes_the_hidden_size_optional():
    # D is read directly, so the KV figure stands without a hidden size: 2 x 4 layers x 8 x 64 x 2 B = 8,192;
    # the hidden size then only lacks for the parameter count
    spec = parse_config(_base(hidden_size=..., head_dim=64))
    assert (spec.head_dim, spec.hidden_size, spec.kv_bytes_per_token()) == (64, None, 8_192)
    assert spec.missing_fields == (("hidden_size", "hidden_size / n_embd / d_model / model_dim"),)


def test_mla_needs_only_the_two_cache_widths():
    # MLA caches kv_lora_rank + qk_rope_head_dim per token per layer, once (no K/V pair):
    # 4 layers x (512 + 64) x 2 B = 4,608 B; the other MLA widths only matter for parameters
    spec = parse_config(_base(kv_lora_rank=512, qk_rope_head_dim=64))
    assert spec.kv_bytes_per_token() == 4_608
    assert (spec.q_lora_rank, spec.qk_nope_head_dim, spec.v_head_dim) == (None, None, None)


@pytest.mark.parametrize("over,experts", [
    ({"num_local_experts": 8}, 8),        # Mixtral
    ({"n_routed_experts": 8}, 8),         # DeepSeek
    ({"num_experts": 8}, 8),              # Qwen-MoE, OLMoE
    ({"num_experts": 0}, 0),              # some dense configs carry num_experts: 0 (no experts)
])
def test_expert_count_names(over, experts):
    spec = parse_config(_base(num_experts_per_tok=2, **over))
    assert spec.num_experts == experts


def test_shared_experts_read():
    # Qwen2-MoE names the shared expert's width; DeepSeek counts shared experts (0 allowed)
    spec = parse_config(_base(num_experts=8, num_experts_per_tok=2, shared_expert_intermediate_size=5632,
                              moe_intermediate_size=1408, n_shared_experts=0))
    assert (spec.shared_expert_intermediate_size, spec.moe_intermediate_size, spec.num_shared_experts) == \
        (5632, 1408, 0)
    assert parse_config(_base(n_routed_experts=8, num_experts_per_tok=2, n_shared_experts=1)).num_shared_experts == 1


def test_dtype_and_tied_embeddings_of_a_wrapped_model():
    # multimodal wrappers: the language model's own field wins, the wrapper's fills in when it has none
    assert parse_config({"text_config": _base(torch_dtype="float16")}).dtype == "float16"
    assert parse_config({"torch_dtype": "float32", "text_config": _base()}).dtype == "float32"
    assert parse_config({"torch_dtype": "float32", "text_config": _base(torch_dtype="float16")}).dtype == "float16"
    assert parse_config(_base(torch_dtype="float16", dtype="float32")).dtype == "float16"   # the older name first
    assert parse_config({"text_config": _base(tie_word_embeddings=True)}).tie_word_embeddings is True
    assert parse_config({"tie_word_embeddings": True, "text_config": _base()}).tie_word_embeddings is True
    assert parse_config({"tie_word_embeddings": True,
                         "text_config": _base(tie_word_embeddings=False)}).tie_word_embeddings is False
    assert parse_config(_base()).tie_word_embeddings is False                  # Llama-style default
    assert parse_config(_base(model_type="gemma2", sliding_window=8)).tie_word_embeddings is True   # Gemma ties


# Architecture details that only feed the parameter count, by model type. Expected flags come from
# each family's transformers modelling code: which projections carry a bias, tied embeddings, gated
# MLP or not, LayerNorm (with bias) or RMSNorm, norms per layer, learned positions, attention sinks.
ARCH = ("tie_word_embeddings", "qkv_bias", "o_bias", "mlp_gated", "mlp_bias", "layernorm_bias", "norms_per_layer",
        "attention_sinks")


@pytest.mark.parametrize("over,flags", [
    ({"model_type": "llama"}, (False, False, False, True, False, False, 2, False)),
    ({"model_type": "llama", "attention_bias": True}, (False, True, True, True, False, False, 2, False)),
    # Qwen2: q/k/v carry a bias, o_proj never (attention_bias is not read)
    ({"model_type": "qwen2"}, (False, True, False, True, False, False, 2, False)),
    ({"model_type": "qwen2_moe", "attention_bias": True}, (False, True, False, True, False, False, 2, False)),
    ({"model_type": "qwen2_moe"}, (False, True, False, True, False, False, 2, False)),
    ({"model_type": "qwen2", "attention_bias": True}, (False, True, False, True, False, False, 2, False)),
    # GPT-2: Conv1D with biases everywhere, tied, up -> GELU -> down, LayerNorm
    ({"model_type": "gpt2"}, (True, True, True, False, True, True, 2, False)),
    ({"model_type": "gemma"}, (True, False, False, True, False, False, 2, False)),
    ({"model_type": "gemma2", "sliding_window": 8}, (True, False, False, True, False, False, 4, False)),
    ({"model_type": "gemma3", "sliding_window": 8}, (True, False, False, True, False, False, 4, False)),
    ({"model_type": "gemma3_text", "sliding_window": 8}, (True, False, False, True, False, False, 4, False)),
    # Falcon: one `bias` flag for every linear layer of attention; classic MLP, LayerNorm
    ({"model_type": "falcon", "bias": True}, (False, True, True, False, False, True, 2, False)),
    ({"model_type": "RefinedWeb"}, (False, False, False, False, False, True, 2, False)),
    ({"model_type": "RefinedWeb", "bias": True}, (False, True, True, False, False, True, 2, False)),
    ({"model_type": "RefinedWebModel", "bias": True, "attention_bias": False},
     (False, True, True, False, False, True, 2, False)),
    # gpt-oss: MLP biases and a learned sink per head
    ({"model_type": "gpt_oss"}, (False, False, False, True, True, False, 2, True)),
])
def test_parameter_details_by_family(over, flags):
    spec = parse_config(_base(**over))
    assert tuple(getattr(spec, name) for name in ARCH) == flags


def test_positions_and_mtp_layers():
    # GPT-2 learns n_positions position embeddings; others use RoPE (0 learned)
    assert parse_config(_base(model_type="gpt2", n_positions=1024)).learned_positions == 1024
    assert parse_config(_base(model_type="llama", n_positions=1024)).learned_positions == 0
    assert parse_config(_base(model_type="gpt2")).learned_positions == 0
    assert parse_config(_base(num_nextn_predict_layers=0)).mtp_layers == 0                  # Kimi K2 ships 0
    # DeepSeek-V3: num_nextn_predict_layers = 1 multi-token-prediction layer (its config.json)
    assert kv.load_model("deepseek-v3").mtp_layers == 1
    assert parse_config(_base()).mtp_layers == 0
    for name in ("max_position_embeddings", "n_positions", "seq_length"):
        assert parse_config(_base(**{name: 4096})).max_position_embeddings == 4096
    assert parse_config(_base()).max_position_embeddings is None


@pytest.mark.parametrize("model_type", ["qwen2", "qwen2_moe", "qwen3", "qwen3_moe"])
def test_qwen_window_unused_unless_asked(model_type):
    # Qwen configs ship sliding_window but apply it only with use_sliding_window: true
    spec = parse_config(_base(model_type=model_type, sliding_window=4096))
    assert spec.sliding_window is None and set(spec.layer_kinds) == {"full"}


def test_a_shared_expert_width_of_zero_means_none():
    # Qwen3-Coder-480B-A35B's config.json says shared_expert_intermediate_size: 0 (no shared expert):
    # 2 layers of a qwen3_moe toy, 4 experts of 32 over d 64 -> experts 4 x 3 x 64 x 32 and nothing shared
    cfg = {"model_type": "qwen3_moe", "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
           "head_dim": 16, "hidden_size": 64, "vocab_size": 10, "intermediate_size": 128, "num_experts": 4,
           "num_experts_per_tok": 2, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 0}
    spec = parse_config(cfg)
    assert spec.shared_expert_intermediate_size is None
    with_shared = parse_config(dict(cfg, shared_expert_intermediate_size=32))
    # the shared expert adds 3 x 64 x 32 and its gate 64 per layer
    assert with_shared.num_params() - spec.num_params() == 2 * (3 * 64 * 32 + 64)
