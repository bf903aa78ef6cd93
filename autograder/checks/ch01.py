"""Chapter 01 (the KV formula): its four graded exercises, as data.

Grade ids, function names and parameter order are a contract with the
grading pipeline; points (3/1/1/2) are on the source notebook's test cells.

=======================================  ==========================================================
grade id                                 the learner writes
=======================================  ==========================================================
ch01_q1_bytes_per_token_from_config      bytes_per_token_from_config(config, dtype_bytes=2)
ch01_q2_kv_bytes_per_sequence            kv_bytes_for_sequence(L, K, D, b, seq_len)
ch01_q3_kv_bytes_per_batch               kv_bytes_for_batch(L, K, D, b, seq_len, batch_size)
ch01_q4_sequences_that_fit               sequences_that_fit(budget_bytes, L, K, D, b, seq_len)
=======================================  ==========================================================

(L, K, D, b stand for layers, kv_heads, head_dim, dtype_bytes.)

Expected values come from kvlib: q1 from ``kvlib.parse_config(config).kv_bytes_per_token(dtype_bytes)``
(every layer counted in full: no sliding-window cap in this chapter), q2-q4 from
``kv_bytes_per_token``, ``kv_bytes_per_sequence``, ``kv_bytes_total`` and ``max_concurrency``.
Visible cases are real bundled configs; hidden cases are drawn from a seed over the
bundled (non-MLA) configs with mutations: num_key_value_heads removed or null, head_dim
added, removed or null, other layer counts, dtype_bytes of 1, 2 or 4.
"""

from __future__ import annotations

import kvlib as kv

from .cases import (
    CONFIG_VARIANTS,
    GEOMETRY,
    bytes_per_token,
    config_bytes_per_token,
    config_case,
    config_hidden,
    config_slip_inputs,
    geometry_case,
    geometry_hidden,
    geometry_slip_inputs,
    node_budget_bytes,
    random_seq_len,
)
from .core import Exercise, exercises, legacy_checks

H100 = "H100-SXM"
RESERVE_BYTES = 4 * kv.GB          # activations and workspace on one GPU (seed 003: 2 + 2 GB)
NODE_RESERVE_BYTES = 20 * kv.GB    # the same on a 4-GPU node (seed 001: ~20 GB)
Q1_VARIANTS = CONFIG_VARIANTS
Q2_PARAMS = GEOMETRY + ("seq_len",)

HIDDEN_NOTE_CONFIG = ("(Hidden cases use other bundled configs, num_key_value_heads or head_dim absent "
                      "or null, other layer counts, and dtype_bytes of 1, 2 or 4.)")
HIDDEN_NOTE_GEOMETRY = "(Hidden cases use other models' geometry, dtype_bytes of 1, 2 or 4, and other lengths.)"

_cfg = kv.bundled_config
_HEAD_DIM_HINT = "an explicit head_dim in the config wins over hidden_size / num_attention_heads."

Q1_VISIBLE = (
    config_case("meta-llama/Llama-3.1-8B", _cfg("meta-llama/Llama-3.1-8B")),
    config_case("meta-llama/Llama-2-7b-hf", _cfg("meta-llama/Llama-2-7b-hf"),
                hint="dtype_bytes is an argument: do not read torch_dtype."),
    config_case("google/gemma-2-9b-it", _cfg("google/gemma-2-9b-it"), hint=_HEAD_DIM_HINT),
    config_case("openai-community/gpt2-large", _cfg("openai-community/gpt2-large"),
                hint="GPT-2 configs name the fields n_layer, n_head and n_embd, and have no "
                     "num_key_value_heads (so one KV head per query head)."),
    config_case("Qwen/Qwen3-0.6B", _cfg("Qwen/Qwen3-0.6B"), dtype_bytes=1, hint=_HEAD_DIM_HINT),
    config_case("meta-llama/Llama-3.1-8B", dict(_cfg("meta-llama/Llama-3.1-8B"), num_key_value_heads=None),
                dtype_bytes=4, variant="num_key_value_heads: null",
                hint="num_key_value_heads set to null means the same as absent: one KV head per query head."),
)

Q2_VISIBLE = (
    geometry_case("llama-3.1-8b", 2, "Llama 3.1 8B, bf16, 8,192 tokens", seq_len=8192),
    geometry_case("llama-3.3-70b", 2, "Llama 3.3 70B, bf16, 8,192 tokens", seq_len=8192),
    geometry_case("qwen2.5-7b", 1, "Qwen2.5 7B, fp8, 32,768 tokens", seq_len=32768),
    geometry_case("llama-2-7b", 2, "Llama 2 7B (MHA), bf16, 4,000 tokens", seq_len=4000),
)

