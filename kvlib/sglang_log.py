"""Read an SGLang startup log's KV-cache lines, and check them against ``kvlib.sglang``.

``parse_log(text)`` returns one frozen ``SGLangStart`` per server start, every figure as printed
(``None`` where the log prints none). Lines understood (the message part; any prefix -- a date, a
``[2025-03-08 12:29:21 TP3]`` or ``[... TP0 EP0]`` tag, a docker-compose timestamp -- is skipped)::

    server_args=ServerArgs(model_path='...', mem_fraction_static=0.85, tp_size=4, page_size=1, ...)
    Load weight begin. avail mem=21.63 GB
    Load weight end. type=Qwen2ForCausalLM, dtype=torch.bfloat16, avail mem=6.09 GB, mem usage=15.54 GB.
    KV Cache is allocated. K size: 2.82 GB, V size: 2.82 GB.                 (0.4.2)
    KV Cache is allocated. #tokens: 46611, K size: 1.42 GB, V size: 1.42 GB  (0.4.3 on; MLA: "KV size")
    KV Cache is allocated. dtype: torch.bfloat16, #tokens: 70950, ...        (after 0.5.8)
    Use sliding window memory pool. full_layer_tokens=63987, swa_layer_tokens=51189
    Memory pool end. avail mem=2.09 GB
    max_total_num_tokens=46611, chunked_prefill_size=2048, ...               (the scheduler)

SGLang's "GB" is GiB (``get_available_gpu_memory`` divides by 2^30) printed to two decimals, so a
figure stands for a window of bytes (``kvlib.vllm.gib_window``). Under TP each rank prints its own;
SGLang sizes the pool from the smallest (``distributed=True``), and so does ``check_start``. A rank
that loads two models (a speculative draft after the target) prints two load lines: the first
"begin" and the last "end" are the two measurements.

``check_start(start, model)`` predicts ``max_total_num_tokens`` from the two free-memory figures
(``kvlib.sglang.kv_budget_bytes`` over ``cell_size_bytes``): a window of tokens, and whether the
printed count is in it; then the K/V sizes the log prints from its own token count.

Taught in ch04_pool_paging, beside vLLM's reader (``kvlib.vllm.log``).

>>> log = '''[12:29:04] server_args=ServerArgs(model_path='Qwen/QwQ-32B', mem_fraction_static=0.85, tp_size=4)
... [12:29:13 TP0] Load weight begin. avail mem=21.63 GB
... [12:29:21 TP0] Load weight end. type=Qwen2ForCausalLM, avail mem=6.09 GB, mem usage=15.54 GB.
... [12:29:21 TP0] KV Cache is allocated. #tokens: 46611, K size: 1.42 GB, V size: 1.42 GB'''
>>> [start] = parse_log(log)
>>> start.kv_tokens, start.mem_fraction_static, start.tp_size
(46611, 0.85, 4)
>>> c = check_start(start, "qwen2.5-32b")
>>> (c.tokens_min, c.tokens_max), c.agrees, c.k_size_predicted
((46526, 46714), True, '1.42')
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fractions import Fraction

from .sglang import SGLangError, allocated_kv_bytes, cell_size_bytes, swa_pool_split, uses_hybrid_swa_pool
from .units import GiB
from .vllm.log import gib_window, strip_ansi

__all__ = ["SGLangLogError", "SGLangStart", "parse_log", "LogCheck", "check_start"]


class SGLangLogError(SGLangError):
    """An SGLang log (or a figure taken from one) cannot be used; the message says why."""


_FLT = r"(\d{1,9}(?:\.\d{1,15})?)"
_SIGNED = r"(-?\d{1,9}(?:\.\d{1,15})?)"      # a draft model's load can print a negative "mem usage"
_RANK = re.compile(r"\bTP(\d{1,5})\b")
_LINES = {
    "server_args": re.compile(r"server_args=ServerArgs\((.*)\)\s*$"),
    "begin": re.compile(r"Load weight begin\. avail mem=" + _FLT + r" GB"),
    "end": re.compile(r"Load weight end\..*?\bavail mem=" + _FLT + r" GB(?:, mem usage=" + _SIGNED + r" GB)?"),
    "kv": re.compile(r"(?<![\w])KV Cache is allocated\.(?: dtype: (\S+),)?(?: #tokens: (\d{1,12}),?)?"
                     r"(?: K size: " + _FLT + r" GB, V size: " + _FLT + r" GB| KV size: " + _FLT + r" GB)?"),
    "swa": re.compile(r"[Ss]liding window memory pool\. full_layer_tokens=(\d{1,12}).*?swa_layer_tokens=(\d{1,12})"),
    "pool_end": re.compile(r"Memory pool end\. avail mem=" + _FLT + r" GB"),
    "max_total": re.compile(r"(?<![\w.])max_total_num_tokens=(\d{1,12})"),
}
def _flag(text: str) -> bool:
    if text not in ("True", "False"):
        raise ValueError(text)
    return text == "True"


_ARG = {   # server_args fields read, with their parser
    "mem_fraction_static": float, "tp_size": int, "pp_size": int, "dp_size": int, "page_size": int,
    "kv_cache_dtype": str, "swa_full_tokens_ratio": float, "hicache_ratio": float, "hicache_size": int,
    "model_path": str, "attention_backend": str, "max_total_tokens": int, "enable_dp_attention": _flag,
    "chunked_prefill_size": int, "speculative_algorithm": str,
}


@dataclass(frozen=True)
class SGLangStart:
    """One server start's KV-cache figures, as printed (GiB figures as their text, e.g. '21.63')."""

    server_args: dict = field(default_factory=dict)   # the fields of _ARG the start printed (None: printed None)
    free_before_load_text: str | None = None          # smallest "Load weight begin. avail mem" over the ranks
    free_after_load_text: str | None = None           # smallest "Load weight end ... avail mem"
    weight_mem_usage_text: str | None = None          # "mem usage" of that rank's last load (0.4.3 on)
    kv_dtype: str | None = None
    kv_tokens: int | None = None                      # "KV Cache is allocated. #tokens"
    k_size_text: str | None = None
    v_size_text: str | None = None
    kv_size_text: str | None = None                   # MLA's one latent buffer
    full_layer_tokens: int | None = None
    swa_layer_tokens: int | None = None
    pool_end_text: str | None = None                  # smallest "Memory pool end. avail mem"
    max_total_num_tokens: int | None = None
    ranks: int = 0                                    # TP ranks that printed a load line

    @property
    def mem_fraction_static(self):
        return self.server_args.get("mem_fraction_static")

    @property
    def tp_size(self):
        return self.server_args.get("tp_size")

    @property
    def tokens(self) -> int | None:
        """The pool's tokens: the scheduler's ``max_total_num_tokens``, else the allocation line's ``#tokens``."""
        return self.max_total_num_tokens if self.max_total_num_tokens is not None else self.kv_tokens


