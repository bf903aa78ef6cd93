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
ch07_q6_ttft_ms                          ttft_ms(prompt_tokens, token_budget, decode_tokens, step_ms, queue_ms)
ch07_q7_in_flight                        requests_in_flight(rate_per_s, ttft_ms, output_tokens, itl_ms)
=======================================  ===============================================================

Every exercise shares one list of plan cases (case k is the same plan in each), so q2-q4,
which need one sequence's bytes per GPU, build on q1 (``builds_on``): each is right on kvlib's
value or on the one the learner's own q1 answer gives (reused or recomputed alike), so a slip
in q1 is named there and costs only q1. q5 is given the two limits
(kvlib's), so it grades the last step alone. Expected values come from kvlib: the TP rule
``kv_heads_per_gpu``, ``weight_bytes_per_gpu``, ``kv_pool_bytes`` (vLLM's budget rounded up) and
``kvlib.planner``'s step functions; the limits in q3 and q5 from ``plan_capacity``. Hidden cases
are plans drawn from a seed over the bundled full-attention models, GPUs, TP degrees and
assumptions.
"""

from __future__ import annotations

import functools
import math
import random

import kvlib as kv
from kvlib import planner

from .answers import Float
from .cases import short
from .schema import Edge, Exercise, exercises

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


#: The edges the plans of exercises 1 and 3 sit on (the same visible plans line up across exercises 1-3)
HEADS_PER_GPU_EDGE = Edge("each GPU keeps kv_heads // tp heads, and at least one whole head past tp = K")
TP_OVERHEAD_EDGE = Edge("multiply by 1 + tp_overhead only when tp > 1")
VISIBLE = (
    HEADS_PER_GPU_EDGE.on(plan_case("qwen2.5-32b", "A100-80GB", tp=8, users=500, context=16384, itl_ms=80,
                                    label="Qwen2.5 32B, 500 users at 16,384 tokens, 80 ms, 8 x A100-80GB, TP 8")),
    HEADS_PER_GPU_EDGE.on(TP_OVERHEAD_EDGE.on(plan_case("qwen2.5-32b", "A100-80GB", tp=4, users=500, context=16384,
                                                        itl_ms=80, label="the same plan with two TP-4 replicas per node"))),
    TP_OVERHEAD_EDGE.on(plan_case("llama-3.1-8b", "H100-SXM", tp=1, users=2000, context=4096, itl_ms=30,
                                  label="Llama 3.1 8B, 2,000 users at 4,096 tokens, 30 ms, 8 x H100, TP 1 "
                                        "(eight replicas)")),
    # TP > K on a model vLLM starts at TP 8 (16 query heads; Qwen2.5 7B's 28 are not divisible by 8)
    HEADS_PER_GPU_EDGE.on(plan_case("qwen2.5-3b", "H100-SXM", tp=8, users=2000, context=8192, itl_ms=40,
                                    label="Qwen2.5 3B (2 KV heads), 2,000 users at 8,192 tokens, 40 ms, 8 x H100, "
                                          "TP 8")),
    plan_case("qwen2.5-3b", "H100-SXM", tp=4, users=2000, context=8192, itl_ms=40,
              label="Qwen2.5 3B, the same plan with two TP-4 replicas per node"),
    # the geometry and the cache dtype are inputs: a 64-wide head and a 1-byte cache
    plan_case("gpt2-large", "H100-SXM", tp=4, users=5000, context=1024, itl_ms=20, dtype_bytes=1,
              label="GPT-2 large (MHA, head_dim 64), 5,000 users at 1,024 tokens, 20 ms, 8 x H100, TP 4, an fp8 cache"),
)


def pool_edge_overhead(model, gpu, *, tp, context, utilization=0.92, dtype_bytes=2, short_bytes=0) -> int:
    """The overhead (about 3 GB) that leaves one GPU's pool exactly k whole sequences, less ``short_bytes``.

    Exercise 2's edges: the budget ``ceil(M u)`` rounded up, then the floor of pool / one sequence. On the
    edge (``short_bytes`` 0) a budget rounded down (``int(M * u)``) loses one sequence; one byte short
    (``short_bytes`` 1), the floor gives one fewer than the rounding a learner might take.
    """
    spec, card = kv.load_model(model), kv.get_gpu(gpu)
    per_seq = kv.kv_bytes_per_sequence(kv.kv_bytes_per_token(spec.num_kv_layers, kv.kv_heads_per_gpu(
        spec.num_kv_heads, tp), spec.head_dim, dtype_bytes), context)
    room = kv.kv_pool_bytes(card.cuda_memory_bytes, utilization, kv.weight_bytes_per_gpu(spec.weight_bytes(2), tp),
                            0, round_budget_up=True)
    whole = (room - 3 * kv.GB) // per_seq
    return room - whole * per_seq + short_bytes


def short_bytes_label(short_bytes: int) -> str:
    return "exact" if short_bytes == 0 else f"-{short_bytes} B"


def _pool_edge_cases(model, gpu, tp, users, context, itl_ms, name, hidden=False):
    """Exercise 2's edge: exactly k sequences' pool, and one byte short of it (labelled for the visible cases)."""
    out = []
    for less, what in ((0, "exactly"), (1, "one byte short of")):
        overhead = pool_edge_overhead(model, gpu, tp=tp, context=context, short_bytes=less)
        label = (f"{short(model)} on {gpu}: pool edge {short_bytes_label(less)}" if hidden else
                 f"{name}, an overhead of {overhead:,} B: the pool is {what} a whole number of sequences")
        out.append(plan_case(model, gpu, tp=tp, users=users, context=context, itl_ms=itl_ms, label=label,
                             overhead_bytes=overhead))
    return out


#: Exercise 2's edge, visible: Llama 3.1 8B on one H100 (0.92 x 85,018,877,624 B = 78,217,367,414.08 B: the
#: budget's rounding decides a sequence when the pool is exactly whole sequences)
BUDGET_EDGE = Edge("the budget gpu_memory_bytes x utilization rounded up to a whole byte, then whole sequences "
                   "(floor): a pool of exactly whole sequences, and one byte short of it")
VISIBLE += BUDGET_EDGE.on_each(_pool_edge_cases("llama-3.1-8b", "H100-SXM", 1, 2000, 4096, 30,
                                                "Llama 3.1 8B, 4,096 tokens, TP 1"))


def nodes_edge_cases(plan: dict, base_nodes: int, name: str = "", hidden: bool = False) -> tuple:
    """Exercise 5's edges on one plan: users exactly ``base_nodes`` nodes' worth (whose spiked count is whole),
    one user fewer (the same nodes) and one more (one node more)."""
    k = plan["kwargs"]
    per_node = k["gpus_per_node"] // k["tp"] * min(k["sequences_by_memory"], k["sequences_by_itl"])
    out = []
    for extra, what in ((0, "exactly"), (-1, "one user short of"), (1, "one user past")):
        users = base_nodes * per_node + extra
        label = (f"{plan['label']}: nodes edge {extra:+d} at x {k['spike_factor']}" if hidden else
                 f"{name}, {users:,} users: {what} {base_nodes} nodes' worth ({per_node:,} sequences a node), "
                 f"spike x {k['spike_factor']}")
        out.append(dict(plan, label=label, kwargs=dict(k, users=users)))
    return tuple(out)


def _whole_spike_nodes(spike_factor: float) -> int:
    """Nodes (at least 10) whose count times ``spike_factor`` is a whole number in exact arithmetic: one whose
    float product lands above it (``math.ceil`` would add a node) when there is one below 400, else the fewest."""
    from fractions import Fraction
    f = Fraction(str(spike_factor))
    whole = [n for n in range(10, 400) if (n * f).denominator == 1]
    return next((n for n in whole if math.ceil(n * spike_factor) != n * f), whole[0])


def _with_spike(plan: dict, spike_factor: float) -> dict:
    return dict(plan, kwargs=dict(plan["kwargs"], spike_factor=spike_factor))


def _itl_edge_cases(plan: dict, index: int, name: str = "", hidden: bool = False) -> tuple:
    """Exercise 4's edge, "return 0": a target the weights alone miss (the formula goes negative), one the weights
    meet but not with one sequence (it floors to 0), and one a single sequence meets (1). Exercise 4 only (the
    plan cannot be met, so no later step has them); they come after the cases that line up with q1's, and each
    builds on q1's answer to the plan it varies (``index``, its ``earlier_case``)."""
    k = plan["kwargs"]
    w_gpu, per_seq = kv.weight_bytes_per_gpu(k["weight_bytes"], k["tp"]), _kv_per_seq_gpu(plan)
    slow = _slowdown(k)

    def target(n_bytes):        # the target in ms at which a step reads n_bytes, a little above it
        return round(n_bytes / k["bandwidth_bytes_per_s"] * slow * 1e3 * 1.0001, 4)

    out = []
    for what, ms in (("the weights alone miss it", round(target(w_gpu) * 0.9, 4)),
                     ("the weights meet it, one sequence more does not", target(w_gpu + per_seq // 2)),
                     ("one sequence meets it", target(w_gpu + per_seq))):
        label = f"{plan['label']}: ITL edge {ms}" if hidden else f"{name}, a {ms} ms target: {what}"
        out.append(dict(plan, label=label, kwargs=dict(k, itl_target_ms=ms),
                        context=dict(plan["context"], earlier_case=index)))
    return tuple(out)




@functools.cache   # every seed's plans draw from it; counting each model's parameters is slow
def _full_attention_models():
    out = []
    for model in kv.course_models():
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
    # the TP edges every seed shows (Exercises 1 and 3): tp below, at and past K, and tp = 1 (no all-reduce);
    # Qwen2.5 3B has 2 KV heads, Qwen2.5 7B 4, Llama 3.1 8B 8: one plan each where the draws gave none
    for side, (model, tp) in (("tp < K", ("llama-3.1-8b", 4)), ("tp = K", ("qwen2.5-7b", 4)),
                              ("tp > K", ("qwen2.5-3b", 8)), ("tp = 1", ("llama-3.1-8b", 1))):
        if not any(side in (tp_side(c), overhead_side(c)) for c in cases):
            cases.append(plan_case(model, rng.choice(["H100-SXM", "H200"]), tp=tp, users=rng.randint(50, 5000),
                                   context=rng.choice([2048, 4096, 8192]), itl_ms=rng.choice([40, 60, 80]),
                                   label=f"{model}, {side}"))
    # Exercise 2's edge on the first plan's model, GPU and TP: a pool of exactly whole sequences, one byte short
    first = cases[0]
    k = first["kwargs"]
    gpu = next(g for g in ("H100-SXM", "A100-80GB", "H200", "B200", "L40S", "A100-40GB")
               if kv.get_gpu(g).cuda_memory_bytes == k["gpu_memory_bytes"])
    try:
        cases += _pool_edge_cases(_model_of(first), gpu, k["tp"], k["users"], k["context"], k["itl_target_ms"],
                                  "", hidden=True)
    except ValueError:
        pass
    return tuple(cases)


def _model_of(case) -> str:
    name = case["context"]["model"]
    return next(m for m in _full_attention_models() if kv.load_model(m).name == name)


def itl_hidden(seed: int) -> tuple:
    """Exercise 4's hidden cases: the seed's plans (lined up with q1's), then its "return 0" edge on the first."""
    plans = hidden_plans(seed)
    return plans + _itl_edge_cases(plans[0], 0, hidden=True)


def nodes_hidden(seed: int) -> tuple:
    """Exercise 5's hidden cases: the seed's plans, then its edges on the first (a whole spiked node count)."""
    plans = hidden_plans(seed)
    first = plans[0]
    return (plans + nodes_edge_cases(first, _whole_spike_nodes(first["kwargs"]["spike_factor"]), hidden=True)
            + nodes_edge_cases(_with_spike(first, 1.1), _whole_spike_nodes(1.1), hidden=True))


def _kv_per_seq_gpu(case) -> int:
    k = case["kwargs"]
    per_token = kv.kv_bytes_per_token(k["layers"], kv.kv_heads_per_gpu(k["kv_heads"], k["tp"]), k["head_dim"],
                                      k["dtype_bytes"])
    return kv.kv_bytes_per_sequence(per_token, k["context"])


def _per_seq(case, earlier):
    """One sequence's bytes per GPU: the number the learner's own q1 gave on this case (builds_on: a float, a
    numpy scalar's or a bool's number, 0 included), or kvlib's when q1 gave none. A 0 leaves q2 and q4 nothing
    to divide by: ``judge`` excuses those cases (the slip is charged in q1 only)."""
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


#: Exercise 4's visible cases: the plans (lined up with q1's), then its "return 0" edge on Llama 3.1 8B at TP 1
RETURN_ZERO_EDGE = Edge("no sequence meets the target: return 0 (the formula negative, or floored to 0); one that "
                        "does: 1")
Q4_VISIBLE = VISIBLE + RETURN_ZERO_EDGE.on_each(_itl_edge_cases(VISIBLE[2], 2, "Llama 3.1 8B on one H100"))

#: Exercise 5's own visible cases: the plans, then its edges on the first plan (124 sequences a node): the
#: users' ceiling at 10 nodes' worth (x 1.3 = 13 exactly), and a whole spiked count that floating point stores
#: a hair above it (50 x 1.1 = 55, stored as 55.00000000000001: math.ceil alone gives 56)
NODES_EDGE = Edge("the users' nodes rounded up: exactly whole nodes' worth, one user short, one past")
SPIKE_EDGE = Edge("the spiked count rounded up, a whole one kept whole (50 x 1.1 = 55, stored as 55.00000000000001)")
_SPIKED = nodes_edge_cases(_with_spike(VISIBLE[0], 1.1), 50, "Qwen2.5 32B, TP 8")
Q5_VISIBLE = (VISIBLE + NODES_EDGE.on_each(nodes_edge_cases(VISIBLE[0], 10, "Qwen2.5 32B, TP 8"))
              + (SPIKE_EDGE.on(_SPIKED[0]),) + _SPIKED[1:])


#: The edges the exercise text decides (a tie, a rounding direction, a tolerance, an "other"), each
#: with the visible cases that sit on it (tests/test_case_variants.py checks that they exist).
def tp_side(case) -> str:
    """Which side of Exercise 1's edge (tp = K) a plan sits on."""
    k = case["kwargs"]
    return "tp < K" if k["tp"] < k["kv_heads"] else "tp = K" if k["tp"] == k["kv_heads"] else "tp > K"


def overhead_side(case) -> str:
    """Exercise 3's edge: the all-reduce overhead applies only when tp > 1."""
    return "tp = 1" if case["kwargs"]["tp"] == 1 else "tp > 1"


def pool_side(case) -> str | None:
    """Exercise 2's edge: a pool of exactly whole sequences, or one byte short of it (else None)."""
    k = case["kwargs"]
    pool = kv.kv_pool_bytes(k["gpu_memory_bytes"], k["utilization"], kv.weight_bytes_per_gpu(k["weight_bytes"], k["tp"]),
                            k["overhead_bytes"], round_budget_up=True)
    rest = pool % _kv_per_seq_gpu(case)
    return "exactly whole" if rest == 0 else "one byte short" if rest == _kv_per_seq_gpu(case) - 1 else None


def zero_side(case) -> str | None:
    """Exercise 4's "return 0" edge: the formula negative, floored to 0, or exactly 1 (else None)."""
    k = case["kwargs"]
    raw = planner.sequences_under_itl(k["itl_target_ms"] / 1e3, kv.weight_bytes_per_gpu(k["weight_bytes"], k["tp"]),
                                      _kv_per_seq_gpu(case), k["bandwidth_bytes_per_s"], _slowdown(k))
    return {0: "floors to 0", 1: "one sequence"}.get(raw, "negative" if raw < 0 else None)


def users_side(case) -> str | None:
    """Exercise 5's ceiling: users exactly whole nodes' worth, one short, one past (else None)."""
    k = case["kwargs"]
    per_node = k["gpus_per_node"] // k["tp"] * min(k["sequences_by_memory"], k["sequences_by_itl"])
    return {0: "exactly whole", per_node - 1: "one short", 1: "one past"}.get(k["users"] % per_node)


def spike_side(case) -> str | None:
    """Exercise 5's spike: a whole spiked count stored a hair above it (math.ceil adds a node), else None."""
    from fractions import Fraction
    k = case["kwargs"]
    per_node = k["gpus_per_node"] // k["tp"] * min(k["sequences_by_memory"], k["sequences_by_itl"])
    nodes = -(-k["users"] // per_node)
    exact = nodes * Fraction(str(k["spike_factor"]))
    return "whole, stored above" if exact.denominator == 1 and math.ceil(nodes * k["spike_factor"]) > exact else None


#: The edges the text decides, with the visible cases on each side and ``side(case)``, which side a case sits
#: on (None: off the edge); tests/test_case_variants.py checks that hidden cases of every seed show each side
#: the visible ones show. Exercise 4's floor at an exact tie is not an edge here: where the target is met
#: exactly, the float order of the learner's arithmetic decides it, not the text.
# --- q6: the first token of a request under chunked prefill ---------------------------------------
def _ttft_case(label, prompt_tokens, decode_tokens, step_ms, queue_ms, token_budget=512, hint=""):
    return {"label": label,
            "kwargs": {"prompt_tokens": prompt_tokens, "token_budget": token_budget, "decode_tokens": decode_tokens,
                       "step_ms": step_ms, "queue_ms": queue_ms},
            "context": {"hint": hint or "the queue, then one step per chunk of (budget - decodes) prompt tokens, "
                                        "the last chunk rounded up to a whole step."}}


WHOLE_CHUNKS_EDGE = Edge("a prompt of exactly whole chunks takes no extra step; one token more takes one more")
Q6_VISIBLE = (
    _ttft_case("a 6,144-token prompt alone, a 512-token budget, 20 ms steps, no queue", 6144, 0, 20.0, 0.0),
    _ttft_case("the same prompt beside 64 decodes, after 150 ms in the queue", 6144, 64, 20.0, 150.0),
    _ttft_case("a 2,000-token prompt beside 80 decodes, 38.5 ms steps, 250 ms queued", 2000, 80, 38.5, 250.0),
    _ttft_case("a 300-token prompt, shorter than one chunk, 12 ms steps, 40 ms queued", 300, 16, 12.0, 40.0),
    _ttft_case("an 8,192-token budget (one chunk) for a 6,000-token prompt beside 100 decodes, 95 ms steps, "
               "500 ms queued", 6000, 100, 95.0, 500.0, token_budget=8192),
    *WHOLE_CHUNKS_EDGE.on_each((
        _ttft_case("4,320 tokens beside 80 decodes: exactly 10 chunks of 432, 30 ms steps, 60 ms queued",
                   4320, 80, 30.0, 60.0),
        _ttft_case("4,321 tokens beside 80 decodes: one token into an 11th chunk, 30 ms steps, 60 ms queued",
                   4321, 80, 30.0, 60.0))),
)


def _ttft_ms(case: dict) -> float:
    from kvlib.serving import prefill_steps
    k = case["kwargs"]
    return k["queue_ms"] + prefill_steps(k["prompt_tokens"], k["token_budget"], k["decode_tokens"]) * k["step_ms"]


def ttft_hidden(seed: int) -> tuple:
    rng = random.Random(seed)
    cases = []
    for _ in range(6):
        budget = rng.choice([256, 512, 1024, 2048, 8192])
        decodes = rng.choice([0, 8, 32, 64, 128])
        decodes = min(decodes, budget // 2)
        prompt = rng.choice([500, 1500, 3000, 6000, 12000, 30000])
        cases.append(_ttft_case(f"a {prompt:,}-token prompt beside {decodes} decodes, a {budget:,}-token budget",
                                prompt, decodes, round(rng.uniform(10, 80), 1), round(rng.uniform(0, 800), 1),
                                token_budget=budget))
    chunk = 512 - 32
    cases += WHOLE_CHUNKS_EDGE.on_each(tuple(
        _ttft_case(f"{n:,} tokens beside 32 decodes, a 512-token budget", n, 32, 25.0, 100.0)
        for n in (chunk * 7, chunk * 7 + 1)))
    return tuple(cases)


def chunk_side(case) -> str | None:
    """Q6's edge: a prompt of exactly whole chunks, or one token past them (else None)."""
    k = case["kwargs"]
    rest = k["prompt_tokens"] % (k["token_budget"] - k["decode_tokens"])
    return {0: "whole chunks", 1: "one token past"}.get(rest)


# --- q7: requests in flight, Little's law -----------------------------------------------------------------
Q7_PARAMS = ("rate_per_s", "ttft_ms", "output_tokens", "itl_ms")


def _in_flight_case(label, rate_per_s, ttft_ms, output_tokens, itl_ms):
    return {"label": label,
            "kwargs": {"rate_per_s": rate_per_s, "ttft_ms": ttft_ms, "output_tokens": output_tokens, "itl_ms": itl_ms},
            "context": {}}


def _exact_in_flight(case):
    """The mean in flight in exact arithmetic (the inputs as written in decimal)."""
    from fractions import Fraction
    k = case["kwargs"]
    return (Fraction(str(k["rate_per_s"])) * (Fraction(str(k["ttft_ms"])) + k["output_tokens"]
                                              * Fraction(str(k["itl_ms"]))) / 1000)


#: Exercise 7's answer is the mean (Little's L), a float checked to 1 part in 10^6: never rounded to a whole request
MEAN_EDGE = Edge("the mean in flight as a float, not rounded: under one request on average stays a fraction, and a "
                 "whole one (stored a hair off it in floating point) is within the tolerance")
Q7_VISIBLE = (
    MEAN_EDGE.on(_in_flight_case("section 8's service: 10 requests/s, a 1,000 ms TTFT, 300 tokens at 50 ms",
                                 10, 1000.0, 300, 50.0)),
    _in_flight_case("0.5 requests/s (under one a second), a 2,500 ms TTFT, 1,200 tokens at 35 ms",
                    0.5, 2500.0, 1200, 35.0),
    _in_flight_case("a single output token: 40 requests/s, a 180 ms TTFT, 1 token at 20 ms", 40, 180.0, 1, 20.0),
    _in_flight_case("one request a second, an 800 ms TTFT, 400 tokens at 25 ms", 1, 800.0, 400, 25.0),
    MEAN_EDGE.on(_in_flight_case("fewer than one in flight on average: 0.2 requests/s, a 300 ms TTFT, 50 tokens at "
                                 "12 ms", 0.2, 300.0, 50, 12.0)),
    _in_flight_case("150 requests/s, a 450 ms TTFT, 180 tokens at 9 ms", 150, 450.0, 180, 9.0),
    _in_flight_case("a large service: 500 requests/s, a 400 ms TTFT, 250 tokens at 12 ms", 500, 400.0, 250, 12.0),
    # 1.1 x 50 s = 55 requests, stored as 55.00000000000001
    MEAN_EDGE.on(_in_flight_case("1.1 requests/s after a long queue: a 2,000 ms TTFT, 600 tokens at 80 ms",
                                 1.1, 2000.0, 600, 80.0)),
)


def _in_flight(case: dict) -> float:
    from kvlib.serving import littles_law_concurrency
    k = case["kwargs"]
    return littles_law_concurrency(k["rate_per_s"], (k["ttft_ms"] + k["output_tokens"] * k["itl_ms"]) / 1e3)


def in_flight_hidden(seed: int) -> tuple:
    """Six services drawn from ``seed`` (rates, TTFTs, output lengths and ITLs of chat, batch and agent loads),
    then the edge's two sides: under one request on average, and a whole number."""
    rng = random.Random(seed + 70)
    cases = []
    for _ in range(6):
        rate = rng.choice([0.25, 0.5, 2, 3, 8, 12.5, 25, 60, 120])
        ttft = rng.choice([150.0, 300.0, 600.0, 900.0, 1500.0, 4000.0])
        out = rng.choice([1, 32, 128, 400, 1000, 2500])
        itl = rng.choice([6.0, 10.0, 18.0, 25.0, 40.0, 70.0])
        cases.append(_in_flight_case(f"{rate:g} requests/s, {ttft:g} ms TTFT, {out} tokens at {itl:g} ms",
                                     rate, ttft, out, itl))
    under = rng.choice([0.05, 0.1, 0.15])
    cases += MEAN_EDGE.on_each((
        _in_flight_case(f"{under:g} requests/s: under one in flight", under, 400.0, 20, 15.0),
        _in_flight_case("4 requests/s: a whole number in flight", 4, 250.0, 150, 25.0)))
    return tuple(cases)


def mean_side(case) -> str | None:
    """Q7's edge: under one request in flight on average, or a whole number of them (else None)."""
    exact = _exact_in_flight(case)
    return "under one" if exact < 1 else "whole" if exact.denominator == 1 else None


EDGES = {
    "ch07_q1_kv_per_sequence_per_gpu": (HEADS_PER_GPU_EDGE.listing(tp_side),),
    "ch07_q2_sequences_by_memory": (BUDGET_EDGE.listing(pool_side),),
    "ch07_q3_itl_ms": (TP_OVERHEAD_EDGE.listing(overhead_side),),
    "ch07_q4_sequences_by_itl": (RETURN_ZERO_EDGE.listing(zero_side),),
    "ch07_q5_nodes": (NODES_EDGE.listing(users_side), SPIKE_EDGE.listing(spike_side)),
    "ch07_q6_ttft_ms": (WHOLE_CHUNKS_EDGE.listing(chunk_side),),
    "ch07_q7_in_flight": (MEAN_EDGE.listing(mean_side),),
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
             visible_cases=Q4_VISIBLE, hidden_cases=itl_hidden, expected=_sequences_by_itl,
             builds_on="ch07_q1_kv_per_sequence_per_gpu", quantity="sequences_by_itl", slip_inputs=_latency_inputs,
             unit="sequences", hidden_note=HIDDEN_NOTE),
    Exercise(grade_id="ch07_q5_nodes", function_name="nodes", params=Q5_PARAMS, visible_cases=Q5_VISIBLE,
             hidden_cases=nodes_hidden, expected=_nodes, quantity="nodes_with_headroom", slip_inputs=_nodes_inputs,
             unit="nodes", hidden_note=HIDDEN_NOTE),
    Exercise(grade_id="ch07_q6_ttft_ms", function_name="ttft_ms",
             params=("prompt_tokens", "token_budget", "decode_tokens", "step_ms", "queue_ms"), visible_cases=Q6_VISIBLE,
             hidden_cases=ttft_hidden, expected=_ttft_ms, answer=Float(rel_tol=1e-6), quantity="chunked_ttft_ms",
             slip_inputs=lambda case: dict(case["kwargs"]), unit="ms",
             hidden_note="(Hidden cases use other prompts, budgets, decodes, step times and queues, and a prompt of "
                         "whole chunks with one token past it.)"),
    Exercise(grade_id="ch07_q7_in_flight", function_name="requests_in_flight", params=Q7_PARAMS,
             visible_cases=Q7_VISIBLE, hidden_cases=in_flight_hidden, expected=_in_flight,
             answer=Float(rel_tol=1e-6), quantity="requests_in_flight", slip_inputs=lambda case: dict(case["kwargs"]),
             unit="requests", hidden_note="(Hidden cases use other rates, TTFTs, output lengths and ITLs, one service "
                                          "with under one request in flight and one with a whole number.)"),
)