Q3_VISIBLE = (
    geometry_case("llama-3.3-70b", 2, "Llama 3.3 70B, bf16, batch of 32 x 8,192 tokens", seq_len=8192, batch_size=32),
    geometry_case("llama-3.1-8b", 2, "Llama 3.1 8B, bf16, batch of 32 x 4,096 tokens", seq_len=4096, batch_size=32),
    geometry_case("mistral-7b", 1, "Mistral 7B, fp8, batch of 8 x 16,384 tokens", seq_len=16384, batch_size=8),
    geometry_case("phi-3-mini", 2, "Phi-3 mini (MHA), bf16, batch of 5 x 3,000 tokens", seq_len=3000, batch_size=5),
)

_B70 = node_budget_bytes("llama-3.3-70b", H100, 4, NODE_RESERVE_BYTES)
_B8 = node_budget_bytes("llama-3.1-8b", H100, 1, RESERVE_BYTES)
_B32 = node_budget_bytes("qwen2.5-32b", "A100-80GB", 1, RESERVE_BYTES)
Q4_VISIBLE = (
    geometry_case("llama-3.3-70b", 2, "Llama 3.3 70B on 4 x H100 (CUDA memory less weights and 20 GB), "
                  "8,192 tokens", budget_bytes=_B70, seq_len=8192),
    geometry_case("llama-3.1-8b", 2, "Llama 3.1 8B on one H100 (CUDA memory less weights and 4 GB), "
                  "8,192 tokens", budget_bytes=_B8, seq_len=8192),
    geometry_case("llama-3.1-8b", 2, "Llama 3.1 8B on one H100, 131,072 tokens", budget_bytes=_B8, seq_len=131072),
    geometry_case("qwen2.5-32b", 1, "Qwen2.5 32B on one A100-80GB, fp8 KV, 32,768 tokens",
                  budget_bytes=_B32, seq_len=32768),
    geometry_case("llama-3.1-8b", 2, "Llama 3.1 8B, a 1 GB budget, 8,192 tokens (less than one sequence)",
                  budget_bytes=kv.GB, seq_len=8192),
)


def _with_seq_len(rng, case):
    case["kwargs"]["seq_len"] = random_seq_len(rng)


def _with_batch(rng, case):
    case["kwargs"]["seq_len"] = random_seq_len(rng)
    case["kwargs"]["batch_size"] = rng.randint(1, 512)


def _with_budget(rng, case):
    seq_len = random_seq_len(rng)
    per_seq = bytes_per_token(case) * seq_len
    whole = rng.choice([0, rng.randint(1, 20), rng.randint(20, 2000)])
    case["kwargs"]["budget_bytes"] = whole * per_seq + rng.randint(1, per_seq - 1) if per_seq > 1 else whole
    case["kwargs"]["seq_len"] = seq_len


EXERCISES = exercises(
    Exercise(
        grade_id="ch01_q1_bytes_per_token_from_config",
        function_name="bytes_per_token_from_config",
        params=("config", "dtype_bytes"),
        visible_cases=Q1_VISIBLE,
        hidden_cases=config_hidden,
        expected=config_bytes_per_token,
        quantity="kv_bytes_per_token",
        slip_inputs=config_slip_inputs,
        hidden_note=HIDDEN_NOTE_CONFIG,
    ),
    Exercise(
        grade_id="ch01_q2_kv_bytes_per_sequence",
        function_name="kv_bytes_for_sequence",
        params=Q2_PARAMS,
        visible_cases=Q2_VISIBLE,
        hidden_cases=geometry_hidden(_with_seq_len),
        expected=lambda c: kv.kv_bytes_per_sequence(bytes_per_token(c), c["kwargs"]["seq_len"]),
        quantity="kv_bytes_per_sequence",
        slip_inputs=geometry_slip_inputs,
        hidden_note=HIDDEN_NOTE_GEOMETRY,
    ),
    Exercise(
        grade_id="ch01_q3_kv_bytes_per_batch",
        function_name="kv_bytes_for_batch",
        params=Q2_PARAMS + ("batch_size",),
        visible_cases=Q3_VISIBLE,
        hidden_cases=geometry_hidden(_with_batch),
        expected=lambda c: kv.kv_bytes_total(bytes_per_token(c), c["kwargs"]["seq_len"], c["kwargs"]["batch_size"]),
        quantity="kv_bytes_total",
        slip_inputs=geometry_slip_inputs,
        hidden_note=HIDDEN_NOTE_GEOMETRY,
    ),
    Exercise(
        grade_id="ch01_q4_sequences_that_fit",
        function_name="sequences_that_fit",
        params=("budget_bytes",) + Q2_PARAMS,
        visible_cases=Q4_VISIBLE,
        hidden_cases=geometry_hidden(_with_budget),
        expected=lambda c: kv.max_concurrency(c["kwargs"]["budget_bytes"],
                                              kv.kv_bytes_per_sequence(bytes_per_token(c), c["kwargs"]["seq_len"])),
        quantity="max_concurrency",
        slip_inputs=geometry_slip_inputs,
        unit="sequences",
        hidden_note=HIDDEN_NOTE_GEOMETRY,
    ),
)

# Notebooks released before the registry call ch01.check_q1(fn) ... check_q4(fn).
__getattr__ = legacy_checks(EXERCISES)
