"""Decode on the roofline: step time, tokens/s and ITL from bytes moved.

One decode step reads every weight once and every running sequence's whole
KV cache once, and produces one token per sequence:

    bytes_per_step = W + B * kv_bytes_per_sequence(T)      [B]
    step_s (bandwidth limit) = bytes_per_step / BW          [s]
    tokens_per_s = B / step_s;  ITL = step_s

With an efficiency factor e (real kernels reach 60-75% of peak bandwidth,
[kv-math]) the step takes ``step_s / e``. Arithmetic intensity is FLOPs per
byte moved; below the GPU's ridge point (peak FLOP/s / BW, 295 FLOP/byte on
an H100) the step is bandwidth-bound. The regime is *weight-dominated* while
the weights are the larger read and *cache-dominated* once the KV reads
exceed them, at ``B * T = W / bytes_per_token`` (the crossover).

FLOPs of a decode step: ``2 * P * B`` for the linear layers plus, per
sequence and layer, ``2 * H * (d_qk + d_v) * T`` for the new token's Q.K
and softmax(.)V against T cached tokens (H = query heads).

"Every weight once" is true of every matrix but the input embedding: a step
looks up one row of it per sequence and does no arithmetic with it.
``weight_bytes_read`` counts what a step reads, ``W - (V - B) d b`` for an
untied table (Llama 3.1 8B skips 1.05 GB of its 16.06 GB), and
``decode_step(..., embedding_rows=True)`` uses it, with the lookup's
parameters left out of the FLOPs too. ``compute_bound_batch`` is the batch
from which a step is compute-bound: about the ridge for the weights alone,
never once the context is long enough.

A mixture of experts reads, in each MoE layer, only the experts its tokens
are routed to: ``expected_experts_touched`` gives how many a step of B
tokens touches on average, and ``weight_bytes_read`` counts those experts,
the shared experts and the dense parts (a dense model is the case with no
routed experts). At batch 1 a Mixtral step reads 2 of 8 experts; it takes
about 20 tokens before every expert is read in most layers.

A step's time is the sum over its operations of ``max(bytes / BW, FLOPs / F)``
(``step_ops``): the weight matmuls turn compute-bound at a batch near the
ridge while attention stays bandwidth-bound at any batch, so one intensity
for the whole step (``one_intensity_seconds``, the rule this module started
from) understates a step whose matmuls are compute-bound and whose
attention is not (Williams, Waterman and Patterson 2009, "Roofline", apply
the roofline per kernel).

Taught in ch06_crossover (bandwidth against compute).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from . import formulas
from .config import load_model
from .gpus import get_gpu
from .params import routed_expert_params
from .spec import ATTENTION_KINDS

__all__ = [
    "RooflineError",
    "DecodeStep",
    "decode_step",
    "decode_flops",
    "regime",
    "crossover_context",
    "first_cache_context",
    "crossover_batch",
    "weight_bytes_read",
    "expected_experts_touched",
    "all_experts_batch",
    "StepOp",
    "step_ops",
    "one_intensity_seconds",
    "matmul_ridge_batch",
    "compute_bound_batch",
    "WEIGHT_DOMINATED",
    "CACHE_DOMINATED",
]

WEIGHT_DOMINATED = "weight-dominated"
CACHE_DOMINATED = "cache-dominated"


class RooflineError(ValueError):
    """A decode-step input is out of range; the message names it."""


def _positive(name, value, *, integer=False, at_most=None):
    ok_type = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok_type or not value > 0:
        kind = "a positive integer" if integer else "a positive number"
        raise RooflineError(f"{name} must be {kind}, got {value!r}")
    if at_most is not None and value > at_most:
        raise RooflineError(f"{name} must be at most {at_most}, got {value!r}")
    return value


def regime(weight_bytes, kv_bytes) -> str:
    """'weight-dominated' while the weights are the larger read, else 'cache-dominated'.

    >>> regime(16.06e9, 131072 * 4096 * 32), regime(16.06e9, 131072 * 4096 * 128)
    ('cache-dominated', 'cache-dominated')
    >>> regime(16.06e9, 131072 * 1024 * 32)
    'weight-dominated'
    """
    return WEIGHT_DOMINATED if weight_bytes >= kv_bytes else CACHE_DOMINATED


def crossover_context(weight_bytes, bytes_per_token, batch):
    """Context at which ``batch`` sequences read as many KV bytes as weight bytes.

    Formula: ``T = W / (bytes_per_token * B)`` [tokens]. [kv-math] example 4,
    Llama 3 8B (16.06 GB): 16.06e9 / 131,072 = 122,528 token-slots, so

    >>> [round(crossover_context(16.06e9, 131072, b)) for b in (32, 64, 128)]
    [3829, 1915, 957]

    (The seed prints 122,543 token-slots and context 3,830 at batch 32: its
    division is off by 15; 16.06e9 / 131,072 = 122,527.9.)
    """
    return formulas.crossover_tokens(weight_bytes, bytes_per_token) / batch


def first_cache_context(weight_bytes, bytes_per_token, batch) -> int:
    """The first whole context at which ``batch`` sequences' cache read reaches the weight read.

    ``ceil(W / (bytes_per_token * B))`` [tokens], exact for integer bytes: one token
    less and the step is still weight-dominated. The rounding rule of ch06's
    Question 1, its explorer and Exercise 1. Llama 3.1 8B (16,060,522,496 B of
    bf16 weights, 131,072 B per token): at B = 32, 3,829 tokens read 16,059,990,016
    cache bytes, still below the weights, so the answer is 3,830:

    >>> [first_cache_context(16_060_522_496, 131072, b) for b in (32, 64, 128)]
    [3830, 1915, 958]
    """
    if all(isinstance(x, int) for x in (weight_bytes, bytes_per_token, batch)):
        return -(-weight_bytes // (bytes_per_token * batch))
    return math.ceil(weight_bytes / (bytes_per_token * batch))


def crossover_batch(weight_bytes, bytes_per_token, context):
    """Batch at which sequences of ``context`` tokens read as many KV bytes as weight bytes.

    >>> round(crossover_batch(16.06e9, 131072, 4096), 1)
    29.9
    """
    return formulas.crossover_tokens(weight_bytes, bytes_per_token) / context


def _embedding_lookup(spec):
    """(parameters a decode step only looks up rows of, how many tables that is) for ``spec``.

    The token table, unless the LM head shares it (tied: the head reads it whole),
    plus a learned position table (GPT-2), whose rows are looked up too.
    """
    d, vocab = spec.hidden_size, spec.vocab_size
    if d is None or vocab is None:
        raise RooflineError(f"{spec.name}: hidden_size and vocab_size are needed to count the embedding rows")
    tables = [] if spec.tie_word_embeddings else [vocab]
    if spec.learned_positions:
        tables.append(spec.learned_positions)
    return d, tables


def expected_experts_touched(num_experts: int, top_k: int, tokens: int) -> float:
    """Expected distinct experts one MoE layer reads for ``tokens`` tokens: ``E (1 - (1 - k/E)^B)``.

    Under uniform routing each token picks k of the E experts, so a given
    expert is missed by one token with probability ``1 - k/E`` and by all B
    tokens (routed independently) with probability ``(1 - k/E)^B``; the
    expected count of experts touched is E times the chance of a hit. B = 1
    gives exactly k; large B gives E. Mixtral (E = 8, k = 2): one token reads
    2 experts, a 6-token speculative verify 8 (1 - 0.75^6) = 6.58, and 20
    tokens 7.97 (every expert, in effect); DeepSeek-V3 (E = 256, k = 8) needs
    hundreds of tokens:

    >>> [round(expected_experts_touched(8, 2, b), 2) for b in (1, 6, 20)]
    [2.0, 6.58, 7.97]
    >>> [round(expected_experts_touched(256, 8, b), 1) for b in (1, 32, 256)]
    [8.0, 163.3, 255.9]

    This is the *uniform-routing expectation*. Real routers are skewed: with
    expert i chosen with probability ``p_i`` per token (``sum p_i = k``) the
    expectation is ``sum_i (1 - (1 - p_i)^B)``, and since ``1 - (1 - p)^B`` is
    concave in p, any skew lowers it below the uniform figure (Jensen). Two
    tokens on Mixtral with two experts at p = 0.5 and six at 1/6 touch
    2 (1 - 0.5^2) + 6 (1 - (5/6)^2) = 3.33 experts instead of
    8 (1 - 0.75^2) = 3.5. The uniform figure is thus an upper bound on the
    experts read on average, and the step time from it an upper bound too.
    Per token the top-k picks are distinct experts; across tokens they are
    taken as independent (the expert-load model of the DeepSpeed-MoE and
    vLLM fused-MoE cost notes).
    """
    _positive("num_experts", num_experts, integer=True)
    _positive("top_k", top_k, integer=True, at_most=num_experts)
    _positive("tokens", tokens, integer=True)
    return num_experts * (1 - (1 - top_k / num_experts) ** tokens)


def all_experts_batch(num_experts: int, top_k: int) -> int:
    """The first batch at which fewer than one routed expert per MoE layer stays unread: the smallest B with
    ``N_e (1 - k_e / N_e)^B < 1`` [sequences], i.e. ``floor(ln N_e / -ln(1 - k_e / N_e)) + 1``.

    The expected experts left unread by B uniformly routed tokens is ``N_e (1 - k_e / N_e)^B``
    (``expected_experts_touched``'s complement); once it drops below one, a decode step reads the
    whole expert set in effect, and batching further adds no weight bytes. Far more than the
    ``N_e / k_e`` a learner guesses (tokens pick experts at random, so they overlap). Mixtral 8x7B
    (8 experts, top 2): 8 x 0.75^7 = 1.07, 8 x 0.75^8 = 0.80, so 8 sequences; Qwen3-30B-A3B (128, top 8):
    ln 128 / -ln(15 / 16) = 75.2, so 76; DeepSeek-V3 (256, top 8): ln 256 / -ln(31 / 32) = 174.7, so 175:

    >>> all_experts_batch(8, 2), all_experts_batch(128, 8), all_experts_batch(256, 8)
    (8, 76, 175)

    Taught in ch09_interview_drills (the ``moe_decode`` drill).
    """
    _positive("num_experts", num_experts, integer=True)
    _positive("top_k", top_k, integer=True, at_most=num_experts)
    if top_k == num_experts:
        return 1
    batch = max(1, math.floor(math.log(num_experts) / -math.log1p(-top_k / num_experts)))
    # the float estimate may sit one off at a near-tie: settle it on exact integers
    while batch > 1 and num_experts * (num_experts - top_k) ** (batch - 1) < num_experts ** (batch - 1):
        batch -= 1
    while num_experts * (num_experts - top_k) ** batch >= num_experts ** batch:
        batch += 1
    return batch


def _expert_split(spec):
    """``(MoE layers, params per routed expert, E, k)``; zeros for a dense model."""
    layers, per_expert = routed_expert_params(spec)
    if not layers:
        return 0, 0, 0, 0
    return layers, per_expert, spec.num_experts, spec.num_experts_per_tok


def _check_ep(spec, ep):
    _positive("ep", ep, integer=True)
    if ep > 1 and (not spec.num_experts or spec.num_experts % ep):
        what = f"its {spec.num_experts} experts" if spec.num_experts else "experts (it is a dense model)"
        raise RooflineError(f"ep must divide the model's routed experts: {spec.name} has {what}, got ep={ep}")
    return ep


def weight_bytes_read(model, batch: int, *, dtype_bytes=2, tp: int = 1, ep: int = 1,
                      embedding_rows: bool = True) -> int:
    """Weight bytes one decode step of ``batch`` sequences reads, per GPU, in whole bytes.

    Every matrix is read once, except an input embedding table (``V x d``
    numbers): the step fetches only the rows of the ``B`` tokens it feeds in
    (at most ``V``). ``W_r = W - (V - B) d b`` [B], ``W`` the whole model at
    ``dtype_bytes`` per parameter. A tied table is read whole anyway, by the LM
    head, so it saves nothing; a learned position table (GPT-2) is looked up
    by rows as well. Under tensor parallelism ``tp`` each GPU reads ``W_r / t``
    (vLLM splits the vocabulary across ranks; the rows land where their tokens
    live, so this is the average). ``embedding_rows=False`` counts the whole
    table (the textbook "every weight once").

    Llama 3.1 8B (V = 128,256, d = 4,096, untied): the table is 1,050,673,152 B
    of the 16,060,522,496 B of bf16 weights (6.5%); a step of 32 reads 32 rows:

    >>> weight_bytes_read("llama-3.1-8b", 32)
    15010111488
    >>> weight_bytes_read("llama-3.1-8b", 32) == 16_060_522_496 - (128_256 - 32) * 4096 * 2
    True

    A mixture of experts reads in each of its ``L_e`` MoE layers only the
    experts its B tokens are routed to, ``E_B = expected_experts_touched(E,
    k, B)`` of the E, each of ``P_e`` parameters; the shared experts, the
    router, attention and the rest are read whole:
    ``W_r = (P - L_e E P_e) b + L_e E_B P_e b`` less the embedding rows
    (vLLM's fused-MoE kernel loads only the experts with tokens routed to them).
    Mixtral 8x7B at batch 1 reads 2 of its 8 experts, 1,605,636,096 dense and
    32 x 2 x 176,160,768 expert parameters, less 31,999 untouched embedding rows:

    >>> weight_bytes_read("mixtral-8x7b", 1) == (1_605_636_096 + 32 * 2 * 176_160_768 - 31_999 * 4096) * 2
    True

    Under expert parallelism ``ep`` (which must divide E) each GPU holds E / ep
    whole experts and reads, on average, ``1 / ep`` of the experts touched;
    ``tp`` still splits the dense parts. With ``ep=1`` the experts are split
    by ``tp`` like every other matrix (vLLM's default, without
    ``--enable-expert-parallel``). The average hides the busiest rank, which
    sets the step: an upper figure needs the routing skew.

    Taught in ch06_crossover.
    """
    return sum(_weight_read_split(model, batch, dtype_bytes=dtype_bytes, tp=tp, ep=ep,
                                  embedding_rows=embedding_rows))


def _weight_read_split(model, batch, *, dtype_bytes, tp, ep, embedding_rows):
    """``(dense bytes, routed-expert bytes)`` one step reads per GPU (``weight_bytes_read``'s two parts)."""
    _positive("batch", batch, integer=True)
    _positive("tp", tp, integer=True)
    spec = load_model(model)
    _check_ep(spec, ep)
    skipped = 0
    if embedding_rows:
        d, tables = _embedding_lookup(spec)
        skipped = sum(max(0, rows - batch) for rows in tables) * d
    layers, per_expert, experts, top_k = _expert_split(spec)
    routed = layers * experts * per_expert
    dense = formulas.weight_bytes(spec.num_params() - routed - skipped, dtype_bytes)
    dense_gpu = formulas.weight_bytes_per_gpu(dense, tp)
    if not routed:
        return dense_gpu, 0
    expected_experts_touched(experts, top_k, batch)          # validates the routing figures
    return dense_gpu, math.ceil(layers * per_expert * Fraction(dtype_bytes) * _touched_exact(experts, top_k, batch)
                                 / (ep if ep > 1 else tp))


def _touched_exact(experts: int, top_k: int, tokens: int) -> Fraction:
    """``E (1 - ((E - k) / E)^B)`` as a fraction, so whole bytes round exactly; once the missed share is
    below e^-200 (far under a byte of any model) it is E."""
    if top_k == experts or tokens * math.log(experts / (experts - top_k)) > 200:
        return Fraction(experts)
    return experts - Fraction((experts - top_k) ** tokens, experts ** (tokens - 1))


def decode_flops(num_params, batch, layers, num_heads, qk_head_dim, context, v_head_dim=None):
    """FLOPs of one decode step: ``2 P B + 2 L H (d_qk + d_v) T B``.

    Llama 3 8B, batch 32 at 4,096 tokens: 2 x 8.03e9 x 32 = 5.14e11 linear
    plus 2 x 32 x 32 x 256 x 4,096 x 32 = 6.87e10 attention; over the
    33.24 GB the step reads that is 17.5 FLOP/byte, far below an H100's ridge
    of 989e12 / 3.35e12 = 295 FLOP/byte, so the step is bandwidth-bound.

    >>> f"{decode_flops(8.03e9, 32, 32, 32, 128, 4096):.3g}"
    '5.83e+11'
    """
    d_v = qk_head_dim if v_head_dim is None else v_head_dim
    return 2 * num_params * batch + 2 * layers * num_heads * (qk_head_dim + d_v) * context * batch


def _attention_flops_per_token(spec, context: int):
    """Attention FLOPs for one new token against ``context`` cached tokens (all layers)."""
    if spec.is_mla:
        d_qk = (spec.qk_nope_head_dim or 0) + spec.qk_rope_head_dim
        d_v = spec.v_head_dim or d_qk
    else:
        d_qk = d_v = spec.head_dim
    total = 0
    for kind in spec.layer_kinds:
        if kind in ATTENTION_KINDS:
            total += 2 * spec.num_heads * (d_qk + d_v) * spec.layer_tokens_held(kind, context)
    return total


@dataclass(frozen=True)
class StepOp:
    """One operation of a decode step on the roofline, per GPU.

    ``seconds = max(bytes / BW, flops / F)`` at peak (no efficiency factor):
    ``bound`` says which side sets it ('compute' only when strictly longer).
    """

    name: str         # 'matmuls' (dense weights), 'experts' (routed experts), 'attention' (the KV read)
    bytes: int        # [B] read from HBM
    flops: float      # [FLOP]
    bound: str        # 'bandwidth' or 'compute'
    seconds: float    # [s]


def _op(name, nbytes, flops, bw, peak) -> StepOp:
    read_s, math_s = nbytes / bw, flops / peak
    return StepOp(name, nbytes, flops, "compute" if math_s > read_s else "bandwidth", max(read_s, math_s))


def one_intensity_seconds(ops, *, bandwidth_bytes_per_s, peak_flop_per_s) -> float:
    """The one-intensity rule: ``max(sum bytes / BW, sum FLOPs / F)`` [s] for a whole step.

    It treats the step as one kernel with one byte-weighted intensity. The
    sum over operations of their own ``max`` (``step_ops``) is never below it
    and is the step time; the two agree only when every operation is on the
    same side of the ridge. Llama 3.1 8B, 512 sequences of 512 tokens on an
    H100: 49.37 GB and 7.82 TFLOP make one intensity of 158 FLOP/B, below the
    ridge (295), so 14.74 ms; per operation the matmuls are compute-bound:

    >>> ops = step_ops("llama-3.1-8b", batch=512, context=512, embedding_rows=True)
    >>> h100 = get_gpu("H100-SXM")
    >>> round(one_intensity_seconds(ops, bandwidth_bytes_per_s=h100.bandwidth_bytes_per_s,
    ...                             peak_flop_per_s=h100.bf16_flop_per_s) * 1e3, 2)
    14.74
    >>> round(sum(op.seconds for op in ops) * 1e3, 2)
    18.03

    Taught in ch06_crossover (why one intensity misleads).
    """
    ops = list(ops)
    return max(sum(op.bytes for op in ops) / bandwidth_bytes_per_s, sum(op.flops for op in ops) / peak_flop_per_s)


@dataclass(frozen=True)
class DecodeStep:
    """One decode step of ``batch`` sequences of ``context`` tokens, per GPU."""

    model: str
    gpu: str
    batch: int
    context: int
    tp: int
    weight_bytes: int            # [B] per GPU (a MoE model: the experts its tokens touch)
    kv_bytes: int                # [B] per GPU, all sequences
    bytes_per_step: int          # [B] weight_bytes + kv_bytes
    bandwidth_bytes_per_s: float  # [B/s]
    flops: float                 # [FLOP] per GPU
    peak_flop_per_s: float       # [FLOP/s] dense bf16
    efficiency: float            # achieved / peak bandwidth
    bandwidth_s: float           # [s] bytes_per_step / BW: the bandwidth limit
    compute_s: float             # [s] flops / peak
    ridge_flop_per_byte: float   # peak FLOP/s / BW
    ops: tuple = ()              # StepOp per operation; their seconds sum to step_s_bound

    @property
    def step_s_bound(self) -> float:
        """Roofline step time [s]: the sum over the operations of their own ``max(bytes / BW, FLOPs / F)``."""
        if not self.ops:
            return self.one_intensity_s
        return sum(op.seconds for op in self.ops)

    @property
    def one_intensity_s(self) -> float:
        """The one-intensity figure [s]: ``max(bandwidth_s, compute_s)`` for the whole step (the old rule)."""
        return max(self.bandwidth_s, self.compute_s)

    @property
    def step_s(self) -> float:
        """Expected step time [s]: the bound divided by the efficiency."""
        return self.step_s_bound / self.efficiency

    @property
    def itl_s(self) -> float:
        """Inter-token latency [s]: every sequence gets one token per step."""
        return self.step_s

    @property
    def tokens_per_s(self) -> float:
        """Decode throughput of the batch [tokens/s] at ``step_s``."""
        return self.batch / self.step_s

    @property
    def tokens_per_s_bound(self) -> float:
        """Throughput at the roofline bound [tokens/s]."""
        return self.batch / self.step_s_bound

    @property
    def arithmetic_intensity(self) -> float:
        """FLOPs per byte moved [FLOP/B], the whole step as one kernel."""
        return self.flops / self.bytes_per_step

    @property
    def limit(self) -> str:
        """'bandwidth' below the ridge point, 'compute' above it (the step's one intensity)."""
        return "bandwidth" if self.arithmetic_intensity < self.ridge_flop_per_byte else "compute"

    @property
    def regime(self) -> str:
        """'weight-dominated' or 'cache-dominated'."""
        return regime(self.weight_bytes, self.kv_bytes)


def decode_step(model, *, batch: int, context: int, gpu="H100-SXM", efficiency: float = 1.0,
                weight_bytes=None, num_params=None, kv_dtype_bytes=None, tp: int = 1, ep: int = 1,
                weight_dtype_bytes=2, bandwidth_bytes_per_s=None, peak_flop_per_s=None,
                embedding_rows: bool = False) -> DecodeStep:
    """Step time, throughput, ITL and regime of one decode step.

    ``weight_bytes`` defaults to what the step reads of the model's weights
    at ``weight_dtype_bytes`` (bf16: 2), ``weight_bytes_read``: every matrix
    of a dense model, and of a mixture of experts only the experts its
    ``batch`` tokens touch; under tensor parallelism ``tp`` each GPU reads
    W / tp and its own KV heads (``ep``: expert parallelism, as in
    ``weight_bytes_read``). The step time is the sum of its operations'
    (``step_ops``). Llama 3 8B on an H100 (3.35 TB/s), batch 32:

    >>> s = decode_step("llama-3-8b", batch=32, context=4096, weight_bytes=16.06e9)
    >>> print(f"{s.bytes_per_step / 1e9:.2f} GB, {s.step_s * 1e3:.2f} ms, "
    ...       f"{s.tokens_per_s:,.0f} tok/s, {s.regime}")
    33.24 GB, 9.92 ms, 3,225 tok/s, cache-dominated
    >>> s = decode_step("llama-3-8b", batch=32, context=32768, weight_bytes=16.06e9)
    >>> print(f"{s.bytes_per_step / 1e9:.1f} GB, {s.step_s * 1e3:.1f} ms, {s.tokens_per_s:,.0f} tok/s")
    153.5 GB, 45.8 ms, 698 tok/s

    (32 / 9.9223 ms = 3,225.04 and 32 / 45.8206 ms = 698.4: a step time
    rounded to 9.92 ms first gives 3,226.)

    ``embedding_rows=True`` counts what the step reads of the input embedding,
    B rows (``weight_bytes_read``), and leaves the lookup out of the linear
    FLOPs (``2 (P - V d) B`` for an untied table); it needs the model's own
    weights, so it excludes ``weight_bytes`` and ``num_params``:

    >>> s = decode_step("llama-3.1-8b", batch=32, context=4096, embedding_rows=True)
    >>> print(f"{s.weight_bytes / 1e9:.2f} GB of weights, {s.bytes_per_step / 1e9:.2f} GB, {s.step_s * 1e3:.2f} ms")
    15.01 GB of weights, 32.19 GB, 9.61 ms

    Mixtral 8x7B at batch 1 reads 2 of its 8 experts, its 12.88 B active
    parameters: 25.76 GB of its 93.41 GB of bf16 weights, 7.73 ms on an H100
    rather than the (93.41 + 0.13) GB / 3.35 TB/s = 27.92 ms of reading them all:

    >>> s = decode_step("mixtral-8x7b", batch=1, context=1024)
    >>> print(f"{s.weight_bytes / 1e9:.2f} GB, {s.step_s * 1e3:.2f} ms")
    25.76 GB, 7.73 ms
    """
    _positive("batch", batch, integer=True)
    _positive("context", context, integer=True)
    _positive("efficiency", efficiency, at_most=1)
    _positive("tp", tp, integer=True)
    spec = load_model(model)
    card = get_gpu(gpu)
    _check_ep(spec, ep)
    lookup_params = 0
    if embedding_rows:
        if weight_bytes is not None or num_params is not None:
            raise RooflineError("embedding_rows counts the model's own weights: leave weight_bytes and "
                                "num_params unset")
        d, tables = _embedding_lookup(spec)
        lookup_params = sum(tables) * d
    split = None
    if weight_bytes is None and num_params is None:
        split = _weight_read_split(spec, batch, dtype_bytes=weight_dtype_bytes, tp=tp, ep=ep,
                                   embedding_rows=embedding_rows)
        w = sum(split)
    else:
        if weight_bytes is None:
            weight_bytes = formulas.weight_bytes(_positive("num_params", num_params), weight_dtype_bytes)
        _positive("weight_bytes", weight_bytes)
        w = formulas.weight_bytes_per_gpu(weight_bytes, tp)
    kv = spec.kv_bytes_per_sequence(context, kv_dtype_bytes, tp=tp) * batch
    bw = card.bandwidth_bytes_per_s if bandwidth_bytes_per_s is None else _positive(
        "bandwidth_bytes_per_s", bandwidth_bytes_per_s)
    peak = card.bf16_flop_per_s if peak_flop_per_s is None else _positive("peak_flop_per_s", peak_flop_per_s)
    attention_flops = _attention_flops_per_token(spec, context) * batch / tp
    layers, per_expert, _, top_k = _expert_split(spec)
    if split is not None and split[1]:
        routed_active = layers * top_k * per_expert
        dense_flops = 2 * (spec.num_params_active() - routed_active - lookup_params) * batch / tp
        expert_flops = 2 * routed_active * batch / (ep if ep > 1 else tp)
        ops = (_op("matmuls", split[0], dense_flops, bw, peak), _op("experts", split[1], expert_flops, bw, peak))
    else:
        active = (spec.num_params_active() if num_params is None else num_params) - lookup_params
        ops = (_op("matmuls", w, 2 * active * batch / tp, bw, peak),)
    ops += (_op("attention", kv, attention_flops, bw, peak),)
    flops = sum(op.flops for op in ops)
    total = w + kv
    return DecodeStep(model=spec.name, gpu=card.name, batch=batch, context=context, tp=tp,
                      weight_bytes=w, kv_bytes=kv, bytes_per_step=total, bandwidth_bytes_per_s=bw,
                      flops=flops, peak_flop_per_s=peak, efficiency=efficiency,
                      bandwidth_s=total / bw, compute_s=flops / peak, ridge_flop_per_byte=peak / bw, ops=ops)


def step_ops(model, *, batch: int, context: int, **kwargs) -> list:
    """The operations of one decode step, each on its own roofline: a list of ``StepOp``.

    ``matmuls`` reads the dense weights (for a MoE model the shared experts,
    attention projections, router and head) and does ``2 P B`` FLOPs;
    ``experts`` (MoE only) reads the routed experts the batch touches and does
    ``2 L_e k P_e B``; ``attention`` reads every sequence's cache and does
    ``2 L H (d_qk + d_v) T B``. Each takes ``max(bytes / BW, FLOPs / F)`` and the
    step their sum (``decode_step``, whose keywords this takes). Llama 3.1 8B,
    512 sequences of 512 tokens on an H100: the matmuls are compute-bound
    (7.685e12 FLOP / 989e12 = 7.77 ms against 15.01 GB / 3.35 TB/s = 4.48 ms),
    attention bandwidth-bound (34.36 GB / 3.35 TB/s = 10.26 ms):

    >>> [(op.name, op.bound, round(op.seconds * 1e3, 2))
    ...  for op in step_ops("llama-3.1-8b", batch=512, context=512, embedding_rows=True)]
    [('matmuls', 'compute', 7.77), ('attention', 'bandwidth', 10.26)]

    Taught in ch06_crossover.
    """
    return list(decode_step(model, batch=batch, context=context, **kwargs).ops)


def _first_true(predicate, start: int = 1, cap: int = 1 << 40):
    """Smallest integer n >= start with ``predicate(n)``, for a predicate false then true; None past ``cap``."""
    if predicate(start):
        return start
    low, high = start, start * 2
    while not predicate(high):
        if high > cap:
            return None
        low, high = high, high * 2
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if predicate(mid) else (mid, high)
    return high


def matmul_ridge_batch(model, *, gpu="H100-SXM", dtype_bytes=2, tp: int = 1, ep: int = 1,
                       peak_flop_per_s=None, bandwidth_bytes_per_s=None, embedding_rows: bool = True) -> int:
    """Smallest batch from which every weight matmul of a decode step is compute-bound (its ridge batch).

    A dense model's matmuls do ``2 P B`` FLOPs on ``P b`` bytes: compute-bound
    from ``B = I* b / 2``, ``I* = F / BW`` the ridge (296 on an H100 in bf16,
    a few more here as the embedding rows are read per sequence). A mixture of
    experts' routed experts do ``2 k P_e B`` FLOPs per layer on the
    ``E_B P_e b`` bytes of the ``E_B`` experts touched: intensity
    ``2 k B / (E_B b)``, which reaches the ridge only once ``E_B`` is close to E,
    at ``B ~ I* b E / (2 k)``, E / k times the dense figure. DeepSeek-V3
    (E = 256, k = 8) on an H200 (989 TFLOP/s, 4.8 TB/s, ridge 206.04): the
    dense rule says 207, its experts need 206.04 x 256 / 8 = 6,593.3, so
    6,594 sequences:

    >>> matmul_ridge_batch("llama-3.1-8b"), matmul_ridge_batch("deepseek-v3", gpu="H200")
    (296, 6594)

    Taught in ch06_crossover (a MoE model beside the dense one).
    """
    kw = dict(context=1, gpu=gpu, tp=tp, ep=ep, weight_dtype_bytes=dtype_bytes, embedding_rows=embedding_rows,
              peak_flop_per_s=peak_flop_per_s, bandwidth_bytes_per_s=bandwidth_bytes_per_s)

    def compute_bound(b):
        return all(op.bound == "compute" for op in step_ops(model, batch=b, **kw) if op.name != "attention")

    return _first_true(compute_bound)


def compute_bound_batch(model, *, context: int, gpu="H100-SXM", kv_dtype_bytes=None, tp: int = 1,
                        embedding_rows: bool = False, peak_flop_per_s=None, bandwidth_bytes_per_s=None):
    """Smallest batch whose decode step at ``context`` tokens is compute-bound, or None if none is.

    A step's bytes grow by a fixed amount per sequence (its cache, plus an
    embedding row) on top of the weights, and its FLOPs in proportion to the
    batch: ``I(B) = f B / (W_0 + m B)``, which rises with B towards ``f / m``.
    It reaches the ridge ``I* = F / BW`` from ``B = ceil(I* W_0 / (f - I* m))``
    on, and never when ``f / m <= I*``: each added sequence brings its own
    cache, so the intensity never passes ``f / m``, which a long context pulls toward ``H/K``, whatever the
    batch. With the weights alone (one token of context) an H100 needs about
    its ridge, 295 sequences; at 1,024 tokens no batch gets there:

    >>> compute_bound_batch("llama-3.1-8b", context=1), compute_bound_batch("llama-3.1-8b", context=1024)
    (296, None)

    A mixture of experts' W_0 grows with the batch too (the experts touched,
    ``weight_bytes_read``), still less than in proportion, so ``I(B)`` still
    rises towards ``f / m`` and the first compute-bound batch is found by search.

    Taught in ch06_crossover.
    """
    kw = dict(context=context, gpu=gpu, kv_dtype_bytes=kv_dtype_bytes, tp=tp, embedding_rows=embedding_rows,
              peak_flop_per_s=peak_flop_per_s, bandwidth_bytes_per_s=bandwidth_bytes_per_s)
    spec = load_model(model)
    layers, _, experts, top_k = _expert_split(spec)
    # per-sequence bytes and FLOPs once every expert is read (a dense model: from batch 1 on)
    settled = 1 if not layers else 1 + math.ceil(200 / math.log(experts / (experts - top_k))) \
        if top_k < experts else 1
    one, two = decode_step(spec, batch=settled, **kw), decode_step(spec, batch=settled + 1, **kw)
    per_seq_bytes = two.bytes_per_step - one.bytes_per_step
    per_seq_flops = two.flops - one.flops
    ridge = one.ridge_flop_per_byte
    if per_seq_flops <= ridge * per_seq_bytes:
        return None
    if not layers:
        base_bytes = one.bytes_per_step - per_seq_bytes
        batch = max(1, math.ceil(ridge * base_bytes / (per_seq_flops - ridge * per_seq_bytes)))
        # float guard: settle on the exact first batch the step's own limit calls compute-bound
        while batch > 1 and decode_step(spec, batch=batch - 1, **kw).limit == "compute":
            batch -= 1
        while decode_step(spec, batch=batch, **kw).limit != "compute":
            batch += 1
        return batch
    return _first_true(lambda b: decode_step(spec, batch=b, **kw).limit == "compute")
