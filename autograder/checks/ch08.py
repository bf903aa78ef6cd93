"""Chapter 08 (the vLLM lab): its exercises, as data (three graded, two ungraded practice).

Grade ids, function names and parameter order are a contract with the grading
pipeline; points are on the source notebook's test cells.

=================================  ================================================================================
grade id                           the learner writes
=================================  ================================================================================
ch08_q1_available_gib              available_kv_gib(log_text) -> float: the available-KV figure, as printed
ch08_q2_kv_count                   kv_count(log_text) -> int: the block or token count the log prints
ch08_q5_pool_blocks                pool_blocks(total_bytes, u, W, O_act, O_nt, O_cg, L, K, D, b, block_size, tp) -> int
ch08_q3_block_range                block_range(available_gib, L, K, D, b, block_size, tp) -> (int, int)
ch08_q4_mismatch_cause             mismatch_cause(available_gib, logged_blocks, L, K, D, b, block_size, gpus) -> str
=================================  ================================================================================

q3 and q4 sit in the chapter's optional "Deeper" section as practice: their test cells carry 0 points, so every
point comes from q1, q2 and q5, which a learner who stops before that section can do (docs/instructors.md).

The logs are kvlib's bundled real vLLM startup logs (``kvlib/data/vllm_logs``, their
public sources in its PROVENANCE.md) and one bundled vLLM CPU start
(``kvlib/data/vllm_cpu/llama_gqa``). Expected values come from kvlib: q1 and q2 from
``kvlib.vllm.parse_log`` (the smallest rank's figure; the block count where the log
prints blocks, else the token capacity), q5 from ``kvlib.formulas.kv_pool_bytes`` over
``kvlib.vllm.mismatch.block_bytes``, q3 from ``kvlib.vllm.mismatch.block_range``,
q4 from ``kvlib.vllm.mismatch.classify_block_mismatch``. Hidden cases are the same logs
with labelled perturbations (ANSI colours, docker-compose and process prefixes, Windows
line ends, other printed figures), and other bundled models, GiB figures, TP and dtypes.
"""

from __future__ import annotations

import functools
import random
import re
from fractions import Fraction

import kvlib as kv
from kvlib.vllm import DEFAULT_BLOCK_SIZE, parse_log, read_bundled_log
from kvlib.vllm.bundled import bundled_cpu_start
from kvlib.vllm.mismatch import MISMATCH_CAUSES, block_range, classify_block_mismatch

from .answers import INT, Choice, Float, Tuple
from .schema import Edge, Exercise, exercises

HIDDEN_NOTE_LOG = ("(Hidden cases: the same bundled logs with ANSI colours, docker-compose or process prefixes, "
                   "Windows line ends, and other printed figures.)")
HIDDEN_NOTE_RANGE = "(Hidden cases use other bundled models, other printed GiB figures, TP sizes, dtypes and blocks.)"

_ANSI_LEVEL = "\x1b[32mINFO\x1b[0m"
_BUDGET = re.compile(r"gpu_memory_utilization \([\d.]+\) = ([\d.]+) ?GiB")
_CPU_SPACE = re.compile(r"Explicitly set \(([\d.]+)/([\d.]+)\) ?GiB")


# ---------------------------------------------------------------------------
# The logs: one engine start each, as the bundled files print it
# ---------------------------------------------------------------------------
def start_text(name: str, index: int = 0) -> str:
    """The lines of bundled log ``name`` that belong to its ``index``-th engine start."""
    text = read_bundled_log(name)
    start = parse_log(text)[index]
    return "\n".join(text.splitlines()[start.first_line - 1:start.last_line]) + "\n"


def cpu_log_text() -> str:
    """The bundled vLLM 0.32.0 CPU start of a tiny GQA model (1 GiB, max_model_len 1000)."""
    return bundled_cpu_start("llama_gqa")[1]


def colour(text: str) -> str:
    """The log as a terminal shows it: the level word and the numbers wrapped in ANSI colour codes."""
    out = text.replace("INFO", _ANSI_LEVEL)
    return re.sub(r"(?<=[\s(])(\d[\d,]*\.?\d*)(?= ?GiB| tokens|x\b)", "\x1b[1m\\1\x1b[0m", out)


