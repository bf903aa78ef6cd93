"""Property tests of the formulas and the spec (hypothesis)."""

from hypothesis import given, settings
from hypothesis import strategies as st

import kvlib as kv
from kvlib.config import parse_config

pos = st.integers(min_value=1, max_value=512)


@given(pos, pos, pos, st.sampled_from([1, 2, 4]), st.integers(1, 8))
def test_linear_in_each_factor(layers, kv_heads, head_dim, b, k):
    base = kv.kv_bytes_per_token(layers, kv_heads, head_dim, b)
    assert kv.kv_bytes_per_token(k * layers, kv_heads, head_dim, b) == k * base
    assert kv.kv_bytes_per_token(layers, k * kv_heads, head_dim, b) == k * base
    assert kv.kv_bytes_per_token(layers, kv_heads, k * head_dim, b) == k * base
    assert kv.kv_bytes_total(base, k * 100, 3) == k * kv.kv_bytes_total(base, 100, 3)
    assert kv.kv_bytes_total(base, 100, k * 3) == k * kv.kv_bytes_total(base, 100, 3)


@given(pos, pos, pos)
def test_fp8_halves_bf16_exactly(layers, kv_heads, head_dim):
    assert 2 * kv.kv_bytes_per_token(layers, kv_heads, head_dim, 1) == kv.kv_bytes_per_token(layers, kv_heads, head_dim, 2)


@given(pos, pos, pos, st.sampled_from([1, 2]))
def test_mla_has_no_factor_two(layers, latent, rope, b):
    assert kv.mla_bytes_per_token(layers, latent, rope, b) == layers * (latent + rope) * b
    # an MLA cache of width w equals a one-head "GQA" cache of width w, halved
    assert 2 * kv.mla_bytes_per_token(layers, latent, rope, b) == kv.kv_bytes_per_token(layers, 1, latent + rope, b)


@st.composite
def specs(draw):
    kv_heads = draw(st.sampled_from([1, 2, 4, 8, 16]))
    group = draw(st.sampled_from([1, 2, 4, 8]))
    head_dim = draw(st.sampled_from([64, 96, 128, 256]))
    heads = kv_heads * group
    cfg = {"num_hidden_layers": draw(st.integers(1, 96)), "num_attention_heads": heads,
           "num_key_value_heads": kv_heads, "head_dim": head_dim, "hidden_size": heads * head_dim,
           "vocab_size": 1000, "intermediate_size": 1024}
    return parse_config(cfg)


@given(specs(), st.sampled_from([1, 2, 4, 8, 16, 32, 64]))
def test_tp_never_increases_per_gpu_kv(spec, tp):
    per_gpu = spec.kv_bytes_per_token(tp=tp)
    assert per_gpu <= spec.kv_bytes_per_token()
    if tp >= spec.num_kv_heads:  # replication: at least one whole head per GPU
        assert spec.kv_heads_per_gpu(tp) == 1
    assert per_gpu * min(tp, spec.num_kv_heads) == spec.kv_bytes_per_token()


@given(specs(), st.integers(1, 10**6))
@settings(max_examples=50)
def test_sequence_bytes_linear_without_windows(spec, context):
    assert spec.kv_bytes_per_sequence(context) == spec.kv_bytes_per_token() * context


@given(st.integers(1, 10**7))
@settings(max_examples=50)
def test_windowed_never_exceeds_full(context):
    spec = kv.load_model("gemma-2-9b")
    assert spec.kv_bytes_per_sequence(context) <= spec.kv_bytes_per_token() * context
