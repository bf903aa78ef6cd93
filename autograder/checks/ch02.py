"""Chapter 02 (GQA, MHA, MQA and tensor parallelism): its four graded exercises, as data.

Grade ids, function names and parameter order are a contract with the grading
pipeline; points are on the source notebook's test cells.

=======================================  =====================================================================
grade id                                 the learner writes
=======================================  =====================================================================
ch02_q1_kv_heads_and_group               kv_heads_and_group(config) -> (K, H // K)
ch02_q2_kv_bytes_per_token_per_gpu       kv_bytes_per_token_per_gpu(L, K, D, b, tp)
ch02_q3_sequences_per_gpu                sequences_per_gpu(cuda_memory_bytes, weight_bytes, reserve_bytes,
                                                           L, K, D, b, tp, seq_len)
ch02_q4_diagnose_colleague               diagnose_colleague(claimed_bytes, L, num_heads, K, D, b, tp)
                                         -> (factor, slip name)
=======================================  =====================================================================

(L, K, D, b stand for layers, kv_heads, head_dim, dtype_bytes.)

Expected values come from kvlib: q1 from ``kvlib.parse_config(config)`` (``num_kv_heads``,
``num_heads``), q2 from ``kv_heads_per_gpu`` and ``kv_bytes_per_token`` (replicated past
tp = K), q3 from ``weight_bytes_per_gpu``, ``kv_pool_bytes`` (u = 1) and ``max_concurrency``,
q4 from the per-GPU bytes per token and the kvlib slip catalogue's own recomputations.
Visible cases are real bundled configs and GPUs; hidden cases are drawn from a seed over
the bundled non-MLA configs, with only the TP sizes an engine runs (TP divides the query
heads, and divides the KV heads or is a multiple of them).
"""

from __future__ import annotations

import random

import kvlib as kv

from .answers import INT, Choice, Tuple
from .cases import (
    GEOMETRY,
    config_case,
    config_spec,
    dtype_name,
    geometry_case,
    geometry_hidden,
    geometry_slip_inputs,
    head_count_slip_inputs,
    mutate_config,
    non_mla_models,
    random_seq_len,
    short,
)
from .schema import Edge, Exercise, exercises, with_sides

RESERVE_BYTES = 5 * kv.GB            # activations and workspace per GPU under TP ([kv-math] example 2: 3 + 2 GB)
TP_SIZES = (1, 2, 4, 8, 16, 32)
GPUS = ("H100-SXM", "H200", "A100-80GB", "A100-40GB", "L40S", "B200")

HIDDEN_NOTE_CONFIG = ("(Hidden cases use other bundled configs, num_key_value_heads absent, null or "
                      "changed to another divisor of the query heads.)")
HIDDEN_NOTE_TP = ("(Hidden cases use other models' geometry, dtype_bytes of 1, 2 or 4, and other TP "
                  "sizes, some larger than the KV heads.)")

_cfg = kv.bundled_config
_MHA_HINT = "no num_key_value_heads (absent or null) means one KV head per query head: K = H, a group of 1."


def engine_tp_sizes(num_heads: int, kv_heads: int) -> list:
    """TP sizes an engine runs: TP divides the query heads, and divides K or is a multiple of it."""
    return [t for t in TP_SIZES if num_heads % t == 0 and (kv_heads % t == 0 or t % kv_heads == 0)]


