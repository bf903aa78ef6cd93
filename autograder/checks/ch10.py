"""Chapter 10 (state and sparsity): its three graded exercises, as data.

Grade ids, function names and parameter order are a contract with the grading
pipeline; points are on the source notebook's test cells.

=====================================  ===============================================================
grade id                               the learner writes
=====================================  ===============================================================
ch10_q1_hybrid_sequence_bytes_per_gpu  hybrid_sequence_bytes_per_gpu(attention_layers, state_layers,
                                       kv_heads, head_dim, dtype_bytes, state_bytes_per_layer, context, tp)
ch10_q2_dsa_bytes_per_token_per_group  dsa_bytes_per_token_per_group(layers, latent_dim, rope_dim,
                                       indexer_layers, index_head_dim, dtype_bytes, tp)
ch10_q3_state_crossover                state_crossover(state_bytes, bytes_per_token, dense_bytes_per_token)
=====================================  ===============================================================

Every case is a real bundled config (its geometry read by kvlib), so the expected values are kvlib's
own figures: q1 ``spec.state_bytes_per_sequence(tp) + spec.kv_bytes_per_sequence(context, tp=tp)``, q2
``tp x spec.kv_bytes_per_token(dtype_bytes, tp=tp)`` (the MLA latent and the indexer, both whole on every
rank, so the group holds tp copies), q3 ``kvlib.state_crossover_tokens`` against the hybrid's all-attention twin or a dense model.
"""

from __future__ import annotations

import random

import kvlib as kv

from .schema import Edge, Exercise, exercises