def compose_prefix(text: str, service: str = "vllm-1") -> str:
    """Each line prefixed as ``docker compose up`` prints it (``vllm-1  | ...``)."""
    return "".join(f"{service}  | {line}\n" for line in text.splitlines())


def perturb_rank(text: str, tag: str, old: str, new: str) -> str:
    """One rank's figure changed: the lines whose process tag is ``tag`` print ``new`` for ``old``."""
    return "".join((line.replace(old, new) if f"({tag})" in line else line) + "\n" for line in text.splitlines())


def _start(case: dict):
    starts = parse_log(case["kwargs"]["log_text"])
    return starts[0]


# ---------------------------------------------------------------------------
# q1: the available-KV figure
# ---------------------------------------------------------------------------
def _available_wrong(text: str) -> dict:
    """The figures a learner may take for the available KV memory, by slip."""
    s = parse_log(text)[0]
    wrong = {}
    if s.available_kv_cache_by_rank:
        wrong["largest_rank"] = max(float(v) for _, v in s.available_kv_cache_by_rank)
    if s.model_weights_gib is not None:
        wrong["weights_figure"] = s.model_weights_gib
    budget = _BUDGET.search(text)
    if budget:
        wrong["budget_figure"] = float(budget.group(1))
    if s.total_gpu_memory_gib is not None:
        wrong["total_figure"] = s.total_gpu_memory_gib
    cpu = _CPU_SPACE.search(text)
    if cpu:
        wrong["cpu_total_figure"] = float(cpu.group(2))
    return wrong


def log_case(label: str, text: str, hint: str = "") -> dict:
    return {"label": label, "kwargs": {"log_text": text}, "context": {"hint": hint}}


def available_expected(case: dict) -> float:
    return _start(case).available_kv_cache_gib


def available_slip_inputs(case: dict) -> dict:
    wrong = _available_wrong(case["kwargs"]["log_text"])
    start = _start(case)
    printed, text = start.available_kv_cache_gib, start.available_kv_cache_text
    # the GiB figure converted to GB: exactly, or rounded to the decimals the log printed (or to two)
    wrong["gib_as_gb"] = printed * kv.GiB / kv.GB
    decimals = len(text.split(".")[1]) if text and "." in text else 0
    wrong["gib_as_gb@printed"] = round(printed * kv.GiB / kv.GB, decimals)
    wrong["gib_as_gb@2dp"] = round(printed * kv.GiB / kv.GB, 2)
    return {"printed": printed, "wrong": wrong}


_RANK_HINT = "several ranks print their own figure; vLLM sizes the pool from the smallest."
Q1_VISIBLE = (
    log_case("07.log, first start: V0's 'Memory profiling results' line", start_text("07", 0),
             hint="the figure is kv_cache_size=...GiB inside the line."),
    log_case("12.log: V0's profiling summary", start_text("12"),
             hint="'the rest of the memory reserved for KV Cache is X GiB'."),
    log_case("14.log: three ranks, with rank pid=521's figure changed to 1.62 (a labelled perturbation)",
             perturb_rank(start_text("14"), "VllmWorkerProcess pid=521", "1.57GiB.", "1.62GiB."), hint=_RANK_HINT),
    log_case("20.log: V1's 'Available KV cache memory' line", start_text("20")),
    log_case("20.log as a terminal colours it (ANSI codes kept)", colour(start_text("20")),
             hint="strip ANSI escape codes (ESC [ ... m) before matching."),
    log_case("25.log: a start that failed after printing the figure", start_text("25")),
    log_case("a vLLM 0.32.0 CPU start: 'Explicitly set (space/total) GiB for KV cache'", cpu_log_text(),
             hint="on the CPU backend the KV space is set by VLLM_CPU_KVCACHE_SPACE and printed first."),
)

# ---------------------------------------------------------------------------
# q2: the block or token count
# ---------------------------------------------------------------------------
def count_expected(case: dict) -> int:
    s = _start(case)
    return s.num_gpu_blocks if s.num_gpu_blocks is not None else s.gpu_kv_cache_tokens


