"""Read a vLLM startup log: what each engine start printed about its KV cache.

``parse_log(text)`` returns one frozen ``EngineStart`` per engine start found
in the text, for any vLLM from 0.2 to 0.34, V0 or V1 engine. Every figure is
kept *as the log prints it* (``None`` where it prints none); nothing is
computed here except the integer byte count a printed GiB figure stands for.

Lines understood (the message part; any prefix is stripped first)::

    Initializing an LLM engine (v0.6.4) with config: model='...', dtype=torch.bfloat16,
        max_seq_len=8192, tensor_parallel_size=16, pipeline_parallel_size=1, kv_cache_dtype=auto ...
    vLLM API server version 0.8.5
    # GPU blocks: 76240, # CPU blocks: 7281          (V0; also '# cuda blocks', '# CUDA blocks',
    GPU blocks: 1952, # CPU blocks: 2048                and a line that lost its leading '# ')
    # GPU blocks: 4739                               (V1 0.7.3)
    Memory profiling results: total_gpu_memory=23.58GiB ... kv_cache_size=3.81GiB gpu_memory_utilization=0.90
    the current vLLM instance can use total_gpu_memory (79.19GiB) x gpu_memory_utilization (0.90) = 71.27GiB
    model weights take 12.55GiB; non_torch_memory takes 0.16GiB; PyTorch activation peak memory
        takes 2.38GiB; the rest of the memory reserved for KV Cache is 56.18GiB.
    Loading model weights took 14.9888 GB            ('GB' here is really GiB)
    Model loading took 14.9889 GiB and 3.652170 seconds
    Available KV cache memory: 69.66 GiB
    GPU KV cache size: 158,656 tokens
    Maximum concurrency for 32,768 tokens per request: 4.84x
    GPU KV cache size: 652,144 tokens, Maximum concurrency for 4,096 tokens per request: 159.21x  (0.33)
    CPU KV cache size: 240,941 tokens, Maximum concurrency for 1,000 tokens per request: 240.94x
    Explicitly set (1.0/16.84) GiB for KV cache on node 0.   (CPU backend: VLLM_CPU_KVCACHE_SPACE)
    kv cache group sizes (128, 128)                   (hybrid models: one block size per group)
    Using AMX_MLA backend.                            (the attention backend, first one printed)
    Chunked prefill is enabled with max_num_batched_tokens=4096.
    Setting attention block size to 384 tokens to ensure that attention page size is >= mamba page size.
    Padding mamba page size by 44.91% to ensure that mamba page size and attention page size are exactly equal.
    Mamba cache mode is set to 'align' for Qwen3NextForCausalLM by default when prefix caching is enabled
    Reset SSM cache type to float32 for accelerated GDN mamba backend 'none'.   (CPU build, AVX-512 BF16)
    Updating mamba_ssm_cache_dtype to 'float32' for NemotronH model
    The model's max seq len (29000) is larger than the maximum number of tokens that can be
        stored in KV cache (23648).                  (the second number is the token capacity)
    Memory after warmup: 5.1 GiB free, 0.01 GiB committed to the KV cache, 2.6 GiB kept for transient
        activations (2.6 GiB allocated at peak, 0.0 GiB of torch reservation growth); 3970 KV cache blocks
        (62.03 GiB) fit within the requested 79.18 GiB. Torch may reserve up to 8.77 GiB.   (0.34, measured)
    Extended KV cache to 3970 blocks (62.03 GiB).    (0.34's extensible KV cache, after warmup)
    Disabling the extensible KV cache: <reason>. The KV cache will be sized from profiling estimates ...

**How the pool was sized** (``pool_sizing``). Through 0.33 vLLM sized it from an estimate: a profiling
run before the cache exists, then ``ceil(total x utilization)`` less what the run took ('estimate').
0.34 on CUDA and ROCm measures it instead ('measured': ``vllm/v1/worker/extensible_kv_cache.py``):
it reserves the address range, warms up and captures CUDA graphs, then sizes the pool from the memory
still free, and prints the 'Memory after warmup' and 'Extended KV cache to' lines. Those lines come
before the capacity line ("GPU KV cache size ...", ``kv_cache_planning.py``
``finalize_extensible_kv_cache``); a start whose capacity came with neither was sized by estimate (V0,
the CPU build, ``--kv-cache-memory``, an extensible cache disabled for a KV connector or an override,
or an excerpt that left the lines out). In a measured start the "Available KV cache memory" line is
the profiling estimate that sized the reservation (``estimated_kv_cache_text``), and the available
figure this reader reports is the measured one the blocks were counted from.

Prefixes stripped: ANSI colour codes, docker-compose ``name-1  | ``, a pasted
``>> `` marker, and process tags such as ``(VllmWorker rank=1 pid=7)``,
``(VllmWorkerProcess pid=7)``, ``(EngineCore_DP0 pid=7)`` -- the process tag
identifies the rank that printed a per-rank figure.

**Device.** ``'cpu'`` when the start prints vLLM's CPU-backend lines (``CPU KV
cache size``, ``Explicitly set (...) GiB for KV cache``, ``device_config=cpu``),
``'gpu'`` for ``GPU KV cache size``, else None. The CPU token count is kept in
``gpu_kv_cache_tokens`` like the GPU one (its source says which line printed it);
``kvlib.vllm.cpu`` predicts the CPU backend's figures.

**Engine starts.** A new start begins at an engine-config line, or when a
figure arrives that the current start already holds (a second block line, a
second capacity line, a second available-memory line from the same rank, or
any start-up line once the current start has been sized). Several ranks
printing their own figure belong to one start; the pool is sized by the
*smallest* available figure, so that is the one reported.

**Engine.** ``'v0'`` or ``'v1'`` from the engine-config line when it names
one, else from the printed version (< 0.7 is V0, >= 0.11 is V1), else from
the line formats (block lines with CPU blocks, the profiling summaries and the
max-seq-len error are V0; available-memory and KV-cache-size lines are V1);
``None`` when the start's lines carry no engine-specific format at all.

Taught in ch08_vllm_lab, where vLLM's own figures are checked. Worked example:

>>> log = '''INFO 03-21 20:15:45 [worker.py:267] the current vLLM instance can use total_gpu_memory (79.19GiB) x gpu_memory_utilization (0.90) = 71.27GiB
... INFO 03-21 20:15:45 [worker.py:267] model weights take 12.55GiB; non_torch_memory takes 0.16GiB; PyTorch activation peak memory takes 2.38GiB; the rest of the memory reserved for KV Cache is 56.18GiB.
... INFO 03-21 20:15:46 [executor_base.py:111] # cuda blocks: 7191, # CPU blocks: 512'''
>>> [start] = parse_log(log)
>>> start.engine, start.num_gpu_blocks, start.available_kv_cache_text
('v0', 7191, '56.18')
>>> start.available_kv_cache_bytes      # round(56.18 * 2**30)
60322815672
"""  # noqa: E501

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from ..units import GiB
from .engine import V0, V1, VllmLogError, parse_version

