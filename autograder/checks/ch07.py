"""Chapter 07 (capacity planning): a plan's steps, graded one by one, as data.

Grade ids, function names and parameter order are a contract with the grading
pipeline; points are on the source notebook's test cells.

=======================================  ===============================================================
grade id                                 the learner writes
=======================================  ===============================================================
ch07_q1_kv_per_sequence_per_gpu          kv_per_sequence_per_gpu(L, K, D, b, context, tp)
ch07_q2_sequences_by_memory              sequences_by_memory(M, u, W, O, L, K, D, b, context, tp)
ch07_q3_itl_ms                           itl_ms(sequences, W, tp, BW, tp_overhead, efficiency, L, K, D, b, context)
ch07_q4_sequences_by_itl                 sequences_by_itl(itl_target_ms, W, tp, BW, tp_overhead, efficiency, L, K, D, b, context)
ch07_q5_nodes                            nodes(users, gpus_per_node, tp, sequences_by_memory, sequences_by_itl,
                                               spike_factor, redundancy_nodes)
=======================================  ===============================================================

Every exercise shares one list of plan cases (case k is the same plan in each), so q2-q4,
which need one sequence's bytes per GPU, are judged against the learner's own answer to q1
(``builds_on``): a slip in q1 is named there and costs only q1. q5 is given the two limits
(kvlib's), so it grades the last step alone. Expected values come from kvlib: the TP rule
``kv_heads_per_gpu``, ``weight_bytes_per_gpu``, ``kv_pool_bytes`` (vLLM's budget rounded up) and
``kvlib.planner``'s step functions; the limits in q3 and q5 from ``plan_capacity``. Hidden cases
are plans drawn from a seed over the bundled full-attention models, GPUs, TP degrees and
assumptions.
"""

from __future__ import annotations

import functools
import random

import kvlib as kv
from kvlib import planner

from .answers import Float
from .cases import short
from .core import Exercise, exercises

GEOMETRY = ("layers", "kv_heads", "head_dim", "dtype_bytes")
Q1_PARAMS = GEOMETRY + ("context", "tp")
Q2_PARAMS = ("gpu_memory_bytes", "utilization", "weight_bytes", "overhead_bytes") + Q1_PARAMS
LATENCY = ("weight_bytes", "tp", "bandwidth_bytes_per_s", "tp_overhead", "efficiency") + GEOMETRY + ("context",)
Q3_PARAMS = ("sequences",) + LATENCY
Q4_PARAMS = ("itl_target_ms",) + LATENCY
Q5_PARAMS = ("users", "gpus_per_node", "tp", "sequences_by_memory", "sequences_by_itl", "spike_factor",
             "redundancy_nodes")

HIDDEN_NOTE = ("(Hidden cases are other plans: other models, GPUs, TP degrees, contexts, targets and "
               "assumptions.)")


def plan_case(model, gpu, *, tp, users, context, itl_ms, label, gpus_per_node=8, utilization=0.92,
              overhead_bytes=3 * kv.GB, efficiency=0.7, tp_overhead=0.3, spike_factor=1.3, redundancy_nodes=1,
              dtype_bytes=2):
    """One plan as a case: every input of every step, and kvlib's two limits (q3's load, q5's inputs)."""
    spec, card = kv.load_model(model), kv.get_gpu(gpu)
    weights = spec.weight_bytes(2)
    plan = planner.plan_capacity(model, users=users, context=context, itl_ms=itl_ms, gpu=gpu,
                                 gpus_per_node=gpus_per_node, tp=tp, utilization=utilization,
                                 overhead_bytes_per_gpu=overhead_bytes, weight_bytes=weights, efficiency=efficiency,
                                 tp_overhead=tp_overhead, spike_factor=spike_factor,
                                 redundancy_nodes=redundancy_nodes, kv_dtype_bytes=dtype_bytes)
    kwargs = dict(layers=spec.num_kv_layers, kv_heads=spec.num_kv_heads, head_dim=spec.head_dim, dtype_bytes=dtype_bytes,
                  context=context, tp=tp, gpu_memory_bytes=card.cuda_memory_bytes, utilization=utilization,
                  weight_bytes=weights, overhead_bytes=overhead_bytes, bandwidth_bytes_per_s=card.bandwidth_bytes_per_s,
                  tp_overhead=tp_overhead, efficiency=efficiency, itl_target_ms=itl_ms,
                  sequences=plan.sequences_per_replica_by_memory, users=users, gpus_per_node=gpus_per_node,
                  sequences_by_memory=plan.sequences_per_replica_by_memory,
                  sequences_by_itl=plan.sequences_per_replica_by_latency, spike_factor=spike_factor,
                  redundancy_nodes=redundancy_nodes)
    context_ = dict(model=spec.name, num_heads=spec.num_heads, hidden_size=spec.hidden_size,
                    label_bytes=card.memory_bytes)
    return {"label": label, "kwargs": kwargs, "context": context_}