def count_slip_inputs(case: dict) -> dict:
    s = _start(case)
    wrong = {}
    if s.num_cpu_blocks is not None:
        wrong["cpu_blocks"] = s.num_cpu_blocks
    if s.max_model_len is not None and s.max_model_len_source == "concurrency line":
        wrong["tokens_per_request"] = s.max_model_len
    if s.gpu_kv_cache_tokens_source == "max seq len error":
        wrong["max_seq_len_not_capacity"] = s.max_model_len
    if s.num_gpu_blocks is not None:
        wrong["blocks_as_tokens"] = s.num_gpu_blocks * (s.block_size or DEFAULT_BLOCK_SIZE)
    elif s.gpu_kv_cache_tokens:       # a log that prints tokens, converted to blocks
        wrong["tokens_as_blocks"] = s.gpu_kv_cache_tokens // (s.block_size or DEFAULT_BLOCK_SIZE)
    return {"printed": count_expected(case), "wrong": wrong}


Q2_VISIBLE = (
    log_case("02.log: V0 '# GPU blocks' after a pasted '>> ' marker", start_text("02"),
             hint="V0 prints '# GPU blocks: N, # CPU blocks: M': the GPU's count is the first."),
    log_case("04.log, first start: a bare V0 block line", start_text("04", 0)),
    log_case("05.log: the only count is in V0's max-seq-len error", start_text("05"),
             hint="'... maximum number of tokens that can be stored in KV cache (N)'."),
    log_case("07.log, first start: a block line that lost its leading '# '", start_text("07", 0)),
    log_case("12.log: V0 0.8 says '# cuda blocks'", start_text("12")),
    log_case("16.log: V1 tokens, comma-grouped", start_text("16"), hint="remove the thousands commas."),
    log_case("17.log: V1 tokens behind a docker-compose prefix, coloured (ANSI codes kept)",
             colour(start_text("17"))),
    log_case("a vLLM 0.32.0 CPU start: tokens and concurrency on one line", cpu_log_text(),
             hint="from vLLM 0.32 the count and the concurrency share one line."),
)


# ---------------------------------------------------------------------------
# Hidden cases of q1 and q2: the bundled logs, perturbed
# ---------------------------------------------------------------------------
_Q1_BASES = (("07", 0), ("07", 1), ("12", 0), ("14", 0), ("20", 0), ("25", 0), ("cpu", 0))
_Q2_BASES = (("02", 0), ("04", 0), ("04", 1), ("05", 0), ("07", 0), ("07", 1), ("12", 0), ("16", 0), ("17", 0),
             ("20", 0), ("cpu", 0))


def _base(name: str, index: int) -> str:
    return cpu_log_text() if name == "cpu" else start_text(name, index)


def _perturb(rng: random.Random, text: str, figure: str | None, new_figure: str | None) -> str:
    if figure and new_figure:
        text = text.replace(figure, new_figure)
    if rng.random() < 0.5:
        text = colour(text)
    if rng.random() < 0.4 and "  | " not in text:     # one compose prefix (17.log already has its own)
        text = compose_prefix(text, rng.choice(["vllm-1", "qwen3-1", "server_1"]))
    if rng.random() < 0.3:
        text = text.replace("\n", "\r\n")
    return text


def _new_gib(rng: random.Random) -> str:
    return f"{rng.uniform(0.5, 90):.2f}"


def available_hidden(seed: int, count: int = 8) -> tuple:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        name, index = rng.choice(_Q1_BASES)
        text = _base(name, index)
        printed = parse_log(text)[0].available_kv_cache_text
        figure = printed if name != "cpu" else None   # the CPU space is whole GiB: kept
        out.append(log_case("hidden", _perturb(rng, text, figure, _new_gib(rng) if figure else None)))
    return tuple(out)


def _format_count(old: str, n: int) -> str:
    return f"{n:,}" if "," in old else str(n)


def count_hidden(seed: int, count: int = 8) -> tuple:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        name, index = rng.choice(_Q2_BASES)
        text = _base(name, index)
        s = parse_log(text)[0]
        n = s.num_gpu_blocks if s.num_gpu_blocks is not None else s.gpu_kv_cache_tokens
        printed = next(f for f in (f"{n:,}", str(n)) if f in text)
        new = _format_count(printed, rng.randint(1_000, 900_000))
        out.append(log_case("hidden", _perturb(rng, text, printed, new)))
    return tuple(out)


