"""Chapter 06 (the weight/KV crossover and decode time): its six graded exercises, as data.

Grade ids, function names and parameter order are a contract with the grading
pipeline; points are on the source notebook's test cells.

=======================================  ==============================================================================
grade id                                 the learner writes
=======================================  ==============================================================================
ch06_q1_crossover_context                crossover_context(weight_bytes, L, K, D, b, batch_size) -> int
ch06_q2_decode_step_ms                   decode_step_ms(weight_bytes, L, K, D, b, seq_len, batch_size,
                                         bandwidth_bytes_per_s) -> float
ch06_q3_tokens_per_second                tokens_per_second(weight_bytes, L, K, D, b, seq_len, batch_size,
                                         bandwidth_bytes_per_s, efficiency) -> float
ch06_q4_fp8_speedups                     fp8_kv_speedups(weight_bytes, L, K, D, batch_size, short_context,
                                         long_context) -> (float, float)
ch06_q5_optimisation                     optimisation_for(weight_bytes, L, K, D, b, seq_len, batch_size) -> str
ch06_q6_expert_bytes_read                expert_bytes_read(E, k, batch_size, L_e, P_e, b) -> float
=======================================  ==============================================================================

(L, K, D, b stand for layers, kv_heads, head_dim, dtype_bytes.)

Expected values come from kvlib: q1 ``kv.roofline.first_cache_context`` (the first whole
context at which the cache reads reach the weights, ``ceil(W_r / (bytes per token x B))``), q2
and q3 ``kv.decode_step_seconds`` (q3 divided by the efficiency), q4 the ratio of
``kv.decode_step_seconds`` with a bf16 and an fp8 cache, q5 the fix that takes more bytes off the step (int4
weights 3/4 of ``weight_bytes``, an fp8 cache 1/2 of ``kv.kv_bytes_total``: §7's 1.5 x rule), q6
``kv.roofline.expected_experts_touched`` x the experts' bytes in every MoE layer, on real mixture-of-experts
configs.
``weight_bytes`` is what one decode step of the case's batch reads of the real model's bf16
weights, ``kv.roofline.weight_bytes_read`` (W_r: every matrix, but of an untied input embedding
only the batch's rows), as the chapter's step model counts it. Hidden cases use other bundled
dense models (a mixture of experts reads only its routed experts: not this chapter's step),
batches, contexts, GPUs and efficiencies; q5's hidden workloads stay at least a factor 2 away
from the 1.5 x tie, where the choice is clear, besides the tie cases of ``EDGES``, which sit on it.
"""

from __future__ import annotations

import math
import random
from fractions import Fraction

import kvlib as kv

from .answers import Choice, Float, Tuple
from .cases import bytes_per_token, dtype_name, geometry_case, geometry_slip_inputs, model_spec, non_mla_models, short
from .schema import Edge, Exercise, exercises

STEP_TOLERANCE = 1e-3     # floats: within 0.1% (a rounding of the bandwidth or the weights stays outside)
OPTIONS = ("quantise_weights", "shrink_kv_cache")
HIDDEN_NOTE = "(Hidden cases use other bundled models, batches, contexts, GPUs and cache dtypes.)"


def _weights_read(model: str, batch: int) -> int:
    """What one decode step of ``batch`` sequences reads of ``model``'s bf16 weights (W_r)."""
    return kv.roofline.weight_bytes_read(model_spec(model), batch)


def _case(model: str, dtype_bytes: int, label: str, **extra) -> dict:
    """A geometry case with weight_bytes first: what a step of its batch reads (set by ``_weigh`` when the
    batch comes later)."""
    case = geometry_case(model, dtype_bytes, label, **extra)
    case["kwargs"] = {"weight_bytes": 0, **case["kwargs"]}
    if "batch_size" in extra:
        _weigh(model, case)
    return case


def _weigh(model: str, case: dict) -> dict:
    case["kwargs"]["weight_bytes"] = _weights_read(model, case["kwargs"]["batch_size"])
    return case


def _dense_models() -> list:
    """Bundled non-MLA models whose every weight a step reads (not a mixture of experts)."""
    return [m for m in non_mla_models() if model_spec(m).num_params_active() == model_spec(m).num_params()]


def _gpu(name: str) -> int:
    return kv.get_gpu(name).bandwidth_bytes_per_s


