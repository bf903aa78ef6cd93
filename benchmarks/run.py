"""The course's benchmarks: one command, a printed table per section, BENCHMARKS.md.

    .venv/bin/python benchmarks/run.py [--class-size 200] [--repeats 3] [--only SECTION ...]

Sections (each a function below):
  vllm       kvlib's predicted block/token range against every real vLLM log; params vs published
  notebooks  seconds to execute each chapter's source notebook headless, and the whole course
  widgets    ms per update of each chapter's main widget callback (median, p95)
  tests      each chapter's share of the test suite's time (pytest's per-test durations, by chapter)
  simulators the simulators and planner at widget sizes (benchmarks/bench_simulators.py)
  grading    seconds per submission: plain `nbgrader autograde` vs `python -m autograder grade-class`
             on all cores, with and without isolation, on generated submissions
  report     the class slip report (python -m autograder report) on a generated class of
             --class-size stored results (benchmarks/bench_report.py)
  setup      wall time and disk size of ./dev.sh setup on an empty venv; `import kvlib` time
  site       ./dev.sh site's build (ten chapters executed, Sphinx): seconds and megabytes
  engine     ./dev.sh engine on an empty venv (time, disk) and vLLM CPU engine starts
             (benchmarks/bench_engine.py); only with --only engine (it installs 3.4 GB), and a
             run without it keeps the engine section already in the output file
Figures, not assertions: nothing here fails on a slow machine. Medians over --repeats runs.
Sized for a 2-core machine: the default class of 200 keeps the whole run under about 30 min.
"""

from __future__ import annotations

import argparse
import importlib.util
import csv
import datetime
import json
import os
import platform
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))
from common import md_table, median, p95  # noqa: E402

import kvlib as kv  # noqa: E402
from autograder.chapter import CHAPTER_IDS  # noqa: E402
from kvlib import vllm  # noqa: E402
from kvlib.vllm import parse_log, predict_from_log  # noqa: E402

PY = sys.executable
CHAPTERS = list(CHAPTER_IDS)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