# ---------------------------------------------------------------------------
# q5: the pool forwards, in blocks of one rank
# ---------------------------------------------------------------------------
POOL_PARAMS = ("total_bytes", "utilization", "weights_bytes", "activation_bytes", "non_torch_bytes", "cudagraph_bytes",
               "layers", "kv_heads", "head_dim", "dtype_bytes", "block_size", "tp")
HIDDEN_NOTE_POOL = "(Hidden cases use other bundled models, GPUs, utilizations, overheads, TP sizes, dtypes and blocks.)"


def _gib(x: float) -> int:
    """A GiB figure as printed, in bytes (as the worked problems read a log's figures)."""
    return round(x * kv.GiB)


def pool_case(model: str, label: str, *, total_bytes: int, utilization: float, activation_bytes: int,
              non_torch_bytes: int, cudagraph_bytes: int = 0, weights_bytes: int | None = None, dtype_bytes: int = 2,
              block_size: int = 16, tp: int = 1) -> dict:
    spec = kv.load_model(model)
    if weights_bytes is None:      # the 16-bit weights split over the TP ranks
        weights_bytes = kv.formulas.weight_bytes_per_gpu(spec.weight_bytes(2), tp)
    kwargs = dict(total_bytes=total_bytes, utilization=utilization, weights_bytes=weights_bytes,
                  activation_bytes=activation_bytes, non_torch_bytes=non_torch_bytes, cudagraph_bytes=cudagraph_bytes,
                  layers=spec.num_kv_layers, kv_heads=spec.num_kv_heads, head_dim=spec.head_dim,
                  dtype_bytes=dtype_bytes, block_size=block_size, tp=tp)
    return {"label": label, "kwargs": kwargs, "context": {"model": model}}


def pool_expected(case: dict) -> int:
    from kvlib.vllm.mismatch import block_bytes
    k = case["kwargs"]
    pool = kv.formulas.kv_pool_bytes(k["total_bytes"], k["utilization"], k["weights_bytes"],
                                     k["activation_bytes"] + k["non_torch_bytes"] + k["cudagraph_bytes"])
    return pool // block_bytes(k["layers"], k["kv_heads"], k["head_dim"], k["dtype_bytes"], k["block_size"], k["tp"])


def pool_slip_inputs(case: dict) -> dict:
    return dict(case["kwargs"])


_H100 = kv.get_gpu("H100-SXM").cuda_memory_bytes
Q5_VISIBLE = (
    pool_case("llama-2-7b", "12.log's V0 start: Llama 2 7B on an H100, every figure as the log prints it (79.19 GiB "
              "total, u 0.90, weights 12.55 GiB, activation peak 2.38 GiB, non-torch 0.16 GiB), no CUDA graphs",
              total_bytes=_gib(79.19), utilization=0.90, weights_bytes=_gib(12.55), activation_bytes=_gib(2.38),
              non_torch_bytes=_gib(0.16)),
    pool_case("llama-3.1-8b", "07.log's V0 start: Llama 3.1 8B on an RTX 3090 (23.58 GiB, u 0.90, weights 14.9888 "
              "GiB, torch peak 17.06 GiB, non-torch 0.35 GiB)",
              total_bytes=_gib(23.58), utilization=0.90, weights_bytes=_gib(14.9888),
              activation_bytes=_gib(17.06 - 14.9888), non_torch_bytes=_gib(0.35)),
    pool_case("llama-3.3-70b", "Llama 3.3 70B at TP 4 on H100s, vLLM 0.20+: u 0.92, 16-bit weights split four ways, "
              "activation 1.5 GiB, non-torch 0.6 GiB, CUDA graphs 0.75 GiB per rank (a built case)",
              total_bytes=_H100, utilization=0.92, activation_bytes=_gib(1.5), non_torch_bytes=_gib(0.6),
              cudagraph_bytes=_gib(0.75), tp=4),
    pool_case("mistral-7b", "Mistral 7B on one H100 with an fp8 cache in 32-token blocks, vLLM 0.20+: u 0.92, "
              "activation 2 GiB, non-torch 0.5 GiB, CUDA graphs 0.4 GiB (a built case)",
              total_bytes=_H100, utilization=0.92, activation_bytes=_gib(2.0), non_torch_bytes=_gib(0.5),
              cudagraph_bytes=_gib(0.4), dtype_bytes=1, block_size=32),
    pool_case("qwen2.5-32b", "Qwen2.5 32B at TP 8 on H100s (one KV head per rank), V0: u 0.90, activation 0.8 GiB, "
              "non-torch 0.3 GiB (a built case)",
              total_bytes=_H100, utilization=0.90, activation_bytes=_gib(0.8), non_torch_bytes=_gib(0.3), tp=8),
    pool_case("gpt2-large", "GPT-2 large (MHA, head_dim 64) on an L40S, V0: u 0.90, activation 0.5 GiB, non-torch "
              "0.2 GiB (a built case)",
              total_bytes=kv.get_gpu("L40S").cuda_memory_bytes, utilization=0.90, activation_bytes=_gib(0.5),
              non_torch_bytes=_gib(0.2)),
)


