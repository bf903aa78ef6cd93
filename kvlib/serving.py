"""Serving arithmetic that interviews ask beyond the cache size: one function per formula.

Prefill and time to first token, the batch where decode turns compute-bound,
decode rates per user and per GPU, a step that carries a prefill chunk beside
the decodes, static against continuous batching, a prefix cache's prefill
saving, speculative decoding (its memory and its speed-up), weight-only
quantization at batch 1, tensor parallelism's all-reduce traffic and the
cost of a million tokens. Plain arithmetic on numbers, like
``kvlib.formulas``; the drills (``kvcoach.drills``) and ch09_interview_drills
call them, and the slip catalogue (``kvcoach.slips``) recomputes their slips.

Letters (``kvlib.notation``): P parameters (active ones for a mixture of
experts), T_p prompt tokens, F peak FLOP/s (dense), eta MFU (achieved / peak
FLOP/s), BW bandwidth, W weight bytes, b bytes per stored number, B batch,
S_g one sequence's KV bytes on one GPU, t tensor-parallel degree, C tokens of
a prefill chunk, alpha a draft token's acceptance rate, gamma tokens drafted
per verification, c a draft step's cost over a target step's, d hidden size,
L layers, C_h a GPU-hour's price.

Taught in ch09_interview_drills (and ch05_prefix_reuse, ch06_crossover for
the prefill and roofline parts).
"""

from __future__ import annotations

import math
from fractions import Fraction

from . import formulas
from .offload import prefill_linear_flops
from .prefix_cache import prefix_sharing_savings

__all__ = [
    "prefill_seconds",
    "ridge_batch",
    "tp_decode_step_seconds",
    "decode_tokens_per_s",
    "mixed_step_seconds",
    "static_batch_tokens_per_step",
    "continuous_batching_speedup",
    "prefix_hit_tokens",
    "speculative_expected_tokens",
    "speculative_speedup",
    "speculative_extra_bytes",
    "weight_only_speedup",
    "ring_allreduce_bytes_sent",
    "tp_allreduce_bytes_per_step",
    "cost_per_million_tokens",
]


def prefill_seconds(num_params, prompt_tokens, peak_flop_per_s, mfu):
    """Time to first token of a prompt, compute-bound: ``2 · P · T_p / (eta · F)`` [s].

    A prefill's linear layers do one multiply-add (2 FLOPs) per parameter per
    prompt token (``offload.prefill_linear_flops``); attention adds
    ``2 L H (d_qk + d_v) T_p (T_p + 1) / 2``, small below a few thousand
    tokens and left out of this interview estimate. For a mixture of experts
    P is the *active* parameters. Llama 3.1 8B, 2,000 tokens, an H100's
    989 TFLOP/s at 50% MFU:

    >>> round(prefill_seconds(8.03e9, 2000, 989e12, 0.5) * 1e3, 1)   # 3.212e13 FLOP / 4.945e14 FLOP/s
    65.0
    """
    return prefill_linear_flops(num_params, prompt_tokens) / (mfu * peak_flop_per_s)


def ridge_batch(peak_flop_per_s, bandwidth_bytes_per_s, dtype_bytes) -> int:
    """The smallest batch at which a decode step reaches the GPU's ridge point: ``ceil(F / BW · b / 2)``.

    A decode step of B sequences does 2 · P · B FLOPs of linear layers and
    reads the P · b weight bytes once (the KV reads and attention FLOPs left
    out: short contexts), so its intensity is 2 B / b FLOP per byte; it
    reaches the ridge ``I* = F / BW`` at B = I* · b / 2. Exact for integer
    F and BW. An H100 (989 TFLOP/s bf16, 3.35 TB/s): ridge 295.2, so batch
    296 with bf16 weights and 74 with 4-bit ones:

    >>> ridge_batch(989 * 10**12, 3_350_000_000_000, 2), ridge_batch(989 * 10**12, 3_350_000_000_000, 0.5)
    (296, 74)
    """
    exact = Fraction(peak_flop_per_s) * Fraction(dtype_bytes) / (2 * Fraction(bandwidth_bytes_per_s))
    return math.ceil(exact)