HYBRIDS = ("qwen3-next-80b-a3b", "nemotron-h-56b", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16")
DSA_MODELS = ("deepseek-v3.2", "glm-5", "deepseek-v3")
DENSE = ("llama-3.3-70b", "llama-3.1-8b", "qwen2.5-32b", "mistral-7b")
TPS = (1, 2, 4, 8)

HIDDEN_NOTE_HYBRID = "(Hidden cases use the same three hybrids at other contexts and TP sizes.)"
HIDDEN_NOTE_DSA = "(Hidden cases use DeepSeek-V3.2, GLM-5 and DeepSeek-V3 at other TP sizes and cache dtypes.)"
HIDDEN_NOTE_CROSSOVER = "(Hidden cases use the hybrids at other TP sizes, against their twins and other dense models.)"


def _spec(case: dict):
    return kv.load_model(case["context"]["model"])


def _name(model: str) -> str:
    return kv.load_model(model).name.split("/")[-1]


# --- q1: one sequence of a hybrid on one GPU -----------------------------------------------------------
def _hybrid_case(model: str, context: int, tp: int, hint: str = "", dtype_bytes: int | None = None) -> dict:
    spec = kv.load_model(model)
    assert kv.feasibility.tp_refusal(spec, tp) is None, (model, tp)    # a layout vLLM accepts
    [state_kind] = sorted(set(spec.layer_kinds) & {"mamba2", "gated_deltanet"})
    heads, head_dim = spec.kv_geometry("full")
    kwargs = dict(attention_layers=spec.num_kv_layers, state_layers=spec.num_state_layers, kv_heads=heads,
                  head_dim=head_dim, dtype_bytes=spec.dtype_bytes if dtype_bytes is None else dtype_bytes,
                  state_bytes_per_layer=spec.layer_state_bytes(state_kind), context=context, tp=tp)
    return {"label": f"{_name(model)}, {context:,} token{'s' if context != 1 else ''}, TP {tp}", "kwargs": kwargs,
            "context": {"hint": hint, "model": model}}


def _hybrid_expected(case: dict) -> int:
    k, spec = case["kwargs"], _spec(case)
    return spec.state_bytes_per_sequence(k["tp"]) + spec.kv_bytes_per_sequence(k["context"], k["dtype_bytes"],
                                                                                 tp=k["tp"])


KV_HEADS_EDGE = Edge("each GPU keeps K // t KV heads, at least one: TP past the KV heads copies them")
Q1_VISIBLE = (
    KV_HEADS_EDGE.on(_hybrid_case("qwen3-next-80b-a3b", 4096, 1)),
    _hybrid_case("nemotron-h-56b", 8192, 4,
                 hint="each GPU of a TP group keeps its share of every state layer: state_bytes_per_layer / tp."),
    KV_HEADS_EDGE.on(_hybrid_case("qwen3-next-80b-a3b", 32768, 4,
                                  hint="2 KV heads over 4 GPUs: each GPU keeps one whole KV head (K / t, at least 1).")),
    _hybrid_case("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", 1000, 2,
                 hint="the state is the same at any context: count it once, not per token."),
    _hybrid_case("nemotron-h-56b", 1, 8),
    _hybrid_case("qwen3-next-80b-a3b", 65536, 2, dtype_bytes=1,
                 hint="an fp8 KV cache (dtype_bytes = 1) shrinks the attention KV; the state is given in bytes."),
)


def _hybrid_hidden(seed: int) -> tuple:
    rng = random.Random(seed)
    cases = []
    for _ in range(8):
        model = rng.choice(HYBRIDS)
        spec = kv.load_model(model)
        tp = rng.choice([t for t in TPS if kv.feasibility.tp_refusal(spec, t) is None])
        cases.append(_hybrid_case(model, rng.randint(1, spec.max_position_embeddings), tp,
                                  dtype_bytes=rng.choice((None, None, 1))))
    return tuple(cases)


def _hybrid_slip_inputs(case: dict) -> dict:
    return dict(case["kwargs"])


# --- q2: DSA's latent and indexer per token, over a TP group -------------------------------------------------
def _dsa_case(model: str, tp: int, dtype_bytes: int = 2, hint: str = "") -> dict:
    spec = kv.load_model(model)
    indexer_dim = spec.index_head_dim if spec.indexer_layers else 128    # the field is there or not: 128 then
    kwargs = dict(layers=spec.num_kv_layers, latent_dim=spec.kv_lora_rank, rope_dim=spec.qk_rope_head_dim,
                  indexer_layers=len(spec.indexer_layers), index_head_dim=indexer_dim, dtype_bytes=dtype_bytes,
                  tp=tp)
    return {"label": f"{_name(model)}, TP {tp}, dtype_bytes={dtype_bytes}", "kwargs": kwargs,
            "context": {"hint": hint, "model": model}}


def _dsa_expected(case: dict) -> int:
    k = case["kwargs"]
    return k["tp"] * _spec(case).kv_bytes_per_token(k["dtype_bytes"], tp=k["tp"])    # each GPU keeps it whole


Q2_VISIBLE = (
    _dsa_case("deepseek-v3.2", 1),
    _dsa_case("deepseek-v3.2", 8, hint="the latent and the indexer key have one head each: every GPU keeps both "
                                       "whole, so the group holds tp copies."),
    _dsa_case("glm-5", 4, 1, hint="dtype_bytes is the latent's; the indexer's numbers are fp8 whatever it is."),
    _dsa_case("deepseek-v3", 2, hint="a model without an indexer (indexer_layers = 0) keeps the latent alone."),
)


def _dsa_hidden(seed: int) -> tuple:
    rng = random.Random(seed)
    return tuple(_dsa_case(rng.choice(DSA_MODELS), rng.choice(TPS + (16,)), rng.choice((1, 2)))
                 for _ in range(8))


# --- q3: the crossover -----------------------------------------------------------------------------------
def _crossover_case(model: str, tp: int, dense: str | None = None, hint: str = "") -> dict:
    spec = kv.load_model(model)
    if dense is None:    # the all-attention twin: every mixer layer one of the model's attention layers
        per_token = (spec.num_kv_layers + spec.num_state_layers) * spec.layer_kv_bytes_per_token(tp=tp, kind="full")
        against = "its all-attention twin"
    else:
        per_token = kv.load_model(dense).kv_bytes_per_token(tp=tp)
        against = _name(dense)
    kwargs = dict(state_bytes=spec.state_bytes_per_sequence(tp), bytes_per_token=spec.kv_bytes_per_token(tp=tp),
                  dense_bytes_per_token=per_token)
    return {"label": f"{_name(model)} against {against}, TP {tp}", "kwargs": kwargs,
            "context": {"hint": hint, "model": model}}


def _crossover_expected(case: dict) -> int:
    k = case["kwargs"]
    return kv.state_crossover_tokens(k["state_bytes"], k["bytes_per_token"], k["dense_bytes_per_token"])


CEIL_EDGE = Edge("the crossover rounds up: a quotient that is a whole number stays, any fraction takes the next token")
Q3_VISIBLE = (
    CEIL_EDGE.on(_crossover_case("qwen3-next-80b-a3b", 1)),                     # 536.0: exactly on a whole token
    CEIL_EDGE.on(_crossover_case("qwen3-next-80b-a3b", 1, "llama-3.3-70b",
                                 hint="the first whole context at which the hybrid holds no more: round up.")),  # 130.4
    _crossover_case("nemotron-h-56b", 4, hint="the hybrid keeps KV too: subtract its bytes per token."),
    _crossover_case("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", 2, "llama-3.1-8b"),
)


def _crossover_hidden(seed: int) -> tuple:
    rng = random.Random(seed)
    cases = []
    while len(cases) < 8:
        model = rng.choice(HYBRIDS)
        spec = kv.load_model(model)
        tp = rng.choice([t for t in TPS if kv.feasibility.tp_refusal(spec, t) is None])
        dense = rng.choice((None,) + DENSE)
        case = _crossover_case(model, tp, dense)
        if case["kwargs"]["dense_bytes_per_token"] > case["kwargs"]["bytes_per_token"]:    # a crossover exists
            cases.append(case)
    return tuple(cases)


EDGES = {
    "ch10_q1_hybrid_sequence_bytes_per_gpu": (KV_HEADS_EDGE.listing(),),
    "ch10_q3_state_crossover": (CEIL_EDGE.listing(),),
}


EXERCISES = exercises(
    Exercise(
        grade_id="ch10_q1_hybrid_sequence_bytes_per_gpu",
        function_name="hybrid_sequence_bytes_per_gpu",
        params=("attention_layers", "state_layers", "kv_heads", "head_dim", "dtype_bytes", "state_bytes_per_layer",
                "context", "tp"),
        visible_cases=Q1_VISIBLE,
        hidden_cases=_hybrid_hidden,
        expected=_hybrid_expected,
        quantity="hybrid_sequence_bytes_per_gpu",
        slip_inputs=_hybrid_slip_inputs,
        hidden_note=HIDDEN_NOTE_HYBRID,
    ),
    Exercise(
        grade_id="ch10_q2_dsa_bytes_per_token_per_group",
        function_name="dsa_bytes_per_token_per_group",
        params=("layers", "latent_dim", "rope_dim", "indexer_layers", "index_head_dim", "dtype_bytes", "tp"),
        visible_cases=Q2_VISIBLE,
        hidden_cases=_dsa_hidden,
        expected=_dsa_expected,
        quantity="dsa_bytes_per_token_per_group",
        slip_inputs=lambda case: dict(case["kwargs"]),
        hidden_note=HIDDEN_NOTE_DSA,
    ),
    Exercise(
        grade_id="ch10_q3_state_crossover",
        function_name="state_crossover",
        params=("state_bytes", "bytes_per_token", "dense_bytes_per_token"),
        visible_cases=Q3_VISIBLE,
        hidden_cases=_crossover_hidden,
        expected=_crossover_expected,
        quantity="state_crossover",
        slip_inputs=lambda case: dict(case["kwargs"]),
        unit="tokens",
        hidden_note=HIDDEN_NOTE_CROSSOVER,
    ),
)