def pool_hidden(seed: int, count: int = 8) -> tuple:
    rng = random.Random(seed)
    gpus = [kv.get_gpu(g).cuda_memory_bytes for g in ("H100-SXM", "H200", "A100-80GB", "L40S")]
    out = []
    while len(out) < count:
        model = rng.choice(_uniform_models())
        spec = kv.load_model(model)
        tp = rng.choice([t for t in (1, 2, 4, 8) if t <= spec.num_kv_heads])
        case = pool_case(model, "hidden", total_bytes=rng.choice(gpus), utilization=rng.choice([0.85, 0.90, 0.92]),
                         activation_bytes=rng.randint(_gib(0.3), _gib(4)), non_torch_bytes=rng.randint(_gib(0.1), _gib(1)),
                         cudagraph_bytes=rng.choice([0, rng.randint(_gib(0.1), _gib(2))]),
                         dtype_bytes=rng.choice([1, 2]), block_size=rng.choice([16, 16, 32, 64]), tp=tp)
        if pool_expected(case) >= 100:      # a deployment that fits, with room for a pool
            out.append(case)
    return tuple(out)


# ---------------------------------------------------------------------------
# q3: the block range a printed GiB figure allows
# ---------------------------------------------------------------------------
RANGE_PARAMS = ("available_gib", "layers", "kv_heads", "head_dim", "dtype_bytes", "block_size", "tp")


def range_case(model: str, available_gib: str, label: str, dtype_bytes: int = 2, block_size: int = 16,
               tp: int = 1) -> dict:
    spec = kv.load_model(model)
    kwargs = dict(available_gib=available_gib, layers=spec.num_kv_layers, kv_heads=spec.num_kv_heads,
                  head_dim=spec.head_dim, dtype_bytes=dtype_bytes, block_size=block_size, tp=tp)
    return {"label": label, "kwargs": kwargs, "context": {"model": model}}


def range_expected(case: dict) -> tuple:
    k = case["kwargs"]
    return block_range(k["available_gib"], k["layers"], k["kv_heads"], k["head_dim"], k["dtype_bytes"],
                       k["block_size"], k["tp"])


def range_slip_inputs(case: dict) -> dict:
    return dict(case["kwargs"])


WINDOW_ENDS_EDGE = Edge("the window [(X - 0.005) 2^30, (X + 0.005) 2^30): its open upper end and its closed lower "
                        "end, each exactly on a block boundary")
ONE_WHOLE_HEAD_EDGE = Edge("past tp = K each rank keeps one whole head")
Q3_VISIBLE = (
    range_case("llama-2-7b", "56.18", "12.log: Llama 2 7B, 56.18 GiB (vLLM printed 7,191 blocks)"),
    range_case("llama-3.1-8b", "3.81", "07.log: Llama 3.1 8B, 3.81 GiB (vLLM printed 1,952 blocks)"),
    range_case("qwen3-0.6b", "69.66", "20.log: Qwen3 0.6B, 69.66 GiB (vLLM printed 652,144 tokens)"),
    range_case("llama-3.3-70b", "15.0", "Llama 3.3 70B at TP 4 printing '15.0' GiB per rank (0.14+ drops a "
               "trailing zero)", tp=4),
    range_case("llama-3.1-8b", "3.81", "Llama 3.1 8B, 3.81 GiB, an fp8 cache", dtype_bytes=1),
    ONE_WHOLE_HEAD_EDGE.on(range_case("qwen3-0.6b", "1.57", "Qwen3 0.6B at TP 16: more ranks than KV heads", tp=16)),
    # the window's two edges, exactly on a block boundary (Llama 3.1 8B's block: 2 x 32 x 8 x 128 x 2 x 16 =
    # 2 MiB, and 53.375 GiB = 27,328 blocks): the open upper end of "53.37" is not a byte it stands for
    # (27,327 at most), the closed lower end of "53.38" is (27,328 at least)
    WINDOW_ENDS_EDGE.on(range_case("llama-3.1-8b", "53.37", "Llama 3.1 8B, 53.37 GiB: the window's open upper end, "
                                   "53.375 GiB, is exactly 27,328 blocks")),
    WINDOW_ENDS_EDGE.on(range_case("llama-3.1-8b", "53.38", "Llama 3.1 8B, 53.38 GiB: the window's closed lower "
                                   "end, 53.375 GiB, is exactly 27,328 blocks")),
    range_case("gpt2-large", "12.34", "GPT-2 large (MHA, head_dim 64), 12.34 GiB, an fp32 cache in 32-token blocks",
               dtype_bytes=4, block_size=32),
)


