"""The vLLM lab's views: a printed GiB figure against a logged block count, the engine cell, how a start's pool
was sized, and a running engine's stats lines.

Plain functions return HTML (tests and benchmarks call them without widgets); the widget
functions only wire controls to them. Every figure comes from kvlib: the block range from
``kvlib.vllm.mismatch``, the CPU engine's figures from ``kvlib.vllm.cpu``, the engine
start itself from ``kvlib.vllm.cpu_engine.run_engine`` (never without an explicit opt-in),
the sizing rule from ``kvlib.vllm.parse_log``, the stats lines from ``kvlib.vllm.stats_lines``.
"""

from __future__ import annotations

import html
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from IPython.display import HTML

import kvlib as kv
from kvlib.vllm import DEFAULT_BLOCK_SIZE, gib_window, parse_log, read_bundled_log
from kvlib.vllm.bundled import bundled_cpu_start
from kvlib.vllm.log import strip_ansi
from kvlib.vllm.cpu import predict_cpu_from_log
from kvlib.vllm.cpu_engine import EngineRun, run_engine
from kvlib.vllm.mismatch import block_bytes, block_range

from .explorer import LABEL_WIDTH, SLIDER_WIDTH

__all__ = ["LogPreset", "log_presets", "block_window_view", "block_window_explorer", "ENGINE_GEOMETRIES",
           "engine_geometry", "engine_lab_view", "engine_lab", "KV_LINE_WORDS", "log_source_words",
           "classify_at_settings", "pool_sizing_table", "stats_source_words", "release_span", "stats_lines_table"]

_NO_ENGINE = os.devnull + "/no-engine"     # a path no Python is at: run_engine returns the committed log
KV_LINE_WORDS = ("KV cache", "blocks:", "Maximum concurrency", "kv cache group sizes", "for KV Cache")
CAUSE_WORDS = {
    "agrees": "inside the window: the count is what the printed figure allows.",
    "rounding": "just outside the window: the pool was not sized from exactly the printed figure.",
    "tensor_parallel": "fits with the KV heads split over the GPUs: each rank holds only its heads.",
    "kv_cache_dtype": "fits with one byte per element: an fp8 cache.",
    "block_size": "fits with a larger block: the attention backend chose the block size.",
    "wrong_model": "no single setting explains it: check the model and its dtype.",
}


# ---------------------------------------------------------------------------
# The block window: a printed GiB figure, a geometry, the range of blocks it allows
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class LogPreset:
    """A bundled vLLM log's figures: the model, what it printed, and the count to compare."""

    name: str
    model: str
    available_gib: str
    logged_blocks: int | None
    tp: int = 1


def log_presets() -> dict:
    """The bundled logs that print both an available figure and a count, as explorer presets.

    Used in: ch08_vllm_lab.
    """
    out = {}
    for name, model in (("12", "llama-2-7b"), ("07", "llama-3.1-8b"), ("20", "qwen3-0.6b")):
        start = parse_log(read_bundled_log(name))[0]
        blocks = start.num_gpu_blocks
        if blocks is None and start.gpu_kv_cache_tokens is not None:
            blocks = start.gpu_kv_cache_tokens // DEFAULT_BLOCK_SIZE   # one group, max_model_len % 16 == 0
        label = f"{name}.log · {kd_name(model)} · {start.available_kv_cache_text} GiB"
        out[label] = LogPreset(name, model, start.available_kv_cache_text, blocks)
    return out


def kd_name(model: str) -> str:
    return kv.load_model(model).name.split("/")[-1]


#: The settings the explorer's controls offer; a verdict tries the others, one control at a time.
TP_CHOICES = (1, 2, 4, 8)
BLOCK_SIZE_CHOICES = (16, 32, 64, 128)
DTYPE_CHOICES = (2, 1)