def _slip_inputs(case: dict) -> dict:
    return geometry_slip_inputs(case)


# --- q1: the crossover context at a batch --------------------------------------------------------
Q1_VISIBLE = (
    _case("llama-3.1-8b", 2, "Llama 3.1 8B, bf16 cache, batch 32", batch_size=32),
    _case("llama-3.1-8b", 2, "Llama 3.1 8B, bf16 cache, batch 128", batch_size=128),
    _case("llama-3.3-70b", 2, "Llama 3.3 70B, bf16 cache, batch 32", batch_size=32),
    _case("llama-2-7b", 2, "Llama 2 7B (MHA), bf16 cache, batch 8", batch_size=8),
    _case("qwen2.5-7b", 1, "Qwen2.5 7B, fp8 cache, batch 16", batch_size=16),
    _case("gpt2-large", 4, "GPT-2 large (MHA, head_dim 64), fp32 cache, batch 4", batch_size=4),
)


def _edge(case: dict, offset: int, label: str) -> dict:
    """``case`` with its weights moved onto an exact crossover (a whole context's cache), then ``offset`` bytes."""
    k = case["kwargs"]
    per_context = bytes_per_token(case) * k["batch_size"]
    exact = kv.roofline.first_cache_context(k["weight_bytes"], bytes_per_token(case), k["batch_size"]) * per_context
    k["weight_bytes"] = exact + offset
    case["label"] = label
    return case


#: Round up (the text's rule): exactly on a whole context, one byte of weights less (still that context) and
#: one byte more (the next one). Llama 3.1 8B at batch 32: 131,072 x 32 = 4,194,304 B per token of context.
ROUND_UP_EDGE = Edge("round up: the first whole context whose cache read reaches the weights (exactly on a whole "
                     "context, one byte of weights short of it, one byte past it)")
Q1_EDGES = ROUND_UP_EDGE.on_each(
    _edge(_case("llama-3.1-8b", 2, "", batch_size=32), offset,
          f"Llama 3.1 8B geometry at batch 32, weights {what} a whole context's cache read")
    for offset, what in ((0, "exactly"), (-1, "one byte short of"), (1, "one byte past")))
Q1_VISIBLE = Q1_VISIBLE + Q1_EDGES


def crossover_context_expected(case: dict) -> int:
    k = case["kwargs"]
    return kv.roofline.first_cache_context(k["weight_bytes"], bytes_per_token(case), k["batch_size"])


# --- q2, q3: the step at the bandwidth limit, and at a share of it -------------------------------
H100, A100, MI300X, L4 = "H100-SXM", "A100-80GB", "MI300X", "L4"
Q2_VISIBLE = (
    _case("llama-3.1-8b", 2, "Llama 3.1 8B on an H100 SXM, batch 32 × 4,096 tokens", seq_len=4096, batch_size=32,
          bandwidth_bytes_per_s=_gpu(H100)),
    _case("llama-3.1-8b", 2, "Llama 3.1 8B on an H100 SXM, batch 8 × 32,768 tokens", seq_len=32768,
          batch_size=8, bandwidth_bytes_per_s=_gpu(H100)),     # 32 x 32K needs 137 GB of cache: not one H100
    _case("llama-3.1-8b", 2, "Llama 3.1 8B on an H100 SXM, one sequence of 2,048 tokens", seq_len=2048,
          batch_size=1, bandwidth_bytes_per_s=_gpu(H100)),
    _case("qwen2.5-7b", 1, "Qwen2.5 7B on an A100-80GB, fp8 cache, batch 64 × 8,192 tokens", seq_len=8192,
          batch_size=64, bandwidth_bytes_per_s=_gpu(A100)),
    _case("llama-3.3-70b", 2, "Llama 3.3 70B on an MI300X, batch 16 × 8,192 tokens", seq_len=8192, batch_size=16,
          bandwidth_bytes_per_s=_gpu(MI300X)),
    _case("gpt2-large", 4, "GPT-2 large (MHA, head_dim 64) on an L4, fp32 cache, batch 8 × 1,024 tokens",
          seq_len=1024, batch_size=8, bandwidth_bytes_per_s=_gpu(L4)),
)

