"""nbgrader over the generated course, through the grading CLI.

* The source notebook scores full marks, the blank release zero, and each slip
  in a small catalogue gets its named feedback (one ``grade-class`` run grades
  them all, in parallel, into a gradebook and a CSV; a re-run grades nobody twice).
* ``python -m autograder grade`` gives the right status and reason for good,
  wrong and broken notebooks (truncated, empty, not UTF-8, nbformat 3, another
  assignment, a kernel killed by os._exit, an infinite loop), and exits 2 only
  on usage errors.
* Nothing is written into the checkout.

About 60 s: each grade is about 1 s of autograde in the sandboxed kernel plus
the out-of-process check, and 3-4 s of start-up, so submissions are batched
and the single-notebook runs go two at a time. The hostile corpus graded as a
class is tests/test_hostile_class.py.
"""

from __future__ import annotations

import copy
import csv
import importlib.util
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parents[1]
COURSE = REPO / "course"
ASSIGNMENT = "ch01_kv_formula"
TESTS = {"q1": "ch01_q1_bytes_per_token_from_config", "q2": "ch01_q2_kv_bytes_per_sequence",
         "q3": "ch01_q3_kv_bytes_per_batch", "q4": "ch01_q4_sequences_that_fit",
         "q5": "ch01_q5_sequences_on_gpu", "q6": "ch01_q6_kv_head_sharing"}
#: The points each test cell of the source states (the contract: 3, 1, 1, 2, 2, 2), and their sum.
POINTS = dict(zip(TESTS, (3, 1, 1, 2, 2, 2)))
MAX_SCORE = sum(POINTS.values())
N_TESTS = len(TESTS)

# --- the slip catalogue: answer cell -> code with one classic mistake -> words the feedback must hold
SLIPS = {
    "query_heads": ("q1", '''
def bytes_per_token_from_config(config, dtype_bytes=2):
    layers = config.get("num_hidden_layers", config.get("n_layer"))
    heads = config.get("num_attention_heads", config.get("n_head"))
    hidden = config.get("hidden_size", config.get("n_embd"))
    head_dim = config.get("head_dim") or hidden // heads
    return 2 * layers * heads * head_dim * dtype_bytes  # query heads, not KV heads
''', "query heads"),
    "hidden_over_heads": ("q1", '''
def bytes_per_token_from_config(config, dtype_bytes=2):
    layers = config.get("num_hidden_layers", config.get("n_layer"))
    heads = config.get("num_attention_heads", config.get("n_head"))
    hidden = config.get("hidden_size", config.get("n_embd"))
    kv_heads = config.get("num_key_value_heads") or heads
    return 2 * layers * kv_heads * (hidden // heads) * dtype_bytes  # ignores an explicit head_dim
''', "hidden_size / num_attention_heads"),
    "missing_kv_factor": ("q2", '''
def kv_bytes_for_sequence(layers, kv_heads, head_dim, dtype_bytes, seq_len):
    return layers * kv_heads * head_dim * dtype_bytes * seq_len  # no 2 for K and V
''', "factor 2"),
    "bits_not_bytes": ("q2", '''
def kv_bytes_for_sequence(layers, kv_heads, head_dim, dtype_bytes, seq_len):
    return 2 * layers * kv_heads * head_dim * (8 * dtype_bytes) * seq_len  # bits
''', "bits"),
    "answer_in_kib": ("q3", '''
def kv_bytes_for_batch(layers, kv_heads, head_dim, dtype_bytes, seq_len, batch_size):
    return 2 * layers * kv_heads * head_dim * dtype_bytes * seq_len * batch_size // 1024  # KiB
''', "KiB"),
    "ceil_not_floor": ("q4", '''
import math

def sequences_that_fit(budget_bytes, layers, kv_heads, head_dim, dtype_bytes, seq_len):
    return math.ceil(budget_bytes / (2 * layers * kv_heads * head_dim * dtype_bytes * seq_len))
''', "floor"),
    "label_memory": ("q5", '''
def sequences_on_gpu(gpu, num_params, weight_dtype_bytes, utilization, other_bytes, bytes_per_token, seq_len):
    memory = gpu["label_gb"] * 10**9  # the label, not what CUDA reports
    pool = memory * utilization - num_params * weight_dtype_bytes - other_bytes
    return max(0, int(pool // (bytes_per_token * seq_len)))
''', "the label"),
    "inverted_ratio": ("q6", '''
def kv_head_sharing(config, dtype_bytes=2):
    layers = config.get("num_hidden_layers") or config.get("n_layer")
    heads = config.get("num_attention_heads") or config.get("n_head")
    kv_heads = config.get("num_key_value_heads") or heads
    head_dim = config.get("head_dim") or (config.get("hidden_size") or config.get("n_embd")) // heads
    return kv_heads // heads, 2 * layers * (heads - kv_heads) * head_dim * dtype_bytes  # K / H, not H / K
''', "upside down"),
}


