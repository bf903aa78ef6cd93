"""Decode on the roofline: step time, tokens/s and ITL from bytes moved.

One decode step reads every weight once and every running sequence's whole
KV cache once, and produces one token per sequence:

    bytes_per_step = W + B * kv_bytes_per_sequence(T)      [B]
    step_s (bandwidth limit) = bytes_per_step / BW          [s]
    tokens_per_s = B / step_s;  ITL = step_s

With an efficiency factor e (real kernels reach 60-75% of peak bandwidth,
seed 003) the step takes ``step_s / e``. Arithmetic intensity is FLOPs per
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

Taught in ch06_crossover (bandwidth against compute).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from . import formulas
from .config import load_model
from .gpus import get_gpu
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

    Formula: ``T = W / (bytes_per_token * B)`` [tokens]. Seed 003 example 4,
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


def weight_bytes_read(model, batch: int, *, dtype_bytes=2, tp: int = 1) -> int:
    """Weight bytes one decode step of ``batch`` sequences reads, per GPU.

    Every matrix is read once, except an input embedding table (``V x d``
    numbers): the step fetches only the rows of the ``B`` tokens it feeds in
    (at most ``V``). ``W_r = W - (V - B) d b`` [B], ``W`` the whole model at
    ``dtype_bytes`` per parameter. A tied table is read whole anyway, by the LM
    head, so it saves nothing; a learned position table (GPT-2) is looked up
    by rows as well. Under tensor parallelism ``tp`` each GPU reads ``W_r / t``
    (vLLM splits the vocabulary across ranks; the rows land where their tokens
    live, so this is the average).

    Llama 3.1 8B (V = 128,256, d = 4,096, untied): the table is 1,050,673,152 B
    of the 16,060,522,496 B of bf16 weights (6.5%); a step of 32 reads 32 rows:

    >>> weight_bytes_read("llama-3.1-8b", 32)
    15010111488
    >>> weight_bytes_read("llama-3.1-8b", 32) == 16_060_522_496 - (128_256 - 32) * 4096 * 2
    True

    Taught in ch06_crossover.
    """
    _positive("batch", batch, integer=True)
    _positive("tp", tp, integer=True)
    spec = load_model(model)
    d, tables = _embedding_lookup(spec)
    skipped = sum(max(0, rows - batch) for rows in tables) * d
    whole = formulas.weight_bytes(spec.num_params(), dtype_bytes)
    return formulas.weight_bytes_per_gpu(whole - formulas.weight_bytes(skipped, dtype_bytes), tp)


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
class DecodeStep:
    """One decode step of ``batch`` sequences of ``context`` tokens, per GPU."""

    model: str
    gpu: str
    batch: int
    context: int
    tp: int
    weight_bytes: int            # [B] per GPU
    kv_bytes: int                # [B] per GPU, all sequences
    bytes_per_step: int          # [B] weight_bytes + kv_bytes
    bandwidth_bytes_per_s: float  # [B/s]
    flops: float                 # [FLOP] per GPU
    peak_flop_per_s: float       # [FLOP/s] dense bf16
    efficiency: float            # achieved / peak bandwidth
    bandwidth_s: float           # [s] bytes_per_step / BW: the bandwidth limit
    compute_s: float             # [s] flops / peak
    ridge_flop_per_byte: float   # peak FLOP/s / BW

    @property
    def step_s_bound(self) -> float:
        """Roofline step time [s]: the larger of the bandwidth and compute times."""
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
        """FLOPs per byte moved [FLOP/B]."""
        return self.flops / self.bytes_per_step

    @property
    def limit(self) -> str:
        """'bandwidth' below the ridge point, 'compute' above it."""
        return "bandwidth" if self.arithmetic_intensity < self.ridge_flop_per_byte else "compute"

    @property
    def regime(self) -> str:
        """'weight-dominated' or 'cache-dominated'."""
        return regime(self.weight_bytes, self.kv_bytes)


def decode_step(model, *, batch: int, context: int, gpu="H100-SXM", efficiency: float = 1.0,
                weight_bytes=None, num_params=None, kv_dtype_bytes=None, tp: int = 1,
                bandwidth_bytes_per_s=None, peak_flop_per_s=None, embedding_rows: bool = False) -> DecodeStep:
    """Step time, throughput, ITL and regime of one decode step.

    ``weight_bytes`` defaults to the model's bf16 weights (kvlib's parameter
    count); under tensor parallelism ``tp`` each GPU reads W / tp and its own
    KV heads. Seed 003 example 5, Llama 3 8B on an H100 (3.35 TB/s),
    batch 32:

    >>> s = decode_step("llama-3-8b", batch=32, context=4096, weight_bytes=16.06e9)
    >>> print(f"{s.bytes_per_step / 1e9:.2f} GB, {s.step_s * 1e3:.2f} ms, "
    ...       f"{s.tokens_per_s:,.0f} tok/s, {s.regime}")
    33.24 GB, 9.92 ms, 3,225 tok/s, cache-dominated
    >>> s = decode_step("llama-3-8b", batch=32, context=32768, weight_bytes=16.06e9)
    >>> print(f"{s.bytes_per_step / 1e9:.1f} GB, {s.step_s * 1e3:.1f} ms, {s.tokens_per_s:,.0f} tok/s")
    153.5 GB, 45.8 ms, 698 tok/s

    (The seed prints 3,226 and 699 tok/s: it divides 32 by the step time
    already rounded to 9.92 and 45.8 ms; 32 / 9.9223 ms = 3,225.04 and
    32 / 45.8206 ms = 698.4.)

    ``embedding_rows=True`` counts what the step reads of the input embedding,
    B rows (``weight_bytes_read``), and leaves the lookup out of the linear
    FLOPs (``2 (P - V d) B`` for an untied table); it needs the model's own
    weights, so it excludes ``weight_bytes`` and ``num_params``:

    >>> s = decode_step("llama-3.1-8b", batch=32, context=4096, embedding_rows=True)
    >>> print(f"{s.weight_bytes / 1e9:.2f} GB of weights, {s.bytes_per_step / 1e9:.2f} GB, {s.step_s * 1e3:.2f} ms")
    15.01 GB of weights, 32.19 GB, 9.61 ms
    """
    _positive("batch", batch, integer=True)
    _positive("context", context, integer=True)
    _positive("efficiency", efficiency, at_most=1)
    _positive("tp", tp, integer=True)
    spec = load_model(model)
    card = get_gpu(gpu)
    lookup_params = 0
    if embedding_rows:
        if weight_bytes is not None or num_params is not None:
            raise RooflineError("embedding_rows counts the model's own weights: leave weight_bytes and "
                                "num_params unset")
        d, tables = _embedding_lookup(spec)
        lookup_params = sum(tables) * d
        weight_bytes = weight_bytes_read(spec, batch, dtype_bytes=2)
    if weight_bytes is None:
        params = spec.num_params() if num_params is None else _positive("num_params", num_params)
        weight_bytes = formulas.weight_bytes(params, 2)
    _positive("weight_bytes", weight_bytes)
    w = formulas.weight_bytes_per_gpu(weight_bytes, tp)
    kv = spec.kv_bytes_per_sequence(context, kv_dtype_bytes, tp=tp) * batch
    bw = card.bandwidth_bytes_per_s if bandwidth_bytes_per_s is None else _positive(
        "bandwidth_bytes_per_s", bandwidth_bytes_per_s)
    peak = card.bf16_flop_per_s if peak_flop_per_s is None else _positive("peak_flop_per_s", peak_flop_per_s)
    active = (spec.num_params_active() if num_params is None else num_params) - lookup_params
    flops = (2 * active * batch + _attention_flops_per_token(spec, context) * batch) / tp
    total = w + kv
    return DecodeStep(model=spec.name, gpu=card.name, batch=batch, context=context, tp=tp,
                      weight_bytes=w, kv_bytes=kv, bytes_per_step=total, bandwidth_bytes_per_s=bw,
                      flops=flops, peak_flop_per_s=peak, efficiency=efficiency,
                      bandwidth_s=total / bw, compute_s=flops / peak, ridge_flop_per_byte=peak / bw)


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

    Taught in ch06_crossover.
    """
    kw = dict(context=context, gpu=gpu, kv_dtype_bytes=kv_dtype_bytes, tp=tp, embedding_rows=embedding_rows,
              peak_flop_per_s=peak_flop_per_s, bandwidth_bytes_per_s=bandwidth_bytes_per_s)
    one, two = decode_step(model, batch=1, **kw), decode_step(model, batch=2, **kw)
    per_seq_bytes = two.bytes_per_step - one.bytes_per_step
    base_bytes = one.bytes_per_step - per_seq_bytes
    per_seq_flops = one.flops
    ridge = one.ridge_flop_per_byte
    if per_seq_flops <= ridge * per_seq_bytes:
        return None
    batch = max(1, math.ceil(ridge * base_bytes / (per_seq_flops - ridge * per_seq_bytes)))
    # float guard: settle on the exact first batch the step's own limit calls compute-bound
    while batch > 1 and decode_step(model, batch=batch - 1, **kw).limit == "compute":
        batch -= 1
    while decode_step(model, batch=batch, **kw).limit != "compute":
        batch += 1
    return batch
