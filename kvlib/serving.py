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
from .config import load_model
from .gpus import get_gpu
from .offload import _attention_dims as _attention_head_dims
from .offload import attention_pairs, prefill_attention_flops, prefill_linear_flops, prefill_params_per_token
from .params import _layer_params
from .prefix_cache import prefix_sharing_savings
from .roofline import RooflineError, decode_step

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
    "littles_law_concurrency",
    "prefill_steps",
    "ttft_seconds",
    "disagg_transfer_bytes",
    "disagg_transfer_seconds",
    "pd_ratio",
    "ep_all_to_all_bytes",
    "eagle_expected_tokens",
    "eagle_speedup",
    "draft_head_bytes",
    "verify_cost_ratio",
]


def prefill_seconds(num_params, prompt_tokens, peak_flop_per_s, mfu):
    """Time to first token of a prompt, compute-bound: ``2 · P · T_p / (eta · F)`` [s].

    A prefill's linear layers do one multiply-add (2 FLOPs) per parameter per
    prompt token (``offload.prefill_linear_flops``); attention adds
    ``2 L H (d_qk + d_v) T_p (T_p + 1) / 2``, small below a few thousand
    tokens and left out of this interview estimate. P is the parameters a
    token is multiplied by, ``offload.prefill_params_per_token``: the input
    embedding is a lookup, not a matmul, so its V x d parameters are left out
    (a tied table stays once, as the LM head), and a mixture of experts counts
    its *active* parameters. Llama 3.1 8B: P = 8,030,261,248 - 128,256 x 4,096
    = 7,504,924,672. 2,000 tokens on an H100's 989 TFLOP/s at 50% MFU:
    2 x 7,504,924,672 x 2,000 = 3.0020e13 FLOP over 4.945e14 FLOP/s is 60.7 ms
    (the 8.03e9 that counts the embedding too would say 65.0 ms, 7% high):

    >>> round(prefill_seconds(7_504_924_672, 2000, 989e12, 0.5) * 1e3, 1)
    60.7
    >>> from kvlib.offload import prefill_params_per_token
    >>> prefill_params_per_token("llama-3.1-8b") == 7_504_924_672
    True
    """
    return prefill_linear_flops(num_params, prompt_tokens) / (mfu * peak_flop_per_s)


def ridge_batch(peak_flop_per_s, bandwidth_bytes_per_s, dtype_bytes, num_experts=None, top_k=None) -> int:
    """The smallest batch at which a decode step reaches the GPU's ridge point: ``ceil(F / BW · b / 2)``.

    A decode step of B sequences does 2 · P · B FLOPs of linear layers and
    reads the P · b weight bytes once (the KV reads and attention FLOPs left
    out: short contexts), so its intensity is 2 B / b FLOP per byte; it
    reaches the ridge ``I* = F / BW`` at B = I* · b / 2. Exact for integer
    F and BW. An H100 (989 TFLOP/s bf16, 3.35 TB/s): ridge 295.2, so batch
    296 with bf16 weights and 74 with 4-bit ones:

    >>> ridge_batch(989 * 10**12, 3_350_000_000_000, 2), ridge_batch(989 * 10**12, 3_350_000_000_000, 0.5)
    (296, 74)

    A mixture of experts (``num_experts`` E, ``top_k`` k) reads in each MoE
    layer only the ``E_B = E (1 - (1 - k/E)^B)`` experts its B tokens touch
    (``roofline.expected_experts_touched``) and does ``2 k P_e B`` FLOPs on
    their ``E_B P_e b`` bytes: intensity ``2 k B / (E_B b)``, below the dense
    ``2 B / b`` by ``E_B / k``, so its experts reach the ridge only at
    ``I* b E_B / (2 k)`` -- about E / k times the dense batch once every expert
    is read (the dense parts turn compute-bound before). DeepSeek-V3 (256
    experts, top 8) on an H200 (989 TFLOP/s, 4.8 TB/s): 206.04 x 32 = 6,593.3,
    so 6,594 sequences, not 207:

    >>> ridge_batch(989 * 10**12, 4_800_000_000_000, 2), ridge_batch(989 * 10**12, 4_800_000_000_000, 2, 256, 8)
    (207, 6594)
    """
    exact = Fraction(peak_flop_per_s) * Fraction(dtype_bytes) / (2 * Fraction(bandwidth_bytes_per_s))
    if num_experts is None:
        return math.ceil(exact)
    from .roofline import expected_experts_touched

    def reached(b):
        return 2 * top_k * b * bandwidth_bytes_per_s >= (
            peak_flop_per_s * dtype_bytes * expected_experts_touched(num_experts, top_k, b))

    batch = math.ceil(exact)                    # the dense figure: E_B >= k, so never earlier
    step = 1
    while not reached(batch + step):
        step *= 2
    low, high = batch + step // 2, batch + step
    if reached(batch):
        return batch
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if reached(mid) else (mid, high)
    return high


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
    that step waits for it, so the step is their inter-token latency. P is
    the parameters a token is multiplied by (``prefill_seconds``). Llama 3.1
    8B on an H100, 32 decodes and a 2,048-token chunk: the reads take
    20.36e9 / 3.35e12 = 6.08 ms, the FLOPs 2 x 7,504,924,672 x 2,080 =
    3.1220e13 at 4.945e14 FLOP/s take 63.14 ms, so compute sets the step:

    >>> round(mixed_step_seconds(16.06e9, 4.3e9, 7_504_924_672, 32 + 2048, 3.35e12, 989e12, 0.5) * 1e3, 2)
    63.14
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