#: Students of the class run, each making one slip per exercise (exercises are graded independently).
SLIP_STUDENTS = {
    "slips_a": ("query_heads", "missing_kv_factor", "answer_in_kib", "ceil_not_floor", "label_memory"),
    "slips_b": ("hidden_over_heads", "bits_not_bytes", "inverted_ratio"),
}
STUDENT_OF = {slip: student for student, slips in SLIP_STUDENTS.items() for slip in slips}


def _load_build_course():
    spec = importlib.util.spec_from_file_location("build_course", REPO / "tools" / "build_course.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _answer_id(q):
    return f"ch01_{q}_answer"


def _strip_markers(text):
    return "\n".join(line for line in text.splitlines() if "### BEGIN SOLUTION" not in line
                     and "### END SOLUTION" not in line)


@pytest.fixture(scope="module")
def notebooks():
    """The source, the blank release, and the release answered (fully, or with a slip)."""
    build = _load_build_course()
    release = nbformat.reads(build.generate(COURSE, [ASSIGNMENT])[f"chapters/{ASSIGNMENT}.ipynb"].decode(),
                             as_version=4)
    source = nbformat.read(COURSE / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    answers = {c.metadata["nbgrader"]["grade_id"]: _strip_markers(c.source) for c in source.cells
               if c.metadata.get("nbgrader", {}).get("solution")}

    def answered(**code):
        nb = copy.deepcopy(release)
        for cell in nb.cells:
            gid = cell.metadata.get("nbgrader", {}).get("grade_id")
            if gid in answers:
                cell.source = code.get(gid, answers[gid])
        return nb

    out = {"source": source, "blank": release, "full": answered()}
    for student, slips in SLIP_STUDENTS.items():  # one slip per exercise, so one autograde checks several
        out[student] = answered(**{_answer_id(SLIPS[slip][0]): SLIPS[slip][1].strip() for slip in slips})
    out["query_heads"] = answered(**{_answer_id("q1"): SLIPS["query_heads"][1].strip()})
    out["os_exit"] = answered(**{_answer_id("q1"): "import os\nos._exit(0)"})
    out["loop"] = answered(**{_answer_id("q4"): "def sequences_that_fit(*args):\n    while True:\n        pass"})
    return out


def _run(args, cwd, timeout=600):
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "autograder", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _checkout_snapshot():
    """Paths nbgrader or the grader could leave in the checkout."""
    paths = {p.name for p in REPO.iterdir()}
    for folder in ("course", "chapters", "solutions"):
        if (REPO / folder).is_dir():
            paths |= {str(p.relative_to(REPO)) for p in (REPO / folder).rglob("*") if "__pycache__" not in p.parts}
    return paths


@pytest.fixture(scope="module")
def before():
    return _checkout_snapshot()


# --- a class: source, blank, full, and every slip, graded in parallel -------------------------
@pytest.fixture(scope="module")
def graded_class(notebooks, tmp_path_factory, before):
    root = tmp_path_factory.mktemp("class")
    students = ["source", "blank", "full", *SLIP_STUDENTS]
    for student in students:
        folder = root / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        nbformat.write(notebooks[student], folder / f"{ASSIGNMENT}.ipynb")
    run = _run(["grade-class", str(root / "submitted"), "--assignment", ASSIGNMENT, "--course", str(COURSE),
                "--jobs", "2", "--out", str(root / "out"), "--json"], cwd=root)
    assert run.returncode == 0, run.stdout + run.stderr
    summary = json.loads(run.stdout)
    results = {s: json.loads((root / "out" / "results" / ASSIGNMENT / f"{s}.json").read_text()) for s in students}
    return {"root": root, "summary": summary, "results": results, "students": students}


def _tests(result):
    return {t["grade_id"]: t for t in result["tests"]}


def test_source_scores_full_marks(graded_class):
    result = graded_class["results"]["source"]
    assert (result["score"], result["max_score"], result["status"]) == (MAX_SCORE, MAX_SCORE, "graded")
    assert all(t["passed"] and t["feedback"] == "" for t in result["tests"])
    assert graded_class["results"]["full"]["score"] == MAX_SCORE  # the release with the solutions typed in


def test_blank_release_scores_zero(graded_class):
    result = graded_class["results"]["blank"]
    assert (result["score"], result["status"]) == (0, "graded")
    assert set(_tests(result)) == set(TESTS.values())
    for test in result["tests"]:
        assert not test["passed"] and test["points"] == 0
        assert "not written yet" in test["feedback"] or "NotImplementedError" in test["feedback"]
    assert f"{N_TESTS} of {N_TESTS} tests failed" in result["reason"]


@pytest.mark.parametrize("slip", SLIPS)
def test_each_slip_gets_its_named_feedback(graded_class, slip):
    q, _, words = SLIPS[slip]
    result = graded_class["results"][STUDENT_OF[slip]]
    tests = _tests(result)
    assert result["status"] == "graded"
    assert not tests[TESTS[q]]["passed"] and tests[TESTS[q]]["points"] == 0, result
    assert words in tests[TESTS[q]]["feedback"], tests[TESTS[q]]["feedback"]
    assert "hidden=True" not in tests[TESTS[q]]["feedback"]


def test_slip_students_lose_only_their_slips(graded_class):
    for student, slips in SLIP_STUDENTS.items():
        result = graded_class["results"][student]
        tests = _tests(result)
        failed = {gid for gid, t in tests.items() if not t["passed"]}
        slipped = {TESTS[SLIPS[slip][0]] for slip in slips}
        # the reference q3/q4 may call the learner's q2 function, so a q2 slip may spread to them
        spread = {TESTS["q3"], TESTS["q4"]} if TESTS["q2"] in slipped else set()
        assert slipped <= failed <= slipped | spread, (student, failed)
        assert result["score"] == MAX_SCORE - sum(tests[gid]["max_points"] for gid in failed)
        assert f"{len(failed)} of {N_TESTS} tests failed" in result["reason"]


def test_class_gradebook_and_csv_are_consistent(graded_class):
    from nbgrader.api import Gradebook

    summary, results = graded_class["summary"], graded_class["results"]
    assert summary["consistent"] and summary["graded_now"] == len(results) and summary["jobs"] == 2
    assert summary["gradebook"].startswith("sqlite:///") and str(graded_class["root"]) in summary["gradebook"]
    with Gradebook(summary["gradebook"], "kv-course") as gb:
        assert sorted(s.id for s in gb.students) == sorted(results)
        for student, result in results.items():
            submission = gb.find_submission(ASSIGNMENT, student)
            assert submission.score == result["score"] and submission.max_score == MAX_SCORE
            grades = {g.name: g.score for nb in submission.notebooks for g in nb.grades}
            assert grades == {t["grade_id"]: t["points"] for t in result["tests"]}
    with open(summary["csv"], newline="") as f:
        rows = {row["student"]: row for row in csv.DictReader(f)}
    assert set(rows) == set(results)
    for student, result in results.items():
        assert float(rows[student]["score"]) == result["score"] and rows[student]["status"] == result["status"]
        for test in result["tests"]:
            assert float(rows[student][test["grade_id"]]) == test["points"]


def test_class_rerun_grades_nobody_twice(graded_class, notebooks):
    root, first = graded_class["root"], graded_class["summary"]
    args = ["grade-class", str(root / "submitted"), "--assignment", ASSIGNMENT, "--course", str(COURSE),
            "--out", str(root / "out")]
    again = _run(args, cwd=root)  # the readable summary this time
    assert again.returncode == 0, again.stderr
    assert f"{len(graded_class['students'])} students, 0 graded now" in again.stdout, again.stdout
    for student in graded_class["students"]:  # the summary names each student and its status
        line = next(line for line in again.stdout.splitlines() if line.split()[:1] == [student])
        assert graded_class["results"][student]["status"] in line
    # a resubmission is graded again, alone, and replaces the old grade
    nbformat.write(notebooks["full"], root / "submitted" / "blank" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    third = json.loads(_run(args + ["--jobs", "1", "--json"], cwd=root).stdout)
    assert third["graded_now"] == 1 and third["consistent"]
    assert sorted(third["skipped"]) == sorted(set(graded_class["students"]) - {"blank"})
    scores = {r["student"]: r["score"] for r in third["rows"]}
    assert scores == {**{r["student"]: r["score"] for r in first["rows"]}, "blank": MAX_SCORE}


# --- one notebook at a time through the CLI -----------------------------------------------------
def _latin1(text: str) -> bytes:
    """The notebook saved as Latin-1 by some editor, with an accented word in it."""
    nb = json.loads(text)
    nb["cells"].insert(0, nbformat.v4.new_markdown_cell("Résumé of the chapter"))
    return json.dumps(nb, ensure_ascii=False).encode("latin-1", errors="replace")


def _broken_files(notebooks, folder: Path) -> dict:
    text = nbformat.writes(notebooks["full"])
    files = {
        "good.ipynb": text.encode(),
        "wrong.ipynb": nbformat.writes(notebooks["query_heads"]).encode(),
        "truncated.ipynb": text[: len(text) // 2].encode(),
        "empty.ipynb": b"",
        "latin1.ipynb": _latin1(text),
        "os_exit.ipynb": nbformat.writes(notebooks["os_exit"]).encode(),
    }
    nb3 = json.loads(text)
    nb3["nbformat"] = 3
    files["nbformat3.ipynb"] = json.dumps(nb3).encode()
    other = json.loads(text)
    for cell in other["cells"]:
        meta = cell["metadata"].get("nbgrader")
        if meta:
            meta["grade_id"] = meta["grade_id"].replace("ch01_", "ch02_")
    files["other_assignment.ipynb"] = json.dumps(other).encode()
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return files


LOOP_TIMEOUT = 8  # seconds per cell: the chapter's heaviest cell (imports, plots) takes about 2
EXPECT = {  # file -> (status, score, words in the reason)
    "good.ipynb": ("graded", MAX_SCORE, f"all {N_TESTS} tests passed"),
    "truncated.ipynb": ("error", 0, "not valid JSON"),
    "empty.ipynb": ("error", 0, "empty"),
    "latin1.ipynb": ("error", 0, "not UTF-8"),
    "nbformat3.ipynb": ("error", 0, "nbformat 3"),
    "other_assignment.ipynb": ("error", 0, "another assignment"),
    "os_exit.ipynb": ("needs_manual", 0, "kernel died"),
    "loop.ipynb": ("graded", MAX_SCORE - POINTS["q4"], "limit"),
}


@pytest.fixture(scope="module")
def single_runs(notebooks, tmp_path_factory, before):
    folder = tmp_path_factory.mktemp("single")
    _broken_files(notebooks, folder)
    nbformat.write(notebooks["loop"], folder / "loop.ipynb")

    def grade(name):
        args = ["grade", str(folder / name), "--assignment", ASSIGNMENT, "--course", str(COURSE)]
        if name != "wrong.ipynb":  # that one gives the readable report
            args.append("--json")
        if name == "loop.ipynb":
            args += ["--timeout", str(LOOP_TIMEOUT)]
        return name, _run(args, cwd=folder)

    order = ["loop.ipynb", *(name for name in EXPECT if name != "loop.ipynb"), "wrong.ipynb"]
    with ThreadPoolExecutor(2) as pool:
        return dict(pool.map(grade, order))


@pytest.mark.parametrize("name", EXPECT)
def test_grade_cli_status_and_reason(single_runs, name):
    run = single_runs[name]
    status, score, words = EXPECT[name]
    assert run.returncode == (4 if status == "error" else 0), run.stderr   # 4: an error status (docs/instructors.md)
    result = json.loads(run.stdout)
    assert {"assignment", "score", "max_score", "status", "reason", "tests"} <= set(result)
    assert (result["assignment"], result["status"], result["score"], result["max_score"]) == \
        (ASSIGNMENT, status, score, MAX_SCORE), result
    assert words in result["reason"], result["reason"]
    assert [t["grade_id"] for t in result["tests"]] == list(TESTS.values())
    for test in result["tests"]:
        assert {"grade_id", "points", "max_points", "passed", "feedback"} <= set(test)
        assert test["passed"] or test["feedback"], test  # never a silent zero
        assert "BEGIN HIDDEN" not in test["feedback"] and "hidden=True" not in test["feedback"]


def test_grade_cli_readable_report_names_the_slip(single_runs):
    run = single_runs["wrong.ipynb"]
    assert run.returncode == 0, run.stderr
    assert f"{MAX_SCORE - POINTS['q1']}/{MAX_SCORE} points, graded" in run.stdout
    assert f"1 of {N_TESTS} tests failed" in run.stdout
    fail = [line for line in run.stdout.splitlines() if line.strip().startswith("FAIL")]
    assert len(fail) == 1 and TESTS["q1"] in fail[0] and "query heads" in run.stdout


def test_grade_cli_infinite_loop_is_cut_by_the_timeout(single_runs):
    result = json.loads(single_runs["loop.ipynb"].stdout)
    tests = _tests(result)
    assert "timed out" in tests[TESTS["q4"]]["feedback"] and f"{LOOP_TIMEOUT} s" in tests[TESTS["q4"]]["feedback"]
    assert all(tests[TESTS[q]]["passed"] for q in ("q1", "q2", "q3"))


def test_grade_cli_dead_kernel_needs_manual_grade(single_runs):
    result = json.loads(single_runs["os_exit.ipynb"].stdout)
    assert all(t["needs_manual"] and "kernel died" in t["feedback"] for t in result["tests"])


@pytest.mark.parametrize("args, words", [
    (["grade", "no-such-file.ipynb", "--assignment", ASSIGNMENT], "no such file"),
    (["grade", "{good}", "--assignment", "ch99_nothing"], "unknown assignment"),
    (["grade-class", "no-such-folder", "--assignment", ASSIGNMENT], "no such folder"),
    (["grade", "{good}"], "--assignment"),
])
def test_usage_errors_exit_2_with_one_line(args, words, tmp_path, notebooks):
    good = tmp_path / "good.ipynb"
    nbformat.write(notebooks["full"], good)
    args = [a.replace("{good}", str(good)) for a in args] + ["--course", str(COURSE)]
    run = _run(args, cwd=tmp_path)
    assert run.returncode == 2
    assert run.stdout == "" and len(run.stderr.strip().splitlines()) == 1 and words in run.stderr


def test_grading_never_writes_into_the_checkout(before, graded_class, single_runs):
    for name in ("gradebook.db", "release", "submitted", "autograded", "feedback", ".nbgrader.log"):
        assert not (COURSE / name).exists() or f"course/{name}" in before
        assert not (REPO / name).exists() or name in before
    assert _checkout_snapshot() - before == set()