# --- 1. kvlib against vLLM --------------------------------------------------------------
def _log_model(side: dict):
    """The model a log ran: the bundled config when kvlib ships it, else the sidecar's geometry."""
    if side["model"].startswith("cognitivecomputations/DeepSeek-V3"):
        return kv.load_model("deepseek-v3")  # AWQ weights, same MLA geometry
    try:
        return kv.load_model(side["model"])
    except kv.ConfigError:
        g = side["model_kv"]
        cfg = {k: g[k] for k in ("num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim")
               if k in g}
        cfg.setdefault("num_attention_heads", cfg["num_key_value_heads"])  # llava's sidecar lists only KV heads
        cfg.update(hidden_size=g.get("hidden_size", cfg["num_attention_heads"] * cfg["head_dim"]),
                   vocab_size=1000, intermediate_size=1000)
        if "sliding_window" in g and isinstance(g.get("layer_types"), str):
            n = cfg["num_hidden_layers"]
            cfg.update(sliding_window=g["sliding_window"],
                       layer_types=["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(n)])
        return kv.parse_config(cfg, name=side["model"])


def bench_vllm(args) -> str:
    data = kv.config.resources.files("kvlib") / "data" / "vllm_logs"
    rows, inside, compared = [], 0, 0
    for name in vllm.bundled_logs():
        side = json.loads((data / f"{name}.json").read_text())
        tp = side.get("tensor_parallel_size") or 1
        runs = [side] + [dict(side, **extra) for extra in side.get("additional_runs", [])]
        for i, start in enumerate(parse_log(vllm.read_bundled_log(name))):
            run_side = runs[min(i, len(runs) - 1)]
            spec = _log_model(run_side)
            try:
                p = predict_from_log(start, spec, tp=tp)
            except ValueError as exc:
                rows.append((f"{name}.log #{i + 1}", side["model"], "-", "-", f"not predicted: {exc}"))
                continue
            logged = start.num_gpu_blocks if start.num_gpu_blocks is not None else (
                None if start.gpu_kv_cache_tokens is None else start.gpu_kv_cache_tokens // p.block_size)
            rng = "-" if p.blocks_min is None else f"{p.blocks_min:,}-{p.blocks_max:,}"
            if p.agrees is not None:
                compared += 1
                inside += bool(p.agrees)
            err = "-" if p.error_blocks is None else str(p.error_blocks)
            rows.append((f"{name}.log #{i + 1}", run_side["model"],
                         "-" if start.available_kv_cache_gib is None else f"{start.available_kv_cache_gib} GiB",
                         "-" if logged is None else f"{logged:,}", rng, err,
                         {True: "yes", False: "NO", None: "n/a"}[p.agrees]))
    out = ["## kvlib against vLLM's startup logs", "",
           "Predicted from the printed available-memory figure (a range: the GiB is rounded to 2 decimals); "
           "error is blocks outside the range (0 = inside).", "",
           md_table(["log", "model", "available (printed)", "logged blocks", "predicted blocks", "error (blocks)",
                     "agrees"], [r if len(r) == 7 else (*r[:2], "-", "-", "-", "-", r[4]) for r in rows]),
           "", f"**{inside} of {compared}** logs that print both an available figure and a count fall inside "
               f"their predicted range."]
    published = {"meta-llama/Llama-3.1-8B": 8.03e9, "meta-llama/Llama-3.3-70B-Instruct": 70.55e9,
                 "meta-llama/Llama-2-7b-hf": 6.74e9, "meta-llama/Llama-2-70b-chat-hf": 68.98e9,
                 "Qwen/Qwen2.5-7B": 7.62e9, "Qwen/Qwen2.5-32B": 32.76e9, "mistralai/Mistral-7B-v0.1": 7.24e9,
                 "mistralai/Mixtral-8x7B-v0.1": 46.70e9, "deepseek-ai/DeepSeek-V3": 671e9,
                 "openai/gpt-oss-20b": 20.9e9, "google/gemma-2-9b-it": 9.24e9,
                 "microsoft/Phi-3-mini-4k-instruct": 3.82e9, "openai-community/gpt2-large": 774e6,
                 "Qwen/Qwen3-0.6B": 0.6e9}
    prow, within = [], 0
    for model, pub in published.items():
        n = kv.load_model(model).num_params()
        err = 100 * (n / pub - 1)
        within += abs(err) < 1
        prow.append((model, f"{pub / 1e9:.3f} B", f"{n / 1e9:.3f} B", f"{err:+.2f}%"))
    out += ["", "### Parameter counts against the published ones", "",
            md_table(["model", "published", "kvlib", "error"], prow), "",
            f"**{within} of {len(published)}** within 1%."]
    return "\n".join(out)


# --- 2. notebook run time ------------------------------------------------------------------
def _execute(path: Path) -> float:
    import nbformat
    from nbclient import NotebookClient
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    # ch09 draws its graded questions from a student id; a headless run gets a fixed one unless one is set.
    env = {**os.environ, "KV_COURSE_STUDENT": os.environ.get("KV_COURSE_STUDENT") or "benchmark-student"}
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute(env=env)
    return time.perf_counter() - start


def bench_notebooks(args) -> str:
    rows, total = [], []
    per = {c: [_execute(ROOT / "course" / "source" / c / f"{c}.ipynb") for _ in range(args.repeats)]
           for c in CHAPTERS}
    for r in range(args.repeats):
        total.append(sum(per[c][r] for c in CHAPTERS))
    rows = [(c, f"{median(t):.2f} s", f"{min(t):.2f} s") for c, t in per.items()]
    rows.append(("whole course", f"{median(total):.2f} s", f"{min(total):.2f} s"))
    return "\n".join(["## Notebook run time (source notebooks, headless, kernel start included)", "",
                      md_table(["chapter", "median", "best"], rows)])


# --- 3. widget latency -----------------------------------------------------------------------
#: Chapters whose explorer lives in kvdisplay: the view function each slider move calls.
def _ch01_args(rng, gpus):
    return dict(layers=rng.randint(1, 128), kv_heads=rng.choice([1, 2, 4, 8, 16, 32]),
                head_dim=rng.choice([64, 128, 256]), dtype_bytes=rng.choice([1, 2]),
                seq_len=rng.choice([1024, 8192, 32768, 131072]), batch_size=rng.randint(1, 256),
                gpu=rng.choice(gpus), weight_bytes=rng.choice([0, 16 * 10**9, 141 * 10**9]))


def _ch02_args(rng, gpus):
    kv_heads = rng.choice([1, 2, 4, 8, 16, 64])
    return dict(layers=rng.choice([32, 80]), num_heads=64, kv_heads=kv_heads, head_dim=128,
                dtype_bytes=rng.choice([1, 2]), tp=rng.choice([1, 2, 4, 8, 16]),
                seq_len=rng.choice([1024, 8192, 131072]), gpu=rng.choice(gpus),
                weight_bytes=rng.choice([0, 16 * 10**9, 141 * 10**9]))


def _ch03_args(rng, gpus):
    return dict(latent_dim=rng.choice([256, 512, 1024]), rope_dim=rng.choice([32, 64, 128]),
                layers=rng.randint(1, 96), tp=rng.choice([1, 2, 4, 8, 16]), dtype_bytes=rng.choice([1, 2]))


def _ch04_args(rng, gpus):
    return dict(model=rng.choice(["llama-3.1-8b", "qwen2.5-7b", "gpt-oss-20b"]), gpu=rng.choice(["H100-SXM", "A100-80GB"]),
                utilization=rng.choice([0.8, 0.9, 0.92]), kv_cache_dtype=rng.choice(["auto", "fp8"]),
                block_size=rng.choice([16, 32, 64, 128, 256]), context=rng.choice([1024, 8192, 32768]))


def _ch05_args(rng, gpus):
    return dict(prompt_tokens=rng.randint(1, 8192), block_size=rng.choice([16, 32, 64]),
                num_requests=rng.randint(1, 1000), bytes_per_token=131_072, model="llama-3.1-8b")


def _ch06_args(rng, gpus):
    return dict(model=rng.choice(["llama-3.1-8b", "llama-3.3-70b"]), batch=rng.randint(1, 256),
                context=rng.choice([1024, 4096, 32768]), gpu=rng.choice(["H100-SXM", "A100-80GB"]),
                kv_dtype_bytes=rng.choice([1, 2]), efficiency=rng.choice([0.6, 0.7, 1.0]))


def _ch07_args(rng, gpus):
    return dict(model=rng.choice(["llama-3.1-8b", "llama-3.3-70b", "qwen2.5-32b"]), gpu="H100-SXM",
                gpus_per_node=8, tp=rng.choice([1, 2, 4, 8]), users=rng.choice([100, 2000, 10000]),
                context=rng.choice([4096, 8192, 32768]), itl_ms=rng.choice([30.0, 60.0, 100.0]))


def _ch08_args(rng, gpus):
    return dict(layers=rng.choice([28, 32, 80]), kv_heads=rng.choice([1, 2, 8]), head_dim=rng.choice([64, 128]),
                dtype_bytes=rng.choice([1, 2]), block_size=rng.choice([16, 32]), tp=rng.choice([1, 2, 4]),
                available_gib=f"{rng.uniform(1, 70):.2f}", logged_blocks=rng.choice([None, 7191]))


def _ch09_args(rng, gpus):
    return dict(model=rng.choice(["llama-3.1-8b", "llama-3.3-70b", "llama-2-70b"]),
                gpu=rng.choice(["H100-SXM", "H200", "A100-80GB", "L40S"]),
                context=rng.choice([1024, 8192, 32768, 131072]), batch=rng.choice([1, 5, 32, 256]),
                kv_dtype_bytes=rng.choice([1, 2]))


def _ch10_args(rng, gpus):
    return dict(model=rng.choice(["qwen3-next-80b-a3b", "nemotron-h-56b", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"]),
                context=rng.choice([512, 4096, 32768, 262144, 1048576]), tp=rng.choice([1, 2, 4, 8]))


# chapter -> (kvdisplay view a slider move calls, random arguments for it)
EXPLORER_VIEWS = {
    "ch01_kv_formula": ("kv_explorer_view", _ch01_args),
    "ch02_gqa_tp": ("tp_explorer_view", _ch02_args),
    "ch03_mla": ("mla_explorer_view", _ch03_args),
    "ch04_pool_paging": ("pool_explorer_view", _ch04_args),
    "ch05_prefix_reuse": ("prefix_sharing_view", _ch05_args),
    "ch06_crossover": ("crossover_view", _ch06_args),
    "ch07_capacity_plan": ("planner_view", _ch07_args),
    "ch08_vllm_lab": ("block_window_view", _ch08_args),
    "ch09_interview_drills": ("interview_sheet_view", _ch09_args),
    "ch10_state_and_sparsity": ("sequence_memory_view", _ch10_args),
}


def bench_widgets(args) -> str:
    import kvdisplay
    rows = []
    gpus = list(kv.GPUS)
    for chapter in CHAPTERS:
        if chapter not in EXPLORER_VIEWS:
            rows.append((chapter, "-", "-", "no explorer view registered (EXPLORER_VIEWS)"))
            continue
        name, arguments = EXPLORER_VIEWS[chapter]
        view = getattr(kvdisplay, name)
        rng = random.Random(0)
        calls = [arguments(rng, gpus) for _ in range(300)]
        times = []
        for kwargs in calls:
            t0 = time.perf_counter()
            view(**kwargs)
            times.append((time.perf_counter() - t0) * 1e3)
        rows.append((chapter, f"{median(times):.3f} ms", f"{p95(times):.3f} ms", f"kvdisplay.{name}(): kvlib + HTML view"))
    return "\n".join(["## Widget latency (the callback each slider move runs; goal < 100 ms)", "",
                      md_table(["chapter", "median", "p95", "what is timed"], rows)])


# --- 3b. each chapter's share of the test suite -------------------------------------------
def _chapter_of(nodeid: str, classname: str) -> str:
    for chapter in CHAPTERS:
        short = chapter.split("_")[0]          # ch01: test_checks_ch01.py and the like
        if chapter in nodeid or f"_{short}" in classname or f"{short}_" in nodeid.split("::")[-1]:
            return chapter
    return "shared (names no chapter)"


def bench_tests(args) -> str:
    """Run the suite once with per-test timings and add them up by the chapter each test names."""
    import xml.etree.ElementTree as ET
    with tempfile.TemporaryDirectory(prefix="kv-bench-tests-") as tmp:
        report = Path(tmp) / "junit.xml"
        paths = args.test_paths or ["tests", "kvlib", "kvcoach", "kvdisplay", "autograder"]
        log = Path(tmp) / "pytest.log"
        t0 = time.perf_counter()
        with log.open("w") as out:   # a file, not a pipe: the browser tests' Jupyter server logs a lot
            proc = subprocess.run([PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}",
                                   *paths], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        wall = time.perf_counter() - t0
        if not report.exists():
            return f"## Test time by chapter\n\npytest wrote no report:\n```\n{log.read_text()[-2000:]}\n```"
        by, counts, failed = {}, {}, []
        for case in ET.parse(report).iter("testcase"):
            nodeid = f"{case.get('classname', '')}::{case.get('name', '')}"
            if case.find("failure") is not None or case.find("error") is not None:
                failed.append(nodeid)
            key = _chapter_of(nodeid, case.get("classname", ""))
            by[key] = by.get(key, 0.0) + float(case.get("time", 0))
            counts[key] = counts.get(key, 0) + 1
    total = sum(by.values())
    rows = [(k, counts[k], f"{v:.1f} s", f"{100 * v / total:.1f}%") for k, v in sorted(by.items())]
    rows.append(("all tests", sum(counts.values()), f"{total:.1f} s", "100%"))
    return "\n".join(["## Test time by chapter (share of the suite)", "",
                      f"`pytest {' '.join(paths)}`: {wall:.0f} s wall, exit {proc.returncode}. A test counts for "
                      "a chapter when its id names the chapter (parametrized notebook, build and browser tests, "
                      "`test_checks_chNN.py`); the grading tests run on chapter 01's notebooks but name no "
                      "chapter, so they sit under shared.", "",
                      md_table(["chapter", "tests", "time", "share"], rows)]
                     + (["", "Failed in this run: " + ", ".join(f"`{f}`" for f in failed)] if failed else []))


# --- 4. simulators -----------------------------------------------------------------------------
def bench_simulators(args) -> str:
    proc = run([PY, str(HERE / "bench_simulators.py"), "--repeats", str(max(3, args.repeats))], cwd=ROOT)
    text = proc.stdout.strip() or proc.stderr.strip()
    return "## Simulators and planner at widget sizes\n\n" + text


# --- 5. grading throughput -----------------------------------------------------------------------
SOLUTION_MARKER = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n?", re.MULTILINE)


def _make_class(dest: Path, size: int, assignment: str) -> tuple[Path, dict]:
    """`size` submissions with a mix of right, slipped and blank answers; (submitted/, {student: kind})."""
    import nbformat
    solution = nbformat.read(ROOT / "solutions" / f"{assignment}.ipynb", as_version=4)
    release = nbformat.read(ROOT / "chapters" / f"{assignment}.ipynb", as_version=4)
    answers = {c.metadata["nbgrader"]["grade_id"]: c.source for c in solution.cells
               if c.metadata.get("nbgrader", {}).get("solution")}
    blank = {c.metadata["nbgrader"]["grade_id"]: c.source for c in release.cells
             if c.metadata.get("nbgrader", {}).get("solution")}
    slips = [("2 * layers", "layers"), ("kv_heads", "kv_heads * 4"), ("dtype_bytes", "dtype_bytes * 8"),
             ("budget_bytes // per_sequence", "-(-budget_bytes // per_sequence)"), ("* 2**30", "* 10**9")]
    rng = random.Random(1)
    submitted = dest / "submitted"
    kinds = {}
    for i in range(size):
        nb = nbformat.from_dict(json.loads(json.dumps(release)))
        kind = rng.choices(["right", "slip", "blank"], weights=[5, 4, 1])[0]
        for cell in nb.cells:
            gid = cell.metadata.get("nbgrader", {}).get("grade_id")
            if gid in answers:
                src = answers[gid] if kind != "blank" else blank[gid]
                if kind == "slip" and rng.random() < 0.5:
                    old, new = rng.choice(slips)
                    if old in src:
                        src = src.replace(old, new, 1)
                        kinds.setdefault(f"student{i:03d}", "slipped")
                cell.source = SOLUTION_MARKER.sub("", src)
        folder = submitted / f"student{i:03d}" / assignment
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / f"{assignment}.ipynb")
        (folder / "timestamp.txt").write_text("2026-11-30 00:00:00.000000 UTC")
        kinds.setdefault(folder.parent.name, "right" if kind != "blank" else "blank")
    return submitted, kinds


def _max_points(assignment: str) -> float:
    import nbformat
    nb = nbformat.read(ROOT / "course" / "source" / assignment / f"{assignment}.ipynb", as_version=4)
    return sum(c.metadata["nbgrader"].get("points", 0) for c in nb.cells
               if c.metadata.get("nbgrader", {}).get("grade"))


def _copy_batch(submitted: Path, students: list, dest: Path) -> Path:
    for student in students:
        shutil.copytree(submitted / student, dest / "submitted" / student)
    return dest / "submitted"


def _plain_nbgrader(batch: Path, students: list, work: Path, assignment: str, env: dict) -> tuple[float, dict]:
    """One `nbgrader autograde` over a fresh course copy holding these students; (seconds, scores)."""
    course = work / "course"
    shutil.copytree(ROOT / "course", course, ignore=shutil.ignore_patterns("gradebook.db", "release",
                                                                             "submitted", "autograded"))
    _copy_batch(batch, students, course)
    nbgrader = str(Path(PY).parent / "nbgrader")
    run([nbgrader, "generate_assignment", assignment, "--force"], cwd=course, env=env)
    t0 = time.perf_counter()
    proc = run([nbgrader, "autograde", assignment], cwd=course, env=env)
    took = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"nbgrader autograde failed:\n{proc.stderr[-2000:]}")
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        scores = {s: gb.find_submission(assignment, s).score for s in students}
    return took, scores


def _grade_class(batch: Path, students: list, work: Path, assignment: str, env: dict) -> tuple[float, dict]:
    """`python -m autograder grade-class` on all cores over these students; (seconds, scores)."""
    submitted = _copy_batch(batch, students, work)
    t0 = time.perf_counter()
    proc = run([PY, "-m", "autograder", "grade-class", str(submitted), "--assignment", assignment,
                "--jobs", str(os.cpu_count()), "--out", str(work / "out")], cwd=ROOT, env=env)
    took = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"grade-class failed:\n{proc.stderr[-2000:]}")
    with open(work / "out" / f"{assignment}_grades.csv", newline="") as f:
        scores = {r["student"]: float(r["score"]) for r in csv.DictReader(f)}
    return took, scores


def bench_grading(args) -> str:
    """The class is graded in `repeats` interleaved batches, each by all three graders in a rotating
    order, so every grader sees all `class_size` submissions, each figure is a median over batches,
    and each speed-up is a ratio within one batch (same submissions, same machine load)."""
    from autograder import sandbox
    assignment = "ch01_kv_formula"
    n, repeats = args.class_size, max(1, args.repeats)
    env = dict(os.environ, PATH=f"{Path(PY).parent}:{os.environ.get('PATH', '')}")
    env.pop("REQUIRE_ISOLATION", None)
    strongest = sandbox.detect_level()
    # The course config sandboxes plain nbgrader too; the "no isolation" baseline asks for python3.
    graders = [("plain `nbgrader autograde` (1 process, no isolation)", _plain_nbgrader,
                dict(env, KV_COURSE_UNSANDBOXED="1")),
               (f"`grade-class --jobs {os.cpu_count()}` (isolation: {strongest})", _grade_class, env),
               (f"`grade-class --jobs {os.cpu_count()}` (isolation off)", _grade_class,
                dict(env, SANDBOX_LEVEL="none"))]
    walls = {label: [] for label, _, _ in graders}   # per batch: (seconds, submissions)
    scores = {label: {} for label, _, _ in graders}
    with tempfile.TemporaryDirectory(prefix="kv-bench-") as tmp:
        tmp = Path(tmp)
        submitted, kinds = _make_class(tmp / "class", n, assignment)
        students = sorted(p.name for p in submitted.iterdir())
        for b in range(repeats):
            batch = students[b::repeats]
            order = graders[b % 3:] + graders[:b % 3]   # rotate: no grader always runs first
            for label, grader, grader_env in order:
                work = tmp / f"batch{b}" / f"grader{[g[0] for g in graders].index(label)}"
                took, got = grader(submitted, batch, work, assignment, grader_env)
                walls[label].append((took, len(batch)))
                scores[label].update(got)
                print(f"  batch {b + 1}/{repeats}: {label}: {len(batch)} in {took:.1f} s", flush=True)
    plain_label = graders[0][0]
    rows = []
    for label, _, _ in graders:
        per_sub = [t / k for t, k in walls[label]]
        ratios = [p / t for (p, _), (t, _) in zip(walls[plain_label], walls[label])]
        rows.append((label, n, f"{sum(t for t, _ in walls[label]):.1f} s", f"{median(per_sub):.2f} s",
                     f"{min(per_sub):.2f}-{max(per_sub):.2f} s", f"{median(ratios):.2f}x"))
    iso, off = graders[1][0], graders[2][0]
    cost = median([t / o for (t, _), (o, _) in zip(walls[iso], walls[off])])
    agree = sum(scores[plain_label].get(s) == scores[iso].get(s) == scores[off].get(s) for s in students)
    by_kind = []
    for kind in ("right", "slipped", "blank"):
        got = sorted(scores[plain_label][s] for s in students if kinds[s] == kind)
        if got:
            by_kind.append(f"{kind} {len(got)} (median {median(got):g}, {got[0]:g}-{got[-1]:g})")
    return "\n".join([
        f"## Grading throughput (chapter 01, {n} generated submissions: right, slipped, blank)", "",
        f"The class is graded in {repeats} interleaved batches of about {n // repeats}; each batch by all three "
        "graders, in a rotating order. Per submission: the median over batches (and their range); "
        "speed-up: the median of the within-batch ratios.", "",
        md_table(["grader", "submissions", "wall (all batches)", "per submission (median)", "range",
                  "speed-up vs plain"], rows), "",
        f"Isolation's cost ({strongest} vs off, within-batch ratio): **{cost:.2f}x**. "
        f"The three graders gave the same score to **{agree} of {n}** submissions. "
        f"Scores out of {_max_points(assignment):g} by kind (plain nbgrader): " + "; ".join(by_kind) + "."])


def bench_report(args) -> str:
    import bench_report as B
    return B.bench(args.class_size, args.repeats)


# --- 6. setup and import ---------------------------------------------------------------------------
def _du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def bench_setup(args) -> str:
    rows = []
    with tempfile.TemporaryDirectory(prefix="kv-setup-") as tmp:
        copy = Path(tmp) / "repo"
        shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(".venv", ".git", "artefacts", "workspace"))
        t0 = time.perf_counter()
        proc = run(["bash", str(copy / "dev.sh"), "setup"], cwd=copy)
        took = time.perf_counter() - t0
        size = _du(copy / ".venv") if (copy / ".venv").exists() else 0
        rows.append(("`./dev.sh setup` on an empty venv" + ("" if proc.returncode == 0 else " (FAILED)"),
                     f"{took:.1f} s", f"{size / 1e6:,.0f} MB ({size / 2**20:,.0f} MiB)"))
    code = "import time; t = time.perf_counter(); import kvlib; print(time.perf_counter() - t)"
    times = [float(run([PY, "-c", code]).stdout) * 1e3 for _ in range(max(5, args.repeats))]
    rows.append(("`import kvlib` (fresh interpreter)", f"{median(times):.1f} ms (median of {len(times)})", "-"))
    return "\n".join(["## Setup and import", "", md_table(["what", "time", "disk"], rows),
                      "", "Pip reads the machine's configured wheel caches; a cold download takes longer."])


# --- 7. the executed site --------------------------------------------------------------------------
def bench_site(args) -> str:
    """./dev.sh site's build (tools/build_site.py) into a scratch folder: time and size."""
    spec = importlib.util.spec_from_file_location("build_site", ROOT / "tools" / "build_site.py")
    build_site = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build_site)
    with tempfile.TemporaryDirectory(prefix="kv-site-") as tmp:
        out = Path(tmp) / "site"
        figures = build_site.build(out, jobs=2, repo="OWNER/kv-course", branch="HEAD")
        parts = {"pages (HTML)": sum(f.stat().st_size for f in out.glob("*.html")),
                 "plots (_images/)": _du(out / "_images") if (out / "_images").exists() else 0,
                 "theme, CSS, JS, search (_static/, searchindex.js)":
                     _du(out / "_static") + (out / "searchindex.js").stat().st_size,
                 "release notebooks (notebooks/)": _du(out / "notebooks")}
    rows = [("execute the ten chapters (nbclient, 2 at a time)", f"{figures['execute_s']:.1f} s", "-"),
            ("render with Sphinx + myst-nb", f"{figures['total_s'] - figures['execute_s']:.1f} s", "-"),
            ("whole build", f"{figures['total_s']:.1f} s",
             f"{figures['bytes'] / 1e6:.1f} MB ({figures['bytes'] / 2**20:.1f} MiB), {figures['files']} files")]
    rows += [(f"of which {name}", "-", f"{size / 1e6:.2f} MB") for name, size in parts.items()]
    return "\n".join(["## Executed site (`./dev.sh site`, tools/build_site.py)", "",
                      md_table(["what", "time", "size"], rows), "",
                      "Offline: nothing is downloaded at build or read time. The tools' install "
                      "(tools/site/requirements.txt) is not counted."])