Q3_VISIBLE = (
    _case("llama-3.1-8b", 2, "Llama 3.1 8B on an H100 SXM, batch 32 × 4,096 tokens, 70% of peak bandwidth",
          seq_len=4096, batch_size=32, bandwidth_bytes_per_s=_gpu(H100), efficiency=0.7),
    _case("llama-3.1-8b", 2, "Llama 3.1 8B on an H100 SXM, batch 8 × 32,768 tokens, at the bandwidth limit",
          seq_len=32768, batch_size=8, bandwidth_bytes_per_s=_gpu(H100), efficiency=1.0),
    _case("llama-3.3-70b", 2, "Llama 3.3 70B on an MI300X, batch 16 × 8,192 tokens, 60% of peak bandwidth",
          seq_len=8192, batch_size=16, bandwidth_bytes_per_s=_gpu(MI300X), efficiency=0.6),
    _case("qwen2.5-7b", 1, "Qwen2.5 7B on an L4, fp8 cache, batch 4 × 2,048 tokens, 75% of peak bandwidth",
          seq_len=2048, batch_size=4, bandwidth_bytes_per_s=_gpu(L4), efficiency=0.75),
    _case("gpt2-large", 4, "GPT-2 large (MHA, head_dim 64) on an A100-80GB, fp32 cache, batch 8 × 1,024 tokens, "
          "80% of peak bandwidth", seq_len=1024, batch_size=8, bandwidth_bytes_per_s=_gpu(A100), efficiency=0.8),
)


def _step_s(case: dict) -> float:
    k = case["kwargs"]
    return kv.decode_step_seconds(weight_bytes=k["weight_bytes"], bytes_per_token=bytes_per_token(case),
                                  context=k["seq_len"], batch=k["batch_size"],
                                  bandwidth_bytes_per_s=k["bandwidth_bytes_per_s"])


# --- q4: the fp8 cache's speedup at a short and a long context -----------------------------------
def _fp8_case(model: str, batch: int, short_context: int, long_context: int) -> dict:
    case = _case(model, 2, f"{short(kv.load_model(model).name)}, batch {batch}, {short_context:,} and "
                           f"{long_context:,} tokens", batch_size=batch, short_context=short_context,
                 long_context=long_context)
    del case["kwargs"]["dtype_bytes"]     # bf16 against fp8 is the question, not an argument
    case["context"]["hint"] = ("each speedup is the step time with a bf16 cache divided by the step time with an "
                               "fp8 cache; the weights stay bf16 and are read in full at every step.")
    return case


Q4_VISIBLE = (
    _fp8_case("llama-3.1-8b", 32, 1024, 32768),
    _fp8_case("llama-3.3-70b", 16, 2048, 65536),
    _fp8_case("llama-2-7b", 8, 512, 4096),      # Llama 2's context is 4,096 tokens
    _fp8_case("gpt2-large", 16, 128, 1024),
)


def _speedup(case: dict, context: int) -> float:
    k = case["kwargs"]
    geometry = (k["layers"], k["kv_heads"], k["head_dim"])

    def step(dtype_bytes):
        return kv.decode_step_seconds(weight_bytes=k["weight_bytes"],
                                      bytes_per_token=kv.kv_bytes_per_token(*geometry, dtype_bytes),
                                      context=context, batch=k["batch_size"], bandwidth_bytes_per_s=1)
    return step(2) / step(1)


def fp8_speedups_expected(case: dict) -> tuple:
    return (_speedup(case, case["kwargs"]["short_context"]), _speedup(case, case["kwargs"]["long_context"]))


def fp8_speedups_hidden(seed: int) -> tuple:
    rng = random.Random(seed)
    cases = []
    while len(cases) < 6:
        model = rng.choice(_dense_models())
        short_context = rng.choice([256, 512, 1024, 2048])
        case = _fp8_case(model, rng.choice([1, 4, 16, 32, 64]), short_context,
                         short_context * rng.choice([8, 16, 32, 64]))
        if _within_context(model, case["kwargs"]["long_context"]):
            cases.append(case)
    return tuple(cases)


# --- q5: the optimisation that matters for a described workload ----------------------------------
def _workload(model: str, label: str, seq_len: int, batch_size: int, hint: str = "", dtype_bytes: int = 2) -> dict:
    case = _case(model, dtype_bytes, label, seq_len=seq_len, batch_size=batch_size)
    case["context"]["hint"] = hint or ("compare what each fix takes off one step: int4 weights three quarters of the "
                                       "weights' read, an fp8 cache half of batch_size × seq_len × bytes per token; "
                                       "the larger saving wins.")
    return case


