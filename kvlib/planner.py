"""Capacity planner: how many nodes serve N users at an average context under an ITL target.

The plan follows [kv-math] section 8, one step per line of the report:

1. KV per sequence: ``bytes_per_token * T``, and per GPU under tensor
   parallelism ``tp`` (each GPU holds its own KV heads).
2. Total KV: ``users * kv_per_sequence``.
3. Sequences per node by memory: per GPU the pool is
   ``ceil(M * u) - W / tp - O`` (``formulas.kv_pool_bytes`` with vLLM's
   rounding of the budget; M memory as CUDA reports it, u the engine's
   utilization, W the weights, O activations and other allocations); a
   replica of ``tp`` GPUs holds ``floor(pool / kv_per_sequence_per_gpu)``
   sequences and a node holds ``gpus_per_node / tp`` replicas.
4. Latency check at that load: each GPU reads ``W / tp + n * kv_per_seq_per_gpu``
   bytes per step (a mixture of experts: of ``W`` only the experts its n
   sequences' tokens touch, ``roofline.weight_bytes_read``); ``ITL = bytes / BW / efficiency + 2 L l``, the last term
   the tensor-parallel all-reduces, two per layer at a near-fixed latency
   ``l`` each (``allreduce_seconds_per_step``; only when tp > 1). The older
   rule charges the all-reduce as a fraction of the step instead,
   ``ITL = bytes / BW * (1 + tp_overhead) / efficiency``: at 30%
   (``PESSIMISTIC_TP_OVERHEAD``) several times the modelled time on the
   chapters' plans, so it is kept only as a stated pessimistic bound
   (``tp_overhead=0.3``); ``Plan.allreduce_rule`` says which rule a plan used.
   If the ITL misses the target, the sequences per replica are cut until it is
   met. This is a mean steady-state step; the target is usually a p95, set by
   the steps that also carry a prefill chunk, so ``itl_margin_ms`` holds that
   back (``prefill_chunk_seconds``). A replica also runs at most vLLM's
   ``max_num_seqs`` sequences.
5. Throughput: ``sequences_per_node / ITL`` tokens/s per node.
6. Nodes: ``ceil(users / sequences_per_node)``; with headroom
   ``ceil(nodes * spike_factor) + redundancy_nodes`` (N+1).

Every assumption is a parameter with a default, and the report lists them.
Decode is taken to be bandwidth-bound (true far below the ridge point, see
``kvlib.roofline``); prefill, the KV of the tokens being generated beyond
the average, and the scheduler's own limits are outside the model.

[kv-math] section 8 (Llama 3 70B, 2,000 users, 6K context, p95 ITL < 60 ms,
8 x H100) with its own assumptions -- 80 GB per GPU (its "640 GB" node), no
utilization cap, 24 GB of overhead per node, 141.2 GB of weights, and the
all-reduce as 30% of the step (the pessimistic bound):

>>> p = plan_capacity("llama-3-70b", users=2000, context=6000, itl_ms=60, gpu="H100-SXM",
...                   gpu_memory_bytes=80 * 10**9, utilization=1.0, overhead_bytes_per_gpu=3 * 10**9,
...                   weight_bytes=141_200_000_000, tp_overhead=PESSIMISTIC_TP_OVERHEAD)
>>> p.sequences_per_node, round(p.itl_s * 1e3, 1), p.nodes, p.nodes_with_headroom, p.allreduce_rule
(241, 42.6, 9, 13, 'pessimistic_fraction')

Taught in ch07_capacity_plan. The CLI (``kvlib plan``) formats a ``Plan`` as rows.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from . import formulas
from .assumptions import DEFAULT_OVERHEAD_BYTES, DEFAULT_UTILIZATION
from .config import load_model
from .feasibility import check_deployment, default_max_num_seqs, tp_refusal
from .gpus import get_gpu
from .units import format_gb_gib

__all__ = ["PlanError", "Plan", "plan_capacity", "step_slowdown", "itl_seconds", "sequences_under_itl",
           "nodes_needed", "nodes_with_headroom", "prefill_chunk_seconds", "allreduce_seconds_per_step",
           "ALLREDUCES_PER_LAYER", "DEFAULT_ALLREDUCE_LATENCY_S", "RequestPlan", "plan_requests",
           "BINDING_CONSTRAINTS", "ALLREDUCE_RULES",
           "DEFAULT_UTILIZATION", "DEFAULT_OVERHEAD_BYTES", "DEFAULT_EFFICIENCY",
           "PESSIMISTIC_TP_OVERHEAD", "DEFAULT_SPIKE_FACTOR", "DEFAULT_REDUNDANCY_NODES"]

DEFAULT_EFFICIENCY = 0.70           # achieved / peak bandwidth ([kv-math]: 60-75%)
#: The all-reduce as a fraction of the step ([kv-math] section 8's 30%): not a default, a stated pessimistic bound
#: (``tp_overhead=PESSIMISTIC_TP_OVERHEAD``). On [kv-math] section 8's plan (Llama 3 70B, TP 8, a 23 ms read at 70%
#: efficiency) it charges 9.8 ms a step, where two all-reduces per layer at 20 us cost 3.2 ms.
PESSIMISTIC_TP_OVERHEAD = 0.30
#: Latency of one decode-step all-reduce on NVLink [s], the assumption behind ``allreduce_seconds_per_step`` when a
#: plan models the all-reduce (``tp_overhead=None``, the default): small messages cost a near-fixed latency, of
#: order 10-30 us for 8 GPUs in nccl-tests' all_reduce_perf at 64 KB - 1 MB. Measure yours.
DEFAULT_ALLREDUCE_LATENCY_S = 20e-6
#: How a plan charged the all-reduce (``Plan.allreduce_rule``): two per layer at a latency each, or a fraction of
#: the step (``tp_overhead``).
ALLREDUCE_RULES = ("modelled", "pessimistic_fraction")
DEFAULT_SPIKE_FACTOR = 1.30         # traffic spike headroom ([kv-math] section 8)
DEFAULT_REDUNDANCY_NODES = 1        # N+1
#: Tensor-parallel all-reduces per decoder layer: after attention's o_proj and after the MLP's down_proj
#: (both ``RowParallelLinear`` with ``reduce_results``, ``vllm/model_executor/layers/linear.py``).
ALLREDUCES_PER_LAYER = 2


class PlanError(ValueError):
    """A planner input is out of range, or the target cannot be met; names the parameter."""


def _number(name, value, *, integer=False, minimum=None, above=None, at_most=None):
    ok = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok or value != value:
        raise PlanError(f"{name} must be {'an integer' if integer else 'a number'}, got {value!r}")
    if above is not None and not value > above:
        raise PlanError(f"{name} must be greater than {above}, got {value!r}")
    if minimum is not None and value < minimum:
        raise PlanError(f"{name} must be at least {minimum}, got {value!r}")
    if at_most is not None and value > at_most:
        raise PlanError(f"{name} must be at most {at_most}, got {value!r}")
    return value


def _ceil(x) -> int:
    """Ceiling that ignores float noise (9 x 1.3 = 11.700000000000001 -> 12, 10 x 1.3 -> 13)."""
    return math.ceil(round(x, 9))


# --- the plan's steps, one function each (the chapter's sympy chain calls them; so does plan_capacity) ---------
def step_slowdown(tp, tp_overhead=0, efficiency=DEFAULT_EFFICIENCY):
    """How much longer a real decode step takes than the bandwidth bound: ``(1 + o) / e``.

    ``o`` is the tensor-parallel all-reduce cost as a fraction of the step,
    charged only when ``tp > 1`` (one GPU has nothing to reduce); ``e`` the
    fraction of peak bandwidth real kernels reach. Dimensionless. ``o``
    defaults to 0: a plan models the all-reduce as time added to the step
    (``allreduce_seconds_per_step``) and uses a fraction only as the
    pessimistic bound. Taught in ch07_capacity_plan. A 30% all-reduce and
    70% efficiency ([kv-math] section 8):

    >>> round(step_slowdown(8, tp_overhead=0.3, efficiency=0.7), 4), round(step_slowdown(1, 0.3, 0.7), 4)
    (1.8571, 1.4286)
    """
    return (1 + (tp_overhead if tp > 1 else 0)) / efficiency


def itl_seconds(weight_bytes_per_gpu, kv_bytes_per_sequence_per_gpu, sequences, bandwidth_bytes_per_s,
                slowdown=1):
    """Inter-token latency of a replica holding ``sequences`` sequences: ``(W_g + n S_g) / BW * s`` [s].

    Each GPU of the replica reads its share of the weights ``W_g`` [B] and its
    slice ``S_g`` [B] of every sequence's cache once per step, at ``BW`` [B/s];
    ``s`` is ``step_slowdown``. With every layer attending over the whole
    context this is ``decode_step_seconds(W_g, bytes_per_token_per_gpu, T, n, BW) * s``.
    Accepts sympy symbols. Taught in ch07_capacity_plan. [kv-math] s8: 17.65 GB
    of weights and 241 sequences of 6,000 x 40,960 B per GPU on an H100 (3.35 TB/s),
    x 1.3 / 0.7:

    >>> round(itl_seconds(17.65e9, 6000 * 40960, 241, 3.35e12) * 1e3, 2)
    22.95
    >>> round(itl_seconds(17.65e9, 6000 * 40960, 241, 3.35e12, slowdown=1.3 / 0.7) * 1e3, 1)
    42.6
    """
    return (weight_bytes_per_gpu + sequences * kv_bytes_per_sequence_per_gpu) / bandwidth_bytes_per_s * slowdown


def sequences_under_itl(itl_target_s, weight_bytes_per_gpu, kv_bytes_per_sequence_per_gpu, bandwidth_bytes_per_s,
                        slowdown=1):
    """Most sequences a replica may hold and still meet the ITL target: ``floor((tau BW / s - W_g) / S_g)``.

    ``itl_seconds`` solved for ``n`` at ``tau`` [s], then floored (a fraction of
    a sequence cannot be admitted); negative or zero when the weights alone
    miss the target. Accepts sympy symbols (a ``floor`` expression out).
    Taught in ch07_capacity_plan. [kv-math] s8's numbers at 60 ms:
    0.06 x 3.35e12 x 0.7 / 1.3 = 108.23 GB, less 17.65 GB, over 245.76 MB = 368.6:

    >>> sequences_under_itl(0.060, 17.65e9, 6000 * 40960, 3.35e12, slowdown=1.3 / 0.7)
    368
    """
    return formulas._floor((itl_target_s / slowdown * bandwidth_bytes_per_s - weight_bytes_per_gpu)
                           / kv_bytes_per_sequence_per_gpu)


def prefill_chunk_seconds(num_params, chunk_tokens, tp, flop_per_s, mfu=0.5):
    """Time a prefill chunk of ``C`` prompt tokens adds to the decode step that carries it: ``2 P C / (t F m)`` [s].

    With chunked prefill (vLLM V1's default) a new request's prompt is cut into
    chunks that ride in the same steps as the running sequences' decode tokens,
    so a step that carries one lasts the decode step plus the chunk's compute:
    ``2 P`` FLOPs per token over the ``P`` parameters a prompt token is
    multiplied by (``kvlib.offload.prefill_params_per_token``: the active
    parameters less an untied input embedding, a lookup), split over ``t``
    GPUs of ``F`` FLOP/s each at model FLOPs utilization ``m`` (attention over
    the prompt left out: it adds more for long prompts). Those steps set the
    tail of the ITL, so a plan aims its *mean* step at the p95 target less this
    margin. ``C`` is at most vLLM's per-step token budget,
    ``max_num_batched_tokens``. Taught in ch07_capacity_plan. A 512-token chunk
    of Llama 3.3 70B (70,553,706,496 - 128,256 x 8,192 = 69,503,033,344) on 8
    GPUs of 989 TFLOP/s at 50%: 2 x 69,503,033,344 x 512 / (8 x 989e12 x 0.5)
    = 17.99 ms:

    >>> round(prefill_chunk_seconds(69_503_033_344, 512, 8, 989e12) * 1e3, 2)
    17.99
    """
    return 2 * num_params * chunk_tokens / (tp * flop_per_s * mfu)


def allreduce_seconds_per_step(layers, tp, latency_s, per_layer=ALLREDUCES_PER_LAYER):
    """Time a decode step spends in tensor-parallel all-reduces: ``2 L l`` when ``t > 1``, else 0 [s].

    Each layer reduces twice (``ALLREDUCES_PER_LAYER``), and a decode step's
    message is small (batch x hidden x 2 bytes), so each all-reduce costs a
    near-fixed latency ``l`` rather than a share of the step; the planner adds
    this to the step by default (the ``tp_overhead`` fraction is only a
    pessimistic bound). ``l`` is an assumption to
    replace with a measurement (nccl-tests' ``all_reduce_perf`` at the step's
    message size). Taught in ch07_capacity_plan. 80 layers at 20 us:
    2 x 80 x 20e-6 = 3.2 ms:

    >>> round(allreduce_seconds_per_step(80, 8, 20e-6) * 1e3, 2), allreduce_seconds_per_step(80, 1, 20e-6)
    (3.2, 0)
    """
    return per_layer * layers * latency_s if tp > 1 else 0


def nodes_needed(users, sequences_per_node):
    """Nodes that hold ``users`` sequences at ``sequences_per_node`` each: ``ceil(users / n_node)``.

    A part of a node's load still needs a whole node. Taught in ch07_capacity_plan.
    [kv-math] s8: 2,000 users, 241 sequences per node (8.3):

    >>> nodes_needed(2000, 241)
    9
    """
    if isinstance(users, int) and isinstance(sequences_per_node, int):
        return -(-users // sequences_per_node)
    return formulas._ceil(users / sequences_per_node)


def nodes_with_headroom(nodes, spike_factor=DEFAULT_SPIKE_FACTOR, redundancy_nodes=DEFAULT_REDUNDANCY_NODES):
    """Nodes to deploy: ``ceil(nodes * f) + r`` -- a traffic spike of ``f``, then ``r`` spare nodes (N+1).

    The spike is rounded up to whole nodes before the spares are added (float
    noise ignored: 9 x 1.3 is 11.7, 10 x 1.3 is 13 exactly). Taught in
    ch07_capacity_plan. [kv-math] s8: 9 nodes, 30% spike, N+1 (9 x 1.3 + 1 = 12.7):

    >>> nodes_with_headroom(9, 1.3, 1), nodes_with_headroom(10, 1.3, 1)
    (13, 14)
    """
    product = nodes * spike_factor
    if isinstance(product, (int, float)):
        return _ceil(product) + redundancy_nodes
    return formulas._ceil(product) + redundancy_nodes


@dataclass(frozen=True)
class Plan:
    """Every input, assumption and intermediate figure of a capacity plan."""

    # requirement
    model: str
    users: int
    context: int
    itl_target_s: float
    # hardware and assumptions
    gpu: str
    gpus_per_node: int
    tp: int
    gpu_memory_bytes: int          # per GPU, as CUDA reports it unless overridden
    utilization: float
    overhead_bytes_per_gpu: int
    weight_bytes: int              # whole model
    kv_dtype_bytes: float
    bandwidth_bytes_per_s: float   # per GPU
    efficiency: float
    tp_overhead: float | None      # None: the all-reduce modelled (allreduce_rule), else the fraction charged
    spike_factor: float
    redundancy_nodes: int
    # step 1
    kv_bytes_per_token: int
    kv_bytes_per_token_per_gpu: int
    kv_bytes_per_sequence: int
    kv_bytes_per_sequence_per_gpu: int
    # step 2
    total_kv_bytes: int
    # step 3
    budget_bytes_per_gpu: int      # ceil(M * u)
    weight_bytes_per_gpu: int
    kv_pool_bytes_per_gpu: int
    kv_pool_bytes_per_node: int
    replicas_per_node: int
    sequences_per_replica_by_memory: int
    nodes_for_memory: int
    # step 4
    step_bytes_per_gpu_at_memory_limit: int
    itl_s_at_memory_limit: float
    sequences_per_replica_by_latency: int
    sequences_per_replica: int
    step_bytes_per_gpu: int
    step_s_bound: float            # bytes / BW, before overheads
    itl_s: float
    # steps 5 and 6
    sequences_per_node: int
    nodes: int
    nodes_with_headroom: int
    # added later: the scheduler's cap and the p95 margin
    max_num_seqs: int = 1024       # vLLM's default max_num_seqs on the GPU (sequences per replica at most)
    itl_margin_s: float = 0.0      # held back from the target for the steps that carry prefill chunks
    allreduce_s_per_step: float = 0.0   # modelled all-reduce time per step (tp_overhead None), else 0
    allreduce_latency_s: float | None = None   # per all-reduce, when modelled; None under the fraction

    @property
    def allreduce_rule(self) -> str:
        """'modelled' (two all-reduces per layer at ``allreduce_latency_s``, added to the step) or
        'pessimistic_fraction' (the step stretched by ``1 + tp_overhead``); see ``ALLREDUCE_RULES``."""
        return ALLREDUCE_RULES[0] if self.tp_overhead is None else ALLREDUCE_RULES[1]

    @property
    def sequences_per_node_by_memory(self) -> int:
        return self.replicas_per_node * self.sequences_per_replica_by_memory

    @property
    def meets_itl_at_memory_limit(self) -> bool:
        return self.itl_s_at_memory_limit <= self.itl_target_s

    @property
    def limited_by(self) -> str:
        """'memory' when the KV pool sets the sequences per node, 'latency' when the ITL does, 'max_num_seqs'
        when the engine's scheduler cap is below both."""
        if self.sequences_per_replica == self.sequences_per_replica_by_memory:
            return "memory"
        if self.sequences_per_replica == self.sequences_per_replica_by_latency:
            return "latency"
        return "max_num_seqs"

    @property
    def tokens_per_s_per_node(self) -> float:
        return self.sequences_per_node / self.itl_s

    @property
    def tokens_per_s(self) -> float:
        """Aggregate decode throughput of ``nodes`` full nodes [tokens/s]."""
        return self.nodes * self.tokens_per_s_per_node

    @property
    def tokens_per_s_per_user(self) -> float:
        return 1 / self.itl_s

    @property
    def gpus(self) -> int:
        return self.nodes_with_headroom * self.gpus_per_node

    def to_dict(self) -> dict:
        d = asdict(self)
        for name in ("allreduce_rule", "sequences_per_node_by_memory", "meets_itl_at_memory_limit", "limited_by",
                     "tokens_per_s_per_node", "tokens_per_s", "tokens_per_s_per_user", "gpus"):
            d[name] = getattr(self, name)
        return d


def _weight_read(spec, weight_bytes_per_gpu: int):
    """``n -> W_g(n)``: the weight bytes per GPU a decode step of ``n`` sequences reads.

    A dense model reads all its weights, ``W_g``, at any batch. A mixture of experts reads in
    each MoE layer only the experts its n tokens touch (``roofline.weight_bytes_read``): the
    share ``P_read(n) / P`` of its parameters, applied to the weights as given (one precision
    for the whole model assumed), whole bytes rounded up."""
    if not spec.num_experts:
        return lambda n: weight_bytes_per_gpu
    from .roofline import weight_bytes_read
    total = spec.num_params()
    return lambda n: -(-weight_bytes_per_gpu * weight_bytes_read(spec, n, dtype_bytes=1, embedding_rows=False)
                       // total)


def _most_sequences_under(budget_s, read, kv_bytes_per_sequence_per_gpu, bandwidth_bytes_per_s, slowdown) -> int:
    """Largest n with ``(W_g(n) + n S_g) / BW * s <= budget`` for a step read ``W_g(n)`` growing with n (a mixture of
    experts): between the closed forms at ``W_g(1)`` (above) and ``W_g`` whole (below), by bisection."""
    high = sequences_under_itl(budget_s, read(1), kv_bytes_per_sequence_per_gpu, bandwidth_bytes_per_s, slowdown)
    if high < 1:
        return high
    low = 0

    def meets(n):
        return itl_seconds(read(n), kv_bytes_per_sequence_per_gpu, n, bandwidth_bytes_per_s, slowdown) <= budget_s

    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if meets(mid) else (low, mid)
    return high if meets(high) else low


def plan_capacity(model, *, users: int, context: int, itl_ms: float, gpu="H100-SXM", gpus_per_node: int = 8,
                  tp: int | None = None, gpu_memory_bytes=None, utilization: float = DEFAULT_UTILIZATION,
                  overhead_bytes_per_gpu=DEFAULT_OVERHEAD_BYTES, weight_bytes=None, num_params=None,
                  weight_dtype_bytes=2, kv_dtype_bytes=None, bandwidth_bytes_per_s=None,
                  efficiency: float = DEFAULT_EFFICIENCY, tp_overhead: float | None = None,
                  spike_factor: float = DEFAULT_SPIKE_FACTOR,
                  redundancy_nodes: int = DEFAULT_REDUNDANCY_NODES, hub: bool = False, max_num_seqs=None,
                  itl_margin_ms: float = 0, allreduce_latency_s: float = DEFAULT_ALLREDUCE_LATENCY_S) -> Plan:
    """Plan nodes of ``gpus_per_node`` GPUs for ``users`` sequences of ``context`` tokens.

    ``tp`` defaults to ``gpus_per_node`` (one replica per node);
    ``gpu_memory_bytes`` to what CUDA reports for ``gpu``; ``weight_bytes``
    to ``num_params`` (default: kvlib's count) x ``weight_dtype_bytes``;
    ``bandwidth_bytes_per_s`` to the GPU's datasheet figure. Raises
    PlanError (naming the parameter) when an input is out of range, when
    one sequence does not fit, or when the weights alone miss the ITL.

    The all-reduce is modelled by default (``tp_overhead=None``): two per
    layer at ``allreduce_latency_s`` each (``allreduce_seconds_per_step``),
    added to the step, ``ITL = bytes / BW / e + 2 L l``, as the request-based
    plan (``plan_requests``) does. ``tp_overhead=0.3``
    (``PESSIMISTIC_TP_OVERHEAD``) charges it as a fraction of the step
    instead, ``ITL = bytes / BW x (1 + o) / e``: a stated pessimistic bound.
    ``Plan.allreduce_rule`` names the rule used.

    [kv-math] exercise D, with kvlib's defaults (CUDA-reported memory, 0.92,
    3 GB per GPU, TP = 8 on 8 x A100-80GB):

    >>> p = plan_capacity("qwen2.5-32b", users=500, context=16384, itl_ms=80, gpu="A100-80GB")
    >>> p.sequences_per_node, p.nodes, p.nodes_with_headroom, round(p.itl_s * 1e3, 1)
    (124, 5, 8, 54.9)
    """
    spec = load_model(model, hub=hub)
    card = get_gpu(gpu)
    _number("users", users, integer=True, minimum=1)
    _number("context", context, integer=True, minimum=1)
    _number("itl_ms", itl_ms, above=0)
    _number("gpus_per_node", gpus_per_node, integer=True, minimum=1)
    tp = gpus_per_node if tp is None else _number("tp", tp, integer=True, minimum=1)
    if gpus_per_node % tp:
        raise PlanError(f"tp ({tp}) must divide gpus_per_node ({gpus_per_node})")
    refusal = tp_refusal(spec, tp)   # the engine's own rules: query heads, then KV heads
    if refusal:
        raise PlanError(f"tp: {refusal}; choose a tp that divides both")
    if spec.max_position_embeddings is not None and context > spec.max_position_embeddings:
        raise PlanError(f"context: {context:,} tokens is over the model's max_position_embeddings "
                        f"{spec.max_position_embeddings:,}; vLLM will not serve it")
    memory = card.cuda_memory_bytes if gpu_memory_bytes is None else _number("gpu_memory_bytes", gpu_memory_bytes,
                                                                             above=0)
    _number("utilization", utilization, above=0, at_most=1)
    _number("overhead_bytes_per_gpu", overhead_bytes_per_gpu, minimum=0)
    _number("efficiency", efficiency, above=0, at_most=1)
    if tp_overhead is not None:
        _number("tp_overhead", tp_overhead, minimum=0)
    _number("allreduce_latency_s", allreduce_latency_s, minimum=0)
    _number("spike_factor", spike_factor, minimum=1)
    _number("redundancy_nodes", redundancy_nodes, integer=True, minimum=0)
    _number("itl_margin_ms", itl_margin_ms, minimum=0)
    if not itl_margin_ms < itl_ms:
        raise PlanError(f"itl_margin_ms ({itl_margin_ms}) must be below itl_ms ({itl_ms})")
    cap = default_max_num_seqs(card) if max_num_seqs is None else _number("max_num_seqs", max_num_seqs,
                                                                          integer=True, minimum=1)
    if weight_bytes is None:
        params = spec.num_params() if num_params is None else _number("num_params", num_params, above=0)
        _number("weight_dtype_bytes", weight_dtype_bytes, above=0)
        weight_bytes = formulas.weight_bytes(params, weight_dtype_bytes)
    weight_bytes = math.ceil(_number("weight_bytes", weight_bytes, above=0))
    bw = card.bandwidth_bytes_per_s if bandwidth_bytes_per_s is None else _number(
        "bandwidth_bytes_per_s", bandwidth_bytes_per_s, above=0)
    kv_b = spec.dtype_bytes if kv_dtype_bytes is None else _number("kv_dtype_bytes", kv_dtype_bytes, above=0)

    # Step 1: KV per sequence, in all and per GPU.
    per_token = spec.kv_bytes_per_token(kv_b)
    per_token_gpu = spec.kv_bytes_per_token(kv_b, tp=tp)
    per_seq = spec.kv_bytes_per_sequence(context, kv_b)
    per_seq_gpu = spec.kv_bytes_per_sequence(context, kv_b, tp=tp)
    # Step 2: total KV.
    total_kv = users * per_seq
    # Step 3: the pool per GPU and the sequences it holds.
    budget = formulas.kv_pool_bytes(memory, utilization, 0, 0, round_budget_up=True)   # ceil(M * u)
    w_gpu = formulas.weight_bytes_per_gpu(weight_bytes, tp)
    pool = formulas.kv_pool_bytes(memory, utilization, w_gpu, overhead_bytes_per_gpu, round_budget_up=True)
    if pool < per_seq_gpu:
        check = check_deployment(spec, card, tp=tp, seq_len=context, kv_dtype_bytes=kv_b, weight_bytes=weight_bytes,
                                 utilization=utilization, other_bytes=overhead_bytes_per_gpu, gpu_memory_bytes=memory)
        raise PlanError(f"gpu: one sequence of {context:,} tokens {check.summary()}; "
                        f"use more GPUs per replica (tp) or a bigger GPU")
    replicas = gpus_per_node // tp
    by_memory = pool // per_seq_gpu
    nodes_for_memory = nodes_needed(users, replicas * by_memory)
    # Step 4: latency at the memory limit, then cut to the ITL target if needed.
    if tp_overhead is None:          # the all-reduce modelled: a fixed time per step on top of the read
        slowdown = step_slowdown(tp, 0, efficiency)
        allreduce_s = allreduce_seconds_per_step(spec.num_layers, tp, allreduce_latency_s)
    else:
        slowdown = step_slowdown(tp, tp_overhead, efficiency)
        allreduce_s = 0
    target_s = itl_ms / 1e3
    mean_target_s = (itl_ms - itl_margin_ms) / 1e3      # the mean step, leaving the margin for the tail
    # a mixture of experts reads only the experts its sequences' tokens touch (read(n) <= w_gpu); a dense model all
    read = _weight_read(spec, w_gpu)
    bytes_mem = read(by_memory) + by_memory * per_seq_gpu
    itl_mem = itl_seconds(read(by_memory), per_seq_gpu, by_memory, bw, slowdown) + allreduce_s
    if spec.num_experts:
        by_latency = _most_sequences_under(mean_target_s - allreduce_s, read, per_seq_gpu, bw, slowdown)
    else:
        by_latency = sequences_under_itl(mean_target_s - allreduce_s, w_gpu, per_seq_gpu, bw, slowdown)
    if by_latency < 1:
        margin = f" less the {itl_margin_ms:g} ms margin" if itl_margin_ms else ""
        raise PlanError(
            f"itl_ms: {itl_ms} ms{margin} cannot be met: reading the weights ({format_gb_gib(read(1))} per GPU) and one "
            f"sequence already takes {((read(1) + per_seq_gpu) / bw * slowdown + allreduce_s) * 1e3:.1f} ms per step")
    n = min(by_memory, by_latency, cap)
    step_bytes = read(n) + n * per_seq_gpu
    # Steps 5 and 6: nodes, then headroom.
    per_node = replicas * n
    nodes = nodes_needed(users, per_node)
    return Plan(
        model=spec.name, users=users, context=context, itl_target_s=target_s,
        gpu=card.name, gpus_per_node=gpus_per_node, tp=tp, gpu_memory_bytes=memory, utilization=utilization,
        overhead_bytes_per_gpu=overhead_bytes_per_gpu, weight_bytes=weight_bytes, kv_dtype_bytes=kv_b,
        bandwidth_bytes_per_s=bw, efficiency=efficiency, tp_overhead=tp_overhead, spike_factor=spike_factor,
        redundancy_nodes=redundancy_nodes,
        kv_bytes_per_token=per_token, kv_bytes_per_token_per_gpu=per_token_gpu, kv_bytes_per_sequence=per_seq,
        kv_bytes_per_sequence_per_gpu=per_seq_gpu, total_kv_bytes=total_kv,
        budget_bytes_per_gpu=budget, weight_bytes_per_gpu=w_gpu, kv_pool_bytes_per_gpu=pool,
        kv_pool_bytes_per_node=pool * gpus_per_node, replicas_per_node=replicas,
        sequences_per_replica_by_memory=by_memory, nodes_for_memory=nodes_for_memory,
        step_bytes_per_gpu_at_memory_limit=bytes_mem, itl_s_at_memory_limit=itl_mem,
        sequences_per_replica_by_latency=by_latency, sequences_per_replica=n, step_bytes_per_gpu=step_bytes,
        step_s_bound=itl_seconds(read(n), per_seq_gpu, n, bw),
        itl_s=itl_seconds(read(n), per_seq_gpu, n, bw, slowdown) + allreduce_s,
        sequences_per_node=per_node, nodes=nodes,
        nodes_with_headroom=nodes_with_headroom(nodes, spike_factor, redundancy_nodes),
        max_num_seqs=cap, itl_margin_s=itl_margin_ms / 1e3, allreduce_s_per_step=allreduce_s,
        allreduce_latency_s=allreduce_latency_s if tp_overhead is None else None,
    )


# --- requests, not users: the plan a capacity review starts from -----------------------------------------------
BINDING_CONSTRAINTS = ("memory", "itl", "ttft", "prefill")
DEFAULT_TOKEN_BUDGET = 512     # tokens per step (vLLM's max_num_batched_tokens), the chunk of ch07's p95 rule
DEFAULT_MFU = 0.5              # achieved / peak FLOP/s of a prefill chunk


@dataclass(frozen=True)
class RequestPlan:
    """A plan from a request rate, prompt and output lengths and two SLOs; ``decode`` is the users-form plan at the
    concurrency Little's law gives."""

    model: str
    rate_per_s: float
    prompt_tokens: int
    prompt_tokens_p95: int
    output_tokens: int
    output_tokens_p95: int
    itl_target_s: float
    ttft_target_s: float
    prefix_hit_rate: float
    token_budget: int
    mfu: float
    seconds_in_system: float       # [s] ttft target + output tokens x itl target: a request at its SLOs
    concurrency: float             # Little's law: rate x seconds in system
    mean_context: int              # [tokens] prompt + output / 2: a sequence's cache over its life, on average
    itl_margin_s: float            # [s] one full chunk's compute, held back from the ITL target (the p95 rule)
    decode: Plan                   # sequences per replica by memory and ITL, the all-reduce modelled
    max_sequences_per_replica: int  # memory, ITL, the token budget and the TTFT cut
    sequences_per_replica: int     # the planned load: concurrency over the replicas
    prefill_steps_p95: int         # steps the p95 prompt's uncached tokens take beside the decodes
    ttft_s_p95: float              # [s] at the planned load
    prefill_tokens_per_s_per_replica: float   # one chunk of (budget - decodes) per step
    nodes_for_decode: int
    nodes_for_prefill: int         # the fewest nodes that also keep up with the prompts
    nodes: int
    nodes_with_headroom: int
    binding_constraint: str        # one of BINDING_CONSTRAINTS

    @property
    def allreduce_rule(self) -> str:
        """How the decode step charged the all-reduce (``Plan.allreduce_rule``)."""
        return self.decode.allreduce_rule

    def to_dict(self) -> dict:
        return dict(asdict(self), allreduce_rule=self.allreduce_rule)


def _prefill_compute_seconds(spec, tokens, cached, tp, flop_per_s, mfu) -> float:
    """Compute time of a prefill of ``tokens`` of which ``cached`` come from the prefix cache (linear + attention)."""
    from .offload import attention_pairs, prefill_params_per_token
    from .serving import _attention_head_dims, _attention_layers
    d_qk, d_v = _attention_head_dims(spec)
    per_pair = 2 * spec.num_heads * (d_qk + d_v) * _attention_layers(spec)
    flops = 2 * prefill_params_per_token(spec) * (tokens - cached) + per_pair * (
        attention_pairs(tokens) - attention_pairs(cached))
    return flops / (tp * flop_per_s * mfu)


def plan_requests(model, *, rate_per_s: float, prompt_tokens: int, output_tokens: int, itl_ms: float,
                  ttft_ms: float, prompt_tokens_p95: int | None = None, output_tokens_p95: int | None = None,
                  prefix_hit_rate: float = 0.0, gpu="H100-SXM", gpus_per_node: int = 8, tp: int | None = None,
                  token_budget: int = DEFAULT_TOKEN_BUDGET, mfu: float = DEFAULT_MFU,
                  allreduce_latency_s: float = DEFAULT_ALLREDUCE_LATENCY_S, tp_overhead: float | None = None,
                  **kwargs) -> RequestPlan:
    """Nodes for ``rate_per_s`` requests a second under a TTFT and an ITL SLO: the plan a capacity review makes.

    1. **Little's law**: a request stays ``W = TTFT + T_o x ITL`` at its SLOs, so
       ``N = lambda W`` run at once (``serving.littles_law_concurrency``), each
       holding on average ``T_p + T_o / 2`` tokens of cache.
    2. **Decode**: ``plan_capacity`` for N sequences at that context, the
       all-reduce modelled (two per layer at ``allreduce_latency_s``; or,
       with ``tp_overhead``, the pessimistic fraction of the step), the mean
       step aimed at the ITL less one full chunk's compute (the p95 rule: the
       slow steps are those carrying a prompt chunk of ``token_budget`` tokens,
       vLLM's ``max_num_batched_tokens``).
    3. **TTFT**: the p95 prompt's uncached tokens (``prefix_hit_rate`` of them
       come from the prefix cache) go ``token_budget - n`` a step beside the n
       decodes (``serving.prefill_steps``), each step lasting the decode step
       plus the chunk's compute, attention included; the decodes per replica
       are cut until that meets the TTFT SLO (queueing left out: the spike
       headroom of step 5 stands for it).
    4. **Prefill capacity**: a replica holding n sequences prefills
       ``token_budget - n`` prompt tokens per step (each step the decode step
       plus that chunk's compute); nodes are added until the replicas keep up
       with ``lambda T_p (1 - h)`` prompt tokens a second.
    5. Then spike and N+1 headroom.

    ``binding_constraint`` names what set the answer: ``memory`` (the KV pool),
    ``itl`` (the step time), ``ttft`` (the cut for the first token) or
    ``prefill`` (prompt throughput). ``kwargs`` pass to ``plan_capacity``
    (utilization, overhead, weights, efficiency, spike, redundancy ...).
    Llama 3.1 70B-class (Llama 3.3 70B) on 8 x H100, 10 requests/s, 2,000-token
    prompts, 300 tokens out, ITL 50 ms, TTFT 1 s: W = 1 + 300 x 0.05 = 16 s,
    N = 160 sequences at 2,150 tokens:

    >>> p = plan_requests("llama-3.3-70b", rate_per_s=10, prompt_tokens=2000, output_tokens=300, itl_ms=50,
    ...                   ttft_ms=1000)
    >>> p.concurrency, p.mean_context, p.binding_constraint, p.nodes
    (160.0, 2150, 'prefill', 2)

    Sources: Little (1961); DistServe (Zhong et al. 2024) for sizing by TTFT
    and ITL goodput; Sarathi-Serve (Agrawal et al. 2024) and vLLM's scheduler
    for chunked prefill under a token budget.
    """
    from .serving import littles_law_concurrency, prefill_steps

    spec = load_model(model, hub=kwargs.get("hub", False))
    _number("rate_per_s", rate_per_s, above=0)
    _number("prompt_tokens", prompt_tokens, integer=True, minimum=1)
    _number("output_tokens", output_tokens, integer=True, minimum=1)
    p95_in = prompt_tokens if prompt_tokens_p95 is None else _number("prompt_tokens_p95", prompt_tokens_p95,
                                                                      integer=True, minimum=prompt_tokens)
    p95_out = output_tokens if output_tokens_p95 is None else _number("output_tokens_p95", output_tokens_p95,
                                                                       integer=True, minimum=output_tokens)
    _number("itl_ms", itl_ms, above=0)
    _number("ttft_ms", ttft_ms, above=0)
    _number("prefix_hit_rate", prefix_hit_rate, minimum=0)
    if not prefix_hit_rate < 1:
        raise PlanError(f"prefix_hit_rate must be below 1, got {prefix_hit_rate!r}")
    _number("token_budget", token_budget, integer=True, minimum=2)
    _number("mfu", mfu, above=0, at_most=1)
    _number("gpus_per_node", gpus_per_node, integer=True, minimum=1)
    tp = gpus_per_node if tp is None else _number("tp", tp, integer=True, minimum=1)
    longest = p95_in + p95_out
    if spec.max_position_embeddings is not None and longest > spec.max_position_embeddings:
        raise PlanError(f"prompt_tokens_p95: {p95_in:,} + {p95_out:,} output tokens is over the model's "
                        f"max_position_embeddings {spec.max_position_embeddings:,}")
    card = get_gpu(gpu)
    flop_per_s = kwargs.pop("peak_flop_per_s", None) or card.bf16_flop_per_s

    seconds = ttft_ms / 1e3 + output_tokens * itl_ms / 1e3
    concurrency = littles_law_concurrency(rate_per_s, seconds)
    users = max(1, _ceil(concurrency))
    context = prompt_tokens + output_tokens // 2
    margin_s = prefill_chunk_seconds(_prefill_params(spec), token_budget, tp, flop_per_s, mfu)
    if not margin_s * 1e3 < itl_ms:
        raise PlanError(f"token_budget: a {token_budget}-token chunk takes {margin_s * 1e3:.1f} ms, not below "
                        f"itl_ms {itl_ms}; lower the budget or raise tp")
    decode = plan_capacity(spec, users=users, context=context, itl_ms=itl_ms, gpu=card.name,
                           gpus_per_node=gpus_per_node, tp=tp, tp_overhead=tp_overhead,
                           allreduce_latency_s=allreduce_latency_s, itl_margin_ms=margin_s * 1e3,
                           **{k: v for k, v in kwargs.items() if k != "hub"})
    cached = math.floor(prefix_hit_rate * p95_in)
    uncached_mean = prompt_tokens - math.floor(prefix_hit_rate * prompt_tokens)
    slowdown = step_slowdown(tp, 0 if tp_overhead is None else tp_overhead, decode.efficiency)
    s_gpu, bw = decode.kv_bytes_per_sequence_per_gpu, decode.bandwidth_bytes_per_s
    # a step carrying a chunk holds token_budget tokens (n decodes, the chunk the rest): a mixture of experts reads the
    # experts those touch
    w_gpu = _weight_read(spec, decode.weight_bytes_per_gpu)(token_budget)

    def ttft(n):
        steps = prefill_steps(p95_in - cached, token_budget, min(n, token_budget - 1))
        decode_s = itl_seconds(w_gpu, s_gpu, n, bw, slowdown) + decode.allreduce_s_per_step
        return steps, steps * decode_s + _prefill_compute_seconds(spec, p95_in, cached, tp, flop_per_s, mfu)

    n_max = min(decode.sequences_per_replica, token_budget - 1)
    cut = False
    while n_max > 1 and ttft(n_max)[1] > ttft_ms / 1e3:
        n_max, cut = n_max - 1, True
    if ttft(n_max)[1] > ttft_ms / 1e3:
        raise PlanError(f"ttft_ms: {ttft_ms} ms cannot be met: the p95 prompt of {p95_in:,} tokens takes "
                        f"{ttft(n_max)[1] * 1e3:,.0f} ms to prefill beside one sequence; raise tp or the token budget")
    replicas = gpus_per_node // tp

    def prefill_rate(n):
        """Prompt tokens a replica prefills per second: one chunk of the budget's rest per step."""
        step_s = itl_seconds(w_gpu, s_gpu, n, bw, slowdown) + decode.allreduce_s_per_step + prefill_chunk_seconds(
            _prefill_params(spec), token_budget - n, tp, flop_per_s, mfu)
        return (token_budget - n) / step_s

    # the fewest nodes whose replicas hold the sequences (at most n_max each) and keep up with the prompts
    nodes_decode = nodes_needed(users, replicas * n_max)
    nodes = nodes_decode
    while True:
        n = -(-users // (replicas * nodes))
        if rate_per_s * uncached_mean / (replicas * nodes) <= prefill_rate(n):
            break
        nodes += 1
    steps, ttft_s = ttft(n)
    nodes_prefill = nodes
    if nodes > nodes_decode:
        binding = "prefill"
    elif cut:
        binding = "ttft"
    elif decode.sequences_per_replica_by_latency < decode.sequences_per_replica_by_memory:
        binding = "itl"
    else:
        binding = "memory"
    spike = kwargs.get("spike_factor", DEFAULT_SPIKE_FACTOR)
    spare = kwargs.get("redundancy_nodes", DEFAULT_REDUNDANCY_NODES)
    return RequestPlan(
        model=spec.name, rate_per_s=rate_per_s, prompt_tokens=prompt_tokens, prompt_tokens_p95=p95_in,
        output_tokens=output_tokens, output_tokens_p95=p95_out, itl_target_s=itl_ms / 1e3,
        ttft_target_s=ttft_ms / 1e3, prefix_hit_rate=prefix_hit_rate, token_budget=token_budget, mfu=mfu,
        seconds_in_system=seconds, concurrency=concurrency, mean_context=context, itl_margin_s=margin_s,
        decode=decode, max_sequences_per_replica=n_max, sequences_per_replica=n, prefill_steps_p95=steps,
        ttft_s_p95=ttft_s, prefill_tokens_per_s_per_replica=prefill_rate(n), nodes_for_decode=nodes_decode,
        nodes_for_prefill=nodes_prefill,
        nodes=nodes, nodes_with_headroom=nodes_with_headroom(nodes, spike, spare), binding_constraint=binding)


def _prefill_params(spec) -> int:
    from .offload import prefill_params_per_token
    return prefill_params_per_token(spec)