def classify_at_settings(available_gib: str, logged_blocks: int, layers: int, kv_heads: int, head_dim: int,
                         dtype_bytes: int, block_size: int, tp: int) -> tuple:
    """Why ``logged_blocks`` does (not) fit the window *at the settings shown*: ``(cause, words)``.

    The explorer's verdict. Tried in order, the first that brings the count into the range wins:
    ``agrees`` (inside ``block_range`` at this TP, dtype and block size), ``rounding`` (at most
    ``ROUNDING_SLACK_BLOCKS`` outside it), then one control moved at a time, the rest as shown:
    ``tensor_parallel`` (another TP of ``TP_CHOICES``), ``kv_cache_dtype`` (the other element
    size), ``block_size`` (another of ``BLOCK_SIZE_CHOICES`` or 256), else ``wrong_model``. The
    words name the setting that fits. (Practice B's ``classify_block_mismatch`` asks a different
    question: a prediction made at TP 1.)

    Used in: ch08_vllm_lab (through block_window_view).
    """
    from kvlib.vllm.mismatch import LARGER_BLOCK_SIZES, ROUNDING_SLACK_BLOCKS

    def fits(span, slack=0):
        return span[0] - slack <= logged_blocks <= span[1] + slack

    geometry = (available_gib, layers, kv_heads, head_dim)
    shown = block_range(*geometry, dtype_bytes, block_size, tp)
    if fits(shown):
        return "agrees", f"inside the window at TP {tp}, {block_size}-token blocks, {dtype_bytes}-byte cache."
    if fits(shown, ROUNDING_SLACK_BLOCKS):
        return "rounding", (f"{min(abs(logged_blocks - shown[0]), abs(logged_blocks - shown[1]))} block(s) outside "
                            "the window: the pool was not sized from exactly the printed figure.")
    for other in TP_CHOICES:
        if other != tp and fits(block_range(*geometry, dtype_bytes, block_size, other)):
            return "tensor_parallel", (f"fits at TP {other}, not the TP {tp} shown: each rank holds "
                                       f"{kv.kv_heads_per_gpu(kv_heads, other)} of the {kv_heads} KV heads there.")
    for other in DTYPE_CHOICES:
        if other != dtype_bytes and fits(block_range(*geometry, other, block_size, tp)):
            return "kv_cache_dtype", (f"fits with {other}-byte elements, not the {dtype_bytes} shown: "
                                      + ("an fp8 cache." if other == 1 else "a 16-bit cache."))
    for other in sorted(set(BLOCK_SIZE_CHOICES + LARGER_BLOCK_SIZES)):
        if other != block_size and fits(block_range(*geometry, dtype_bytes, other, tp)):
            return "block_size", (f"fits with {other}-token blocks, not the {block_size} shown: the attention "
                                  "backend chose the block size.")
    return "wrong_model", "no single control explains it: check the model and its dtype."


def block_window_view(layers: int, kv_heads: int, head_dim: int, dtype_bytes: int, block_size: int, tp: int,
                      available_gib: str, logged_blocks: int | None = None) -> str:
    """HTML: bytes per block on a rank, the byte window a printed GiB figure stands for, the blocks it allows.

    With ``logged_blocks``, the verdict, classified at the settings shown (``classify_at_settings``):
    the mark and the cause always judge the same range.

    Used in: ch08_vllm_lab (through block_window_explorer).
    """
    b = block_bytes(layers, kv_heads, head_dim, dtype_bytes, block_size, tp)
    lo_b, hi_b = gib_window(available_gib)
    lo, hi = block_range(available_gib, layers, kv_heads, head_dim, dtype_bytes, block_size, tp)
    rows = [
        ("bytes per block on one rank", f"{b:,} B = {layers} × 2 × {kv.kv_heads_per_gpu(kv_heads, tp)} × {head_dim} "
                                        f"× {dtype_bytes} × {block_size}"),
        (f"'{available_gib} GiB' stands for", f"{lo_b:,} … {hi_b:,} B"),
        ("blocks", f"<b>{lo:,} – {hi:,}</b> (tokens {lo * block_size:,} – {hi * block_size:,})"),
    ]
    if logged_blocks is not None:
        cause, words = classify_at_settings(available_gib, logged_blocks, layers, kv_heads, head_dim, dtype_bytes,
                                            block_size, tp)
        mark = "✓" if cause == "agrees" else "✗"
        rows.append(("the log printed", f"{mark} {logged_blocks:,} blocks — {cause}: {html.escape(words)}"))
    body = "".join(f"<tr><td style='padding:2px 12px 2px 0'>{html.escape(k)}</td><td>{v}</td></tr>"
                   for k, v in rows)
    return (f"<div style='font-family:sans-serif;font-size:13px;line-height:1.6'>"
            f"<div>blocks: {lo:,} – {hi:,}</div><table>{body}</table></div>")