VISIBLE = (
    plan_case("qwen2.5-32b", "A100-80GB", tp=8, users=500, context=16384, itl_ms=80,
              label="Qwen2.5 32B, 500 users at 16,384 tokens, 80 ms, 8 x A100-80GB, TP 8"),
    plan_case("qwen2.5-32b", "A100-80GB", tp=4, users=500, context=16384, itl_ms=80,
              label="the same plan with two TP-4 replicas per node"),
    plan_case("llama-3.1-8b", "H100-SXM", tp=1, users=2000, context=4096, itl_ms=30,
              label="Llama 3.1 8B, 2,000 users at 4,096 tokens, 30 ms, 8 x H100, TP 1 (eight replicas)"),
    # TP > K on a model vLLM starts at TP 8 (16 query heads; Qwen2.5 7B's 28 are not divisible by 8)
    plan_case("qwen2.5-3b", "H100-SXM", tp=8, users=2000, context=8192, itl_ms=40,
              label="Qwen2.5 3B (2 KV heads), 2,000 users at 8,192 tokens, 40 ms, 8 x H100, TP 8"),
    plan_case("qwen2.5-3b", "H100-SXM", tp=4, users=2000, context=8192, itl_ms=40,
              label="Qwen2.5 3B, the same plan with two TP-4 replicas per node"),
    # the geometry and the cache dtype are inputs: a 64-wide head and a 1-byte cache
    plan_case("gpt2-large", "H100-SXM", tp=4, users=5000, context=1024, itl_ms=20, dtype_bytes=1,
              label="GPT-2 large (MHA, head_dim 64), 5,000 users at 1,024 tokens, 20 ms, 8 x H100, TP 4, an fp8 cache"),
)


@functools.cache   # every seed's plans draw from it; counting each model's parameters is slow
def _full_attention_models():
    out = []
    for model in kv.bundled_models():
        spec = kv.load_model(model)
        if not spec.is_mla and set(spec.layer_kinds) == {"full"} and spec.num_params() > 10**9:
            out.append(model)
    return tuple(out)


@functools.lru_cache(maxsize=512)   # five exercises draw the same plans from one seed (a sweep: from many)
def hidden_plans(seed: int) -> tuple:
    """Eight plans drawn from ``seed``: bundled full-attention models, GPUs, TP, contexts and assumptions."""
    rng = random.Random(seed + 7)
    models = _full_attention_models()
    cases = []
    while len(cases) < 8:
        model = rng.choice(models)
        gpu = rng.choice(["H100-SXM", "A100-80GB", "H200", "B200", "L40S", "A100-40GB"])
        spec = kv.load_model(model)
        tp = rng.choice([t for t in (1, 2, 4, 8) if spec.num_kv_heads % t == 0 or t % spec.num_kv_heads == 0])
        try:
            case = plan_case(model, gpu, tp=tp, users=rng.randint(50, 5000),
                             context=rng.choice([2048, 4096, 6144, 8192, 16384, 32768, 65536, 131072]),
                             itl_ms=rng.choice([30, 40, 50, 60, 80, 100, 150]),
                             label=f"{short(model)} on {gpu}", utilization=rng.choice([0.9, 0.92, 0.95]),
                             overhead_bytes=rng.choice([2, 3, 4, 5]) * kv.GB,
                             efficiency=rng.choice([0.6, 0.65, 0.7, 0.75, 0.8]),
                             tp_overhead=rng.choice([0.1, 0.2, 0.3, 0.4]),
                             spike_factor=rng.choice([1.1, 1.2, 1.25, 1.3, 1.5]),
                             redundancy_nodes=rng.choice([0, 1, 1, 2]))
        except ValueError:      # the plan cannot be met (one sequence does not fit, or the weights miss the ITL)
            continue
        cases.append(case)
    return tuple(cases)


def _kv_per_seq_gpu(case) -> int:
    k = case["kwargs"]
    per_token = kv.kv_bytes_per_token(k["layers"], kv.kv_heads_per_gpu(k["kv_heads"], k["tp"]), k["head_dim"],
                                      k["dtype_bytes"])
    return kv.kv_bytes_per_sequence(per_token, k["context"])


def _per_seq(case, earlier):
    """One sequence's bytes per GPU: the number the learner's own q1 gave on this case (builds_on: a float, a
    numpy scalar's or a bool's number, 0 included), or kvlib's when q1 gave none. A 0 leaves q2 and q4 nothing
    to divide by: ``core`` excuses those cases (the slip is charged in q1 only)."""
    return earlier if earlier is not None else _kv_per_seq_gpu(case)


def _sequences_by_memory(case, earlier=None):
    k = case["kwargs"]
    pool = kv.kv_pool_bytes(k["gpu_memory_bytes"], k["utilization"], kv.weight_bytes_per_gpu(k["weight_bytes"], k["tp"]),
                            k["overhead_bytes"], round_budget_up=True)
    return kv.max_concurrency(pool, _per_seq(case, earlier))


def _slowdown(k):
    return planner.step_slowdown(k["tp"], k["tp_overhead"], k["efficiency"])