PAST_CROSSOVER_EDGE = Edge("past the crossover but short of 1.5 x: the step is cache-dominated and int4 weights still "
                           "take off more ('quantise_weights')")
LARGER_READ_EDGE = Edge("the cache's dtype and head_dim decide: cases where they move the cache's read across 1.5 x "
                        "the weights'")
Q5_VISIBLE = (
    _workload("llama-3.1-8b", "Llama 3.1 8B, one user chatting on a workstation: batch 1, 2,048 tokens", 2048, 1),
    _workload("llama-3.1-8b", "Llama 3.1 8B behind a busy API: batch 64, 8,192 tokens", 8192, 64),
    _workload("llama-3.3-70b", "Llama 3.3 70B for a small team: batch 8, 4,096 tokens", 4096, 8),
    _workload("llama-3.1-8b", "Llama 3.1 8B answering over long documents: batch 4, 131,072 tokens", 131072, 4),
    _workload("llama-2-7b", "Llama 2 7B (MHA), batch 16, 4,096 tokens", 4096, 16),
    # one sequence of Qwen3 0.6B at 32,768 tokens already reads 3.76 GB of cache, 3.2 x its 1.19 GB of weights
    _workload("qwen3-0.6b", "Qwen3 0.6B, two long chats on a laptop: batch 2, 32,768 tokens", 32768, 2),
    # 16 x 8,192 tokens of Llama 3.1 8B read 17.18 GB of cache against 15.01 GB of weights: cache-dominated
    # (1.14 x), and int4's 11.26 GB saved beats fp8's 8.59 GB
    PAST_CROSSOVER_EDGE.on(_workload("llama-3.1-8b", "Llama 3.1 8B for a busy team: batch 16, 8,192 tokens",
                                     8192, 16)),
    # 32 x 8,192 tokens of Llama 3.1 8B read 34.36 GB at bf16 (2.29 x the weights) but 17.18 GB at fp8 (1.14 x);
    # GPT-2 large's 12 x 1,024 tokens read 2.26 GB at head_dim 64 (1.47 x its 1.55 GB of weights), 4.53 GB (2.93 x)
    # were it 128
    LARGER_READ_EDGE.on(_workload("llama-3.1-8b", "Llama 3.1 8B with an fp8 cache: batch 32, 8,192 tokens", 8192,
                                  32, dtype_bytes=1)),
    LARGER_READ_EDGE.on(_workload("gpt2-large", "GPT-2 large (MHA, head_dim 64): batch 12, 1,024 tokens", 1024, 12)),
)


def _kv_read(case: dict) -> int:
    k = case["kwargs"]
    return kv.kv_bytes_total(bytes_per_token(case), k["seq_len"], k["batch_size"])


TIE_HINT = ("the text's rule at a tie: int4 weights win when they take off *at least* as much as an fp8 cache "
            "(3/4 W >= 1/2 the cache read), so a cache read of exactly 1.5 x the weights calls for "
            "'quantise_weights'.")


def _tie(case: dict, offset: int, label: str) -> dict:
    """``case`` with its weights set to 2/3 of its cache read (the tie: 3/4 W = 1/2 cache) plus ``offset`` bytes."""
    cache = _kv_read(case)
    assert cache % 3 == 0, "a tie needs a cache read divisible by 3 (a context of 3 x 2^j tokens)"
    case["kwargs"]["weight_bytes"] = 2 * cache // 3 + offset
    case["label"] = label
    case["context"]["hint"] = TIE_HINT
    return case


def optimisation_ties(model: str, seq_len: int, batch: int, name: str) -> tuple:
    return tuple(_tie(_workload(model, "", seq_len, batch), offset, f"{name}: batch {batch}, {seq_len:,} tokens, "
                                                                    f"cache read {what} 1.5 x the weights")
                 for offset, what in ((0, "exactly"), (-1, "just over"), (1, "just under")))