# ---------------------------------------------------------------------------
# q1: K and the group size from a raw config
# ---------------------------------------------------------------------------
Q1_VISIBLE = (
    config_case("meta-llama/Llama-3.1-8B", _cfg("meta-llama/Llama-3.1-8B")),
    config_case("Qwen/Qwen2.5-7B", _cfg("Qwen/Qwen2.5-7B")),
    config_case("meta-llama/Llama-2-70b-chat-hf", _cfg("meta-llama/Llama-2-70b-chat-hf"),
                hint="read num_key_value_heads: this Llama 2 model is GQA, whatever its age."),
    config_case("meta-llama/Llama-2-7b-hf", _cfg("meta-llama/Llama-2-7b-hf"),
                hint="num_key_value_heads equal to num_attention_heads is MHA: a group of 1."),
    config_case("microsoft/Phi-3-mini-4k-instruct", _cfg("microsoft/Phi-3-mini-4k-instruct"),
                hint="num_key_value_heads equal to num_attention_heads is MHA: a group of 1."),
    config_case("openai-community/gpt2-large", _cfg("openai-community/gpt2-large"),
                hint="GPT-2 configs name the query heads n_head and have no num_key_value_heads: K = H."),
    config_case("meta-llama/Llama-3.1-8B", dict(_cfg("meta-llama/Llama-3.1-8B"), num_key_value_heads=None),
                variant="num_key_value_heads: null", hint=_MHA_HINT),
    config_case("mistralai/Mistral-7B-v0.1", {k: v for k, v in _cfg("mistralai/Mistral-7B-v0.1").items()
                                              if k != "num_key_value_heads"},
                variant="num_key_value_heads removed", hint=_MHA_HINT),
    config_case("meta-llama/Llama-3.1-8B", dict(_cfg("meta-llama/Llama-3.1-8B"), num_key_value_heads=4),
                variant="other KV heads", hint="read num_key_value_heads from the config you are given."),
)

Q1_VARIANTS = ("as published", "num_key_value_heads removed", "num_key_value_heads: null", "other KV heads")