def _server_args(body: str) -> dict:
    out = {}
    for name, kind in _ARG.items():
        m = re.search(r"(?<![\w])" + name + r"=('(?:[^'\\]|\\.){0,400}'|[^,()]{1,40})", body)
        if not m:
            continue
        raw = m.group(1).strip()
        if raw == "None":
            out[name] = None
            continue
        raw = raw.strip("'")
        try:
            out[name] = kind(raw)
        except ValueError:
            raise SGLangLogError(f"server_args field {name}={m.group(1)!r} cannot be read "
                                 f"({'True or False' if kind is _flag else 'a ' + kind.__name__} expected)") from None
    return out


class _Builder:
    def __init__(self):
        self.args, self.begin, self.end, self.usage, self.pool_end = {}, {}, {}, {}, {}
        self.kv = {}
        self.swa = self.max_total = None

    def empty(self) -> bool:
        return not (self.args or self.begin or self.end or self.kv or self.max_total is not None)

    def sized(self) -> bool:
        return bool(self.kv) or self.max_total is not None or self.swa is not None

    def build(self) -> SGLangStart:
        def smallest(d):
            return min(d.values(), key=Fraction) if d else None
        after = smallest(self.end)
        after_rank = next((r for r, v in self.end.items() if v == after), None)
        kv = self.kv.get(0) or (next(iter(self.kv.values())) if self.kv else {})
        return SGLangStart(
            server_args=self.args, free_before_load_text=smallest(self.begin), free_after_load_text=after,
            weight_mem_usage_text=self.usage.get(after_rank), kv_dtype=kv.get("dtype"), kv_tokens=kv.get("tokens"),
            k_size_text=kv.get("k"), v_size_text=kv.get("v"), kv_size_text=kv.get("kv"),
            full_layer_tokens=self.swa[0] if self.swa else None, swa_layer_tokens=self.swa[1] if self.swa else None,
            pool_end_text=smallest(self.pool_end), max_total_num_tokens=self.max_total,
            ranks=len(set(self.begin) | set(self.end)))


def parse_log(text: str) -> list:
    """One ``SGLangStart`` per server start in ``text``: a new one at each ``server_args=`` line, or when a
    rank begins loading again after the pool was sized. One-line ``SGLangLogError`` when no line is found."""
    if not isinstance(text, str):
        raise SGLangLogError(f"an SGLang log must be text, got {type(text).__name__}")
    starts, cur = [], _Builder()
    for raw in strip_ansi(text).splitlines():
        line = raw.strip()
        m = _LINES["server_args"].search(line)
        if m:
            if not cur.empty():
                starts.append(cur.build())
                cur = _Builder()
            cur.args = _server_args(m.group(1))
            continue
        rank_m = _RANK.search(line.split("]", 1)[0]) if "]" in line else None
        rank = int(rank_m.group(1)) if rank_m else 0
        if m := _LINES["begin"].search(line):
            if cur.sized():
                starts.append(cur.build())
                cur = _Builder()
            cur.begin.setdefault(rank, m.group(1))      # the first load on a rank: the target's
        elif m := _LINES["end"].search(line):
            cur.end[rank] = m.group(1)                   # the last: after a draft model, if any
            if m.group(2):
                cur.usage[rank] = m.group(2)
        elif m := _LINES["kv"].search(line):
            dtype, tokens, k, v, kv = m.groups()
            cur.kv[rank] = {"dtype": dtype, "tokens": int(tokens) if tokens else None, "k": k, "v": v, "kv": kv}
        elif m := _LINES["swa"].search(line):
            cur.swa = (int(m.group(1)), int(m.group(2)))
        elif m := _LINES["pool_end"].search(line):
            cur.pool_end[rank] = m.group(1)
        elif m := _LINES["max_total"].search(line):
            cur.max_total = int(m.group(1))
    if not cur.empty():
        starts.append(cur.build())
    if not starts:
        raise SGLangLogError("no SGLang startup line found (looked for 'server_args=', 'Load weight begin', "
                             "'KV Cache is allocated', 'max_total_num_tokens=')")
    return starts