def block_window_explorer(presets: dict | None = None):
    """The widget: a bundled log, then sliders for the printed GiB, TP, block size and the cache dtype.

    Choosing a log sets the model, its printed figure and its count; the sliders then ask
    "what would the engine have printed if ...". Returns the ``VBox``; ``.view`` is the HTML.

    Used in: ch08_vllm_lab.
    """
    import ipywidgets as widgets

    presets = presets or log_presets()
    style = {"description_width": LABEL_WIDTH}
    layout = widgets.Layout(width=SLIDER_WIDTH)
    preset_w = widgets.Dropdown(options=list(presets), description="bundled log", style=style,
                                layout=widgets.Layout(width="760px"))
    gib_w = widgets.FloatSlider(56.18, min=0.5, max=80, step=0.01, readout_format=".2f",
                                description="printed GiB", style=style, layout=layout)
    tp_w = widgets.SelectionSlider(options=[1, 2, 4, 8], value=1, description="TP (GPUs)", style=style,
                                   layout=layout)
    bs_w = widgets.SelectionSlider(options=[16, 32, 64, 128], value=16, description="block size (tokens)",
                                   style=style, layout=layout)
    dtype_w = widgets.ToggleButtons(options=[("bf16", 2), ("fp8", 1)], value=2, description="cache dtype",
                                    style={**style, "button_width": "90px"})
    view = widgets.HTML()

    def redraw(_=None):
        p = presets[preset_w.value]
        spec = kv.load_model(p.model)
        view.value = block_window_view(spec.num_kv_layers, spec.num_kv_heads, spec.head_dim, dtype_w.value,
                                       bs_w.value, tp_w.value, f"{gib_w.value:.2f}", p.logged_blocks)

    def apply_preset(_=None):
        p = presets[preset_w.value]
        gib_w.value = float(p.available_gib)
        tp_w.value, bs_w.value, dtype_w.value = p.tp, 16, 2
        redraw()

    preset_w.observe(apply_preset, "value")
    for control in (gib_w, tp_w, bs_w, dtype_w):
        control.observe(redraw, "value")
    apply_preset()
    box = widgets.VBox([preset_w, gib_w, tp_w, bs_w, dtype_w, view])
    box.view = view
    return box


# ---------------------------------------------------------------------------
# The engine cell
# ---------------------------------------------------------------------------
def _bundled_config(name: str) -> dict:
    return json.loads(bundled_cpu_start(name)[0].read_text())


def _small_width(model: str) -> dict:
    """A bundled model's attention shape (layers, heads, KV heads, head_dim) on a tiny Llama body."""
    spec = kv.load_model(model)
    base = _bundled_config("llama_gqa")
    return dict(base, num_hidden_layers=spec.num_kv_layers, num_attention_heads=spec.num_heads,
                num_key_value_heads=spec.num_kv_heads, head_dim=spec.head_dim, hidden_size=256,
                intermediate_size=512, vocab_size=512)