#: The tie (3/4 W = 1/2 the cache read: 'quantise_weights') and one byte of weights either side. Llama 3.1 8B,
#: 16 x 12,288 tokens: 131,072 x 12,288 x 16 = 25,769,803,776 B of cache, 2/3 of it 17,179,869,184 B.
TIE_EDGE = Edge("a tie (int4 saves exactly what fp8 saves: cache read = 1.5 x the weights) is 'quantise_weights'; "
                "one byte of weights either side")
Q5_EDGES = TIE_EDGE.on_each(optimisation_ties("llama-3.1-8b", 12288, 16, "Llama 3.1 8B geometry"))
Q5_VISIBLE = Q5_VISIBLE + Q5_EDGES


def optimisation_expected(case: dict) -> str:
    """int4 weights take 3/4 of the weights' read off the step, an fp8 cache 1/2 of the cache's
    (``kv.decode_step_seconds`` of each, at the bandwidth limit); the larger saving wins, a tie to the weights."""
    w, cache = case["kwargs"]["weight_bytes"], _kv_read(case)
    int4_saves, fp8_saves = w - Fraction(w, 4), cache - Fraction(cache, 2)
    return OPTIONS[0] if int4_saves >= fp8_saves else OPTIONS[1]


def optimisation_hidden(seed: int) -> tuple:
    rng = random.Random(seed)
    cases = []
    while len(cases) < 8:
        model = rng.choice(_dense_models())
        batch, seq_len = rng.choice([1, 2, 4, 8, 16, 32, 64, 128, 256]), 2 ** rng.randint(9, 17)
        case = _workload(model, f"{short(kv.load_model(model).name)}, batch {batch}, {seq_len:,} tokens",
                         seq_len, batch)
        ratio = _kv_read(case) / case["kwargs"]["weight_bytes"]
        if (ratio < 0.75 or ratio > 3) and _within_context(model, seq_len):   # clear of 1.5 x, and servable
            cases.append(case)
    model = rng.choice(_dense_models())          # and the tie, one byte either side, on a drawn geometry
    longest = kv.load_model(model).max_position_embeddings or 3 * 2**15
    seq_len = 3 * 2 ** rng.randint(8, max(8, min(15, int(math.log2(longest / 3)))))
    return tuple(cases) + optimisation_ties(model, seq_len, rng.choice([2, 4, 8, 16, 32]), "a drawn model")


# --- q6: the routed-expert bytes a MoE decode step reads ---------------------------------------------
MOE_MODELS = ("mixtral-8x7b", "qwen3-30b-a3b", "deepseek-v3", "gpt-oss-20b", "gpt-oss-120b")


def _moe_case(model: str, batch: int, label: str = "") -> dict:
    """bf16 experts, but DeepSeek-V3's in fp8, as its checkpoint ships them (1 byte a parameter)."""
    from kvlib.params import routed_expert_params
    spec = kv.load_model(model)
    layers, per_expert = routed_expert_params(spec)
    return {"label": label or f"{short(spec.name)} (E = {spec.num_experts}, k = {spec.num_experts_per_tok}), "
                              f"batch {batch}",
            "kwargs": {"num_experts": spec.num_experts, "top_k": spec.num_experts_per_tok, "batch_size": batch,
                       "moe_layers": layers, "expert_params": per_expert,
                       "dtype_bytes": 1 if model == "deepseek-v3" else 2},
            "context": {"model": model, "hint": "a given expert is missed by one token with probability 1 - k/E, "
                                                "by all B tokens with (1 - k/E)^B; count the experts not missed, "
                                                "then their bytes in every MoE layer."}}


BATCH_ONE_EDGE = Edge("batch 1: one token reads exactly its k experts")
COVERED_EDGE = Edge("a batch that covers every expert: all E are read (to within the tolerance)")
Q6_VISIBLE = (
    BATCH_ONE_EDGE.on(_moe_case("mixtral-8x7b", 1)),
    _moe_case("mixtral-8x7b", 6, "Mixtral 8x7B (E = 8, k = 2), a 6-token speculative verify"),
    _moe_case("qwen3-30b-a3b", 32),
    _moe_case("gpt-oss-20b", 8),
    COVERED_EDGE.on(_moe_case("mixtral-8x7b", 64)),
    _moe_case("deepseek-v3", 256, "DeepSeek-V3 (E = 256, k = 8), fp8 experts as released, batch 256"),
)