def bench_engine(args) -> str:
    from bench_engine import bench_engine as engine_section
    return engine_section(args)


def bench_forward(args) -> str:
    from bench_forward_pool import bench_forward_pool
    return bench_forward_pool(args)


SECTIONS = {"vllm": bench_vllm, "notebooks": bench_notebooks, "widgets": bench_widgets, "tests": bench_tests,
            "simulators": bench_simulators, "grading": bench_grading, "report": bench_report, "setup": bench_setup,
            "site": bench_site, "engine": bench_engine, "forward": bench_forward}
OPT_IN = ("engine",)        # run only when named in --only; otherwise the file's section is kept


def _versions() -> str:
    names = ["jupyterlab", "nbgrader", "ipywidgets", "sympy", "matplotlib", "nbclient", "pytest"]
    found = []
    for name in names:
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            pass
    return ", ".join(found)


def _keep_mutation_section(text: str, output: Path) -> str:
    """``text`` plus the mutation-score section of the file it replaces (benchmarks/mutation.py writes it)."""
    from mutation import BEGIN, END, write_section
    old = output.read_text() if output.is_file() else ""
    if BEGIN not in old or END not in old:
        return text
    return write_section(text, BEGIN + old.split(BEGIN, 1)[1].split(END, 1)[0] + END)