def tp_decode_step_seconds(weight_bytes, kv_bytes_per_sequence_per_gpu, batch_size, bandwidth_bytes_per_s, tp=1):
    """One decode step at the bandwidth limit on a TP group: ``(ceil(W / t) + B · S_g) / BW`` [s].

    Every GPU reads its share of the weights and its KV heads of every
    sequence; the GPUs read in parallel. Llama 3.1 8B (16,060,522,496 B),
    32 sequences of 4,096 tokens (536,870,912 B each), one H100:

    >>> round(tp_decode_step_seconds(16_060_522_496, 536_870_912, 32, 3.35e12) * 1e3, 2)
    9.92
    """
    w = formulas.weight_bytes_per_gpu(weight_bytes, tp)
    return (w + batch_size * kv_bytes_per_sequence_per_gpu) / bandwidth_bytes_per_s


def decode_tokens_per_s(step_seconds, batch_size=1, gpus=1):
    """Tokens per second of a decode step: ``B / (gpus · step)``.

    ``batch_size=1``: one user's rate (one token per step); the batch, per GPU
    of a group of ``gpus``: the replica's B tokens a step shared among its GPUs.

    >>> round(decode_tokens_per_s(0.01)), round(decode_tokens_per_s(0.01, 32, gpus=4))
    (100, 800)
    """
    return batch_size / (gpus * step_seconds)


def mixed_step_seconds(weight_bytes, kv_bytes, num_params, tokens, bandwidth_bytes_per_s, peak_flop_per_s, mfu):
    """A step that carries ``tokens`` (decodes plus a prefill chunk): ``max((W + KV) / BW, 2 · P · tokens / (eta · F))`` [s].

    The roofline: the step takes the longer of its reads (weights once, the
    decodes' KV) and its linear-layer FLOPs at the achieved rate. A chunk of
    C prompt tokens beside B decodes makes tokens = B + C; every decode in
    that step waits for it, so the step is their inter-token latency.

    >>> round(mixed_step_seconds(16.06e9, 4.3e9, 8.03e9, 32 + 2048, 3.35e12, 989e12, 0.5) * 1e3, 2)
    67.55
    """
    return max((weight_bytes + kv_bytes) / bandwidth_bytes_per_s,
               prefill_linear_flops(num_params, tokens) / (mfu * peak_flop_per_s))


def static_batch_tokens_per_step(output_tokens) -> float:
    """Tokens a static batch generates per step, on average: ``sum(o) / max(o)``.

    A static batch runs until its longest output ends; a finished sequence's
    slot idles till then. Continuous batching refills the slot at once.

    >>> static_batch_tokens_per_step([100, 300, 200, 400])
    2.5
    """
    outputs = list(output_tokens)
    return formulas.exact_div(sum(outputs), max(outputs))


def continuous_batching_speedup(output_tokens, slots=None) -> float:
    """Tokens per step of continuous batching over static: ``B · max(o) / sum(o)``.

    Continuous batching keeps all B = ``slots`` (default: one per request)
    slots busy while requests wait (vLLM's scheduler admits a new request as
    soon as one finishes); the static batch averages ``sum(o) / max(o)``.

    >>> continuous_batching_speedup([100, 300, 200, 400])
    1.6
    """
    outputs = list(output_tokens)
    b = len(outputs) if slots is None else slots
    return b / static_batch_tokens_per_step(outputs)


def prefix_hit_tokens(shared_tokens: int, block_size: int = 16) -> int:
    """Prompt tokens a prefix cache serves to a later request: whole blocks only, ``floor(T / bs) · bs``.

    (``prefix_cache.prefix_sharing_savings``' rule: a partial last block is
    recomputed by every request.)

    >>> prefix_hit_tokens(2000), prefix_hit_tokens(2007), prefix_hit_tokens(15)
    (2000, 2000, 0)
    """
    if shared_tokens < block_size:
        return 0
    return prefix_sharing_savings(shared_tokens, 2, 1, block_size).hit_tokens_per_request


def speculative_expected_tokens(acceptance, draft_tokens):
    """Tokens one verification step yields: ``(1 - alpha^(gamma + 1)) / (1 - alpha)``.

    Each of the gamma drafted tokens is accepted with probability alpha, until
    the first rejection; the target's own token comes with every step
    (Leviathan, Kalman and Matias 2023, "Fast Inference from Transformers via
    Speculative Decoding", eq. 1). alpha = 1 gives gamma + 1.

    >>> round(speculative_expected_tokens(0.8, 4), 4)
    3.3616
    """
    if acceptance == 1:
        return draft_tokens + 1
    return (1 - acceptance ** (draft_tokens + 1)) / (1 - acceptance)