def speculative_speedup(acceptance, draft_tokens, cost_ratio, verify_ratio=1):
    """Speed-up of speculative decoding: ``E / (gamma · c + v)``, E the expected tokens per verification.

    c is one draft step's time over one target step's; a step costs the
    verification, v target steps, plus gamma draft steps (Leviathan et al.
    2023, Theorem 3.8, where v = 1). At batch 1 both are bandwidth-bound, so c
    is about the ratio of their weight bytes, and a dense target's verify of
    gamma + 1 tokens reads the same weights as one decode: v = 1.

    >>> round(speculative_speedup(0.8, 4, 0.05), 3)
    2.801

    A mixture-of-experts target's verify is no longer one step: its gamma + 1
    tokens touch more experts than one token (``roofline.weight_bytes_read``),
    ``v = W_read(gamma + 1) / W_read(1)``, and c is over ``W_read(1)``, the
    active weights, not the total. Mixtral 8x7B verifying 6 tokens (gamma = 5)
    reads 6.58 of its 8 experts against 2: v = 3.0, and a draft that would
    give 2.95x against a dense target of the same step gives 1.14x:

    >>> round(speculative_speedup(0.8, 5, 0.05), 3), round(speculative_speedup(0.8, 5, 0.05, verify_ratio=3.0), 3)
    (2.951, 1.135)
    """
    return speculative_expected_tokens(acceptance, draft_tokens) / (draft_tokens * cost_ratio + verify_ratio)


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