def _merge_sections(old_text: str, new_parts: list) -> list:
    """The ``## `` sections of ``old_text`` with those in ``new_parts`` replaced (same heading) or added."""
    def heading(part):
        return part.splitlines()[0].split("(")[0].strip()
    old_parts = ["## " + p.strip() for p in old_text.split("\n## ")[1:]]
    new_by = {heading(p): p for p in new_parts}
    merged = [new_by.pop(heading(p), p) for p in old_parts]
    return merged + list(new_by.values())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--class-size", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", nargs="*", choices=list(SECTIONS), default=None)
    parser.add_argument("--output", default=str(ROOT / "BENCHMARKS.md"))
    parser.add_argument("--test-paths", nargs="*", default=None,
                        help="tests section: what pytest runs (default: the whole suite, as ./dev.sh test)")
    args = parser.parse_args(argv)
    chosen = args.only or [name for name in SECTIONS if name not in OPT_IN]
    header = ["# Benchmarks", "",
              f"Run {datetime.date.today().isoformat()} on {os.cpu_count()} cores "
              f"({platform.machine()}, Python {platform.python_version()}); {_versions()}.",
              f"Command: `python benchmarks/run.py --class-size {args.class_size} --repeats {args.repeats}`"
              + (f" --only {' '.join(chosen)}" if args.only else "") + ". Medians over the repeats."
              + " Sections this run did not produce keep the figures of an earlier run.", ""]
    parts = []
    for name in chosen:
        t0 = time.perf_counter()
        text = SECTIONS[name](args)
        print(text, f"\n({name}: {time.perf_counter() - t0:.0f} s)\n", flush=True)
        parts.append(text)
    output = Path(args.output)
    old = output.read_text() if output.is_file() else ""
    from mutation import BEGIN, END
    if BEGIN in old and END in old:   # benchmarks/mutation.py owns that section; put back below
        old = old.split(BEGIN, 1)[0] + old.split(END, 1)[1]
    # Sections this run did not produce (--only, the opt-in engine section) keep their last figures.
    parts = _merge_sections(old, parts)
    text = "\n".join(header) + "\n" + "\n\n".join(parts) + "\n"
    output.write_text(_keep_mutation_section(text, output))
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