@functools.cache   # every seed's cases draw from it
def _uniform_models() -> tuple:
    out = []
    for model in kv.course_models():
        spec = kv.load_model(model)
        if not spec.is_mla and len(set(spec.layer_kinds)) == 1:
            out.append(model)
    return tuple(out)


@functools.cache
def _power_of_two_block_models() -> tuple:
    """Uniform models whose bf16 16-token block at TP 1 is a power of two of bytes (so a printed figure's edge
    can fall exactly on a block boundary): Llama 3.1 8B, Llama 2 7B, Mistral 7B, Mixtral, Qwen2.5 32B."""
    out = []
    for model in _uniform_models():
        spec = kv.load_model(model)
        b = 2 * spec.num_kv_layers * spec.num_kv_heads * spec.head_dim * 2 * 16
        if b & (b - 1) == 0 and b <= 2 ** 27:
            out.append(model)
    return tuple(out)


def edge_case(rng: random.Random, upper: bool | None = None) -> dict:
    """A printed figure whose window edge, (X +- 0.005) GiB = j/8 GiB (j odd), is exactly a whole number of
    blocks (every block here divides 2^27 B = 1/8 GiB): the open upper end or the closed lower end."""
    j = 2 * rng.randint(8, 280) + 1
    draw = rng.random() < 0.5
    upper = draw if upper is None else upper
    gib = _two_decimals(Fraction(j, 8) + (Fraction(-1, 200) if upper else Fraction(1, 200)))
    return range_case(rng.choice(_power_of_two_block_models()), gib, "hidden: a window edge on a block boundary",
                      dtype_bytes=rng.choice([1, 2]), block_size=rng.choice([16, 32]), tp=rng.choice([1, 2, 4, 8]))


def _two_decimals(x: Fraction) -> str:
    hundredths = x * 100
    assert hundredths.denominator == 1, x
    return f"{hundredths.numerator // 100}.{hundredths.numerator % 100:02d}"


def range_hidden(seed: int, count: int = 8) -> tuple:
    rng = random.Random(seed)
    models = _uniform_models()
    out = []
    for _ in range(count - 2):
        gib = rng.choice([f"{rng.uniform(0.5, 70):.2f}", f"{rng.uniform(1, 40):.1f}"])
        out.append(range_case(rng.choice(models), gib, "hidden", dtype_bytes=rng.choice([1, 2]),
                              block_size=rng.choice([16, 16, 32]), tp=rng.choice([1, 2, 4, 8])))
    out += [edge_case(rng, upper=True), edge_case(rng, upper=False)]     # each end of the window, every seed
    rng.shuffle(out)
    return tuple(out)


# ---------------------------------------------------------------------------
# q4: why a logged block count misses the prediction
# ---------------------------------------------------------------------------
CAUSE_PARAMS = ("available_gib", "logged_blocks", "layers", "kv_heads", "head_dim", "dtype_bytes", "block_size",
                "gpus")