#: Geometries the engine cell offers: tiny presets and bundled models' shapes at small width.
ENGINE_GEOMETRIES = {
    "tiny GQA (the committed log's model)": lambda: _bundled_config("llama_gqa"),
    "tiny MHA": lambda: dict(_bundled_config("llama_gqa"), num_key_value_heads=8),
    "tiny MQA": lambda: dict(_bundled_config("llama_gqa"), num_key_value_heads=1),
    "tiny Gemma-2 (sliding-window hybrid)": lambda: _bundled_config("gemma2_hybrid"),
    "tiny DeepSeek (MLA)": lambda: _bundled_config("deepseek_mla"),
    "tiny Qwen3-Next (Gated DeltaNet hybrid)": lambda: _bundled_config("qwen3_next_gdn"),
    "Llama 3.1 8B's KV shape at small width": lambda: _small_width("llama-3.1-8b"),
    "Qwen3 0.6B's KV shape at small width": lambda: _small_width("qwen3-0.6b"),
}


def engine_geometry(name: str) -> dict:
    """The config.json dict of an ``ENGINE_GEOMETRIES`` entry (KeyError names the choices).

    Used in: ch08_vllm_lab (through engine_lab).
    """
    if name not in ENGINE_GEOMETRIES:
        raise KeyError(f"no engine geometry {name!r}; choose one of: {', '.join(ENGINE_GEOMETRIES)}")
    return ENGINE_GEOMETRIES[name]()


def _spec_of(config: dict):
    # load_model reads a file: the config the log is for goes to a temporary config.json first
    with tempfile.TemporaryDirectory(prefix="kv-lab-") as tmp:
        path = Path(tmp) / "config.json"
        path.write_text(json.dumps(config))
        return kv.load_model(str(path))


def _layout_words(spec, kv_space_bytes: int, max_model_len: int) -> str:
    """What the engine counts that a per-layer formula does not: KV-cache groups, padding layers, MLA's latent."""
    from kvlib.vllm.cpu import predict_cpu
    f = predict_cpu(spec, kv_space_bytes, max_model_len)
    if spec.is_mla:
        latent = (spec.kv_lora_rank or 0) + (spec.qk_rope_head_dim or 0)
        return (f"an MLA layer caches one latent per token, kv_lora_rank + qk_rope_head_dim = {spec.kv_lora_rank} + "
                f"{spec.qk_rope_head_dim} = {latent} numbers, with no separate key and value and no copy per KV head "
                f"(2 × num_key_value_heads × head_dim would be {2 * spec.num_kv_heads * spec.head_dim}); "
                f"a {f.block_size}-token block of {spec.num_kv_layers} layers is {f.bytes_per_block:,} B, so "
                f"{f.num_blocks:,} blocks")
    if len(f.groups) > 1:
        kinds = list(spec.layer_kinds)
        counts = {kind: kinds.count(kind) for kind in f.groups}
        padding = f.group_size * len(f.groups) - len(kinds)
        names = {"full": "full-attention", "sliding": "sliding-window"}
        listed = " and ".join(f"{counts[k]} {names.get(k, k)} layers" for k in f.groups)
        return (f"vLLM sorts the layers into {len(f.groups)} KV-cache groups of {f.group_size} layers each "
                f"({listed}"
                + (f"; the shorter group is topped up with {padding} padding layer{'s' if padding != 1 else ''}, "
                   f"the log's 'Add {padding} padding layers' warning" if padding else "")
                + f"). A block holds one page of every layer of a group, {f.group_size} × {f.page_bytes:,} = "
                f"{f.bytes_per_block:,} B, so the space makes {f.num_blocks:,} blocks shared by the groups; one "
                f"request takes blocks in each group ({f.blocks_per_request} in all, the sliding-window group only "
                "its window's worth plus one), so concurrency is blocks ÷ that")
    return ""


