"""Fetch or recompute: bring a cached prefix back over a link, or prefill it again.

A prefix whose KV was offloaded (to host memory, another GPU, disk) can be
fetched back or recomputed. Fetching moves ``T * bytes_per_token`` bytes over
a link; recomputing spends the prefill FLOPs of ``T`` tokens on the GPU.

Prefill FLOPs, the convention used here (and the one that reproduces seed
000's 1.49e14 for 8,192 tokens of Llama 3.1 8B):

* linear layers: ``2 * P_m * T`` -- one multiply-add per parameter per token,
  ``P_m = prefill_params_per_token(model)``: the active parameters less an
  untied input embedding (looking up a row is no matmul; a tied table stays,
  as the LM head multiplies by it). One rule for every prefill FLOP figure
  in kvlib; ``num_params=`` overrides it with a given P (``2 P T``, the
  rule of thumb that counts the embedding too);
* attention scores and values, causal: query ``i`` attends to ``i`` keys, so
  a layer has ``T (T + 1) / 2`` (query, key) pairs per head, each costing
  ``2 * d_qk`` FLOPs for Q.K and ``2 * d_v`` for the weighted V sum:
  ``2 * L * H * (d_qk + d_v) * T (T + 1) / 2``, which for ``d_qk = d_v = D``
  is ``2 * L * H * D * T * (T + 1)`` (H = *query* heads: every query head
  does its own dot products, whatever the KV-head count).

With P = 8.03e9 given (the embedding counted): 2 x 8.03e9 x 8,192 = 1.316e14, plus 2 x 32 x 32 x 128 x
8,192 x 8,193 = 1.759e13, is 1.49e14. Counting the attention term without
the causal half (4 L H D T^2) would give 1.67e14, and leaving it out 1.32e14.

The rule: fetch wins when ``bytes_per_token / link_bytes_per_s <
flops_per_token / achieved_flop_per_s`` (plus any fixed cost of a fetch).
Taught in ch05_prefix_reuse (offload and prefix reuse).
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import load_model
from .gpus import get_gpu
from .spec import ATTENTION_KINDS, CHUNKED, SLIDING

__all__ = [
    "OffloadError",
    "prefill_linear_flops",
    "prefill_params_per_token",
    "attention_pairs",
    "prefill_attention_flops",
    "prefill_flops",
    "FetchOrRecompute",
    "fetch_or_recompute",
    "break_even_context",
    "fetch_wins_rule",
    "DEFAULT_LINK_BYTES_PER_S",
    "DEFAULT_MFU",
]

DEFAULT_LINK_BYTES_PER_S = 50 * 10**9  # PCIe Gen5 x16, as assumed in [chains]
DEFAULT_MFU = 0.6                       # achieved / peak for a long prefill, [chains]


class OffloadError(ValueError):
    """A fetch-or-recompute input is out of range; the message names it."""


def _check_positive(name, value, *, integer=False):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (integer and not isinstance(value, int)):
        kind = "a positive integer" if integer else "a positive number"
        raise OffloadError(f"{name} must be {kind}, got {value!r}")
    if not value > 0:
        raise OffloadError(f"{name} must be positive, got {value!r}")
    return value


def prefill_linear_flops(num_params, tokens):
    """FLOPs of the linear layers over a prefill: ``2 * P * T``.

    [chains]'s shared system prompt: each prefix hit skips 2 x 8.03e9 x 2,000
    = 32 TFLOP (65 ms at 50% of 989 TFLOP/s):

    >>> prefill_linear_flops(8.03e9, 2000) / 1e12
    32.12
    >>> round(prefill_linear_flops(8.03e9, 2000) / (0.5 * 989e12) * 1e3)
    65
    """
    return 2 * num_params * tokens


def prefill_params_per_token(model) -> int:
    """Parameters a prefill multiplies each token by: ``P_active - V d`` (untied), ``P_active`` (tied).

    The input embedding is a table lookup, no matmul, so its ``V x d``
    parameters do no FLOPs; a tied table is still multiplied by once per
    token, as the LM head (so it stays), and a learned position table (GPT-2)
    is looked up too. Llama 3.1 8B: 8,030,261,248 - 128,256 x 4,096 =
    7,504,924,672 (2 x 8.03e9 x T is 7.0% high); Qwen2.5-3B ties its table, so
    nothing is left out; a mixture of experts counts its active parameters:

    >>> prefill_params_per_token("llama-3.1-8b"), 8_030_261_248 - 128_256 * 4096
    (7504924672, 7504924672)
    >>> from kvlib import load_model
    >>> prefill_params_per_token("qwen2.5-3b") == load_model("qwen2.5-3b").num_params_active()
    True

    Taught in ch05_prefix_reuse and ch06_crossover (the same rule in both).
    """
    spec = load_model(model)
    d = spec.hidden_size
    lookups = (0 if spec.tie_word_embeddings else spec.vocab_size) + (spec.learned_positions or 0)
    if lookups and d is None:
        raise OffloadError(f"{spec.name}: hidden_size is needed to leave the embedding lookup out")
    return spec.num_params_active() - lookups * (d or 0)


def attention_pairs(tokens: int, window: int | None = None, chunk: int | None = None) -> int:
    """Causal (query, key) pairs in one head of one layer: ``T (T + 1) / 2``.

    With a sliding window W a query sees at most W keys:
    ``W (W + 1) / 2 + (T - W) W`` once T > W. With attention chunks of C
    tokens (Llama 4's chunked layers) a query sees only the keys of its own
    chunk, so for T = q C + r: ``q C (C + 1) / 2 + r (r + 1) / 2``.

    >>> attention_pairs(4), attention_pairs(4, window=2), attention_pairs(5, chunk=2)
    (10, 7, 7)
    """
    if chunk is not None:
        whole, rest = divmod(tokens, chunk)
        return whole * chunk * (chunk + 1) // 2 + rest * (rest + 1) // 2
    if window is None or tokens <= window:
        return tokens * (tokens + 1) // 2
    return window * (window + 1) // 2 + (tokens - window) * window


def prefill_attention_flops(layers, num_heads, qk_head_dim, tokens, v_head_dim=None, window=None, chunk=None):
    """Attention FLOPs over a causal prefill: ``2 * L * H * (d_qk + d_v) * pairs``.

    pairs = ``attention_pairs(T, window, chunk)``; ``v_head_dim`` defaults to
    ``qk_head_dim``. Llama 3.1 8B at 8,192 tokens ([chains]'s recompute):

    >>> prefill_attention_flops(layers=32, num_heads=32, qk_head_dim=128, tokens=8192)
    17594333528064
    """
    d_v = qk_head_dim if v_head_dim is None else v_head_dim
    return 2 * layers * num_heads * (qk_head_dim + d_v) * attention_pairs(tokens, window, chunk)


def _attention_dims(spec):
    if spec.is_mla:
        qk = (spec.qk_nope_head_dim or 0) + spec.qk_rope_head_dim
        return qk, spec.v_head_dim or qk
    return spec.head_dim, spec.head_dim


def prefill_flops(model, tokens: int, *, num_params=None) -> tuple:
    """``(linear, attention)`` prefill FLOPs of ``tokens`` for a model.

    ``model`` is anything ``load_model`` takes; the linear term is
    ``2 * prefill_params_per_token(model) * T``, and ``num_params`` overrides
    those parameters (8.03e9, the embedding counted, gives the figure below). Windowed layers
    attend to at most their window, chunked layers within their own chunk;
    layers without KV (linear attention, Mamba) add no attention term.

    >>> linear, attention = prefill_flops("llama-3.1-8b", 8192, num_params=8.03e9)
    >>> f"{linear + attention:.3g}"
    '1.49e+14'
    """
    _check_positive("tokens", tokens, integer=True)
    spec = load_model(model)
    params = prefill_params_per_token(spec) if num_params is None else _check_positive("num_params", num_params)
    d_qk, d_v = _attention_dims(spec)
    attention = 0
    for kind in spec.layer_kinds:
        if kind not in ATTENTION_KINDS:     # Mamba2, Gated DeltaNet and cache-less layers attend to nothing
            continue
        window = spec.sliding_window if kind == SLIDING else None
        chunk = spec.attention_chunk_size if kind == CHUNKED else None
        attention += prefill_attention_flops(1, spec.num_heads, d_qk, tokens, d_v, window, chunk)
    return prefill_linear_flops(params, tokens), attention


@dataclass(frozen=True)
class FetchOrRecompute:
    """One prefix: the bytes to fetch against the FLOPs to recompute it."""

    model: str
    tokens: int
    kv_bytes: int                   # [B] the prefix's KV cache
    link_bytes_per_s: float         # [B/s]
    fetch_overhead_s: float         # [s] fixed cost per fetch (lookup, scheduling)
    fetch_s: float                  # [s] overhead + kv_bytes / link
    linear_flops: float             # [FLOP] 2 P T
    attention_flops: float          # [FLOP] 2 L H (d_qk + d_v) T (T + 1) / 2
    peak_flop_per_s: float          # [FLOP/s] dense bf16
    mfu: float                      # achieved / peak
    recompute_s: float              # [s] FLOPs / (mfu x peak); with roofline=True at least weight_read_s
    bytes_per_token_over_link_s: float   # [s/token] the rule's left side
    flops_per_token_over_compute_s: float  # [s/token] the rule's right side
    compute_s: float = 0.0          # [s] FLOPs / (mfu x peak), the compute side alone
    weight_bytes: int = 0           # [B] weights the prefill reads (per rank): all, but T rows of the embedding
    weight_read_s: float = 0.0      # [s] weight_bytes / BW: no prefill is shorter (ch06's roofline)
    roofline: bool = False          # whether recompute_s is max(compute_s, weight_read_s)

    @property
    def flops(self):
        return self.linear_flops + self.attention_flops

    @property
    def winner(self) -> str:
        """'fetch' or 'recompute' (a tie goes to fetch: no GPU time spent)."""
        return "fetch" if self.fetch_s <= self.recompute_s else "recompute"

    @property
    def speedup(self) -> float:
        """How many times faster the winner is than the loser."""
        fast, slow = sorted((self.fetch_s, self.recompute_s))
        return slow / fast


def fetch_or_recompute(model, tokens: int, *, link_bytes_per_s=DEFAULT_LINK_BYTES_PER_S, gpu="H100-SXM",
                       peak_flop_per_s=None, mfu=DEFAULT_MFU, kv_dtype_bytes=None, num_params=None,
                       fetch_overhead_s=0.0, tp: int = 1, roofline: bool = False,
                       bandwidth_bytes_per_s=None) -> FetchOrRecompute:
    """Time to fetch a ``tokens``-long prefix against the time to recompute it.

    fetch_s = fetch_overhead_s + T * bytes_per_token / link_bytes_per_s;
    recompute_s = (linear + attention FLOPs) / (mfu * peak_flop_per_s).
    ``peak_flop_per_s`` defaults to the GPU's dense bf16 figure. Under
    tensor parallelism ``tp`` each rank fetches its share of the KV and does
    its share of the FLOPs over its own link, so the comparison is per rank.

    [chains]: 8,192 tokens of Llama 3.1 8B (bf16), PCIe Gen5 at an assumed
    50 GB/s, recompute at 60% of an H100's 989 TFLOP/s:

    >>> r = fetch_or_recompute("llama-3.1-8b", 8192, num_params=8.03e9)
    >>> print(f"{r.kv_bytes / 1e9:.2f} GB, fetch {r.fetch_s * 1e3:.1f} ms, "
    ...       f"recompute {r.recompute_s * 1e3:.0f} ms: {r.winner}")
    1.07 GB, fetch 21.5 ms, recompute 251 ms: fetch

    A prefill also reads every weight once (of the input embedding, the rows
    of its T tokens), so it is never shorter than those bytes over the HBM
    bandwidth: ``weight_read_s``, about 4.8 ms for the 8B on an H100. With
    ``roofline=True`` the recompute time is ``max(compute_s, weight_read_s)``,
    the roofline of ch06 applied to a prefill; it matters for short prefixes,
    whose FLOPs alone would take less (128 tokens: 3.2 ms of compute):

    >>> r = fetch_or_recompute("llama-3.1-8b", 128, roofline=True)
    >>> print(f"compute {r.compute_s * 1e3:.2f} ms, weights {r.weight_read_s * 1e3:.2f} ms: "
    ...       f"recompute {r.recompute_s * 1e3:.2f} ms")
    compute 3.25 ms, weights 4.48 ms: recompute 4.48 ms
    """
    _check_positive("tokens", tokens, integer=True)
    _check_positive("link_bytes_per_s", link_bytes_per_s)
    _check_positive("mfu", mfu)
    if mfu > 1:
        raise OffloadError(f"mfu must be in (0, 1], got {mfu!r}")
    if isinstance(fetch_overhead_s, bool) or not isinstance(fetch_overhead_s, (int, float)) or fetch_overhead_s < 0:
        raise OffloadError(f"fetch_overhead_s must be a number >= 0, got {fetch_overhead_s!r}")
    _check_positive("tp", tp, integer=True)
    spec = load_model(model)
    peak = get_gpu(gpu).bf16_flop_per_s if peak_flop_per_s is None else _check_positive("peak_flop_per_s",
                                                                                          peak_flop_per_s)
    kv_bytes = spec.kv_bytes_per_sequence(tokens, kv_dtype_bytes, tp=tp)
    linear, attention = prefill_flops(spec, tokens, num_params=num_params)
    linear, attention = linear / tp, attention / tp
    achieved = mfu * peak
    bw = get_gpu(gpu).bandwidth_bytes_per_s if bandwidth_bytes_per_s is None else _check_positive(
        "bandwidth_bytes_per_s", bandwidth_bytes_per_s)
    if num_params is None:
        from .roofline import weight_bytes_read
        weights = weight_bytes_read(spec, tokens, tp=tp)
    else:
        weights = int(2 * num_params) // tp
    compute_s = (linear + attention) / achieved
    weight_read_s = weights / bw
    return FetchOrRecompute(
        model=spec.name, tokens=tokens, kv_bytes=kv_bytes, link_bytes_per_s=link_bytes_per_s,
        fetch_overhead_s=float(fetch_overhead_s), fetch_s=fetch_overhead_s + kv_bytes / link_bytes_per_s,
        linear_flops=linear, attention_flops=attention, peak_flop_per_s=peak, mfu=mfu,
        recompute_s=max(compute_s, weight_read_s) if roofline else compute_s,
        bytes_per_token_over_link_s=kv_bytes / tokens / link_bytes_per_s,
        flops_per_token_over_compute_s=(linear + attention) / tokens / achieved,
        compute_s=compute_s, weight_bytes=weights, weight_read_s=weight_read_s, roofline=bool(roofline),
    )


def break_even_context(model, *, link_bytes_per_s=DEFAULT_LINK_BYTES_PER_S, gpu="H100-SXM",
                       peak_flop_per_s=None, mfu=DEFAULT_MFU, kv_dtype_bytes=None, num_params=None,
                       fetch_overhead_s=0.0, max_tokens: int = 10**7, roofline: bool = False) -> int | None:
    """Shortest prefix (tokens) for which fetching is at least as fast as recomputing.

    Recompute time grows faster than linearly (the attention term) while a
    fetch grows linearly, so fetch wins for every length from the break-even
    on. Returns 1 when fetch wins at every length, None when it does not win
    below ``max_tokens``. With no fixed fetch cost the break-even is set by
    the per-token rule; a fixed cost (lookup, scheduling of the load) is what
    makes short prefixes cheaper to recompute.

    Llama 3.1 8B on an H100 at 60% MFU: over 50 GB/s fetch always wins
    (2.6 us of link per token against 2 x 7,504,924,672 / 593.4e12 = 25.3 us
    of compute); add a 5 ms fixed cost per fetch and prefixes under
    ~0.005 / (25.3 - 2.6) us = 220 tokens are cheaper to recompute; over a
    2 GB/s link (65.5 us per token) only the attention term, growing with T,
    lets fetch win, from (65.536e-6 x 593.4e12 - 2 x 7,504,924,672) / 262,144
    - 1 = 91,090.3, so 91,091 tokens:

    >>> break_even_context("llama-3.1-8b")
    1
    >>> break_even_context("llama-3.1-8b", fetch_overhead_s=0.005)
    220
    >>> break_even_context("llama-3.1-8b", link_bytes_per_s=2e9)
    91091

    ``roofline=True`` floors the recompute at the weights' read (see
    ``fetch_or_recompute``). Over a slow link a very short fetch then wins too
    (under 4.5 ms of copy), before recompute takes over; the answer stays the
    length from which fetching wins at every longer length. The floor ends at
    about MFU x ridge tokens (177 at 60% on an H100), so a 5 ms fixed cost keeps
    its 220:

    >>> break_even_context("llama-3.1-8b", fetch_overhead_s=0.005, roofline=True)
    220
    >>> break_even_context("llama-3.1-8b", link_bytes_per_s=2e9, roofline=True)
    91091
    """
    _check_positive("max_tokens", max_tokens, integer=True)
    spec = load_model(model)

    def fetch_wins(t):
        r = fetch_or_recompute(spec, t, link_bytes_per_s=link_bytes_per_s, gpu=gpu,
                               peak_flop_per_s=peak_flop_per_s, mfu=mfu, kv_dtype_bytes=kv_dtype_bytes,
                               num_params=num_params, fetch_overhead_s=fetch_overhead_s, roofline=roofline)
        return r.fetch_s <= r.recompute_s

    if roofline:
        # the floor only raises the recompute time: from the compute-only break-even on, fetch keeps
        # winning; below it, fetch wins only under the floor, so walk down while it does
        first = break_even_context(spec, link_bytes_per_s=link_bytes_per_s, gpu=gpu, peak_flop_per_s=peak_flop_per_s,
                                   mfu=mfu, kv_dtype_bytes=kv_dtype_bytes, num_params=num_params,
                                   fetch_overhead_s=fetch_overhead_s, max_tokens=max_tokens)
        if first is None:
            return None
        while first > 1 and fetch_wins(first - 1):
            first -= 1
        return first
    if fetch_wins(1):
        return 1
    if not fetch_wins(max_tokens):
        return None
    lo, hi = 1, max_tokens  # fetch loses at lo, wins at hi; recompute - fetch is convex, so one crossing
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fetch_wins(mid):
            hi = mid
        else:
            lo = mid
    return hi


def fetch_wins_rule(bytes_per_token, link_bytes_per_s, flops_per_token, achieved_flop_per_s) -> bool:
    """[chains]'s rule: fetch when ``bytes_per_token / link < flops_per_token / achieved``.

    Llama 3.1 8B over 50 GB/s: 131,072 B / 50 GB/s = 2.6 us per token against
    2 x 8.03e9 FLOP / (0.6 x 989 TFLOP/s) = 27 us per token, so fetch:

    >>> fetch_wins_rule(131072, 50e9, 2 * 8.03e9, 0.6 * 989e12)
    True
    >>> fetch_wins_rule(131072, 4e9, 2 * 8.03e9, 0.6 * 989e12)  # a 4 GB/s link
    False
    """
    return bytes_per_token / link_bytes_per_s < flops_per_token / achieved_flop_per_s

