"""The class slip report (``python -m autograder report``) on a generated class: build time for N students.

    .venv/bin/python benchmarks/bench_report.py [--class-size 200] [--repeats 3]

Grading 200 notebooks for real takes about half an hour on 2 cores, so the class is made from
real results: ``grade-class`` grades two notebooks of chapter 01 (the solutions and the blank
release), then each generated student's stored result is one of them, or the solutions' result
with one exercise judged again in-process (``autograder.verdict._judge_exercise``, the grader's
own judging, on the exercise's visible and hidden cases) for a slipped answer (``SLIPPED``).
Every result goes into the gradebook and ``results/`` with ``autograder.classroom._record``, as
grade-class writes them. ``tests/test_class_gradebook.py`` builds its class of 200 the same way.
Prints the seconds to build the report and to write its HTML (with the plot) and CSV.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

ASSIGNMENT = "ch01_kv_formula"
SOLUTION_MARKER = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n?", re.MULTILINE)

#: A slipped answer: (answer cell's grade id, the solution's text replaced, by what). Which slip each
#: one is, is for the tests to say (tests/test_class_gradebook.py), from what the edit does.
SLIPPED = {
    "q1_bits": ("ch01_q1_answer", "* dtype_bytes\n", "* dtype_bytes * 8\n"),
    "q2_no_kv_factor": ("ch01_q2_answer", "return 2 * layers", "return layers"),
    "q4_ceil": ("ch01_q4_answer", "budget_bytes // per_sequence", "-(-budget_bytes // per_sequence)"),
    "q5_label_gib": ("ch01_q5_answer", 'gpu["cuda_total_gib"] * 2**30', 'gpu["label_gb"] * 2**30'),
}
#: The test (grade) cell each answer cell is checked by.
TEST_OF = {"ch01_q1_answer": "ch01_q1_bytes_per_token_from_config", "ch01_q2_answer": "ch01_q2_kv_bytes_per_sequence",
           "ch01_q4_answer": "ch01_q4_sequences_that_fit", "ch01_q5_answer": "ch01_q5_sequences_on_gpu"}


def solution_sources(assignment: str = ASSIGNMENT) -> dict:
    """``{answer grade id: source}`` of the committed solutions notebook (markers removed)."""
    nb = json.loads((ROOT / "solutions" / f"{assignment}.ipynb").read_text(encoding="utf-8"))
    out = {}
    for cell in nb["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("solution"):
            src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            out[meta["grade_id"]] = SOLUTION_MARKER.sub("", src)
    return out


def slipped_source(kind: str, sources: dict | None = None) -> tuple[str, str]:
    """(answer grade id, the answer cell with ``kind``'s slip)."""
    answer_id, old, new = SLIPPED[kind]
    src = (sources or solution_sources())[answer_id]
    if old not in src:
        raise ValueError(f"{kind}: {old!r} is not in the solution of {answer_id}")
    return answer_id, src.replace(old, new, 1)


def judged_test(kind: str, right_test: dict, seed: int, sources: dict | None = None) -> dict:
    """The stored test entry of ``kind``'s slipped exercise: the solutions' entry, judged again with the
    slipped function on the exercise's visible and hidden cases (``seed``), as grade-class records it when
    both nbgrader and the outside check fail it."""
    from autograder import verdict
    from autograder.checks import ch01, runner

    answer_id, src = slipped_source(kind, sources)
    ex = ch01.EXERCISES[TEST_OF[answer_id]]
    namespace: dict = {}
    exec(compile(src, f"<{kind}>", "exec"), namespace)   # the course's own solution, edited: trusted code
    visible, hidden = list(ex.cases(False, seed)), list(ex.cases(True, seed))
    records = runner.run_cases(ex, namespace[ex.function_name], visible + hidden, quiet=True)
    judged, _ = verdict._judge_exercise(ex, ex.grade_id, right_test["max_points"], visible + hidden,
                                        len(visible), records)
    entry = dict(right_test, **judged.as_test())
    entry.update(points=0, nbgrader_points=0, verdict_points=0, passed=False, needs_manual=False,
                 slip=verdict.named_slip(entry["slips"]))
    return entry


def templates(right: dict, blank: dict, seed: int | None = None) -> dict:
    """``{kind: result}``: the two real results and one spliced result per ``SLIPPED`` kind (hidden cases
    from ``seed``: default the right result's own seed when it was stored by value, else the checks')."""
    from autograder.checks import schema

    seed = seed if seed is not None else (right.get("seed") or {}).get("value", schema.DEFAULT_HIDDEN_SEED)
    sources = solution_sources()
    out = {"right": right, "blank": blank}
    for kind, (answer_id, _, _) in SLIPPED.items():
        result = copy.deepcopy(right)
        gid = TEST_OF[answer_id]
        result["tests"] = [judged_test(kind, t, seed, sources) if t["grade_id"] == gid else t for t in result["tests"]]
        result["score"] = sum(t["points"] for t in result["tests"])
        result["reason"] = f"1 of {len(result['tests'])} tests failed: {gid}"
        out[kind] = result
    return out


def write_class(out: Path, gradebook: Path, kinds: dict, made: dict, assignment: str = ASSIGNMENT) -> None:
    """A class's output folder: ``out/gradebook.db`` (a copy of ``gradebook``, its students removed) and
    ``out/results/<assignment>/``, every student ``student: kind`` given ``made[kind]``'s result."""
    from nbgrader.api import Gradebook

    from autograder.classroom import _record

    results_dir = out / "results" / assignment
    results_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(gradebook, out / "gradebook.db")
    with Gradebook(f"sqlite:///{out / 'gradebook.db'}") as gb:
        for student in [s.id for s in gb.students]:
            gb.remove_student(student)
    # nbgrader's own code warns that the removed students' objects are gone from its session: they are
    warnings.filterwarnings("ignore", message="Object of type <Submitted", module="nbgrader")
    with Gradebook(f"sqlite:///{out / 'gradebook.db'}") as gb:
        _no_sync(gb)
        for student, kind in kinds.items():
            result = copy.deepcopy(made[kind])
            result["student"] = student
            _record(gb, assignment, result, results_dir)


def _no_sync(gb) -> None:
    """A scratch gradebook need not survive a power cut: no fsync per commit (200 students' commits
    otherwise take a minute on a busy disk). The rows written are the same."""
    from sqlalchemy import text

    gb.db.execute(text("PRAGMA synchronous=OFF"))
    gb.db.execute(text("PRAGMA journal_mode=MEMORY"))


def class_kinds(size: int, seed: int = 1) -> dict:
    """``{student: kind}``: right, slipped (each ``SLIPPED`` kind alike) and blank, 5 : 4 : 1."""
    rng = random.Random(seed)
    kinds = {}
    for i in range(size):
        kind = rng.choices(["right", "slip", "blank"], weights=[5, 4, 1])[0]
        kinds[f"student{i:03d}"] = rng.choice(sorted(SLIPPED)) if kind == "slip" else kind
    return kinds


def _grade_two(work: Path) -> tuple[dict, dict, Path]:
    """grade-class on the solutions and the blank release; (right result, blank result, gradebook)."""
    for name, nb in (("right", ROOT / "solutions" / f"{ASSIGNMENT}.ipynb"),
                     ("blank", ROOT / "chapters" / f"{ASSIGNMENT}.ipynb")):
        folder = work / "submitted" / name / ASSIGNMENT
        folder.mkdir(parents=True)
        text = SOLUTION_MARKER.sub("", nb.read_text(encoding="utf-8"))
        (folder / f"{ASSIGNMENT}.ipynb").write_text(text, encoding="utf-8")
    run = subprocess.run([sys.executable, "-m", "autograder", "grade-class", str(work / "submitted"), "--assignment",
                          ASSIGNMENT, "--out", str(work / "out"), "--jobs", "2"], cwd=ROOT,
                         capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(f"grade-class failed:\n{run.stderr[-2000:]}")
    results = work / "out" / "results" / ASSIGNMENT
    return (json.loads((results / "right.json").read_text()), json.loads((results / "blank.json").read_text()),
            work / "out" / "gradebook.db")


def bench(size: int, repeats: int) -> str:
    from autograder import report as R

    with tempfile.TemporaryDirectory(prefix="kv-bench-report-") as tmp:
        tmp = Path(tmp)
        right, blank, gradebook = _grade_two(tmp / "graded")
        made = templates(right, blank)
        kinds = class_kinds(size)
        t0 = time.perf_counter()
        write_class(tmp / "class", gradebook, kinds, made)
        stored = time.perf_counter() - t0
        builds, writes = [], []
        for _ in range(max(1, repeats)):
            t0 = time.perf_counter()
            built = R.class_report(tmp / "class", ASSIGNMENT)
            builds.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            R.write(built, tmp / "r.html", tmp / "r.csv")
            writes.append(time.perf_counter() - t0)
        size_kb = (tmp / "r.html").stat().st_size / 1000
        commands = []
        for _ in range(max(1, repeats)):      # the whole command: a fresh process, imports included
            t0 = time.perf_counter()
            run = subprocess.run([sys.executable, "-m", "autograder", "report", str(tmp / "class"), "--assignment",
                                  ASSIGNMENT, "--html", str(tmp / "c.html"), "--csv", str(tmp / "c.csv")],
                                 cwd=ROOT, capture_output=True, text=True)
            commands.append(time.perf_counter() - t0)
            if run.returncode != 0:
                raise SystemExit(f"report failed:\n{run.stderr[-2000:]}")
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import nbgrader.api"], check=True)
        nbgrader_import = time.perf_counter() - t0
    builds.sort()
    writes.sort()
    commands.sort()
    mid = len(builds) // 2
    return (f"## Class slip report ({size} generated students, chapter 01)\n\n"
            f"`python -m autograder report` on a class of {size} stored results (right, slipped, blank: "
            f"`benchmarks/bench_report.py`), medians of {len(builds)}: reading the gradebook and results and "
            f"counting **{builds[mid]:.2f} s**, writing the HTML (with the plot) and CSV **{writes[mid]:.2f} s** "
            f"(HTML {size_kb:.0f} kB); the whole command, a fresh process: **{commands[mid]:.1f} s** "
            f"(of which starting Python and importing nbgrader's API alone: {nbgrader_import:.1f} s). "
            f"Storing the {size} results and grades as grade-class does took {stored:.1f} s.")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--class-size", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    print(bench(args.class_size, args.repeats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