def cause_case(model: str, available_gib: str, logged_blocks: int, label: str, gpus: int = 1, hint: str = "",
               dtype_bytes: int = 2) -> dict:
    spec = kv.load_model(model)
    kwargs = dict(available_gib=available_gib, logged_blocks=logged_blocks, layers=spec.num_kv_layers,
                  kv_heads=spec.num_kv_heads, head_dim=spec.head_dim, dtype_bytes=dtype_bytes, block_size=16,
                  gpus=gpus)
    return {"label": label, "kwargs": kwargs, "context": {"model": model, "hint": hint}}


def cause_expected(case: dict) -> str:
    return classify_block_mismatch(*(case["kwargs"][p] for p in CAUSE_PARAMS))


ROUNDING_SLACK_EDGE = Edge("rounding: at most 2 blocks outside the window (2 past, 3 past, 2 below)")
CAUSE_ORDER_EDGE = Edge("the causes in the table's order: the first that fits wins")
Q4_VISIBLE = (
    cause_case("llama-2-7b", "56.18", 7191, "12.log as printed: 7,191 blocks"),
    *ROUNDING_SLACK_EDGE.on_each((
        cause_case("llama-2-7b", "56.18", 7193, "12.log with the count changed to 7,193 (a labelled perturbation)",
                   hint="two blocks past the window: the pool was not sized from exactly the printed figure."),
        cause_case("llama-2-7b", "56.18", 7194, "12.log with the count changed to 7,194: three past the window",
                   hint="rounding covers at most 2 blocks outside the window."),
        cause_case("llama-2-7b", "56.18", 7188, "12.log with the count changed to 7,188: two below the window"),
    )),
    CAUSE_ORDER_EDGE.on(cause_case("llama-2-7b", "56.18", 14382, "12.log had it come from two GPUs: 14,382 blocks",
                                   gpus=2)),
    CAUSE_ORDER_EDGE.on(cause_case("llama-3.1-8b", "3.81", 3904, "07.log with an fp8 cache: 3,904 blocks",
                                   hint="one byte per element doubles the blocks.")),
    cause_case("qwen3-0.6b", "69.66", 10190, "20.log had a backend forced 64-token blocks: 10,190 blocks"),
    cause_case("llama-3.1-8b", "3.81", 1000, "07.log's figure with another model's count: 1,000 blocks"),
    # the dtype and the head width are inputs, not assumptions: an fp8 prediction that agrees, and GPT-2 large
    # (head_dim 64) agreeing with its own window (4,491 to 4,494 blocks of 12.34 GiB)
    cause_case("llama-3.1-8b", "3.81", 3904, "07.log's figure, predicted with an fp8 cache: 3,904 blocks",
               dtype_bytes=1, hint="dtype_bytes is what you predicted with: start from it."),
    cause_case("gpt2-large", "12.34", 4492, "GPT-2 large (MHA, head_dim 64), 12.34 GiB: 4,492 blocks"),
)


def rounding_edge_cases(rng: random.Random) -> tuple:
    """The rounding slack's edges on one drawn figure: 2 blocks past the window, 3 past, 2 below."""
    model = rng.choice(_uniform_models())
    spec = kv.load_model(model)
    gib = f"{rng.uniform(1, 70):.2f}"
    lo, hi = block_range(gib, spec.num_kv_layers, spec.num_kv_heads, spec.head_dim, 2, 16)
    return tuple(cause_case(model, gib, n, "hidden") for n in (hi + 2, hi + 3, lo - 2))


def cause_hidden(seed: int, count: int = 8) -> tuple:
    rng = random.Random(seed)
    models = _uniform_models()
    out = list(rounding_edge_cases(random.Random(seed + 1)))
    for _ in range(count):
        model = rng.choice(models)
        spec = kv.load_model(model)
        gib = f"{rng.uniform(1, 70):.2f}"
        geometry = (spec.num_kv_layers, spec.num_kv_heads, spec.head_dim)
        cause = rng.choice(MISMATCH_CAUSES)
        gpus = 1
        if cause == "tensor_parallel":
            gpus = rng.choice([2, 4, 8])
            n = block_range(gib, *geometry, 2, 16, gpus)[1]
        elif cause == "kv_cache_dtype":
            n = block_range(gib, *geometry, 1, 16)[0]
        elif cause == "block_size":
            n = block_range(gib, *geometry, 2, rng.choice([32, 64, 128]))[0]
        elif cause == "rounding":
            n = block_range(gib, *geometry, 2, 16)[1] + rng.choice([1, 2])
        elif cause == "wrong_model":
            n = max(1, round(block_range(gib, *geometry, 2, 16)[0] * rng.choice([0.7, 1.3, 3.0])))
        else:
            n = block_range(gib, *geometry, 2, 16)[0]
        out.append(cause_case(model, gib, n, "hidden", gpus=gpus))
    return tuple(out)