def speculative_speedup(acceptance, draft_tokens, cost_ratio):
    """Speed-up of speculative decoding: ``E / (gamma · c + 1)``, E the expected tokens per verification.

    c is one draft step's time over one target step's; a step costs the
    verification (about one target step) plus gamma draft steps (Leviathan et
    al. 2023, Theorem 3.8). At batch 1 both are bandwidth-bound, so c is about
    the ratio of their weight bytes.

    >>> round(speculative_speedup(0.8, 4, 0.05), 3)
    2.801
    """
    return speculative_expected_tokens(acceptance, draft_tokens) / (draft_tokens * cost_ratio + 1)


def speculative_extra_bytes(draft_weight_bytes, draft_bytes_per_token, seq_len, batch_size):
    """Memory a draft model adds: its weights plus its own KV cache, ``W_draft + b_tok,draft · T · B`` [B].

    The draft keeps a cache of every sequence's tokens too (vLLM allocates
    it in the same pool as the target's). Llama 3.1 8B drafting (bf16)
    for 16 sequences of 8,192 tokens:

    >>> speculative_extra_bytes(16_060_522_496, 131072, 8192, 16)
    33240391680
    """
    return draft_weight_bytes + formulas.kv_bytes_total(draft_bytes_per_token, seq_len, batch_size)


def weight_only_speedup(weight_bytes_before, weight_bytes_after, kv_bytes):
    """Batch-1 decode speed-up of weight-only quantization: ``(W + KV) / (W_q + KV)``.

    At batch 1 a step is bandwidth-bound: it reads the weights and one
    sequence's cache, and only the weights shrink (the cache keeps its dtype).
    A 16-bit model read at 4.25 bits per weight (int4 plus group scales):

    >>> round(weight_only_speedup(16e9, 4.25e9, 0), 3), round(weight_only_speedup(16e9, 4.25e9, 1e9), 3)
    (3.765, 3.238)
    """
    return (weight_bytes_before + kv_bytes) / (weight_bytes_after + kv_bytes)


def ring_allreduce_bytes_sent(message_bytes, tp):
    """Bytes each GPU sends in one ring all-reduce of ``message_bytes``: ``2 (t - 1) / t · message`` [B].

    A ring all-reduce is a reduce-scatter then an all-gather, each moving
    (t - 1) / t of the message out of every GPU (NCCL's ring algorithm; its
    "bus bandwidth" figure uses the same 2 (t - 1) / t).

    >>> ring_allreduce_bytes_sent(65536, 8), ring_allreduce_bytes_sent(65536, 1)
    (114688, 0)
    """
    return formulas.exact_div(2 * (tp - 1) * message_bytes, tp)


def tp_allreduce_bytes_per_step(layers, tokens, hidden_size, dtype_bytes, tp):
    """Bytes each GPU sends per forward step under tensor parallelism: ``L · 2 · 2 (t - 1) / t · tokens · d · b``.

    Megatron-style tensor parallelism all-reduces the activations twice per
    layer, after attention and after the MLP (Shoeybi et al. 2019,
    "Megatron-LM", section 3); each message is every token's hidden vector
    (tokens x d numbers of b bytes). Llama 3.1 8B at TP 4, a decode step of
    32 sequences, bf16 activations: messages of 32 x 4,096 x 2 = 262,144 B, of
    which each GPU sends 1.5 x = 393,216 B, twice in each of 32 layers:

    >>> tp_allreduce_bytes_per_step(32, 32, 4096, 2, 4)
    25165824
    """
    return layers * 2 * ring_allreduce_bytes_sent(tokens * hidden_size * dtype_bytes, tp)


def cost_per_million_tokens(price_per_gpu_hour, gpus, tokens_per_s):
    """Dollars per million tokens: ``C_h · gpus / (3600 · tokens/s) · 10^6``.

    Eight GPUs at $2.50 an hour each, serving 5,000 tokens/s in all:

    >>> round(cost_per_million_tokens(2.50, 8, 5000), 4)
    1.1111
    """
    return price_per_gpu_hour * gpus / (3600 * tokens_per_s) * 1e6
