"""kvlib.spec.ModelSpec: validation (each message names its field) and the geometry questions, by hand."""

import pytest

from kvlib import load_model
from kvlib.spec import CHUNKED, FULL, LAYER_KINDS, NO_KV, SLIDING, ModelSpec, SpecError


def _spec(**kw):
    base = dict(name="t", model_type="llama", num_layers=4, num_heads=8, num_kv_heads=2, head_dim=64,
                hidden_size=512, vocab_size=1000, intermediate_size=2048)
    base.update(kw)
    return ModelSpec(**base)


def test_layer_kind_names():
    assert (FULL, SLIDING, CHUNKED, NO_KV) == ("full", "sliding", "chunked", "none")
    assert LAYER_KINDS == (FULL, SLIDING, CHUNKED, NO_KV, "mamba2", "gated_deltanet")


@pytest.mark.parametrize("field", ["num_layers", "num_heads", "num_kv_heads", "head_dim"])
@pytest.mark.parametrize("bad", [0, -1, 2.0, None, True])
def test_geometry_fields_must_be_positive_integers(field, bad):
    with pytest.raises(SpecError, match=rf"^{field} must be a positive integer, got {bad!r}$"):
        _spec(**{field: bad})


@pytest.mark.parametrize("field", ["hidden_size", "vocab_size", "intermediate_size"])
def test_parameter_count_fields_may_be_missing_but_not_wrong(field):
    assert getattr(_spec(**{field: None}), field) is None
    with pytest.raises(SpecError, match=rf"^{field} must be a positive integer, got 0$"):
        _spec(**{field: 0})


def test_validation_messages():
    with pytest.raises(SpecError, match=r"^num_heads \(8\) must be a multiple of num_kv_heads \(3\)$"):
        _spec(num_kv_heads=3)
    with pytest.raises(SpecError, match=r"^layer_kinds has 3 entries for 4 layers$"):
        _spec(layer_kinds=(FULL,) * 3)
    with pytest.raises(SpecError, match=r"^layer_kinds holds unknown kind 'mamba'$"):
        _spec(layer_kinds=(FULL, FULL, FULL, "mamba"))
    with pytest.raises(SpecError, match=r"^sliding_window must be set when some layers slide$"):
        _spec(layer_kinds=(FULL, SLIDING, FULL, FULL))
    with pytest.raises(SpecError, match=r"^attention_chunk_size must be set when some layers are chunked$"):
        _spec(layer_kinds=(FULL, CHUNKED, FULL, FULL))
    with pytest.raises(SpecError, match=r"^MLA needs both kv_lora_rank and qk_rope_head_dim$"):
        _spec(kv_lora_rank=512)
    assert _spec().layer_kinds == (FULL,) * 4


@pytest.mark.parametrize("kw,attention", [
    (dict(num_kv_heads=1), "mqa"), (dict(num_kv_heads=8), "mha"), (dict(num_kv_heads=2), "gqa"),
    (dict(num_kv_heads=1, kv_lora_rank=512, qk_rope_head_dim=64), "mla"),
])
def test_attention_kind(kw, attention):
    assert _spec(**kw).attention == attention


def test_cache_geometry():
    gqa = _spec()
    assert (gqa.cache_heads, gqa.cache_head_dim, gqa.is_mla) == (2, 64, False)
    mla = _spec(num_kv_heads=8, kv_lora_rank=512, qk_rope_head_dim=64)
    assert (mla.cache_heads, mla.cache_head_dim, mla.is_mla) == (1, 576, True)
    assert _spec(layer_kinds=(FULL, NO_KV, NO_KV, FULL)).num_kv_layers == 2


def test_layer_tokens_held():
    s = _spec(layer_kinds=(FULL, SLIDING, CHUNKED, NO_KV), sliding_window=100, attention_chunk_size=300)
    assert [s.layer_tokens_held(k, 50) for k in s.layer_kinds] == [50, 50, 50, 0]
    assert [s.layer_tokens_held(k, 1000) for k in s.layer_kinds] == [1000, 100, 300, 0]


def test_bytes_per_token_and_sequence_by_hand():
    s = _spec(layer_kinds=(FULL, SLIDING, CHUNKED, NO_KV), sliding_window=100, attention_chunk_size=300)
    # one layer: 2 x 2 KV heads x 64 x 2 B = 512 B per token; 3 KV layers = 1,536 B
    assert s.layer_kv_bytes_per_token() == 512 and s.kv_bytes_per_token() == 1536
    # fp8 and tp = 2 (one KV head per rank): 2 x 1 x 64 x 1 = 128 B per layer
    assert s.layer_kv_bytes_per_token(1, tp=2) == 128 and s.kv_bytes_per_token(kv_dtype_bytes=1, tp=2) == 384
    # 1,000 tokens: 512 x (1000 + 100 + 300 + 0) = 716,800 B
    assert s.kv_bytes_per_sequence(1000) == 716_800
    # MLA: (512 + 64) x 2 B per layer, no factor 2, same on every rank
    mla = _spec(num_kv_heads=8, kv_lora_rank=512, qk_rope_head_dim=64)
    assert mla.layer_kv_bytes_per_token() == 1152 and mla.kv_bytes_per_token(tp=8) == 4 * 1152


def test_kv_heads_per_gpu_checks_tp():
    s = _spec(num_heads=16, num_kv_heads=8)
    assert [s.kv_heads_per_gpu(tp) for tp in (1, 2, 4, 8, 16, 32)] == [8, 4, 2, 1, 1, 1]
    for bad in (0, -2, 2.0, "2"):
        with pytest.raises(SpecError, match=rf"^tp must be a positive integer, got {bad!r}$"):
            s.kv_heads_per_gpu(bad)
    with pytest.raises(SpecError, match=r"^tp=3 must divide num_kv_heads=8 or be a multiple of it$"):
        s.kv_heads_per_gpu(3)
    with pytest.raises(SpecError, match=r"^tp=12 must divide"):
        s.kv_heads_per_gpu(12)
    assert _spec(num_kv_heads=8, kv_lora_rank=512, qk_rope_head_dim=64).kv_heads_per_gpu(3) == 1


def test_served_dtype_and_weights():
    assert _spec(dtype="float32").dtype_bytes == 2
    # Llama 3.1 8B: 8,030,261,248 parameters (the published safetensors total, 8.03B), 2 B each in bf16
    spec = load_model("llama-3.1-8b")
    assert spec.num_params() == 8_030_261_248 and spec.weight_bytes() == 16_060_522_496
    assert spec.weight_bytes(0.5) == spec.num_params() // 2
    assert spec.num_params_active() == spec.num_params() and spec.num_params_mtp() == 0


def test_a_missing_parameter_field_does_not_stop_the_checks_of_the_next():
    with pytest.raises(SpecError, match=r"^vocab_size must be a positive integer, got 0$"):
        _spec(hidden_size=None, vocab_size=0)
    assert _spec(num_kv_heads=8).kv_heads_per_gpu() == 8     # tp defaults to 1