def window_side(case) -> str | None:
    """Practice A's edge: the window's open upper end, or its closed lower end, exactly on a block boundary."""
    from kvlib.vllm.log import gib_window
    from kvlib.vllm.mismatch import block_bytes
    k = case["kwargs"]
    b = block_bytes(k["layers"], k["kv_heads"], k["head_dim"], k["dtype_bytes"], k["block_size"], k["tp"])
    lo, hi = gib_window(k["available_gib"])
    return "open upper end" if (hi + 1) % b == 0 else "closed lower end" if lo % b == 0 else None


def slack_side(case) -> str | None:
    """Practice B's rounding slack: a count 2 blocks past the window, 3 past, or 2 below it (else None)."""
    k = case["kwargs"]
    if k["gpus"] != 1 or k["dtype_bytes"] != 2:
        return None
    lo, hi = block_range(k["available_gib"], k["layers"], k["kv_heads"], k["head_dim"], 2, k["block_size"])
    n = k["logged_blocks"]
    return {hi + 2: "2 past", hi + 3: "3 past", lo - 2: "2 below"}.get(n)


#: The edges the exercise text decides (a tie, a rounding direction, a tolerance, an "other"), each
#: with the visible cases that sit on it (tests/test_case_variants.py checks that they exist) and, where
#: given, ``side(case)``: which side a case sits on (hidden cases of every seed show each visible side).
EDGES = {
    "ch08_q3_block_range": (WINDOW_ENDS_EDGE.listing(window_side), ONE_WHOLE_HEAD_EDGE.listing()),
    "ch08_q4_mismatch_cause": (ROUNDING_SLACK_EDGE.listing(slack_side), CAUSE_ORDER_EDGE.listing()),
}


EXERCISES = exercises(
    Exercise(
        grade_id="ch08_q1_available_gib",
        function_name="available_kv_gib",
        params=("log_text",),
        visible_cases=Q1_VISIBLE,
        hidden_cases=available_hidden,
        expected=available_expected,
        answer=Float(rel_tol=1e-9),
        quantity="log_figure",
        slip_inputs=available_slip_inputs,
        unit="GiB",
        hidden_note=HIDDEN_NOTE_LOG,
    ),
    Exercise(
        grade_id="ch08_q2_kv_count",
        function_name="kv_count",
        params=("log_text",),
        visible_cases=Q2_VISIBLE,
        hidden_cases=count_hidden,
        expected=count_expected,
        answer=INT,
        quantity="log_figure",
        slip_inputs=count_slip_inputs,
        unit="(blocks or tokens, as printed)",
        hidden_note=HIDDEN_NOTE_LOG,
    ),
    Exercise(
        grade_id="ch08_q5_pool_blocks",
        function_name="pool_blocks",
        params=POOL_PARAMS,
        visible_cases=Q5_VISIBLE,
        hidden_cases=pool_hidden,
        expected=pool_expected,
        answer=INT,
        quantity="pool_blocks",
        slip_inputs=pool_slip_inputs,
        unit="blocks",
        hidden_note=HIDDEN_NOTE_POOL,
    ),
    Exercise(
        grade_id="ch08_q3_block_range",
        function_name="block_range",
        params=RANGE_PARAMS,
        visible_cases=Q3_VISIBLE,
        hidden_cases=range_hidden,
        expected=range_expected,
        answer=Tuple((INT, INT)),
        quantity="block_range",
        slip_inputs=range_slip_inputs,
        unit="blocks",
        hidden_note=HIDDEN_NOTE_RANGE,
    ),
    Exercise(
        grade_id="ch08_q4_mismatch_cause",
        function_name="mismatch_cause",
        params=CAUSE_PARAMS,
        visible_cases=Q4_VISIBLE,
        hidden_cases=cause_hidden,
        expected=cause_expected,
        answer=Choice(MISMATCH_CAUSES),
        unit="",
        hidden_note=HIDDEN_NOTE_RANGE,
    ),
)