def _itl_ms(case, earlier=None):
    k = case["kwargs"]
    return planner.itl_seconds(kv.weight_bytes_per_gpu(k["weight_bytes"], k["tp"]), _per_seq(case, earlier),
                               k["sequences"], k["bandwidth_bytes_per_s"], _slowdown(k)) * 1e3


def _sequences_by_itl(case, earlier=None):
    k = case["kwargs"]
    # the exercise: 0 when the weights and one sequence alone miss the target (no sequence can be served)
    return max(0, planner.sequences_under_itl(k["itl_target_ms"] / 1e3,
                                              kv.weight_bytes_per_gpu(k["weight_bytes"], k["tp"]),
                                              _per_seq(case, earlier), k["bandwidth_bytes_per_s"], _slowdown(k)))


def _nodes(case):
    k = case["kwargs"]
    per_node = k["gpus_per_node"] // k["tp"] * min(k["sequences_by_memory"], k["sequences_by_itl"])
    return planner.nodes_with_headroom(planner.nodes_needed(k["users"], per_node), k["spike_factor"],
                                       k["redundancy_nodes"])


def _geometry_inputs(case) -> dict:
    k = case["kwargs"]
    inputs = {name: k[name] for name in GEOMETRY + ("tp",)}
    inputs.update(seq_len=k["context"], num_heads=case["context"]["num_heads"])
    return inputs


def _memory_inputs(case, earlier=None) -> dict:
    k = case["kwargs"]
    return dict(gpu_bytes=k["gpu_memory_bytes"], label_bytes=case["context"]["label_bytes"],
                utilization=k["utilization"], weight_bytes=k["weight_bytes"], other_bytes=k["overhead_bytes"],
                tp=k["tp"], kv_heads=k["kv_heads"], kv_bytes_per_sequence_per_gpu=_per_seq(case, earlier))


def _latency_inputs(case, earlier=None) -> dict:
    """The slips are recomputed on the learner's own q1 answer, as the expected value is (never charged twice)."""
    k = case["kwargs"]
    inputs = {name: k[name] for name in ("weight_bytes", "tp", "bandwidth_bytes_per_s", "tp_overhead", "efficiency",
                                         "sequences", "itl_target_ms", "kv_heads")}
    inputs["kv_bytes_per_sequence_per_gpu"] = _per_seq(case, earlier)
    return inputs


def _nodes_inputs(case) -> dict:
    k = case["kwargs"]
    inputs = {name: k[name] for name in Q5_PARAMS}
    inputs["replicas"] = k["gpus_per_node"] // k["tp"]
    return inputs


#: The edges the exercise text decides (a tie, a rounding direction, a tolerance, an "other"), each
#: with the visible cases that sit on it (tests/test_case_variants.py checks that they exist).
EDGES = {
    "ch07_q1_kv_per_sequence_per_gpu": (
        {"rule": "past tp = K each GPU keeps one whole head", "visible": (
            "Qwen2.5 3B (2 KV heads), 2,000 users at 8,192 tokens, 40 ms, 8 x H100, TP 8",)},
    ),
}


EXERCISES = exercises(
    Exercise(grade_id="ch07_q1_kv_per_sequence_per_gpu", function_name="kv_per_sequence_per_gpu",
             params=Q1_PARAMS, visible_cases=VISIBLE, hidden_cases=hidden_plans, expected=_kv_per_seq_gpu,
             quantity="kv_bytes_per_sequence_per_gpu", slip_inputs=_geometry_inputs, hidden_note=HIDDEN_NOTE),
    Exercise(grade_id="ch07_q2_sequences_by_memory", function_name="sequences_by_memory", params=Q2_PARAMS,
             visible_cases=VISIBLE, hidden_cases=hidden_plans, expected=_sequences_by_memory,
             builds_on="ch07_q1_kv_per_sequence_per_gpu", quantity="sequences_per_gpu_by_memory",
             slip_inputs=_memory_inputs, unit="sequences", hidden_note=HIDDEN_NOTE),
    Exercise(grade_id="ch07_q3_itl_ms", function_name="itl_ms", params=Q3_PARAMS, visible_cases=VISIBLE,
             hidden_cases=hidden_plans, expected=_itl_ms, answer=Float(rel_tol=1e-6),
             builds_on="ch07_q1_kv_per_sequence_per_gpu", quantity="itl_ms", slip_inputs=_latency_inputs,
             unit="ms", hidden_note=HIDDEN_NOTE),
    Exercise(grade_id="ch07_q4_sequences_by_itl", function_name="sequences_by_itl", params=Q4_PARAMS,
             visible_cases=VISIBLE, hidden_cases=hidden_plans, expected=_sequences_by_itl,
             builds_on="ch07_q1_kv_per_sequence_per_gpu", quantity="sequences_by_itl", slip_inputs=_latency_inputs,
             unit="sequences", hidden_note=HIDDEN_NOTE),
    Exercise(grade_id="ch07_q5_nodes", function_name="nodes", params=Q5_PARAMS, visible_cases=VISIBLE,
             hidden_cases=hidden_plans, expected=_nodes, quantity="nodes_with_headroom", slip_inputs=_nodes_inputs,
             unit="nodes", hidden_note=HIDDEN_NOTE),
)
