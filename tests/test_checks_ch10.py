"""Chapter 10's instant checks: right answers pass, each catalogued slip gets its named message.

Reference functions are written by hand here (never through kvlib). Figures by hand from the published
configs and vLLM's state shapes (mamba_utils.py): Qwen3-Next-80B-A3B, 36 Gated DeltaNet layers of
3 x 8,192 x 2 + 32 x 128 x 128 x 2 = 1,097,728 B and 12 attention layers of 2 KV heads x 256 (2,048 B a token
in bf16); Nemotron-H-56B, 54 Mamba2 layers of 3 x 20,480 x 2 + 256 x 64 x 256 x 4 = 16,900,096 B and 10
attention layers of 8 x 128 (4,096 B a token); DeepSeek-V3.2, 61 layers of (512 + 64) x 2 = 1,152 B plus an
indexer key of 128 fp8 numbers and one fp32 scale, 132 B, in every layer (vLLM's DeepseekV32IndexerCache).
"""

from __future__ import annotations

import json

import pytest

from autograder.checks import ch10
from chapter_checks import fails, passes_visible_and_hidden, source_points

SEEDS = (0, 1, 7, 2026, 123456)
Q1, Q2, Q3 = ch10.EXERCISES


# --- reference solutions, by hand -------------------------------------------
def hybrid_sequence_bytes_per_gpu(attention_layers, state_layers, kv_heads, head_dim, dtype_bytes,
                                  state_bytes_per_layer, context, tp):
    return (state_layers * state_bytes_per_layer // tp
            + 2 * attention_layers * max(1, kv_heads // tp) * head_dim * dtype_bytes * context)


def dsa_bytes_per_token_per_group(layers, latent_dim, rope_dim, indexer_layers, index_head_dim, dtype_bytes, tp):
    return tp * (layers * (latent_dim + rope_dim) * dtype_bytes
                 + indexer_layers * (index_head_dim + index_head_dim // 128 * 4))


def state_crossover(state_bytes, bytes_per_token, dense_bytes_per_token):
    return -(-state_bytes // (dense_bytes_per_token - bytes_per_token))


REFERENCE = {Q1: hybrid_sequence_bytes_per_gpu, Q2: dsa_bytes_per_token_per_group, Q3: state_crossover}


# --- the contract with the pipeline ------------------------------------------
def test_grade_ids_and_points():
    assert list(ch10.EXERCISES) == list(source_points("ch10_state_and_sparsity"))
    assert set(source_points("ch10_state_and_sparsity").values()) == {2}


def test_the_chapters_figures_by_hand():
    q1 = {c["label"]: c for c in ch10.EXERCISES[Q1].cases()}
    assert ch10._hybrid_expected(q1["Qwen3-Next-80B-A3B-Thinking, 4,096 tokens, TP 1"]) == \
        36 * 1_097_728 + 12 * 2048 * 4096
    assert ch10._hybrid_expected(q1["Nemotron-H-56B-Base-8K, 8,192 tokens, TP 4"]) == \
        54 * 16_900_096 // 4 + 2 * 10 * 2 * 128 * 2 * 8192
    # 2 KV heads at TP 4: one whole head a GPU; the state a quarter
    assert ch10._hybrid_expected(q1["Qwen3-Next-80B-A3B-Thinking, 32,768 tokens, TP 4"]) == \
        36 * 1_097_728 // 4 + 2 * 12 * 1 * 256 * 2 * 32768
    q2 = {c["label"]: ch10._dsa_expected(c) for c in ch10.EXERCISES[Q2].cases()}
    assert q2["DeepSeek-V3.2, TP 1, dtype_bytes=2"] == 61 * 1152 + 61 * 132 == 78_324
    assert q2["DeepSeek-V3.2, TP 8, dtype_bytes=2"] == 8 * 78_324            # every GPU keeps it all
    assert q2["DeepSeek-V3, TP 2, dtype_bytes=2"] == 2 * 61 * 1152           # no indexer
    q3 = {c["label"]: ch10._crossover_expected(c) for c in ch10.EXERCISES[Q3].cases()}
    assert q3["Qwen3-Next-80B-A3B-Thinking against its all-attention twin, TP 1"] == 536      # 1,097,728 / 2,048
    assert q3["Qwen3-Next-80B-A3B-Thinking against Llama-3.3-70B-Instruct, TP 1"] == 131     # 130.4 up
    assert q3["Nemotron-H-56B-Base-8K against its all-attention twin, TP 4"] == 4126         # 16,900,096 / 4,096


def test_cases_are_json_safe_and_seeded():
    for ex in ch10.EXERCISES.values():
        for case in ex.cases() + ex.cases(hidden=True, seed=3):
            json.dumps(case)
        assert ex.cases(hidden=True, seed=11) == ex.cases(hidden=True, seed=11)
        assert ex.cases(hidden=True, seed=11) != ex.cases(hidden=True, seed=12)


@pytest.mark.parametrize("grade_id", [Q1, Q2, Q3])
def test_reference_passes_visible_and_hidden(grade_id, capsys):
    passes_visible_and_hidden(grade_id, REFERENCE[grade_id], SEEDS, capsys)


# --- slips: one wrong function per catalogued slip ---------------------------
def q1_state_per_token(attention_layers, state_layers, kv_heads, head_dim, dtype_bytes, state_bytes_per_layer,
                       context, tp):
    return (state_layers * state_bytes_per_layer // tp * context
            + 2 * attention_layers * max(1, kv_heads // tp) * head_dim * dtype_bytes * context)


def q1_state_whole(attention_layers, state_layers, kv_heads, head_dim, dtype_bytes, state_bytes_per_layer,
                   context, tp):
    return (state_layers * state_bytes_per_layer
            + 2 * attention_layers * max(1, kv_heads // tp) * head_dim * dtype_bytes * context)


def q1_all_layers(attention_layers, state_layers, kv_heads, head_dim, dtype_bytes, state_bytes_per_layer,
                  context, tp):
    return (state_layers * state_bytes_per_layer // tp
            + 2 * (attention_layers + state_layers) * max(1, kv_heads // tp) * head_dim * dtype_bytes * context)


def q1_no_state(attention_layers, state_layers, kv_heads, head_dim, dtype_bytes, state_bytes_per_layer,
                context, tp):
    return 2 * attention_layers * max(1, kv_heads // tp) * head_dim * dtype_bytes * context


def q2_no_indexer(layers, latent_dim, rope_dim, indexer_layers, index_head_dim, dtype_bytes, tp):
    return tp * layers * (latent_dim + rope_dim) * dtype_bytes


def q2_indexer_split(layers, latent_dim, rope_dim, indexer_layers, index_head_dim, dtype_bytes, tp):
    return (tp * layers * (latent_dim + rope_dim) * dtype_bytes
            + indexer_layers * (index_head_dim + index_head_dim // 128 * 4))


def q2_indexer_dtype(layers, latent_dim, rope_dim, indexer_layers, index_head_dim, dtype_bytes, tp):
    return tp * (layers * (latent_dim + rope_dim) * dtype_bytes
                 + indexer_layers * (index_head_dim * dtype_bytes + index_head_dim // 128 * 4))


def q2_no_scale(layers, latent_dim, rope_dim, indexer_layers, index_head_dim, dtype_bytes, tp):
    return tp * (layers * (latent_dim + rope_dim) * dtype_bytes + indexer_layers * index_head_dim)


def q2_once_for_the_group(layers, latent_dim, rope_dim, indexer_layers, index_head_dim, dtype_bytes, tp):
    return dsa_bytes_per_token_per_group(layers, latent_dim, rope_dim, indexer_layers, index_head_dim, dtype_bytes, 1)


def q3_floor(state_bytes, bytes_per_token, dense_bytes_per_token):
    return state_bytes // (dense_bytes_per_token - bytes_per_token)


def q3_dense_alone(state_bytes, bytes_per_token, dense_bytes_per_token):
    return -(-state_bytes // dense_bytes_per_token)


@pytest.mark.parametrize("grade_id, fn, words", [
    (Q1, q1_state_per_token, "once per sequence, whatever its length"),
    (Q1, q1_state_whole, "keeps 1/"),
    (Q1, q1_all_layers, "only the 12 attention layers keep KV per token"),
    (Q1, q1_no_state, "the state is missing"),
    (Q2, q2_no_indexer, "the indexer's key is missing"),
    (Q2, q2_indexer_split, "you split it over the GPUs"),
    (Q2, q2_indexer_dtype, "fp8, 1 byte each"),
    (Q2, q2_no_scale, "4-byte fp32 scale"),
    (Q2, q2_once_for_the_group, "each GPU keeps a whole copy"),
    (Q3, q3_floor, "rounded up (ceil)"),
    (Q3, q3_dense_alone, "dense - hybrid"),
])
def test_each_slip_is_named(grade_id, fn, words):
    message = fails(grade_id, fn)
    assert words in message, message
    assert "Traceback" not in message