def _explain(printed: int, learner: int | None, kvlib_tokens: int, blocks: int | None, block_size: int,
             spec, space_bytes: int, max_model_len: int) -> str:
    if learner is None:
        return "no prediction of yours to compare: set your formula in the cell."
    if learner == printed:
        return "your prediction is the engine's figure, to the token."
    layout = _layout_words(spec, space_bytes, max_model_len)
    if layout:
        return (f"{learner - printed:+,} tokens from the engine's figure. What your formula leaves out: {layout} "
                f"(kvlib: {kvlib_tokens:,} tokens).")
    naive = space_bytes // spec.kv_bytes_per_token() if spec.kv_bytes_per_token() else None
    if blocks is not None and learner == blocks * block_size:
        return (f"you counted whole blocks × {block_size} tokens ({learner:,}); vLLM from 0.20 prints "
                f"int(concurrency × max_model_len), the blocks one request needs counted in whole blocks "
                f"(kvlib: {kvlib_tokens:,}).")
    if naive is not None and learner == naive:
        return (f"you divided the space by bytes per token ({learner:,}); the engine hands out whole blocks of "
                f"{block_size} tokens per layer group and counts requests in whole blocks (kvlib: {kvlib_tokens:,}).")
    return (f"{learner - printed:+,} tokens from the engine's figure; kvlib's rules give {kvlib_tokens:,}: "
            f"recheck bytes per block and the blocks one request needs.")


def engine_lab_view(run: EngineRun, learner_tokens: int | None = None) -> str:
    """HTML: vLLM's own KV lines beside the learner's prediction and kvlib's, the difference explained.

    ``run`` is an ``EngineRun`` (a live start or the committed log shown instead).

    Used in: ch08_vllm_lab (through engine_lab).
    """
    lines = [strip_ansi(line) for line in run.log_lines if any(word in line for word in KV_LINE_WORDS)]
    parts = [f"<p><b>{'vLLM ran' if run.ran else 'Committed log'}:</b> {html.escape(run.message)}</p>",
             "<pre style='font-size:12px;white-space:pre-wrap'>" + html.escape("\n".join(lines[-6:])) + "</pre>"]
    if not run.ok:
        parts.append("<p>The log holds no KV-cache size line to compare.</p>")
        return "<div style='font-family:sans-serif;font-size:13px'>" + "".join(parts) + "</div>"
    spec = _spec_of(run.config)
    pred = predict_cpu_from_log(run.start, spec)
    printed = run.start.gpu_kv_cache_tokens
    bs = pred.block_size
    blocks = pred.blocks_min
    space = run.start.available_kv_cache_bytes
    rows = [("KV space", f"{run.start.available_kv_cache_text} GiB", "—", f"{space:,} B"),
            ("block size (tokens)", "—", "—", f"{bs}"),
            ("blocks", "—", "—", f"{blocks:,}" if blocks is not None else "—"),
            ("tokens", f"{printed:,}", f"{learner_tokens:,}" if learner_tokens is not None else "—",
             f"{pred.tokens_min:,}"),
            ("concurrency", run.start.max_concurrency_text or "—", "—",
             f"{pred.concurrency_min:.2f}" if pred.concurrency_min is not None else "—")]
    head = "<tr><th></th><th>vLLM printed</th><th>your prediction</th><th>kvlib</th></tr>"
    body = "".join("<tr>" + "".join(f"<td style='padding:2px 12px'>{c}</td>" for c in row) + "</tr>" for row in rows)
    parts.append(f"<table>{head}{body}</table>")
    verdict = "kvlib agrees with the engine" if pred.agrees else f"kvlib disagrees: {pred.reason}"
    explained = _explain(printed, learner_tokens, pred.tokens_min, blocks, bs, spec, space,
                         run.start.max_model_len or run.max_model_len)
    parts.append(f"<p>{html.escape(verdict)}.<br>You: "
                 f"{html.escape(explained)}</p>")
    return "<div style='font-family:sans-serif;font-size:13px'>" + "".join(parts) + "</div>"