def kv_heads_and_group_expected(case: dict) -> tuple:
    spec = config_spec(case)
    return (spec.num_kv_heads, spec.num_heads // spec.num_kv_heads)


def _query_heads(config: dict) -> int:
    return config.get("num_attention_heads") or config["n_head"]


def attention_config_hidden(seed: int) -> tuple:
    """Ten configs: every variant at least twice, over the bundled non-MLA configs."""
    rng = random.Random(seed)
    models = non_mla_models()
    variants = list(Q1_VARIANTS) * 2 + [rng.choice(Q1_VARIANTS) for _ in range(2)]
    rng.shuffle(variants)
    cases = []
    for variant in variants:
        with_k = [m for m in models if _cfg(m).get("num_key_value_heads") is not None]
        model = rng.choice(models if variant == "as published" else with_k)
        config = _cfg(model)
        if variant == "other KV heads":
            config = dict(config)
            h = _query_heads(config)
            config["num_key_value_heads"] = rng.choice(
                [d for d in range(1, h + 1) if h % d == 0 and d != config["num_key_value_heads"]])
        elif variant != "as published":
            config = mutate_config(rng, variant, config)
        case = config_case(model, config, variant=variant)
        kv_heads_and_group_expected(case)   # every hidden config must be one kvlib reads
        cases.append(case)
    return tuple(cases)


# ---------------------------------------------------------------------------
# q2: bytes per token on one GPU under TP
# ---------------------------------------------------------------------------
def _tp_case(model: str, dtype_bytes: int, tp: int, label: str, **extra) -> dict:
    return geometry_case(model, dtype_bytes, label, tp=tp, **extra)


ONE_WHOLE_HEAD_EDGE = Edge("past tp = K each GPU keeps one whole head: max(1, K // tp)")
Q2_VISIBLE = (
    ONE_WHOLE_HEAD_EDGE.on(_tp_case("llama-3.3-70b", 2, 8, "Llama 3.3 70B, bf16, TP 8 (one KV head per GPU)")),
    ONE_WHOLE_HEAD_EDGE.on(_tp_case("llama-3.1-8b", 2, 2, "Llama 3.1 8B, bf16, TP 2")),
    _tp_case("llama-3.1-8b", 2, 1, "Llama 3.1 8B, bf16, TP 1 (one GPU)"),
    ONE_WHOLE_HEAD_EDGE.on(_tp_case("llama-3.1-8b", 1, 16, "Llama 3.1 8B, fp8, TP 16 (more GPUs than KV heads)")),
    _tp_case("qwen2.5-7b", 2, 4, "Qwen2.5 7B, bf16, TP 4 (4 KV heads)"),
    _tp_case("llama-2-7b", 2, 4, "Llama 2 7B (MHA), bf16, TP 4"),
    ONE_WHOLE_HEAD_EDGE.on(_tp_case("llama-3.3-70b", 2, 8, "the Llama 3.3 70B shape with MQA (K = 1), bf16, TP 8",
                                    kv_heads=1)),
    _tp_case("gpt2-large", 4, 4, "GPT-2 large (MHA, head_dim 64), fp32, TP 4"),
)


def _with_engine_tp(rng, case):
    heads = case["context"]["num_heads"]
    case["kwargs"]["tp"] = rng.choice(engine_tp_sizes(heads, case["kwargs"]["kv_heads"]))


def _per_gpu_bytes_per_token(case: dict) -> int:
    k = kv.kv_heads_per_gpu(case["kwargs"]["kv_heads"], case["kwargs"]["tp"])
    return kv.kv_bytes_per_token(case["kwargs"]["layers"], k, case["kwargs"]["head_dim"],
                                 case["kwargs"]["dtype_bytes"])


# ---------------------------------------------------------------------------
# q3: sequences per GPU on a node, from CUDA-reported memory, weights split
# ---------------------------------------------------------------------------
def _node_case(model: str, gpu: str, tp: int, seq_len: int, label: str, dtype_bytes: int = 2, **extra) -> dict:
    case = geometry_case(model, dtype_bytes, label, **extra)
    spec = kv.load_model(model)
    case["kwargs"] = dict(cuda_memory_bytes=kv.get_gpu(gpu).cuda_memory_bytes, weight_bytes=spec.weight_bytes(2),
                          reserve_bytes=RESERVE_BYTES, **case["kwargs"], tp=tp, seq_len=seq_len)
    case["context"]["gpu"] = kv.get_gpu(gpu).name
    return case


REPLICATED_HEADS_EDGE = Edge("past tp = K the heads are replicated, the weights still split")
Q3_VISIBLE = (
    REPLICATED_HEADS_EDGE.on(_node_case("llama-3.3-70b", "H100-SXM", 8, 8192,
                                        "Llama 3.3 70B on 8 x H100, TP 8, 8,192 tokens")),
    _node_case("llama-3.3-70b", "H100-SXM", 8, 131072, "Llama 3.3 70B on 8 x H100, TP 8, 131,072 tokens"),
    REPLICATED_HEADS_EDGE.on(_node_case("llama-3.1-8b", "H100-SXM", 2, 32768,
                                        "Llama 3.1 8B on 2 x H100, TP 2, 32,768 tokens")),
    REPLICATED_HEADS_EDGE.on(_node_case("llama-3.3-70b", "A100-40GB", 16, 8192,
                                        "Llama 3.3 70B on 16 x A100-40GB, TP 16 (more GPUs than KV heads), "
                                        "8,192 tokens")),
    _node_case("llama-3.3-70b", "H100-SXM", 8, 8192, "the Llama 3.3 70B shape with MQA (K = 1) on 8 x H100, "
               "TP 8, 8,192 tokens", kv_heads=1),
    _node_case("llama-2-7b", "L40S", 4, 4096, "Llama 2 7B (MHA) on 4 x L40S, TP 4, 4,096 tokens"),
    _node_case("gpt2-large", "L4", 2, 1024, "GPT-2 large (MHA, head_dim 64) on 2 x L4, TP 2, an fp8 cache, "
               "1,024 tokens", dtype_bytes=1),
    _node_case("qwen2.5-7b", "A100-40GB", 2, 16384, "Qwen2.5 7B on 2 x A100-40GB, TP 2, an fp32 cache, "
               "16,384 tokens", dtype_bytes=4),
)


def sequences_per_gpu_expected(case: dict) -> int:
    a = case["kwargs"]
    budget = kv.kv_pool_bytes(a["cuda_memory_bytes"], 1, kv.weight_bytes_per_gpu(a["weight_bytes"], a["tp"]),
                              a["reserve_bytes"])
    return kv.max_concurrency(budget, kv.kv_bytes_per_sequence(_per_gpu_bytes_per_token(case), a["seq_len"]))


def node_hidden(seed: int) -> tuple:
    """Eight nodes: a bundled non-MLA model on a GPU of the table, an engine's TP size, any length,
    the weights' share and the reserve fitting on one GPU."""
    rng = random.Random(seed)
    models = non_mla_models()
    cases = []
    while len(cases) < 8:
        model, gpu = rng.choice(models), rng.choice(GPUS)
        spec = kv.load_model(model)
        tp = rng.choice(engine_tp_sizes(spec.num_heads, spec.num_kv_heads))
        case = _node_case(model, gpu, tp, random_seq_len(rng), f"{short(spec.name)} on {tp} x {gpu}")
        limit = spec.max_position_embeddings
        within_context = limit is None or case["kwargs"]["seq_len"] <= limit
        if kv.weight_bytes_per_gpu(spec.weight_bytes(2), tp) + RESERVE_BYTES < kv.get_gpu(gpu).cuda_memory_bytes \
                and within_context:     # vLLM serves no sequence longer than the model's context
            cases.append(case)
    return tuple(cases)


def node_slip_inputs(case: dict) -> dict:
    inputs = dict(case["kwargs"])
    inputs["num_heads"] = case["context"]["num_heads"]
    return inputs


# ---------------------------------------------------------------------------
# q4: diagnose a colleague's per-GPU bytes per token
# ---------------------------------------------------------------------------
Q4_SLIPS = ("query_heads", "total_not_per_gpu", "fp32_bytes")


def colleague_bytes(slip: str, layers: int, num_heads: int, kv_heads: int, head_dim: int, dtype_bytes: int,
                    tp: int) -> int | None:
    """The per-GPU bytes per token a colleague gets with ``slip`` (None where the slip changes nothing)."""
    if slip == "query_heads":
        wrong = kv.kv_bytes_per_token(layers, kv.kv_heads_per_gpu(num_heads, tp), head_dim, dtype_bytes)
    elif slip == "total_not_per_gpu":
        wrong = kv.kv_bytes_per_token(layers, kv_heads, head_dim, dtype_bytes)
    elif slip == "fp32_bytes":
        wrong = kv.kv_bytes_per_token(layers, kv.kv_heads_per_gpu(kv_heads, tp), head_dim, 4) \
            if dtype_bytes == 2 else None
    else:
        raise ValueError(f"unknown slip {slip!r}")
    right = kv.kv_bytes_per_token(layers, kv.kv_heads_per_gpu(kv_heads, tp), head_dim, dtype_bytes)
    return wrong if wrong is not None and wrong != right else None


def _diagnose_case(model: str, dtype_bytes: int, tp: int, slip: str, label: str = "") -> dict:
    spec = kv.load_model(model)
    geometry = dict(layers=spec.num_kv_layers, num_heads=spec.num_heads, kv_heads=spec.num_kv_heads,
                    head_dim=spec.head_dim, dtype_bytes=dtype_bytes, tp=tp)
    claimed = colleague_bytes(slip, **geometry)
    if claimed is None or not unambiguous(slip, geometry):
        raise ValueError(f"{model}, tp {tp}: slip {slip} is not a clear case")
    label = label or f"{short(spec.name)}, {dtype_name(dtype_bytes)}, TP {tp}: a colleague's {claimed:,} B"
    return {"label": label, "kwargs": dict(claimed_bytes=claimed, **geometry),
            "context": {"model": spec.name, "slip": slip}}


def unambiguous(slip: str, geometry: dict) -> bool:
    """No other listed slip gives the colleague's figure."""
    claimed = colleague_bytes(slip, **geometry)
    return all(colleague_bytes(other, **geometry) != claimed for other in Q4_SLIPS if other != slip)


SLIP_NOT_FACTOR_EDGE = Edge("the slip is read from the recomputed figures, not the factor: the total past tp = K is "
                            "K times too large, not tp times; a factor 2 at fp32 is the query heads")
HEADS_PER_GPU_EDGE = Edge("each GPU keeps K / tp heads below tp = K, one whole head on it and past it")
Q4_VISIBLE = (
    HEADS_PER_GPU_EDGE.on(_diagnose_case("llama-3.1-8b", 2, 1, "query_heads")),
    _diagnose_case("llama-3.3-70b", 2, 2, "query_heads"),
    _diagnose_case("qwen2.5-32b", 1, 4, "query_heads"),
    HEADS_PER_GPU_EDGE.on(_diagnose_case("llama-3.1-8b", 2, 8, "total_not_per_gpu")),
    _diagnose_case("mistral-7b", 2, 1, "fp32_bytes"),
    # the factor alone does not give the slip away: the total over more GPUs than KV heads is K times too
    # large, not tp times (8, at TP 16); the query heads past tp = K are H / tp times too large, not H / K
    # (2 at TP 16); the query heads of a 256-wide head at fp32 are 2 times too large
    SLIP_NOT_FACTOR_EDGE.on(HEADS_PER_GPU_EDGE.on(_diagnose_case("llama-3.1-8b", 1, 16, "total_not_per_gpu"))),
    SLIP_NOT_FACTOR_EDGE.on(_diagnose_case("llama-3.1-8b", 4, 16, "query_heads")),
    SLIP_NOT_FACTOR_EDGE.on(_diagnose_case("gemma-2-9b", 4, 1, "query_heads")),
)


def colleague_hidden(seed: int) -> tuple:
    """Eight colleagues: each listed slip at least twice, on bundled non-MLA models, clear cases only."""
    rng = random.Random(seed)
    models = [m for m in non_mla_models() if kv.load_model(m).attention == "gqa"]
    slips = list(Q4_SLIPS) * 2 + [rng.choice(Q4_SLIPS) for _ in range(2)]
    rng.shuffle(slips)
    cases = []
    for slip in slips:
        while True:
            model = rng.choice(models)
            spec = kv.load_model(model)
            tp = rng.choice(engine_tp_sizes(spec.num_heads, spec.num_kv_heads))
            try:
                case = _diagnose_case(model, rng.choice([1, 2, 2, 4]), tp, slip, label=f"a colleague on {short(model)}")
            except ValueError:
                continue
            cases.append(case)
            break
    return tuple(cases)


def colleague_slip_expected(case: dict) -> tuple:
    a = case["kwargs"]
    right = kv.kv_bytes_per_token(a["layers"], kv.kv_heads_per_gpu(a["kv_heads"], a["tp"]), a["head_dim"],
                                  a["dtype_bytes"])
    return (a["claimed_bytes"] // right, case["context"]["slip"])


# ---------------------------------------------------------------------------
# The edge tp = K: below it, on it, past it ([diagnosis §6]), in every seed's hidden cases
# ---------------------------------------------------------------------------
TP_SIDES = ("tp < K", "tp = K", "tp > K")


def tp_side(case) -> str:
    """Which side of the edge tp = K a case sits on (each GPU keeps K / tp heads, at least one whole head)."""
    k = case["kwargs"]
    return "tp < K" if k["tp"] < k["kv_heads"] else "tp = K" if k["tp"] == k["kv_heads"] else "tp > K"


def _engine_tps_on(side: str, spec) -> list:
    return [t for t in engine_tp_sizes(spec.num_heads, spec.num_kv_heads)
            if tp_side({"kwargs": {"tp": t, "kv_heads": spec.num_kv_heads}}) == side]


def geometry_on_tp_side(rng, side):
    """A bundled model's geometry with an engine's TP on ``side`` of tp = K."""
    models = [m for m in non_mla_models() if _engine_tps_on(side, kv.load_model(m))]
    model, dtype = rng.choice(models), rng.choice([1, 2, 4])
    return geometry_case(model, dtype, f"{short(model)}, {dtype_name(dtype)}",
                         tp=rng.choice(_engine_tps_on(side, kv.load_model(model))))


def node_on_tp_side(rng, side):
    """A node on ``side`` of tp = K whose weights' share and reserve fit one GPU (None if no draw does)."""
    for _ in range(200):
        case = geometry_on_tp_side(rng, side)
        model, tp, gpu = case["context"]["model"], case["kwargs"]["tp"], rng.choice(GPUS)
        spec = kv.load_model(model)
        seq_len = random_seq_len(rng, {"context": {"model": model}})
        if kv.weight_bytes_per_gpu(spec.weight_bytes(2), tp) + RESERVE_BYTES < kv.get_gpu(gpu).cuda_memory_bytes:
            return _node_case(_bundled_id(model), gpu, tp, seq_len, f"{short(spec.name)} on {tp} x {gpu}",
                              dtype_bytes=case["kwargs"]["dtype_bytes"])
    return None


def _bundled_id(name: str) -> str:
    """The bundled model id of a ModelSpec name (``geometry_case`` records the name)."""
    return next(m for m in non_mla_models() if kv.load_model(m).name == name)


def colleague_on_tp_side(rng, side):
    """A colleague's clear slip on ``side`` of tp = K."""
    models = [m for m in non_mla_models() if kv.load_model(m).attention == "gqa"
              and _engine_tps_on(side, kv.load_model(m))]
    for _ in range(200):
        model = rng.choice(models)
        try:
            return _diagnose_case(model, rng.choice([1, 2, 2, 4]), rng.choice(_engine_tps_on(side, kv.load_model(model))),
                                  rng.choice(Q4_SLIPS), label=f"a colleague on {short(model)}")
        except ValueError:
            continue
    return None


#: The edges the exercise text decides (a tie, a rounding direction, a tolerance, an "other"), each with the
#: visible cases that sit on it and, where given, ``side(case)``: every seed's hidden cases show each side the
#: visible ones show (tests/test_case_variants.py).
EDGES = {
    "ch02_q2_kv_bytes_per_token_per_gpu": (ONE_WHOLE_HEAD_EDGE.listing(tp_side),),
    "ch02_q3_sequences_per_gpu": (REPLICATED_HEADS_EDGE.listing(tp_side),),
    "ch02_q4_diagnose_colleague": (SLIP_NOT_FACTOR_EDGE.listing(), HEADS_PER_GPU_EDGE.listing(tp_side)),
}


EXERCISES = exercises(
    Exercise(
        grade_id="ch02_q1_kv_heads_and_group",
        function_name="kv_heads_and_group",
        params=("config",),
        visible_cases=Q1_VISIBLE,
        hidden_cases=attention_config_hidden,
        expected=kv_heads_and_group_expected,
        answer=Tuple((INT, INT)),
        quantity="kv_heads_and_group",
        slip_inputs=head_count_slip_inputs,
        unit="",
        hidden_note=HIDDEN_NOTE_CONFIG,
    ),
    Exercise(
        grade_id="ch02_q2_kv_bytes_per_token_per_gpu",
        function_name="kv_bytes_per_token_per_gpu",
        params=GEOMETRY + ("tp",),
        visible_cases=Q2_VISIBLE,
        hidden_cases=with_sides(geometry_hidden(_with_engine_tp), tp_side, TP_SIDES, geometry_on_tp_side),
        expected=_per_gpu_bytes_per_token,
        quantity="kv_bytes_per_token_per_gpu",
        slip_inputs=geometry_slip_inputs,
        hidden_note=HIDDEN_NOTE_TP,
    ),
    Exercise(
        grade_id="ch02_q3_sequences_per_gpu",
        function_name="sequences_per_gpu",
        params=("cuda_memory_bytes", "weight_bytes", "reserve_bytes") + GEOMETRY + ("tp", "seq_len"),
        visible_cases=Q3_VISIBLE,
        hidden_cases=with_sides(node_hidden, tp_side, TP_SIDES, node_on_tp_side),
        expected=sequences_per_gpu_expected,
        quantity="max_concurrency_per_gpu",
        slip_inputs=node_slip_inputs,
        unit="sequences",
        hidden_note=HIDDEN_NOTE_TP,
    ),
    Exercise(
        grade_id="ch02_q4_diagnose_colleague",
        function_name="diagnose_colleague",
        params=("claimed_bytes", "layers", "num_heads", "kv_heads", "head_dim", "dtype_bytes", "tp"),
        visible_cases=Q4_VISIBLE,
        hidden_cases=with_sides(colleague_hidden, tp_side, TP_SIDES, colleague_on_tp_side),
        expected=colleague_slip_expected,
        answer=Tuple((INT, Choice(Q4_SLIPS)), ("factor", "slip")),
        unit="",
        hidden_note="(Hidden cases: other models, dtypes and TP sizes; each listed slip appears.)",
    ),
)