@dataclass(frozen=True)
class LogCheck:
    """What ``kvlib.sglang`` predicts for one start, beside what it printed."""

    tokens_min: int                # the fewest tokens the two printed free-memory figures allow
    tokens_max: int                # the most
    tokens_logged: int | None
    agrees: bool                   # the printed count lies in [tokens_min, tokens_max]
    cell_bytes: int
    k_size_predicted: str | None   # from the printed count, as the log prints it ('1.42'); MHA/GQA
    kv_size_predicted: str | None  # MLA
    sizes_agree: bool | None       # the printed K/V (or KV) size equals the prediction; None if none printed
    inputs: dict = field(default_factory=dict)


def _setting(start: SGLangStart, name: str, given, default):
    if given is not None:
        return given
    value = start.server_args.get(name)
    return default if value is None else value


def check_start(start: SGLangStart, model, *, mem_fraction_static: float | None = None, tp: int | None = None,
                page_size: int | None = None, kv_cache_dtype: str | None = None) -> LogCheck:
    """Predict the start's pool from its two free-memory figures and compare.

    ``floor((free_after - free_before x (1 - mem_fraction_static)) / cell)`` over every byte count each
    printed figure can stand for (``gib_window``), rounded down to a page. Settings not given are read from the start's
    ``server_args`` (``tp_size`` 1, ``page_size`` 1, ``kv_cache_dtype`` 'auto' when it printed none);
    ``mem_fraction_static`` must be printed or given. A start without both load lines is refused.
    """
    f = _setting(start, "mem_fraction_static", mem_fraction_static, None)
    if f is None:
        raise SGLangLogError("the log prints no mem_fraction_static (server_args); pass mem_fraction_static")
    tp = _setting(start, "tp_size", tp, 1)
    page = _setting(start, "page_size", page_size, 1)
    dtype = _setting(start, "kv_cache_dtype", kv_cache_dtype, "auto")
    if start.free_before_load_text is None or start.free_after_load_text is None:
        raise SGLangLogError("the log lacks a 'Load weight begin' or 'Load weight end' line: the pool cannot be "
                             "predicted without both free-memory figures")
    before_lo, before_hi = gib_window(start.free_before_load_text)
    after_lo, after_hi = gib_window(start.free_after_load_text)
    keep = 1 - Fraction(str(f))
    budget_lo = after_lo - before_hi * keep
    budget_hi = after_hi - before_lo * keep
    budget_lo, budget_hi = max(int(budget_lo), 0), max(int(budget_hi), 0)
    if uses_hybrid_swa_pool(model):
        ratio = _setting(start, "swa_full_tokens_ratio", None, 0.8)
        lo, hi = (swa_pool_split(model, budget, tp=tp, page_size=page, kv_cache_dtype=dtype,
                                 swa_full_tokens_ratio=ratio)[0] for budget in (budget_lo, budget_hi))
        cell = 0
    else:
        cell = cell_size_bytes(model, tp=tp, kv_cache_dtype=dtype)
        lo, hi = (budget // cell // page * page for budget in (budget_lo, budget_hi))
    logged = start.tokens
    k_pred = kv_pred = None
    sizes_agree = None
    if logged and cell:
        sizes = allocated_kv_bytes(model, logged, tp=tp, page_size=page, kv_cache_dtype=dtype)
        if "k" in sizes:
            k_pred = f"{sizes['k'] / GiB:.2f}"
            if start.k_size_text is not None:
                sizes_agree = start.k_size_text == k_pred and start.v_size_text == f"{sizes['v'] / GiB:.2f}"
        else:
            kv_pred = f"{sizes['kv'] / GiB:.2f}"
            if start.kv_size_text is not None:
                sizes_agree = start.kv_size_text == kv_pred
    return LogCheck(tokens_min=lo, tokens_max=hi, tokens_logged=logged,
                    agrees=logged is not None and lo <= logged <= hi, cell_bytes=cell, k_size_predicted=k_pred,
                    kv_size_predicted=kv_pred, sizes_agree=sizes_agree,
                    inputs={"mem_fraction_static": f, "tp": tp, "page_size": page, "kv_cache_dtype": dtype})