def engine_lab(geometry: str, kv_space_gib: int, max_model_len: int, my_tokens=None, *,
               start_engine: bool = False, device: str = "cpu", timeout_s: float = 240) -> HTML:
    """The engine cell: start vLLM on ``geometry`` (only when ``start_engine``), show its lines beside predictions.

    ``my_tokens(config, kv_space_bytes, max_model_len)`` is the learner's prediction of the
    printed token count (None: no prediction). Without ``start_engine`` (the default, and what
    a headless run does) the committed log of the closest bundled start is shown. ``device``
    'cpu' runs vLLM's CPU build (``./dev.sh engine``); 'gpu' runs a GPU build named by
    ``KV_COURSE_GPU_ENGINE_PYTHON`` with a fixed KV size: that branch is untested (no CUDA
    machine in the course's CI). The start is killed with its process group at ``timeout_s``.
    Never raises on a failed start: the message says what happened.

    Used in: ch08_vllm_lab, ch10_state_and_sparsity.
    """
    config = engine_geometry(geometry)
    if not start_engine:
        run = run_engine(config, kv_space_gib, max_model_len, timeout_s, python=_NO_ENGINE)
        run = _replace_message(run, "START_ENGINE is False: " + _shown_words(geometry, config, run)
                               + "; set START_ENGINE = True to start the engine")
    elif device == "gpu":   # untested: needs a CUDA GPU and vLLM's GPU build
        python = os.environ.get("KV_COURSE_GPU_ENGINE_PYTHON")
        run = run_engine(config, kv_space_gib, max_model_len, timeout_s, python=python or _NO_ENGINE,
                         llm_kwargs={"kv_cache_memory_bytes": kv_space_gib * kv.GiB})
    else:   # the CPU build; without it run_engine says so in one line and returns the committed log
        run = run_engine(config, kv_space_gib, max_model_len, timeout_s)
    if start_engine and not run.ran:   # no engine here: name the committed start shown, as above
        run = _replace_message(run, run.message.split(": showing")[0] + ": " + _shown_words(geometry, config, run))
    used = run.config
    learner = None
    if my_tokens is not None:
        try:
            learner = int(my_tokens(used, run.kv_space_gib * kv.GiB, run.max_model_len))
        except Exception as exc:  # noqa: BLE001 -- the learner's formula failing is shown, not raised
            return HTML(engine_lab_view(run) + f"<p>your my_tokens raised {html.escape(type(exc).__name__)}: "
                        f"{html.escape(str(exc)[:200])}</p>")
    return HTML(engine_lab_view(run, learner))


def _shown_words(geometry: str, config: dict, run: EngineRun) -> str:
    """Which committed start is shown instead of ``geometry``, and that the prediction is for its config."""
    name = run.source.split(":")[-1]
    shown = run.config
    shape = (f"{shown.get('num_hidden_layers')} layers, {shown.get('num_key_value_heads')} KV heads of "
             f"{shown.get('head_dim')}")
    where = (f"the committed vLLM 0.32.0 CPU start of the bundled '{name}' model ({shape}; "
             f"{run.kv_space_gib} GiB, max_model_len {run.max_model_len})")
    if shown == config:
        return f"showing {where}"
    return (f"the course has no committed start for '{geometry}', so this shows {where}, the closest; the "
            "predictions below (yours and kvlib's) are for that model's config, not the one chosen")


def _replace_message(run: EngineRun, message: str) -> EngineRun:
    from dataclasses import replace
    return replace(run, message=message)


def _thread_words(url: str) -> str:
    """'vLLM issue #10517', 'a gateway-api-inference-extension pull request (#550)' from a GitHub thread's URL."""
    parts = url.rstrip("/").split("/")
    if len(parts) < 4:
        return "a public thread"
    repo, kind, number = parts[-3], parts[-2], parts[-1]
    kind = "issue" if kind == "issues" else "pull request"
    return f"vLLM {kind} #{number}" if repo == "vllm" else f"a {repo} {kind} (#{number})"