def expert_bytes_expected(case: dict) -> float:
    k = case["kwargs"]
    touched = kv.roofline.expected_experts_touched(k["num_experts"], k["top_k"], k["batch_size"])
    return k["moe_layers"] * touched * k["expert_params"] * k["dtype_bytes"]


def expert_bytes_hidden(seed: int) -> tuple:
    rng = random.Random(seed)
    models = list(MOE_MODELS)
    rng.shuffle(models)
    cases = [_moe_case(models[0], 1), _moe_case(models[1], 1024)]     # the two edges, on drawn real configs
    cases += [_moe_case(m, rng.choice([2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 128])) for m in models[2:]]
    return tuple(cases)


# --- hidden cases of q1-q3 -----------------------------------------------------------------------
def _within_context(model: str, context: int) -> bool:
    limit = kv.load_model(model).max_position_embeddings
    return limit is None or context <= limit


def _runs(model: str, case: dict) -> bool:
    """A step case names a deployment: it must be one vLLM could run on its GPU (``kv.check_deployment``, which
    holds the whole bf16 model in memory, whatever a step reads of it)."""
    k = case["kwargs"]
    if "seq_len" not in k:
        return True
    return kv.check_deployment(model, case["context"]["gpu"], batch_size=k["batch_size"], seq_len=k["seq_len"],
                               kv_dtype_bytes=k["dtype_bytes"]).fits


def _hidden(extra, count: int = 8, edges: bool = False):
    def build(seed: int) -> tuple:
        rng = random.Random(seed)
        cases = []
        while len(cases) < count:       # a draw no engine could run is drawn again
            model, dtype = rng.choice(_dense_models()), rng.choice([1, 2])
            case = _case(model, dtype, f"{short(kv.load_model(model).name)}, {dtype_name(dtype)} cache")
            extra(rng, case)
            _weigh(model, case)
            if _runs(model, case):
                cases.append(case)
        if edges:                       # q1's rounding edge on a drawn geometry: exactly, one byte short, one past
            model, dtype = rng.choice(_dense_models()), rng.choice([1, 2])
            batch = rng.choice([3, 8, 16, 24, 64, 100])
            cases += [_edge(_case(model, dtype, "", batch_size=batch), offset,
                            f"{short(kv.load_model(model).name)}, weights {what} a whole context's cache read")
                      for offset, what in ((0, "exactly"), (-1, "one byte short of"), (1, "one byte past"))]
        return tuple(cases)
    return build


def _with_batch(rng, case):
    case["kwargs"]["batch_size"] = rng.choice([1, 3, 8, 16, 24, 32, 64, 100, 128, 256])


def _with_step(rng, case):
    _with_batch(rng, case)
    case["kwargs"]["seq_len"] = rng.choice([2 ** rng.randint(9, 17), rng.randint(100, 100_000)])
    case["context"]["gpu"] = rng.choice([H100, A100, MI300X, L4, "H200", "B200", "L40S"])
    case["kwargs"]["bandwidth_bytes_per_s"] = _gpu(case["context"]["gpu"])


def _with_efficiency(rng, case):
    _with_step(rng, case)
    case["kwargs"]["efficiency"] = rng.choice([0.5, 0.6, 0.65, 0.7, 0.75, 0.8, 0.9, 1.0])


GEOMETRY_PARAMS = ("weight_bytes", "layers", "kv_heads", "head_dim", "dtype_bytes")
STEP_PARAMS = GEOMETRY_PARAMS + ("seq_len", "batch_size", "bandwidth_bytes_per_s")


def crossover_side(case) -> str | None:
    """Q1's rounding edge: weights exactly a whole context's cache read, one byte short, one past (else None)."""
    k = case["kwargs"]
    per_context = bytes_per_token(case) * k["batch_size"]
    return {0: "exactly", per_context - 1: "one byte short", 1: "one byte past"}.get(k["weight_bytes"] % per_context)


def tie_side(case) -> str | None:
    """Q5's tie: weights 2/3 of the cache read (3 W = 2 x cache), one byte less, one more (else None)."""
    gap = 3 * case["kwargs"]["weight_bytes"] - 2 * _kv_read(case)
    return {0: "tie", -3: "one byte less", 3: "one byte more"}.get(gap)