__all__ = ["VllmLogError", "EngineStart", "parse_log", "parse_version", "gib_window", "rank_number", "StatsLine",
           "parse_stats_line", "stats_lines", "STATS_SOURCE_LINES"]


# --- numbers -----------------------------------------------------------------
# Bounded so that no text can produce an overflowing or infinite figure.
_INT = r"(?<![\d.])(\d{1,3}(?:,\d{3}){1,8}|\d{1,24})(?!\d)"
_FLT = r"(?<![\d.])(\d{1,15}(?:\.\d{1,15})?)(?![\d.]\d)"


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def gib_window(text: str) -> tuple[int, int]:
    """Whole bytes a GiB figure printed to two decimals can stand for: [lo, hi], both inclusive.

    A printed X covers [(X - 0.005) * 2^30, (X + 0.005) * 2^30) -- exactly
    the rounding window of ``%.2f`` / ``round(x, 2)``, never widened. A figure
    printed with more decimals gets half a unit of its last decimal.

    >>> lo, hi = gib_window("3.81")
    >>> lo, hi            # ceil(3.805 * 2**30), ceil(3.815 * 2**30) - 1
    (4085587641, 4096325058)
    """
    value = Fraction(text)
    decimals = len(text.split(".", 1)[1]) if "." in text else 0
    half = Fraction(1, 200) if decimals <= 2 else Fraction(1, 2 * 10**decimals)
    lo = max(0, -((-(value - half) * GiB) // 1))          # ceil, never below 0
    hi_exclusive = -((-(value + half) * GiB) // 1)        # ceil of the open end
    return int(lo), int(hi_exclusive) - 1


# --- line cleaning -------------------------------------------------------------
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
_COMPOSE = re.compile(r"^[A-Za-z0-9][\w.-]{0,80}\s+\|\s?")           # docker compose 'qwen3-1  | '
_QUOTE = re.compile(r"^>+\s?")                                          # '>> ' pasted marker
# _PROC and _RANK are used with .match(line, pos): anchored at pos, so no '^'.
_PROC = re.compile(r"\(([^()]{0,120}?\bpid=\d{1,12}[^()]{0,120})\)\s*")  # '(VllmWorker rank=1 pid=7)'
_RANK = re.compile(r"\[rank(\d{1,6})\]:\s*")                           # torchrun '[rank1]: '
_HEADER = re.compile(r"\b(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL)\s{1,4}\d\d-\d\d\s{1,4}\d\d:\d\d:\d\d")


def strip_ansi(text: str) -> str:
    """``text`` without terminal colour codes (vLLM colours its log prefixes on a terminal).

    >>> strip_ansi("\x1b[0;36m(EngineCore pid=7)\x1b[0;0m INFO")
    '(EngineCore pid=7) INFO'
    """
    return _ANSI.sub("", text)


def _clean(raw: str):
    """(message, process tag or None, has a log header) for one raw line."""
    line = strip_ansi(raw).strip()
    line = _COMPOSE.sub("", line, count=1)
    line = _QUOTE.sub("", line, count=1).lstrip()
    tag, pos = None, 0
    while True:     # nested tags ('[rank1]: (VllmWorker rank=1 pid=7) '): the innermost is the printer
        match = _PROC.match(line, pos) or _RANK.match(line, pos)
        if not match:
            break
        tag = " ".join(match.group(1).split()) if match.re is _PROC else f"rank={match.group(1)}"
        pos = match.end()     # a position, not a slice per tag: a line of many tags stays linear
    line = line[pos:]
    return line, tag, bool(_HEADER.search(line))


# --- line formats ------------------------------------------------------------------
_CONFIG = re.compile(r"Initializing an? (?:(V[01]) )?LLM engine(?: \(v([^()\s]{1,80})\))? with config:(.*)")
_VERSION = re.compile(r"\bvLLM (?:API server )?version:? v?(\d{1,4}\.\d{1,4}[\w.+-]{0,60})")
_V0_BLOCKS = re.compile(r"\b([A-Za-z]{2,10}) blocks: " + _INT + r", #\s?CPU blocks: " + _INT)
_V1_BLOCKS = re.compile(r"#\s?GPU blocks: " + _INT + r"\s*$")
_TOKENS = re.compile(r"\b([GC]PU) KV cache size: " + _INT + r" tokens")
_CONCURRENCY = re.compile(r"Maximum concurrency for " + _INT + r" tokens per request: " + _FLT + r"x")
_AVAILABLE = re.compile(r"Available KV cache memory: " + _FLT + r" ?GiB")
_RESERVED = re.compile(r"reserved " + _FLT + r" ?GiB memory for KV Cache as specified by kv_cache_memory_bytes")
_SUMMARY_TOTAL = re.compile(r"total_gpu_memory \(" + _FLT + r" ?GiB\) x gpu_memory_utilization \(" + _FLT
                            + r"\) = " + _FLT + r" ?GiB")
_SUMMARY_KV = re.compile(r"the rest of the memory reserved for KV Cache is " + _FLT + r" ?GiB")
_SUMMARY_WEIGHTS = re.compile(r"model weights take " + _FLT + r" ?GiB")
_SUMMARY_NON_TORCH = re.compile(r"non_torch_memory takes " + _FLT + r" ?GiB")
_SUMMARY_ACTIVATION = re.compile(r"PyTorch activation peak memory takes " + _FLT + r" ?GiB")
_RESULTS = re.compile(r"Memory profiling results:(.*)")
_RESULTS_FIELD = re.compile(r"\b(\w{1,40}) ?= ?" + _FLT + r" ?(?:GiB|Gib|GB)?", re.IGNORECASE)
_WEIGHTS_OLD = re.compile(r"Loading model weights took " + _FLT + r" ?(GB|GiB|MB|MiB)\b")
_WEIGHTS = re.compile(r"Model loading took " + _FLT + r" ?(GiB|GB)\b")
_ERROR_CAPACITY = re.compile(r"max seq len \(" + _INT + r"\) is larger than the maximum number of tokens "
                             r"that can be stored in KV cache \(" + _INT + r"\)")
_V1_NEEDED = re.compile(r"max seq len \(" + _INT + r"\), \(" + _FLT + r" ?GiB KV cache is needed")
_OVERRIDE = re.compile(r"Overriding num_gpu_blocks=" + _INT + r" with num_gpu_blocks_override=" + _INT)
_BLOCK_SIZE_SET = re.compile(r"(?:[Ff]orcing kv cache block size to|[Ss]etting attention block size to) "
                             r"(\d{1,6})(?!\d)")
_CUDAGRAPH = re.compile(r"Estimated CUDA graph memory: " + _FLT + r" ?GiB")
_CPU_SPACE = re.compile(r"Explicitly set \(" + _FLT + r"/" + _FLT + r"\) ?GiB for KV cache")
_GROUP_BLOCK_SIZES = re.compile(r"kv cache group sizes \((\d{1,6}(?:, ?\d{1,6}){0,200})\)")
_BACKEND = re.compile(r"(?:^|\] )Using (\w{1,60}) backend\.?$")
_BATCHED = re.compile(r"max_num_batched_tokens=(\d{1,12})(?!\d)")
# State hybrids (Mamba2, Gated DeltaNet): platforms/interface.py _align_hybrid_block_size, models/config.py,
# platforms/cpu.py check_and_update_config.
# 0.34's extensible KV cache (vllm/v1/worker/extensible_kv_cache.py measure_kv_cache_blocks, extend_kv_cache;
# v1/executor/abstract.py disable_extensible_kv_cache).
_WARMUP = re.compile(r"Memory after warmup: " + _FLT + r" ?GiB free, " + _FLT + r" ?GiB committed to the KV cache, "
                     + _FLT + r" ?GiB kept for transient activations \(" + _FLT + r" ?GiB allocated at peak, " + _FLT
                     + r" ?GiB of torch reservation growth\); " + _INT + r" KV cache blocks \(" + _FLT
                     + r" ?GiB\) fit within the requested " + _FLT + r" ?GiB")
_EXTENDED = re.compile(r"Extended KV cache to " + _INT + r" blocks \(" + _FLT + r" ?GiB\)")
_EXTENSIBLE_OFF = re.compile(r"(?:Disabling the extensible KV cache: (.{1,300}?)\. The KV cache will be sized"
                             r"|Extensible KV cache (off): )")
_MAMBA_PADDING = re.compile(r"Padding mamba page size by (\d{1,6}\.\d{1,4})%")
_MAMBA_MODE = re.compile(r"Mamba cache mode is set to '(\w{1,20})'")
_SSM_DTYPE = re.compile(r"(?:Reset SSM cache type to (float32)\b|Updating mamba_ssm_cache_dtype to '(\w{1,20})'"
                        r"|Using (\w{1,20}) SSM state storage for the CPU)")

_CONFIG_FIELDS = {
    "model": re.compile(r"(?:^|[\s,(])model='([^']{0,300})'"),
    "dtype": re.compile(r"(?:^|[\s,(])dtype=(?:torch\.)?(\w{1,30})"),
    "max_seq_len": re.compile(r"(?:^|[\s,(])max_seq_len=(\d{1,12})(?!\d)"),
    "tensor_parallel_size": re.compile(r"(?:^|[\s,(])tensor_parallel_size=(\d{1,6})(?!\d)"),
    "pipeline_parallel_size": re.compile(r"(?:^|[\s,(])pipeline_parallel_size=(\d{1,6})(?!\d)"),
    "kv_cache_dtype": re.compile(r"(?:^|[\s,(])kv_cache_dtype=['\"]?(\w{1,30})"),
    "block_size": re.compile(r"(?:^|[\s,(])block_size=(\d{1,6})(?!\d)"),
    "enforce_eager": re.compile(r"(?:^|[\s,(])enforce_eager=(True|False)"),
    "device_config": re.compile(r"(?:^|[\s,(])device_config=(\w{1,20})"),
    "enable_prefix_caching": re.compile(r"(?:^|[\s,(])enable_prefix_caching=(True|False)"),
}
# A line holding none of these words and no '=' can match no pattern above: skipped unread (speed only).
_KEYWORDS = ("blocks", "tokens", "GiB", "GB", "MB", "MiB", "engine", "version", "profiling", "KV", "block size",
             "max seq len", "backend", "kv cache group", "amba", "xtensible")


# --- the result ------------------------------------------------------------------
@dataclass(frozen=True)
class EngineStart:
    """What one vLLM engine start printed about its KV cache (``None`` = not printed).

    Figures are as printed; with several ranks the *smallest* available
    figure, block count, token capacity and concurrency are kept, since the
    engine sizes its pool from the smallest rank. ``first_line`` and
    ``last_line`` are 1-based line numbers in the text.
    """

    index: int
    first_line: int
    last_line: int
    engine: str | None
    engine_evidence: str
    vllm_version: str | None
    model: str | None
    dtype: str | None
    kv_cache_dtype: str | None
    tensor_parallel_size: int | None
    pipeline_parallel_size: int | None
    block_size: int | None
    block_size_line: str | None
    enforce_eager: bool | None
    max_model_len: int | None
    max_model_len_source: str | None
    available_kv_cache_text: str | None
    available_kv_cache_source: str | None
    available_kv_cache_by_rank: tuple
    num_gpu_blocks: int | None
    num_gpu_blocks_computed: int | None
    num_cpu_blocks: int | None
    gpu_kv_cache_tokens: int | None
    gpu_kv_cache_tokens_source: str | None
    max_concurrency: float | None
    max_concurrency_text: str | None
    combined_capacity_line: bool
    model_weights_gib: float | None
    model_weights_text: str | None
    total_gpu_memory_gib: float | None
    gpu_memory_utilization: float | None
    non_torch_gib: float | None
    activation_peak_gib: float | None
    peak_torch_gib: float | None
    cudagraph_estimate_gib: float | None
    kv_cache_needed_gib: float | None
    num_ranks_reporting: int
    device: str | None = None                       # 'cpu' | 'gpu' | None (see the module docstring)
    kv_cache_group_block_sizes: tuple | None = None  # 'kv cache group sizes (128, 128)', hybrid models
    attention_backend: str | None = None            # the first 'Using X backend.' line
    max_num_batched_tokens: int | None = None       # 'Chunked prefill is enabled with max_num_batched_tokens=N'
    mamba_cache_mode: str | None = None             # 'Mamba cache mode is set to ...' (state hybrids)
    mamba_ssm_cache_dtype: str | None = None        # the SSM state dtype the engine said it chose
    mamba_padding_text: str | None = None           # 'Padding mamba page size by X%', as printed
    enable_prefix_caching: bool | None = None       # the engine-config line's enable_prefix_caching
    pool_sizing: str | None = None                  # 'measured' (0.34's extensible cache) | 'estimate' | None
    pool_sizing_evidence: str | None = None         # the line(s) that say which
    estimated_kv_cache_text: str | None = None      # measured starts: the 'Available KV cache memory' estimate
    measured_kv_cache_blocks: int | None = None     # measured starts: 'N KV cache blocks (X GiB) fit ...'
    requested_memory_gib: float | None = None       # measured starts: '... fit within the requested R GiB'

    @property
    def available_kv_cache_gib(self) -> float | None:
        """The smallest rank's available-KV figure in GiB, as printed."""
        return None if self.available_kv_cache_text is None else float(self.available_kv_cache_text)

    @property
    def available_kv_cache_bytes(self) -> int | None:
        """Bytes the printed GiB figure stands for: round(X * 2^30)."""
        if self.available_kv_cache_text is None:
            return None
        return round(Fraction(self.available_kv_cache_text) * GiB)

    def available_kv_cache_window(self) -> tuple[int, int] | None:
        """[lo, hi] whole bytes the printed figure can stand for (see ``gib_window``)."""
        if self.available_kv_cache_text is None:
            return None
        return gib_window(self.available_kv_cache_text)

    @property
    def version_tuple(self) -> tuple[int, int, int] | None:
        return parse_version(self.vllm_version)


# --- the parser ------------------------------------------------------------------
class _Builder:
    def __init__(self, index: int, line_no: int):
        self.index, self.first_line, self.last_line = index, line_no, line_no
        self.engine_label = None
        self.version = None
        self.config: dict = {}
        self.has_config = False
        self.votes = {V0: [], V1: []}
        self.per_rank: dict = {}        # kind -> {rank: value}
        self.blocks = None
        self.cpu_blocks = None
        self.computed_blocks = None
        self.tokens: list = []
        self.capacity_error = None
        self.concurrency: list = []     # (max_model_len, text)
        self.mml = {}                   # source -> value
        self.block_size = None
        self.block_size_line = None
        self.combined = False
        self.needed_gib = None
        self.device = None
        self.group_block_sizes = None
        self.backend = None
        self.batched = None
        self.mamba_mode = None
        self.ssm_dtype = None
        self.mamba_padding = None
        self.capacity_before_warmup = False   # a capacity figure arrived before any 'Memory after warmup' line
        self.extensible_off = None             # why 0.34's extensible KV cache was off, as printed

    def capacity(self):
        """A block or token capacity was printed: before a 'Memory after warmup' line, the pool was estimated."""
        if not self.per_rank.get("warmup"):
            self.capacity_before_warmup = True

    def sized(self) -> bool:
        return self.blocks is not None or bool(self.tokens) or self.capacity_error is not None

    def has_figures(self) -> bool:
        return self.sized() or bool(self.per_rank) or bool(self.concurrency) or self.block_size is not None

    def keep(self) -> bool:
        return self.has_config or self.has_figures()

    def rank_has(self, kind: str, rank) -> bool:
        return rank in self.per_rank.get(kind, {})

    def put(self, kind: str, rank, value):
        self.per_rank.setdefault(kind, {})[rank] = value

    def world_size(self) -> int:
        tp = self.config.get("tensor_parallel_size") or 1
        pp = self.config.get("pipeline_parallel_size") or 1
        return max(1, tp) * max(1, pp)

    def vote(self, engine: str, why: str):
        if why not in self.votes[engine]:
            self.votes[engine].append(why)

    # -- freeze --------------------------------------------------------------
    def _min_rank(self, kind):
        values = self.per_rank.get(kind)
        if not values:
            return None
        return min(values.values(), key=lambda v: Fraction(v[0]))

    def _max_rank(self, kind):
        values = self.per_rank.get(kind)
        if not values:
            return None
        return max(values.values(), key=lambda v: Fraction(v[0]))

    def _engine(self):
        if self.engine_label:
            return self.engine_label.lower(), f"engine-config line names {self.engine_label}"
        version = parse_version(self.version)
        if version is not None and version < (0, 7, 0):
            return V0, f"version {self.version} predates the V1 engine"
        if version is not None and version >= (0, 11, 0):
            return V1, f"version {self.version} has no V0 engine"
        v0, v1 = self.votes[V0], self.votes[V1]
        if len(v0) > len(v1):
            return V0, "V0 line formats: " + "; ".join(v0)
        if len(v1) > len(v0):
            return V1, "V1 line formats: " + "; ".join(v1)
        if v0:
            return None, "conflicting formats: V0 " + "; ".join(v0) + " / V1 " + "; ".join(v1)
        return None, "no engine-specific line"

    def freeze(self) -> EngineStart:
        engine, evidence = self._engine()
        available = self._min_rank("available")
        weights = self._max_rank("weights")
        total = self._min_rank("total")
        non_torch = self._max_rank("non_torch")
        activation = self._max_rank("activation")
        peak = self._max_rank("peak_torch")
        graph = self._max_rank("cudagraph")
        conc = min(self.concurrency, key=lambda c: Fraction(c[1])) if self.concurrency else None
        if self.tokens:
            tokens, tokens_source = min(self.tokens), f"{self.device.upper()} KV cache size line"
        elif self.capacity_error is not None:
            tokens, tokens_source = self.capacity_error, "max seq len error"
        else:
            tokens, tokens_source = None, None
        mml, mml_source = None, None
        for source in ("concurrency line", "max seq len error", "engine config", "KV cache needed error"):
            if source in self.mml:
                mml, mml_source = self.mml[source], source
                break
        ranks = {rank for values in self.per_rank.values() for rank in values}
        sizing, sizing_why = self._pool_sizing(engine)
        estimated = self._min_rank("estimated")
        warmup = self._min_rank("warmup")
        return EngineStart(
            index=self.index, first_line=self.first_line, last_line=self.last_line,
            engine=engine, engine_evidence=evidence,
            vllm_version=self.version,
            model=self.config.get("model"), dtype=self.config.get("dtype"),
            kv_cache_dtype=self.config.get("kv_cache_dtype"),
            tensor_parallel_size=self.config.get("tensor_parallel_size"),
            pipeline_parallel_size=self.config.get("pipeline_parallel_size"),
            block_size=self.block_size, block_size_line=self.block_size_line,
            enforce_eager=self.config.get("enforce_eager"),
            max_model_len=mml, max_model_len_source=mml_source,
            available_kv_cache_text=available[0] if available else None,
            available_kv_cache_source=available[1] if available else None,
            available_kv_cache_by_rank=tuple(sorted((rank or "", value[0]) for rank, value
                                                    in self.per_rank.get("available", {}).items())),
            num_gpu_blocks=self.blocks, num_gpu_blocks_computed=self.computed_blocks,
            num_cpu_blocks=self.cpu_blocks,
            gpu_kv_cache_tokens=tokens, gpu_kv_cache_tokens_source=tokens_source,
            max_concurrency=float(conc[1]) if conc else None,
            max_concurrency_text=conc[1] if conc else None,
            combined_capacity_line=self.combined,
            model_weights_gib=float(weights[0]) if weights and weights[1] in ("GB", "GiB") else None,
            model_weights_text=f"{weights[0]} {weights[1]}" if weights else None,
            total_gpu_memory_gib=float(total[0]) if total else None,
            gpu_memory_utilization=float(total[1]) if total and total[1] is not None else None,
            non_torch_gib=float(non_torch[0]) if non_torch else None,
            activation_peak_gib=float(activation[0]) if activation else None,
            peak_torch_gib=float(peak[0]) if peak else None,
            cudagraph_estimate_gib=float(graph[0]) if graph else None,
            kv_cache_needed_gib=float(self.needed_gib) if self.needed_gib is not None else None,
            num_ranks_reporting=len(ranks),
            device=self.device or ("cpu" if self.config.get("device_config") == "cpu" else None),
            kv_cache_group_block_sizes=self.group_block_sizes, attention_backend=self.backend,
            max_num_batched_tokens=self.batched, mamba_cache_mode=self.mamba_mode,
            mamba_ssm_cache_dtype=self.ssm_dtype, mamba_padding_text=self.mamba_padding,
            enable_prefix_caching=self.config.get("enable_prefix_caching"),
            pool_sizing=sizing, pool_sizing_evidence=sizing_why,
            estimated_kv_cache_text=estimated[0] if estimated else None,
            measured_kv_cache_blocks=int(warmup[1]) if warmup else None,
            requested_memory_gib=float(warmup[2]) if warmup else None,
        )

    def _pool_sizing(self, engine):
        """('measured' | 'estimate' | None, why) -- see the module docstring."""
        if self.per_rank.get("warmup") or self.per_rank.get("extended"):
            return "measured", "'Memory after warmup' / 'Extended KV cache to' lines (0.34's extensible KV cache)"
        if self.extensible_off:
            return "estimate", f"extensible KV cache off: {self.extensible_off}"
        if any(v[1] == "kv_cache_memory_bytes line" for v in self.per_rank.get("available", {}).values()):
            return "estimate", "--kv-cache-memory (kv_cache_memory_bytes) set"
        if engine == V0:
            return "estimate", "V0 engine"
        version = parse_version(self.version)
        if version is not None and version < (0, 34, 0):
            return "estimate", f"vLLM {self.version} predates the measured pool (0.34)"
        if self.device == "cpu":
            return "estimate", "the CPU build (no extensible KV cache off CUDA and ROCm)"
        if self.capacity_before_warmup:
            return "estimate", "a capacity line with no 'Memory after warmup' line before it"
        return None, None


def _config_fields(text: str) -> dict:
    fields = {}
    for name, pattern in _CONFIG_FIELDS.items():
        match = pattern.search(text)
        if not match:
            continue
        value = match.group(1)
        if name in ("max_seq_len", "tensor_parallel_size", "pipeline_parallel_size", "block_size"):
            value = int(value)
            if value < 1:
                continue
        elif name in ("enforce_eager", "enable_prefix_caching"):
            value = value == "True"
        fields[name] = value
    return fields


class _Parser:
    def __init__(self):
        self.done: list = []
        self.cur: _Builder | None = None
        self.line_no = 0

    def start(self, new: bool) -> _Builder:
        if self.cur is not None and new:
            if self.cur.keep():
                self.done.append(self.cur)
            self.cur = None
        if self.cur is None:
            self.cur = _Builder(len(self.done), self.line_no)
        self.cur.last_line = self.line_no
        return self.cur

    def presize(self, kind: str, rank) -> _Builder:
        """A start-up figure printed once per rank, before the pool is sized."""
        cur = self.cur
        new = cur is not None and (cur.sized() or cur.rank_has(kind, rank))
        return self.start(new)

    def finish(self) -> list[EngineStart]:
        if self.cur is not None and self.cur.keep():
            self.done.append(self.cur)
        return [b.freeze() for b in self.done]


def parse_log(text: str) -> list[EngineStart]:
    """Every engine start in a vLLM log, in order (an empty list when there is none).

    Raises ``VllmLogError`` (a ValueError) only when ``text`` is not a str;
    arbitrary text never raises anything else.

    >>> starts = parse_log("GPU blocks: 1952, # CPU blocks: 2048\\n"
    ...                    "Maximum concurrency for 20000 tokens per request: 1.56x\\n"
    ...                    "# GPU blocks: 1478, # CPU blocks: 2048\\n")
    >>> [(s.engine, s.num_gpu_blocks, s.max_model_len) for s in starts]
    [('v0', 1952, 20000), ('v0', 1478, None)]
    """
    if not isinstance(text, str):
        raise VllmLogError(f"parse_log takes the log as a str, not {type(text).__name__}")
    p = _Parser()
    prev_tag = None
    in_config = False
    for p.line_no, raw in enumerate(text.splitlines(), 1):
        line, tag, has_header = _clean(raw)
        if tag is None and not has_header:
            tag = prev_tag  # a continuation line of a multi-line message keeps its rank
        prev_tag = tag
        if not line:
            in_config = False
            continue
        was_config, in_config = in_config, False
        if not any(word in line for word in _KEYWORDS) and "=" not in line:
            continue
        _parse_line(p, line, tag, has_header, was_config)
        in_config = in_config or bool(_CONFIG.search(line))
    return p.finish()


# --- the line table: (patterns, handler) ----------------------------------------------
# A handler gets the parser, the match and the line's rank tag; it returns
# False when the match does not count (then the entry's next pattern is
# tried), anything else when it does. Entries run in order on every line.
def _on_version(p: _Parser, m, rank):
    cur = p.cur
    b = p.start(cur is not None and (cur.has_figures() or cur.version is not None))
    b.version = m.group(1)


def _on_blocks(p: _Parser, m, rank):
    if m.re is _V0_BLOCKS and m.group(1).upper() == "CPU":
        return False
    cur = p.cur
    b = p.start(cur is not None and (cur.blocks is not None or bool(cur.tokens)))
    b.capacity()
    if m.re is _V0_BLOCKS:
        b.blocks, b.cpu_blocks = _int(m.group(2)), _int(m.group(3))
        b.vote(V0, f"'# {m.group(1)} blocks: N, # CPU blocks: M'")
    else:
        b.blocks = _int(m.group(1))
        b.vote(V1, "'# GPU blocks: N' without CPU blocks (0.7.x)")


def _on_tokens(p: _Parser, m, rank):
    cur = p.cur
    new = cur is not None and (cur.blocks is not None or cur.capacity_error is not None
                               or len(cur.tokens) >= cur.world_size())
    b = p.start(new)
    b.capacity()
    b.tokens.append(_int(m.group(2)))
    b.device = m.group(1).lower()
    b.vote(V1, f"'{m.group(1)} KV cache size: N tokens'")
    if _CONCURRENCY.search(m.string):
        b.combined = True


def _on_concurrency(p: _Parser, m, rank):
    b = p.start(False)
    b.concurrency.append((_int(m.group(1)), m.group(2)))
    b.mml["concurrency line"] = min(c[0] for c in b.concurrency)


def _on_capacity_error(p: _Parser, m, rank):
    cur = p.cur
    b = p.start(cur is not None and cur.capacity_error is not None)
    b.capacity()
    b.capacity_error = _int(m.group(2))
    b.mml["max seq len error"] = _int(m.group(1))
    b.vote(V0, "max-seq-len-larger-than-KV-cache error")


def _on_needed(p: _Parser, m, rank):
    b = p.start(False)
    b.mml["KV cache needed error"] = _int(m.group(1))
    b.needed_gib = m.group(2)
    b.vote(V1, "'KV cache is needed' error")


def _on_override(p: _Parser, m, rank):
    b = p.start(False)
    b.computed_blocks = _int(m.group(1))


def _on_available(p: _Parser, m, rank):
    b = p.presize("available", rank)
    if m.re is _AVAILABLE:
        b.put("available", rank, (m.group(1), "Available KV cache memory line"))
        b.vote(V1, "'Available KV cache memory'")
    else:
        b.put("available", rank, (m.group(1), "kv_cache_memory_bytes line"))
        b.vote(V1, "kv_cache_memory_bytes line")


def _on_summary_kv(p: _Parser, m, rank):
    b = p.presize("available", rank)
    b.put("available", rank, (m.group(1), "V0 memory profiling summary"))
    b.vote(V0, "V0 memory-profiling summary")
    for kind, pattern in (("weights", _SUMMARY_WEIGHTS), ("non_torch", _SUMMARY_NON_TORCH),
                          ("activation", _SUMMARY_ACTIVATION)):
        f = pattern.search(m.string)
        if f:
            b.put(kind, rank, (f.group(1), "GiB"))


def _on_summary_total(p: _Parser, m, rank):
    b = p.presize("total", rank)
    b.put("total", rank, (m.group(1), m.group(2)))
    b.vote(V0, "V0 memory-profiling summary")


def _on_results(p: _Parser, m, rank):
    fields = {k.lower(): v for k, v in _RESULTS_FIELD.findall(m.group(1))}
    if "kv_cache_size" in fields:
        b = p.presize("available", rank)
        b.put("available", rank, (fields["kv_cache_size"], "V0 'Memory profiling results' line"))
    else:
        b = p.presize("total", rank)
    for field, kind in (("non_torch_memory", "non_torch"), ("peak_torch_memory", "peak_torch")):
        if field in fields:
            b.put(kind, rank, (fields[field], "GiB"))
    if "total_gpu_memory" in fields:
        b.put("total", rank, (fields["total_gpu_memory"], fields.get("gpu_memory_utilization")))
    b.vote(V0, "V0 'Memory profiling results' line")


def _on_weights(p: _Parser, m, rank):
    b = p.presize("load", rank)
    b.put("load", rank, True)
    if not b.rank_has("weights", rank):
        b.put("weights", rank, (m.group(1), m.group(2)))


def _on_block_size(p: _Parser, m, rank):
    if int(m.group(1)) < 1:
        return False
    b = p.presize("block_size", rank)
    b.put("block_size", rank, True)
    b.block_size, b.block_size_line = int(m.group(1)), m.string.strip()[:200]


def _on_cpu_space(p: _Parser, m, rank):
    b = p.presize("available", rank)
    b.put("available", rank, (m.group(1), "VLLM_CPU_KVCACHE_SPACE line (CPU backend)"))
    b.device = "cpu"
    b.vote(V1, "CPU worker's KV-space line")


def _on_group_block_sizes(p: _Parser, m, rank):
    b = p.start(False)
    b.group_block_sizes = tuple(int(x) for x in m.group(1).split(","))   # int() drops the spaces


# Settings printed before the pool is sized: a new start when the current one is already sized.
def _on_backend(p: _Parser, m, rank):
    b = p.start(p.cur is not None and p.cur.sized())
    b.backend = b.backend or m.group(1)


def _on_batched(p: _Parser, m, rank):
    b = p.start(p.cur is not None and p.cur.sized())
    b.batched = int(m.group(1))


def _on_mamba_mode(p: _Parser, m, rank):
    b = p.start(p.cur is not None and p.cur.sized())
    b.mamba_mode = m.group(1)


def _on_ssm_dtype(p: _Parser, m, rank):
    b = p.start(p.cur is not None and p.cur.sized())
    b.ssm_dtype = next(g for g in m.groups() if g)


def _on_mamba_padding(p: _Parser, m, rank):
    b = p.presize("mamba_padding", rank)
    b.put("mamba_padding", rank, True)
    b.mamba_padding = m.group(1)


def _on_warmup(p: _Parser, m, rank):
    """0.34's measured pool: the figure the blocks were counted from replaces the profiling estimate."""
    b = p.presize("warmup", rank)
    b.put("warmup", rank, (m.group(7), _int(m.group(6)), m.group(8)))    # (X GiB, N blocks, requested GiB)
    previous = b.per_rank.get("available", {}).get(rank)
    if previous is not None and not b.rank_has("estimated", rank):
        b.put("estimated", rank, previous)
    b.put("available", rank, (m.group(7), "'Memory after warmup' line (measured after warmup, 0.34)"))
    b.vote(V1, "'Memory after warmup' line (0.34 extensible KV cache)")


def _on_extended(p: _Parser, m, rank):
    b = p.start(False)
    b.put("extended", rank, (m.group(2), _int(m.group(1))))
    b.vote(V1, "'Extended KV cache to' line (0.34 extensible KV cache)")


def _on_extensible_off(p: _Parser, m, rank):
    b = p.start(p.cur is not None and p.cur.sized())
    b.extensible_off = b.extensible_off or (m.group(1) or "no IMEX channel for a KV connector")


def _on_cudagraph(p: _Parser, m, rank):
    b = p.presize("cudagraph", rank)
    b.put("cudagraph", rank, (m.group(1), "GiB"))
    b.vote(V1, "CUDA-graph memory estimate")


_LINE_TABLE = (
    ((_VERSION,), _on_version),
    ((_V0_BLOCKS, _V1_BLOCKS), _on_blocks),      # V1's form only when V0's does not count
    ((_TOKENS,), _on_tokens),
    ((_CONCURRENCY,), _on_concurrency),
    ((_ERROR_CAPACITY,), _on_capacity_error),
    ((_V1_NEEDED,), _on_needed),
    ((_OVERRIDE,), _on_override),
    # Start-up figures, one per rank.
    ((_AVAILABLE, _RESERVED), _on_available),
    ((_SUMMARY_KV,), _on_summary_kv),
    ((_SUMMARY_TOTAL,), _on_summary_total),
    ((_RESULTS,), _on_results),
    ((_WEIGHTS_OLD, _WEIGHTS), _on_weights),
    ((_BLOCK_SIZE_SET,), _on_block_size),
    ((_CUDAGRAPH,), _on_cudagraph),
    ((_CPU_SPACE,), _on_cpu_space),
    ((_GROUP_BLOCK_SIZES,), _on_group_block_sizes),
    ((_BACKEND,), _on_backend),
    ((_BATCHED,), _on_batched),
    ((_MAMBA_MODE,), _on_mamba_mode),
    ((_SSM_DTYPE,), _on_ssm_dtype),
    ((_MAMBA_PADDING,), _on_mamba_padding),
    ((_WARMUP,), _on_warmup),
    ((_EXTENDED,), _on_extended),
    ((_EXTENSIBLE_OFF,), _on_extensible_off),
)


def _on_config(p: _Parser, m):
    cur = p.cur
    b = p.start(cur is not None and (cur.has_config or cur.has_figures()))
    b.has_config = True
    if m.group(1):
        b.engine_label = m.group(1)
    if m.group(2) and parse_version(m.group(2)):
        b.version = m.group(2)
    b.config.update(_config_fields(m.group(3)))
    if "max_seq_len" in b.config:
        b.mml["engine config"] = b.config["max_seq_len"]
    if "block_size" in b.config:
        b.block_size, b.block_size_line = b.config["block_size"], "engine config"


def _on_config_tail(p: _Parser, line: str):
    """The engine-config line was wrapped; pick up fields from its tail."""
    fields = _config_fields(line)
    for key, value in fields.items():
        p.cur.config.setdefault(key, value)
    if "max_seq_len" in fields:
        p.cur.mml.setdefault("engine config", p.cur.config["max_seq_len"])
    if "block_size" in fields and p.cur.block_size is None:
        p.cur.block_size, p.cur.block_size_line = fields["block_size"], "engine config"


def _parse_line(p: _Parser, line: str, tag, has_header: bool, after_config: bool):
    m = _CONFIG.search(line)
    if m:
        _on_config(p, m)
        return
    if after_config and not has_header and p.cur is not None:
        _on_config_tail(p, line)
    rank = tag or ""
    matched = False
    for patterns, handler in _LINE_TABLE:
        for pattern in patterns:
            m = pattern.search(line)
            if m and handler(p, m, rank) is not False:
                matched = True
                break
    if matched and p.cur is not None and tag:
        if tag.startswith("VllmWorkerProcess"):
            p.cur.vote(V0, "'(VllmWorkerProcess pid=...)' prefix")
        elif tag.startswith(("VllmWorker", "EngineCore", "Worker")):
            p.cur.vote(V1, f"'({tag.split()[0]} ...)' prefix")


_RANK_NUMBER = re.compile(r"\brank[= ]?(\d{1,6})\b")


def rank_number(tag: str) -> int | None:
    """The global rank a process tag names ('VllmWorker rank=3 pid=7' -> 3, 'rank=1' -> 1), else None.

    >>> rank_number("VllmWorker rank=3 pid=7"), rank_number("VllmWorkerProcess pid=7"), rank_number("")
    (3, None, None)
    """
    m = _RANK_NUMBER.search(tag or "")
    return int(m.group(1)) if m else None


# --- the periodic stats line ---------------------------------------------------------------------------------
# What a running engine prints every few seconds (VLLM_LOG_STATS_INTERVAL, 10 s by default), per release read:
#
#   V0 (vllm/engine/metrics.py LoggingStatLogger, through 0.10):
#     Avg prompt throughput: %.1f tokens/s, Avg generation throughput: %.1f tokens/s, Running: %d reqs,
#     Swapped: %d reqs, Pending: %d reqs, GPU KV cache usage: %.1f%%, CPU KV cache usage: %.1f%%.
#     (and, with prefix caching, a line of its own: "Prefix cache hit rate: GPU: %.2f%%, CPU: %.2f%%")
#   V1 (vllm/v1/metrics/loggers.py LoggingStatLogger.log):
#     0.8.0-0.8.2   Avg prompt throughput: ..., Avg generation throughput: ..., Running: %d reqs, Waiting: %d reqs,
#                   GPU KV cache usage: %.1f%%, Prefix cache hit rate: %.1f%%
#     0.8.3-0.11.0  the same after "Engine %03d: " (the data-parallel engine's index)
#     0.11.2-0.29   parts joined by ", ": "Preemptions: %d" after Waiting when there were any; then
#                   External prefix cache and MM cache hit rates when not empty; 0.20 adds "Deferred: %d reqs"
#     0.30-0.34     "%s KV cache usage" names the device (GPU, CPU, XPU); from 0.31 the prefix-cache hit rate is
#                   printed only once there were lookups; 0.32 adds "KV fetch: ..." for a KV connector
# "Waiting" from 0.20 counts the deferred requests too. V1's hit rate is over the last 1,000 requests' lookups
# (v1/metrics/stats.py CachingMetrics), the KV cache usage the share of the pool's blocks in use at that moment.
_STATS_PROMPT = re.compile(r"Avg prompt throughput: " + _FLT + r" tokens/s")
_STATS_FIELDS = {
    "generation_tokens_per_s": re.compile(r"Avg generation throughput: " + _FLT + r" tokens/s"),
    "running": re.compile(r"\bRunning: " + _INT + r" reqs"),
    "waiting": re.compile(r"\b(?:Waiting|Pending): " + _INT + r" reqs"),
    "swapped": re.compile(r"\bSwapped: " + _INT + r" reqs"),
    "preemptions": re.compile(r"\bPreemptions: " + _INT),
    "deferred": re.compile(r"\bDeferred: " + _INT + r" reqs"),
    "kv_cache_usage_percent": re.compile(r"\b([A-Z]{3}) KV cache usage: " + _FLT + r"%"),
    "cpu_kv_cache_usage_percent": re.compile(r", CPU KV cache usage: " + _FLT + r"%"),
    "prefix_cache_hit_rate_percent": re.compile(r"(?<!External )\bPrefix cache hit rate: " + _FLT + r"%"),
    "external_prefix_cache_hit_rate_percent": re.compile(r"External prefix cache hit rate: " + _FLT + r"%"),
}
_STATS_ENGINE = re.compile(r"Engine (\d{3,4}): Avg prompt")
_STATS_SOURCE = re.compile(r"\b(loggers|metrics)\.py:(\d{1,5})\]")
# The line of vllm/v1/metrics/loggers.py each release read logs its stats line from: a log's '[loggers.py:N]'
# tag then names the releases that can have printed it (among those read; releases between them may share N).
STATS_SOURCE_LINES = {111: ("0.8.5",), 116: ("0.9.0",), 118: ("0.9.2",), 123: ("0.10.1.1", "0.10.2"),
                      127: ("0.11.0",), 236: ("0.11.2", "0.12.0"), 248: ("0.13.0",), 257: ("0.14.1", "0.15.1"),
                      259: ("0.16.0", "0.17.1", "0.18.1", "0.19.1"), 271: ("0.20.2", "0.21.0", "0.22.1", "0.23.0"),
                      273: ("0.24.0", "0.25.0", "0.25.1"), 310: ("0.26.0", "0.27.0", "0.27.1", "0.28.0", "0.29.0"),
                      315: ("0.30.0",), 320: ("0.31.0",), 335: ("0.32.0", "0.33.0", "0.34.0")}


@dataclass(frozen=True)
class StatsLine:
    """One periodic stats line of a running engine, every figure as printed (``None`` = not printed)."""

    engine: str                         # 'v0' (metrics.py) or 'v1' (loggers.py)
    engine_index: int | None            # 'Engine 000: ' (V1 from 0.8.3)
    prompt_tokens_per_s: float
    generation_tokens_per_s: float
    running: int
    waiting: int                        # V1 'Waiting', V0 'Pending'
    swapped: int | None                 # V0 only
    preemptions: int | None             # V1 from 0.11.2, when there were any in the interval
    deferred: int | None                # V1 from 0.20
    kv_cache_device: str                # 'GPU', 'CPU', 'XPU'
    kv_cache_usage_percent: float       # share of the pool's blocks in use now
    cpu_kv_cache_usage_percent: float | None      # V0's swap space
    prefix_cache_hit_rate_percent: float | None
    external_prefix_cache_hit_rate_percent: float | None
    source: str | None                  # 'loggers.py:335' as the line's tag prints it
    releases: tuple                     # releases read whose source logs from that line (V1), else ()


def parse_stats_line(line: str) -> StatsLine | None:
    """The figures of one periodic stats line ("Avg prompt throughput: ...") of any release, or None.

    >>> s = parse_stats_line("(APIServer pid=1) INFO 05-19 10:13:11 [loggers.py:271] Engine 000: Avg prompt "
    ...     "throughput: 0.0 tokens/s, Avg generation throughput: 1055.3 tokens/s, Running: 18 reqs, Waiting: 43 "
    ...     "reqs, GPU KV cache usage: 95.9%, Prefix cache hit rate: 0.0%")
    >>> s.running, s.waiting, s.kv_cache_usage_percent, s.prefix_cache_hit_rate_percent, s.releases[0]
    (18, 43, 95.9, 0.0, '0.20.2')
    """
    if not isinstance(line, str):
        raise VllmLogError(f"parse_stats_line takes one line as a str, not {type(line).__name__}")
    text = strip_ansi(line)
    prompt = _STATS_PROMPT.search(text)
    if prompt is None:
        return None
    found = {name: pattern.search(text) for name, pattern in _STATS_FIELDS.items()}
    if found["running"] is None or found["waiting"] is None or found["kv_cache_usage_percent"] is None:
        return None
    number = {name: (None if m is None else m.group(m.lastindex)) for name, m in found.items()}
    engine_m, source_m = _STATS_ENGINE.search(text), _STATS_SOURCE.search(text)
    v0 = found["swapped"] is not None or (source_m is not None and source_m.group(1) == "metrics")
    source = f"{source_m.group(1)}.py:{source_m.group(2)}" if source_m else None
    releases = STATS_SOURCE_LINES.get(int(source_m.group(2)), ()) if source_m and source_m.group(1) == "loggers" \
        else ()

    def f(name):
        return None if number[name] is None else float(number[name])

    def i(name):
        return None if number[name] is None else _int(number[name])

    return StatsLine(
        engine=V0 if v0 else V1, engine_index=int(engine_m.group(1)) if engine_m else None,
        prompt_tokens_per_s=float(prompt.group(1)), generation_tokens_per_s=f("generation_tokens_per_s") or 0.0,
        running=i("running"), waiting=i("waiting"), swapped=i("swapped"), preemptions=i("preemptions"),
        deferred=i("deferred"), kv_cache_device=found["kv_cache_usage_percent"].group(1),
        kv_cache_usage_percent=f("kv_cache_usage_percent"),
        cpu_kv_cache_usage_percent=f("cpu_kv_cache_usage_percent"),
        prefix_cache_hit_rate_percent=f("prefix_cache_hit_rate_percent"),
        external_prefix_cache_hit_rate_percent=f("external_prefix_cache_hit_rate_percent"),
        source=source, releases=releases)


def stats_lines(text: str) -> list[StatsLine]:
    """Every periodic stats line in a log, in order."""
    if not isinstance(text, str):
        raise VllmLogError(f"stats_lines takes the log as a str, not {type(text).__name__}")
    return [s for s in map(parse_stats_line, text.splitlines()) if s is not None]