def log_source_words(name: str) -> str:
    """Where bundled log ``name`` was posted, in words: "vLLM issue #10517", "a gateway-api-inference-extension
    pull request (#550)", from the log's sidecar (``kvlib/data/vllm_logs/NN.json``).

    Used in: ch08_vllm_lab.
    """
    from importlib import resources
    sidecar = json.loads((resources.files("kvlib") / "data" / "vllm_logs" / f"{name}.json").read_text())
    return _thread_words(sidecar.get("url", ""))


def stats_source_words(name: str) -> str:
    """Where bundled stats lines ``name`` were posted, in words ('vLLM issue #43295'), and when.

    >>> stats_source_words("vllm-43295")
    'vLLM issue #43295, 2026-05-19'

    Used in: ch08_vllm_lab.
    """
    source = kv.vllm.bundled.bundled_stats_logs()[name]
    return f"{_thread_words(source['url'])}, {source['posted']}"


def release_span(releases) -> str:
    """Releases read that share a stats line's source line, as a span: ('0.20.2', ..., '0.23.0') -> '0.20–0.23'.

    >>> release_span(("0.20.2", "0.21.0", "0.22.1", "0.23.0")), release_span(("0.9.2",)), release_span(())
    ('0.20–0.23', '0.9.2', 'V0 (its metrics.py)')

    Used in: ch08_vllm_lab.
    """
    if not releases:
        return "V0 (its metrics.py)"
    if len(releases) == 1:
        return releases[0]
    first, last = (".".join(r.split(".")[:2]) for r in (releases[0], releases[-1]))
    return f"{first}–{last}"


def pool_sizing_table(starts, note: str = ""):
    """One row per ``(label, EngineStart)``: the version and engine printed, how the pool was sized and the
    line that says so (``EngineStart.pool_sizing``), the estimate a measured start printed, the figure the
    pool was counted from, and the count.

    Used in: ch08_vllm_lab.
    """
    from .text import table
    rows = []
    for label, start in starts:
        count = (f"{start.gpu_kv_cache_tokens:,} tokens" if start.gpu_kv_cache_tokens is not None
                 else f"{start.num_gpu_blocks:,} blocks" if start.num_gpu_blocks is not None else "—")
        rows.append([label, start.vllm_version or "not printed", (start.engine or "?").upper(),
                     f"**{start.pool_sizing or 'cannot tell'}**", start.pool_sizing_evidence or "—",
                     start.estimated_kv_cache_text or "—", start.available_kv_cache_text or "—", count])
    return table(["start", "version", "engine", "pool", "because", "estimate printed (GiB)",
                  "pool printed (GiB)", "count printed"], rows, note=note)


def stats_lines_table(names, note: str = ""):
    """Every stats line of the bundled excerpts ``names``, parsed by ``kvlib.vllm.stats_lines``: where it was
    posted, the releases its source line dates it to, running, waiting, the pool in use, the prefix-cache hit rate.

    Used in: ch08_vllm_lab.
    """
    from kvlib.vllm.bundled import read_bundled_stats_log
    from .text import table

    def pct(x):
        return "—" if x is None else f"{x:.1f}%"

    rows = []
    for name in names:
        for line in kv.vllm.stats_lines(read_bundled_stats_log(name)):
            rows.append([stats_source_words(name), release_span(line.releases), line.running, line.waiting,
                         "—" if line.swapped is None else line.swapped, f"{line.prompt_tokens_per_s:,.1f}",
                         f"{line.generation_tokens_per_s:,.1f}", f"{line.kv_cache_device} {pct(line.kv_cache_usage_percent)}",
                         pct(line.prefix_cache_hit_rate_percent)])
    return table(["posted in", "vLLM (by the line's source tag)", "running", "waiting", "swapped (V0)",
                  "prompt tokens/s", "generated tokens/s", "KV cache usage", "prefix-cache hit rate"],
                 rows, note=note)