#: The edges the exercise text decides (a tie, a rounding direction, a tolerance, an "other"), each with the
#: visible cases that sit on it and, where given, ``side(case)``: every seed's hidden cases show each side the
#: visible ones show (tests/test_case_variants.py).
EDGES = {
    "ch06_q1_crossover_context": (ROUND_UP_EDGE.listing(crossover_side),),
    "ch06_q5_optimisation": (TIE_EDGE.listing(tie_side), PAST_CROSSOVER_EDGE.listing(), LARGER_READ_EDGE.listing()),
    "ch06_q6_expert_bytes_read": (BATCH_ONE_EDGE.listing(), COVERED_EDGE.listing()),
}


EXERCISES = exercises(
    Exercise(
        grade_id="ch06_q1_crossover_context",
        function_name="crossover_context",
        params=GEOMETRY_PARAMS + ("batch_size",),
        visible_cases=Q1_VISIBLE,
        hidden_cases=_hidden(_with_batch, edges=True),
        expected=crossover_context_expected,
        quantity="crossover_context_tokens",
        slip_inputs=_slip_inputs,
        unit="tokens",
        hidden_note=HIDDEN_NOTE,
    ),
    Exercise(
        grade_id="ch06_q2_decode_step_ms",
        function_name="decode_step_ms",
        params=STEP_PARAMS,
        visible_cases=Q2_VISIBLE,
        hidden_cases=_hidden(_with_step),
        expected=lambda case: _step_s(case) * 1e3,
        answer=Float(rel_tol=STEP_TOLERANCE),
        quantity="decode_step_ms",
        slip_inputs=_slip_inputs,
        unit="ms",
        hidden_note=HIDDEN_NOTE,
    ),
    Exercise(
        grade_id="ch06_q3_tokens_per_second",
        function_name="tokens_per_second",
        params=STEP_PARAMS + ("efficiency",),
        visible_cases=Q3_VISIBLE,
        hidden_cases=_hidden(_with_efficiency),
        expected=lambda case: case["kwargs"]["batch_size"] * case["kwargs"]["efficiency"] / _step_s(case),
        answer=Float(rel_tol=STEP_TOLERANCE),
        quantity="decode_tokens_per_s",
        slip_inputs=_slip_inputs,
        unit="tokens/s",
        hidden_note=HIDDEN_NOTE,
    ),
    Exercise(
        grade_id="ch06_q4_fp8_speedups",
        function_name="fp8_kv_speedups",
        params=("weight_bytes", "layers", "kv_heads", "head_dim", "batch_size", "short_context", "long_context"),
        visible_cases=Q4_VISIBLE,
        hidden_cases=fp8_speedups_hidden,
        expected=fp8_speedups_expected,
        answer=Tuple((Float(rel_tol=STEP_TOLERANCE), Float(rel_tol=STEP_TOLERANCE))),
        quantity="fp8_speedups",
        slip_inputs=lambda case: dict(case["kwargs"]),
        unit="(speedup at the short context, at the long one)",
        hidden_note="(Hidden cases use other bundled models, batches and contexts.)",
    ),
    Exercise(
        grade_id="ch06_q5_optimisation",
        function_name="optimisation_for",
        params=GEOMETRY_PARAMS + ("seq_len", "batch_size"),
        visible_cases=Q5_VISIBLE,
        hidden_cases=optimisation_hidden,
        expected=optimisation_expected,
        answer=Choice(OPTIONS),
        quantity="optimisation_choice",
        slip_inputs=_slip_inputs,
        unit="",
        hidden_note="(Hidden cases use other bundled models and workloads, well away from the 1.5 x tie, and "
                    "a tie with one byte either side on a drawn model.)",
    ),
    Exercise(
        grade_id="ch06_q6_expert_bytes_read",
        function_name="expert_bytes_read",
        params=("num_experts", "top_k", "batch_size", "moe_layers", "expert_params", "dtype_bytes"),
        visible_cases=Q6_VISIBLE,
        hidden_cases=expert_bytes_hidden,
        expected=expert_bytes_expected,
        answer=Float(rel_tol=STEP_TOLERANCE),
        quantity="moe_expert_bytes",
        slip_inputs=lambda case: dict(case["kwargs"]),
        unit="bytes",
        hidden_note="(Hidden cases use other mixture-of-experts configs and batches, batch 1 and a covering batch "
                    "among them.)",
    ),
)