# --- requests, not users: Little's law, prefill capacity, TTFT, disaggregation, EP, EAGLE ------------------------
def littles_law_concurrency(rate_per_s, seconds_in_system):
    """Requests in the system at once: ``N = lambda · W`` (Little's law).

    ``rate_per_s`` [requests/s] arriving, each staying ``seconds_in_system``
    [s] (queue + prefill + decode). Little (1961), "A proof for the queuing
    formula L = lambda W": it holds for any arrival pattern in steady state,
    so it turns a request rate into the concurrency a server must hold. Ten
    requests a second that each take 2 s to first token and 400 tokens at
    40 ms:

    >>> littles_law_concurrency(10, 2 + 400 * 0.040)
    180.0
    """
    for name, value in (("rate_per_s", rate_per_s), ("seconds_in_system", seconds_in_system)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ValueError(f"{name} must be a number >= 0, got {value!r}")
    return rate_per_s * seconds_in_system


def prefill_steps(prompt_tokens: int, token_budget: int, decode_tokens: int = 0) -> int:
    """Engine steps a prompt's prefill takes under chunked prefill: ``ceil(T_p / (C - n_d))``.

    vLLM's scheduler gives each step a budget of ``max_num_batched_tokens``
    (C) tokens; the running decodes take theirs first (one each, n_d) and a
    waiting prompt gets the rest as a chunk (vllm/v1/core/sched/scheduler.py
    schedules running requests before waiting ones). A 6,144-token prompt
    under a 512-token budget takes 12 steps; beside 64 decodes, 14:

    >>> prefill_steps(6144, 512), prefill_steps(6144, 512, decode_tokens=64)
    (12, 14)
    """
    for name, value in (("prompt_tokens", prompt_tokens), ("token_budget", token_budget)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if isinstance(decode_tokens, bool) or not isinstance(decode_tokens, int) or not 0 <= decode_tokens < token_budget:
        raise ValueError(f"decode_tokens must be an integer from 0 to token_budget - 1, got {decode_tokens!r}")
    return -(-prompt_tokens // (token_budget - decode_tokens))


def ttft_seconds(model, prompt_tokens: int, *, gpu="H100-SXM", mfu=0.5, queue_seconds=0.0, token_budget=None,
                 decode_tokens: int = 0, cached_tokens: int = 0, tp: int = 1, peak_flop_per_s=None,
                 bandwidth_bytes_per_s=None) -> float:
    """Time to first token [s]: the queue plus the prefill, chunk by chunk, attention FLOPs included.

    ``TTFT = t_queue + sum over chunks of max(F_chunk / (eta F), W_r / BW)``:
    each chunk of ``C - n_d`` prompt tokens (``prefill_steps``) does
    ``2 P_m`` FLOPs a token (``offload.prefill_params_per_token``) plus the
    causal attention of its tokens against all earlier ones,
    ``2 L H (d_qk + d_v)`` per (query, key) pair, and reads the weights once
    (``roofline.weight_bytes_read``), so a short chunk is held to the weight
    read. ``cached_tokens`` of prefix-cache hit skip their linear FLOPs; the
    rest still attend to them. Without ``token_budget`` the prompt is one
    chunk. Under ``tp`` the FLOPs and bytes split evenly (no all-reduce
    time). Llama 3.1 8B, 2,000 tokens, H100 at 50% MFU:
    2 x 7,504,924,672 x 2,000 = 3.002e13 linear plus 2 x 32 x 32 x 256 x
    2,001,000 = 1.049e12 attention FLOPs over 494.5e12 FLOP/s = 62.83 ms; with
    0.1 s in the queue, 162.83 ms:

    >>> round(ttft_seconds("llama-3.1-8b", 2000) * 1e3, 2), round(ttft_seconds("llama-3.1-8b", 2000, queue_seconds=0.1) * 1e3, 2)
    (62.83, 162.83)

    A 6,144-token prompt in 512-token chunks: 12 chunks of 7.685e12 linear
    FLOPs (15.54 ms each) plus 524,288 x 18,877,440 = 9.897e12 attention in
    all (20.01 ms): 206.5 ms:

    >>> round(ttft_seconds("llama-3.1-8b", 6144, token_budget=512) * 1e3, 1)
    206.5

    Sources: the TTFT decomposition of DistServe (Zhong et al. 2024, section
    2) and Sarathi-Serve (Agrawal et al. 2024) for chunked prefill.
    """
    from .roofline import weight_bytes_read

    if isinstance(prompt_tokens, bool) or not isinstance(prompt_tokens, int) or prompt_tokens < 1:
        raise ValueError(f"prompt_tokens must be a positive integer, got {prompt_tokens!r}")
    if isinstance(cached_tokens, bool) or not isinstance(cached_tokens, int) or not 0 <= cached_tokens < prompt_tokens:
        raise ValueError(f"cached_tokens must be an integer from 0 to prompt_tokens - 1, got {cached_tokens!r}")
    if isinstance(mfu, bool) or not isinstance(mfu, (int, float)) or not 0 < mfu <= 1:
        raise ValueError(f"mfu must be in (0, 1], got {mfu!r}")
    if isinstance(queue_seconds, bool) or not isinstance(queue_seconds, (int, float)) or queue_seconds < 0:
        raise ValueError(f"queue_seconds must be a number >= 0, got {queue_seconds!r}")
    if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
        raise ValueError(f"tp must be a positive integer, got {tp!r}")
    spec = load_model(model)
    card = get_gpu(gpu)
    peak = card.bf16_flop_per_s if peak_flop_per_s is None else peak_flop_per_s
    bw = card.bandwidth_bytes_per_s if bandwidth_bytes_per_s is None else bandwidth_bytes_per_s
    todo = prompt_tokens - cached_tokens
    chunk = todo if token_budget is None else token_budget - decode_tokens
    if token_budget is not None:
        prefill_steps(todo, token_budget, decode_tokens)          # validates the budget
    params = prefill_params_per_token(spec)
    d_qk, d_v = _attention_head_dims(spec)
    per_pair = prefill_attention_flops(1, spec.num_heads, d_qk, 1, d_v) * _attention_layers(spec)
    total = 0.0
    start = cached_tokens
    while start < prompt_tokens:
        end = min(prompt_tokens, start + chunk)
        pairs = attention_pairs(end) - attention_pairs(start) if start else attention_pairs(end)
        flops = (prefill_linear_flops(params, end - start) + per_pair * pairs) / tp
        weights = weight_bytes_read(spec, end - start, tp=tp)
        total += max(flops / (mfu * peak), weights / bw)
        start = end
    return queue_seconds + total


def _attention_layers(spec) -> int:
    """Layers that attend over the whole prompt (windowed and chunked layers counted as full: an upper bound)."""
    from .spec import ATTENTION_KINDS
    return sum(1 for kind in spec.layer_kinds if kind in ATTENTION_KINDS)


def disagg_transfer_bytes(model, prompt_tokens: int, *, kv_dtype_bytes=None) -> int:
    """KV bytes a disaggregated prefill hands to its decode instance per request: ``S(T_p)`` [B].

    With prefill and decode on separate GPUs (DistServe, Zhong et al. 2024;
    Splitwise, Patel et al. 2024; vLLM's KV connectors) the whole prompt's
    cache moves once per request, every layer, K and V: the same bytes as
    the sequence's cache (``ModelSpec.kv_bytes_per_sequence``). Llama 3.1 8B,
    a 6,144-token prompt: 6,144 x 131,072 = 805,306,368 B:

    >>> disagg_transfer_bytes("llama-3.1-8b", 6144)
    805306368
    """
    if isinstance(prompt_tokens, bool) or not isinstance(prompt_tokens, int) or prompt_tokens < 1:
        raise ValueError(f"prompt_tokens must be a positive integer, got {prompt_tokens!r}")
    return load_model(model).kv_bytes_per_sequence(prompt_tokens, kv_dtype_bytes)


def disagg_transfer_seconds(transfer_bytes, link_bytes_per_s) -> float:
    """Time to move a request's KV from prefill to decode: ``S / link`` [s].

    805,306,368 B over a 400 Gb/s NIC (50 GB/s) takes 16.1 ms; over NVLink
    at 900 GB/s, 0.89 ms:

    >>> round(disagg_transfer_seconds(805_306_368, 50e9) * 1e3, 1), round(disagg_transfer_seconds(805_306_368, 900e9) * 1e3, 2)
    (16.1, 0.89)
    """
    if isinstance(link_bytes_per_s, bool) or not isinstance(link_bytes_per_s, (int, float)) or link_bytes_per_s <= 0:
        raise ValueError(f"link_bytes_per_s must be a positive number, got {link_bytes_per_s!r}")
    return transfer_bytes / link_bytes_per_s


def pd_ratio(prompt_tokens, output_tokens, *, prefill_tokens_per_gpu_s, decode_tokens_per_gpu_s) -> float:
    """Prefill GPUs per decode GPU in a disaggregated deployment: ``(T_p / r_p) / (T_o / r_d)``.

    At a request rate lambda the prefill pool must supply ``lambda T_p / r_p``
    GPUs (``r_p`` prompt tokens per GPU-second) and the decode pool
    ``lambda T_o / r_d`` (``r_d`` generated tokens per GPU-second at the batch
    that meets the ITL SLO); the rate cancels (DistServe, Zhong et al. 2024,
    section 4, sizes each phase's instances by its own goodput). 2,000-token
    prompts and 200-token answers, an H100 prefilling 32,945 tokens/s
    (494.5e12 / (2 x 7.505e9)) and decoding 3,225 tokens/s per GPU:
    0.0607 s against 0.0620 s of GPU time per request, about 1:1:

    >>> round(pd_ratio(2000, 200, prefill_tokens_per_gpu_s=32_945, decode_tokens_per_gpu_s=3_225), 3)
    0.979
    """
    for name, value in (("prompt_tokens", prompt_tokens), ("output_tokens", output_tokens),
                        ("prefill_tokens_per_gpu_s", prefill_tokens_per_gpu_s),
                        ("decode_tokens_per_gpu_s", decode_tokens_per_gpu_s)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise ValueError(f"{name} must be a positive number, got {value!r}")
    return (prompt_tokens / prefill_tokens_per_gpu_s) / (output_tokens / decode_tokens_per_gpu_s)


def ep_all_to_all_bytes(tokens, hidden_size, top_k, ep, dtype_bytes=2) -> float:
    """Bytes one GPU sends per MoE layer under expert parallelism: ``2 n k (ep - 1) / ep d b`` [B].

    Each of a GPU's ``n`` tokens goes to its k experts (dispatch) and comes
    back weighted (combine); with the experts spread evenly over ``ep`` GPUs
    a route leaves the GPU with probability ``(ep - 1) / ep``, carrying the
    token's hidden vector of d numbers of b bytes each way (DeepSpeed-MoE,
    Rajbhandari et al. 2022; DeepEP dispatches in fp8 and combines in bf16,
    b = 1 then 2). Against tensor parallelism's all-reduce of every token's
    vector (``tp_allreduce_bytes_per_step``) EP sends k times the tokens but
    only the routes that leave. DeepSeek-V3 (d 7,168, top 8), 128 tokens on
    each of 8 GPUs, bf16: 2 x 128 x 8 x 7/8 x 7,168 x 2 = 25,690,112 B a
    layer, 1.49 GB over its 58 MoE layers:

    >>> ep_all_to_all_bytes(128, 7168, 8, 8), ep_all_to_all_bytes(128, 7168, 8, 1)
    (25690112, 0)
    """
    for name, value in (("tokens", tokens), ("hidden_size", hidden_size), ("top_k", top_k), ("ep", ep)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return formulas.exact_div(2 * tokens * top_k * (ep - 1) * hidden_size * dtype_bytes, ep)


def eagle_expected_tokens(acceptance_per_position) -> float:
    """Tokens per verification with per-position acceptance: ``1 + sum_i prod_{j <= i} a_j``.

    EAGLE draft heads and DeepSeek-V3's multi-token prediction propose a
    chain of tokens whose acceptance falls with the position; ``a_j`` is
    the chance the j-th draft is accepted given the ones before it were.
    vLLM's log prints the products instead: its "Per-position acceptance
    rate" r_j counts the drafts accepted at position j over all drafts
    (vllm/v1/spec_decode/metrics.py), r_j = a_1 ... a_j, so E = 1 + sum_j r_j
    and a_j = r_j / r_(j-1). The target's own token always comes. Li et al. 2024, "EAGLE"; DeepSeek-V3
    technical report, section 5.4.3: one MTP token accepted 85-90% of the
    time gives 1.85-1.9 tokens a step. A constant a is Leviathan's
    ``(1 - a^(gamma + 1)) / (1 - a)`` (``speculative_expected_tokens``):

    >>> eagle_expected_tokens([0.85]), round(eagle_expected_tokens([0.8, 0.6, 0.4]), 3)
    (1.85, 2.472)
    >>> round(1 + 0.8 + 0.48 + 0.192, 3)      # vLLM's per-position rates for the same chain, summed
    2.472
    >>> round(eagle_expected_tokens([0.8] * 4), 4) == round(speculative_expected_tokens(0.8, 4), 4)
    True
    """
    expected, reach = 1.0, 1.0
    for i, a in enumerate(acceptance_per_position):
        if isinstance(a, bool) or not isinstance(a, (int, float)) or not 0 <= a <= 1:
            raise ValueError(f"acceptance_per_position[{i}] must be in [0, 1], got {a!r}")
        reach *= a
        expected += reach
    return expected


def eagle_speedup(acceptance_per_position, cost_ratio, verify_ratio=1) -> float:
    """Speed-up of a draft chain with per-position acceptance: ``E / (gamma · c_d + c_v)`` [times].

    ``E = eagle_expected_tokens(a_1 .. a_gamma)`` tokens come from one verification, which costs
    gamma draft steps of ``c_d`` target steps each and a verify of ``c_v`` target steps
    (``verify_cost_ratio``; 1 for a dense target at batch 1). ``speculative_speedup`` is the case of
    one acceptance rate for every position. Three drafts accepted 0.8, 0.6 and 0.4 of the time,
    ``E = 1 + 0.8 + 0.48 + 0.192 = 2.472``; a head costing 0.05 of a step: 2.472 / (3 x 0.05 + 1)
    = 2.472 / 1.15 = 2.1496, and with a verify of two steps 2.472 / 2.15 = 1.1498:

    >>> round(eagle_speedup([0.8, 0.6, 0.4], 0.05), 4), round(eagle_speedup([0.8, 0.6, 0.4], 0.05, 2.0), 4)
    (2.1496, 1.1498)

    Taught in ch09_interview_drills (draft heads against a draft model).
    """
    rates = list(acceptance_per_position)
    if not rates:
        raise ValueError("acceptance_per_position: expected at least one draft position, got none")
    for name, value in (("cost_ratio", cost_ratio), ("verify_ratio", verify_ratio)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
            raise ValueError(f"{name} must be a number >= 0, got {value!r}")
    if len(rates) * cost_ratio + verify_ratio <= 0:
        raise ValueError("verify_ratio: a verification that costs nothing has no speed-up")
    return eagle_expected_tokens(rates) / (len(rates) * cost_ratio + verify_ratio)


def draft_head_bytes(model, *, dtype_bytes=2, tp: int = 1) -> int:
    """Weight bytes one step of a draft head reads, per GPU: ``W_h = 2 d^2 b + (P_layer + V d) · b / t`` [B].

    An EAGLE head (Li et al. 2024, "EAGLE: Speculative Sampling Requires Rethinking Feature
    Uncertainty", section 3) and DeepSeek-V3's multi-token-prediction module (DeepSeek-V3 technical
    report, section 2.2) draft with a projection of the token's embedding and the target's hidden
    state, ``2 d -> d`` (2 d^2 parameters), one decoder layer of the target's shape (``P_layer``:
    the model's last layer as one token reads it, a MoE layer's top-k experts only, its norms
    included) and the target's own LM head (``V d``), shared, not copied. At batch 1 a draft step
    reads those once. (EAGLE-3 fuses three of the target's layers, ``3 d -> d``, and samples from a
    smaller draft vocabulary: the same order of bytes.) The head's own KV cache (one layer) and the
    norms around the projection are left out. Under tensor parallelism the layer and the LM head are split
    over the ``t`` GPUs, but the projection is not: vLLM builds it whole on every GPU (``ReplicatedLinear``
    in ``llama_eagle.py``, a plain ``nn.Linear`` ``eh_proj`` in ``deepseek_mtp.py``, vLLM 0.34.0), so each
    GPU reads all ``2 d^2`` of it. Llama 3.1 8B (d = 4,096, V = 128,256): one layer is
    attention 2 x 4,096^2 + 2 x 4,096 x 1,024 = 41,943,040, MLP 3 x 4,096 x 14,336 = 176,160,768 and
    two norms of 4,096; in bf16:

    >>> draft_head_bytes("llama-3.1-8b")
    1554006016
    >>> draft_head_bytes("llama-3.1-8b") == (2 * 4096**2 + 41_943_040 + 176_160_768 + 2 * 4096 + 128_256 * 4096) * 2
    True

    DeepSeek-V3's MTP module in fp8 at TP 8: the projection whole, 2 x 7,168^2 = 102,760,448 B on each GPU, and
    an eighth of its MoE layer as one token reads it (585,318,400) and of the LM head (129,280 x 7,168):

    >>> draft_head_bytes("deepseek-v3", dtype_bytes=1, tp=8) == 2 * 7168**2 + (585_318_400 + 129_280 * 7168) // 8
    True

    Taught in ch09_interview_drills (draft heads against a draft model).
    """
    spec = load_model(model)
    if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
        raise ValueError(f"tp must be a positive integer, got {tp!r}")
    if not spec.hidden_size or not spec.vocab_size:
        raise ValueError(f"{spec.name}: hidden_size and vocab_size are needed to size a draft head")
    d, last = spec.hidden_size, spec.num_layers - 1
    layer = _layer_params(spec, last, spec.num_experts_per_tok if spec.num_experts else None)
    projection = formulas.weight_bytes(2 * d * d, dtype_bytes)       # replicated: whole on every GPU
    return projection + formulas.weight_bytes_per_gpu(formulas.weight_bytes(layer + spec.vocab_size * d,
                                                                            dtype_bytes), tp)


def verify_cost_ratio(model, tokens: int, *, context: int, gpu="H100-SXM", weight_dtype_bytes=2,
                      kv_dtype_bytes=None, tp: int = 1, ep: int = 1) -> float:
    """A verify of ``tokens`` = gamma + 1 tokens of one sequence, in plain decode steps: ``c_v = t_v / t_1`` [ratio].

    The target checks gamma drafts and its own next token in one forward pass. On the roofline
    (``kvlib.roofline``) that pass reads the weights once (a mixture of experts: the experts the
    gamma + 1 tokens touch, ``N_B = N_e (1 - (1 - k_e / N_e)^B)`` per MoE layer, against k_e for one
    token) and the sequence's cache once, and does gamma + 1 tokens' FLOPs; each part takes
    ``max(bytes / BW, FLOPs / F)`` (``roofline.step_ops``). ``t_1`` is a plain batch-1 step
    (``decode_step(batch=1, embedding_rows=True)``). At batch 1 every part stays far below the ridge,
    so for a dense model ``c_v`` is 1 plus gamma embedding rows: Llama 3.1 8B verifying 4 tokens at
    4,096 tokens of context reads W_r = 16,060,522,496 - (128,256 - 4) x 4,096 x 2 bytes and
    131,072 x 4,096 of cache:

    >>> round(verify_cost_ratio("llama-3.1-8b", 4, context=4096), 7)
    1.0000016
    >>> w1, kv = 16_060_522_496 - 128_255 * 4096 * 2, 131_072 * 4096
    >>> round((w1 + 3 * 4096 * 2 + kv) / (w1 + kv), 7)
    1.0000016

    Mixtral 8x7B (E = 8, k = 2): 4 tokens touch 8 (1 - 0.75^4) = 5.47 experts a layer against 2, on its
    1,605,636,096 dense parameters and 32 layers of 176,160,768-parameter experts (bf16, cache
    131,072 B a token):

    >>> dense, expert, kv = 1_605_636_096, 32 * 176_160_768, 131_072 * 4096
    >>> by_hand = (((dense + 5.46875 * expert - 31_996 * 4096) * 2 + kv)
    ...            / ((dense + 2 * expert - 31_999 * 4096) * 2 + kv))
    >>> round(by_hand, 4), round(verify_cost_ratio("mixtral-8x7b", 4, context=4096, gpu="MI300X"), 4)
    (2.5021, 2.5021)

    Refused in one line when a part of the verify is compute-bound: then it is no longer a batch-1
    question, and the byte ratio does not hold.

    Taught in ch09_interview_drills (draft heads against a draft model).
    """
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
        raise ValueError(f"tokens must be a positive integer (gamma + 1), got {tokens!r}")
    kw = dict(context=context, gpu=gpu, weight_dtype_bytes=weight_dtype_bytes, kv_dtype_bytes=kv_dtype_bytes,
              tp=tp, ep=ep, embedding_rows=True)
    one, many = decode_step(model, batch=1, **kw), decode_step(model, batch=tokens, **kw)
    # the verify's weights are those of a step of `tokens` tokens; its cache is one sequence's, read once
    cache = next(op for op in one.ops if op.name == "attention")
    parts = [(op.name, op.bytes, op.flops) for op in many.ops if op.name != "attention"]
    parts.append(("attention", cache.bytes, cache.flops * tokens))
    bw, peak = one.bandwidth_bytes_per_s, one.peak_flop_per_s
    for name, nbytes, flops in parts:
        if flops / peak > nbytes / bw:
            raise RooflineError(f"tokens: a verify of {tokens} tokens is compute-bound in its {name} on {one.gpu}; "
                                "the byte ratio of a batch-1 verify does not hold")
    return sum(max(nbytes / bw, flops / peak) for _, nbytes, flops in parts) / one.step_s_bound
