"""Every documented grading path is safe and honest, and they are one path into one gradebook.

One class, in one course folder (nbgrader's layout, with an instructor's written question added to
ch01's source), graded by plain ``nbgrader autograde`` + ``generate_feedback`` and then by ``python -m
autograder grade-class submitted --assignment ...`` run there with no ``--course``, ``--out`` or ``--db``:

* both write the same score for every test into the same gradebook (``<course>/gradebook.db``), with
  the same seed (``<course>/grading-seed``); the formgrader's Autograde button (nbgrader's API, in
  process) too;
* a student whose answer cells read the course's source (solutions, hidden tests) from the checkout
  gets no more than an honest blank (0 of 11: the contract's points q1 3, q2 1, q3 1, q4 2, q5 2,
  q6 2) on every path, and no feedback HTML from either shows the source;
* a helper and ``import math`` in a cell the learner added above q2's answer grade as they ran;
* q2 answered from a table of the notebook's own cases (its hidden ones from the checks' public seed)
  loses q2 on every path: the outside check's hidden cases come from the course's grading seed;
* ``os._exit(1)`` after q6's answer keeps q1-q5 (9 points) on every path, leaves q6 to a person, and
  nbgrader's formgrader lists the submission as autograded and needing manual grading;
* the written question (2 points) passes through to the formgrader on every path, and the totals
  say what is pending; a hand grade given there survives a regrade of the same submission.
* ``grade-class --feedback <course>/feedback`` writes what ``nbgrader release_feedback`` releases, and
  ``fetch_feedback`` brings it to the student.
* A grader whose sandbox cannot import the course (a copy of the checkout
  run without ``pip install -e``: the kernel imports ``autograder`` through
  the editable install of another checkout) exits 5 with one line and records
  nothing; ``error`` statuses exit 4.
* A resumed run reuses the stored random seed and skips exactly the students
  already graded (a kernel death is graded again); ``--student`` regrades one and keeps the rest.
* Bad database URLs and a wrong password: one line, exit 2.
* Results folders are 0700, files 0600; outside a course folder, the default folder is the user's.

Expected scores are the contract's points (all 11 for the solutions, 0 for the
release left blank); the source-reading student must get what the blank gets.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import sys
from pathlib import Path

import pytest
from procs import grading_env, run_in_group

import hostile as H
import pg_server as P
from pg_server import postgres_url  # noqa: F401 -- the fixture

REPO = H.REPO
ASSIGNMENT = H.ASSIGNMENT
FULL = H.FULL

# Every answer cell reads the instructor's source from wherever the checkout may be seen (the
# submission's folder upwards, the folder of the installed kvlib, the checkout's absolute path),
# prints it (into the autograded notebook, so into the feedback) and runs its solution cells.
READER = r'''
import json as _json, os as _os, pathlib as _pl
def _kv_source():
    name = "source/%(a)s/%(a)s.ipynb"
    places = [_pl.Path(_os.getcwd()), *_pl.Path(_os.getcwd()).parents, _pl.Path(%(repo)r) / "course"]
    try:
        import kvlib as _kvlib
        places.append(_pl.Path(_kvlib.__file__).resolve().parents[1] / "course")
    except Exception:
        pass
    for place in places:
        for candidate in (place / name, place / "course" / name):
            try:
                return candidate.read_text()
            except OSError:
                pass
_text = _kv_source()
if _text:
    print("LEAKED" + "-SOURCE:", _text)
    for _cell in _json.loads(_text)["cells"]:
        if _cell["metadata"].get("nbgrader", {}).get("solution"):
            exec("".join(_cell["source"]))
''' % {"a": ASSIGNMENT, "repo": str(REPO)}


def _source_lines() -> list:
    """Distinctive lines of the instructor's source a student's release never holds: each solution
    line and each hidden-test line (from the source itself, not from the code under test)."""
    release = json.dumps(H.release_from_source(H.load_source()))
    lines = set()
    for cell in H.load_source()["cells"]:
        for line in H._src(cell).splitlines():
            line = line.strip()
            if len(line) > 25 and line not in release and json.dumps(line)[1:-1] not in release:
                lines.add(line)
    return sorted(lines)


def _class(root: Path, students: dict, *, exchange_files: bool = True) -> Path:
    """``root/submitted/<student>/<id>/`` as ``nbgrader collect`` leaves it (with the exchange's
    timestamp.txt and submission_secret.txt)."""
    for i, (student, data) in enumerate(students.items()):
        folder = root / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        (folder / f"{ASSIGNMENT}.ipynb").write_bytes(data)
        if exchange_files:
            (folder / "timestamp.txt").write_text(f"2027-03-0{i + 1} 10:00:00.000000 UTC")
            (folder / "submission_secret.txt").write_text(f"{i:02d}" * 64)
    return root / "submitted"


def _run(args, *, cwd=None, timeout=600, **env):
    return run_in_group(args, timeout=timeout, cwd=cwd, env=grading_env(**env))


def _grade_class(submitted: Path, out: Path, *extra, course: Path = REPO / "course", **env):
    return _run([sys.executable, "-m", "autograder", "grade-class", submitted, "--assignment", ASSIGNMENT,
                 "--course", course, "--out", out, *extra], **env)


@pytest.fixture(scope="module")
def notebooks():
    kit = H.make_kit()
    return {"honest": H.dump(kit.notebook()), "blank": H.dump(kit.notebook(blank=tuple(H.Q))),
            "reader": H.dump(kit.notebook({q: READER for q in H.Q}))}


def test_the_reader_would_score_full_marks_where_the_source_is_readable(tmp_path):
    """Shows the tests below can fail: outside a sandbox the reader finds the source and its
    functions are the solutions (checked against kvlib, the chapter's own formula)."""
    import kvlib as kv

    namespace: dict = {}
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        exec(READER, namespace)
    finally:
        os.chdir(cwd)
    assert "### BEGIN SOLUTION" in namespace["_text"]
    # 32 layers x 8 KV heads x 128 x 2 bytes x 2 (K and V) = 131072 B per token (Llama-3.1-8B)
    assert namespace["kv_bytes_for_sequence"](32, 8, 128, 2, 1) == 131072 == \
        kv.kv_bytes_per_token(layers=32, kv_heads=8, head_dim=128, dtype_bytes=2)


def _assert_no_source(html: str, where: str, *, solutions_typed_in: bool = False):
    """No hidden test, no solution marker, and (unless the student typed the solutions in) no
    line of the instructor's source that the release does not hold."""
    assert "### BEGIN SOLUTION" not in html and "### BEGIN HIDDEN TESTS" not in html, where
    assert "LEAKED-SOURCE" not in html, where
    hidden = [line for line in _source_lines() if line in html and (
        not solutions_typed_in or line in _hidden_test_lines())]
    assert hidden == [], (where, hidden[:3])


def _hidden_test_lines() -> set:
    return {line.strip() for cell in H.load_source()["cells"] for m in H._HIDDEN.finditer(H._src(cell))
            for line in m.group(0).splitlines() if len(line.strip()) > 25}


# An instructor's written question under the last exercise: a manually graded answer (nbgrader's
# "Manually graded answer" cell: markdown, solution and grade, 2 points), graded by a person.
WRITTEN, WRITTEN_POINTS = "ch01_q7_why_fewer_kv_heads", 2
TOTAL = FULL + WRITTEN_POINTS                  # 11 for the six tests + 2 for the written answer
WRITTEN_CELLS = [
    {"cell_type": "markdown", "id": "ch01-written-q", "metadata": {},
     "source": "**Question 7 (written, 2 points).** In two sentences: why does a model with grouped-query "
               "attention keep fewer bytes per token than one with a KV head for every query head?"},
    {"cell_type": "markdown", "id": "ch01-written-a",
     "metadata": {"nbgrader": {"grade": True, "solution": True, "locked": False, "points": WRITTEN_POINTS,
                               "grade_id": WRITTEN, "schema_version": 3}},
     "source": "Each token keeps one key and one value per KV head in every layer; grouped queries share "
               "those heads, so the cache shrinks by the ratio of query heads to KV heads."},
]
# A helper and an import in a cell the learner added above q2's answer, which uses both.
HELPER = ("import math\n\n\ndef per_token(layers, kv_heads, head_dim, dtype_bytes):\n"
          "    return 2 * layers * kv_heads * head_dim * dtype_bytes\n")
HELPED_Q2 = H._body("q2", "return math.prod([per_token(layers, kv_heads, head_dim, dtype_bytes), seq_len])")
CRASH = "\nimport os\nos._exit(1)\n"      # at the end of q6's answer cell: q1-q5 ran, q6's test never does
STUDENTS = ("reader", "honest", "blank", "crash", "memorised")
# Automatic points per student on every path (the contract's: q1 3, q2 1, q3 1, q4 2, q5 2, q6 2): the honest
# student (q2 through a helper cell of their own, and an answer to the written question) all 11; the crash
# keeps q1-q5 (9) with q6 left to a person; q2 answered from a table of the notebook's own cases (visible, and
# hidden with the checks' public seed) loses q2 outside, where the hidden cases come from the course's grading
# seed; the reader gets what the blank gets. (The patched checkers of
# the hostile corpus get what the blank gets on both paths too: tests/test_hostile_class.py.)
AUTO = {"reader": 0, "honest": FULL, "blank": 0, "crash": FULL - H.POINTS["q6"], "memorised": FULL - H.POINTS["q2"]}


def _course_with_written_answer(course: Path) -> dict:
    """``course/``: the course config and ch01's source with the written question added after q6's test."""
    source = H.load_source()
    at = next(i for i, c in enumerate(source["cells"]) if H._meta(c).get("grade_id") == H.TEST["q6"]) + 1
    source["cells"][at:at] = [dict(c) for c in WRITTEN_CELLS]
    (course / "source" / ASSIGNMENT).mkdir(parents=True)
    (course / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").write_text(json.dumps(source, indent=1))
    shutil.copy2(REPO / "course" / "nbgrader_config.py", course / "nbgrader_config.py")
    return source


def _students(release: dict, source: dict) -> dict:
    kit = H.make_kit(release=release, solutions=H.solutions_from_source(source))

    def answer_written(nb):
        next(c for c in nb["cells"] if H._meta(c).get("grade_id") == WRITTEN)["source"] = \
            "The cache holds a key and a value per KV head; with GQA several query heads share one."

    def add_helper(nb):
        at = next(i for i, c in enumerate(nb["cells"]) if H._meta(c).get("grade_id") == H.ANSWER["q2"])
        nb["cells"].insert(at, {"cell_type": "code", "id": "a1b2c3d4", "metadata": {}, "execution_count": None,
                                "outputs": [], "source": HELPER})

    def honest(nb):
        add_helper(nb)
        answer_written(nb)

    from autograder.checks import ch01, schema

    q2 = ch01.EXERCISES[H.TEST["q2"]]
    table = {tuple(c["kwargs"][p] for p in q2.params): q2.expected(c)
             for c in (*q2.visible_cases, *q2.hidden_cases(schema.DEFAULT_HIDDEN_SEED))}
    memorised = H._body("q2", f"return {table!r}.get((layers, kv_heads, head_dim, dtype_bytes, seq_len), 0)")
    return {"reader": H.dump(kit.notebook({q: READER for q in H.Q})),
            "honest": H.dump(kit.notebook({"q2": HELPED_Q2}, edit=honest)),
            "memorised": H.dump(kit.notebook({"q2": memorised})),
            "blank": H.dump(kit.notebook(blank=tuple(H.Q))),
            "crash": H.dump(kit.notebook({"q6": kit.solution("q6") + CRASH}))}


def _book(course: Path) -> dict:
    """``{student: {grade_id: (auto_score, needs_manual_grade)}}`` of the course's gradebook (nbgrader's API)."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "kv-course") as gb:
        return {s.id: {g.name: (g.auto_score, g.needs_manual_grade)
                       for nb in gb.find_submission(ASSIGNMENT, s.id).notebooks for g in nb.grades}
                for s in gb.students}


def _formgrader_list(course: Path) -> dict:
    """What nbgrader's formgrader lists per submission (its API): ``{student: (autograded, needs manual
    grading, score)}``."""
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(course)).load_config()
    api = NbGraderAPI(CourseDirectory(config=config), config=config)
    return {s["student"]: (s["autograded"], s["needs_manual_grade"], s["score"])
            for s in api.get_submissions(ASSIGNMENT)}


@pytest.fixture(scope="module")
def graded_course(tmp_path_factory):
    """One class in one course folder (nbgrader's layout, with an instructor's written question), graded by
    each path docs/instructors.md gives, one after the other, into the same gradebook:

    1. plain nbgrader: ``nbgrader generate_assignment``, ``autograde``, ``generate_feedback`` (the course
       config sandboxes the kernel and runs the outside check);
    2. ``python -m autograder grade-class submitted --assignment ... --feedback feedback`` from the course
       folder, with no ``--course``, ``--out`` or ``--db``: the course, the gradebook and the output
       folder are the class's own.
    """
    course = tmp_path_factory.mktemp("class") / "course"
    source = _course_with_written_answer(course)
    runs = {"generate_assignment": _run([sys.executable, "-m", "nbgrader", "generate_assignment", ASSIGNMENT,
                                         "--force"], cwd=course)}
    assert runs["generate_assignment"].returncode == 0, runs["generate_assignment"].stderr[-3000:]
    release = json.loads((course / "release" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text())
    submitted = _class(course, _students(release, source))
    for step in (["autograde", ASSIGNMENT], ["generate_feedback", ASSIGNMENT]):
        runs[step[0]] = _run([sys.executable, "-m", "nbgrader", *step], cwd=course)
        assert runs[step[0]].returncode == 0, (step, runs[step[0]].stderr[-3000:])
    plain = {"book": _book(course), "listed": _formgrader_list(course),
             "feedback": {s: (course / "feedback" / s / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
                          for s in STUDENTS},
             "autograded": {s: json.loads((course / "autograded" / s / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text())
                            for s in STUDENTS},
             "seed": (course / "grading-seed").read_text()}
    run = _run([sys.executable, "-m", "autograder", "grade-class", "submitted", "--assignment", ASSIGNMENT,
                "--jobs", "2", "--feedback", "feedback", "--json"], cwd=course)
    assert run.returncode == 0, run.stderr[-3000:]
    results = course / "results" / ASSIGNMENT
    return {"course": course, "submitted": submitted, "out": course, "runs": runs, "plain": plain, "run": run,
            "summary": json.loads(run.stdout), "book": _book(course), "listed": _formgrader_list(course),
            "results": {p.stem: json.loads(p.read_text()) for p in results.glob("*.json")},
            "first": {p.stem: p.read_bytes() for p in results.glob("*.json")}, "source": source}


@pytest.fixture(scope="module")
def plain_course(graded_course):
    """The class as plain nbgrader left it (the course config sandboxes the kernel)."""
    return {"course": graded_course["course"], "runs": graded_course["runs"], **graded_course["plain"]}


def test_plain_nbgrader_autograde_gives_the_reader_no_more_than_a_blank(plain_course):
    book = plain_course["book"]
    assert sum(score or 0 for score, _ in book["reader"].values()) == 0
    assert sum(score or 0 for score, _ in book["honest"].values()) == FULL   # the sandboxed kernel grades
    assert "LEAKED-SOURCE" not in json.dumps(plain_course["autograded"]["reader"])


def test_plain_nbgrader_feedback_shows_no_source(plain_course):
    assert len(_source_lines()) >= 10 and len(_hidden_test_lines()) >= 4   # the check has things to find
    for student in ("reader", "honest"):
        _assert_no_source(plain_course["feedback"][student], f"plain nbgrader, {student}",
                          solutions_typed_in=student == "honest")


def test_plain_nbgrader_refuses_a_sandbox_that_cannot_hide_the_files(notebooks, tmp_path, monkeypatch):
    """Where the strongest level on offer is resource limits only (the detected level is replaced
    here), the course config's kernel manager refuses to start the kernel: nothing runs unsandboxed.
    It refuses on its own, without REQUIRE_ISOLATION (which CI sets, and which refuses earlier)."""
    from autograder import kernel, sandbox

    monkeypatch.delenv("REQUIRE_ISOLATION", raising=False)
    monkeypatch.delenv("SANDBOX_LEVEL", raising=False)

    km = kernel.SandboxedKernelManager(kernel_name=kernel.SANDBOXED_KERNEL, own_sandbox=True)
    saved = sandbox.detect_level
    sandbox.detect_level = lambda: "rlimits"
    try:
        with pytest.raises(sandbox.IsolationError, match="does not hide the file system"):
            km._make_own_sandbox()
    finally:
        sandbox.detect_level = saved
    assert km._private is None


# ---------------------------------------------------------------------------
# Both paths, one gradebook: every score, the patched checker, added cells, a crash, a written answer
# ---------------------------------------------------------------------------
def test_both_paths_write_one_gradebook(graded_course):
    """grade-class, run from the course folder with no --course, --out or --db, grades the class's own
    course into the gradebook plain nbgrader wrote, with the same seed: the same score for every test."""
    course, summary = graded_course["course"], graded_course["summary"]
    assert summary["out"] == str(course) and summary["gradebook"] == f"sqlite:///{course / 'gradebook.db'}"
    assert summary["seed"]["value"] == int(graded_course["plain"]["seed"])          # <course>/grading-seed
    assert summary["seed"]["source"] == f"random (kept in {course / 'grading-seed'})"
    assert graded_course["book"] == graded_course["plain"]["book"]
    assert set(graded_course["book"]) == set(STUDENTS)
    for student, grades in graded_course["book"].items():
        assert sum(score or 0 for score, _ in grades.values()) == AUTO[student], student
        assert graded_course["results"][student]["score"] == AUTO[student], student
    assert summary["consistent"] and sorted(p.name for p in (course / "autograded").iterdir()) == sorted(STUDENTS)


def test_every_path_draws_hidden_cases_from_the_grading_seed(graded_course):
    """q2 answered from a table of every case the notebook's tests use (visible, and hidden with the checks'
    public seed) passes in the notebook; the outside check, on every path, draws its hidden cases from the
    course's grading seed and takes q2's point back."""
    for book in (graded_course["plain"]["book"], graded_course["book"]):
        assert book["memorised"][H.TEST["q2"]] == (0, False)
    q2 = next(t for t in graded_course["results"]["memorised"]["tests"] if t["grade_id"] == H.TEST["q2"])
    assert (q2["nbgrader_points"], q2["verdict_points"]) == (H.POINTS["q2"], 0) and "hidden case" in q2["feedback"]


def test_added_helper_cells_grade_as_they_ran(graded_course):
    """The honest student's q2 uses a helper and `import math` from a cell they added above the answer: full
    marks on both paths (the outside check runs the added cell before the answer, as the notebook did;
    without it, NameError: per_token)."""
    for book in (graded_course["plain"]["book"], graded_course["book"]):
        assert book["honest"][H.TEST["q2"]] == (H.POINTS["q2"], False)
    result = graded_course["results"]["honest"]
    assert result["verdict"]["score"] == FULL and result["status"] == "graded", result["reason"]
    q2 = next(c for c in graded_course["plain"]["autograded"]["honest"]["cells"]
              if H._meta(c).get("grade_id") == H.TEST["q2"])
    assert not any(o.get("name") == "stderr" for o in q2["outputs"])     # nothing taken back outside


def test_a_crash_keeps_what_ran_and_waits_for_a_person(graded_course):
    """os._exit(1) at the end of q6's answer: q1-q5 keep their 9 points on both paths, q6 has no automatic
    score and needs a manual grade, the autograded notebook says why, and nbgrader's formgrader lists the
    submission as autograded and needing manual grading."""
    expected = {**{H.TEST[q]: (H.POINTS[q], False) for q in ("q1", "q2", "q3", "q4", "q5")},
                H.TEST["q6"]: (None, True), WRITTEN: (None, True)}
    assert {k: v for k, v in graded_course["plain"]["book"]["crash"].items() if k != WRITTEN} == \
        {k: v for k, v in expected.items() if k != WRITTEN}
    assert graded_course["book"]["crash"] == graded_course["plain"]["book"]["crash"]
    for listed in (graded_course["plain"]["listed"], graded_course["listed"]):
        assert listed["crash"] == (True, True, FULL - H.POINTS["q6"])
        assert listed["blank"][:2] == (True, False)
    answer = next(c for c in graded_course["plain"]["autograded"]["crash"]["cells"]
                  if H._meta(c).get("grade_id") == H.ANSWER["q6"])
    died = [o for o in answer["outputs"] if o.get("output_type") == "error"]
    assert died and died[-1]["ename"] == "DeadKernelError" and "ch01_q6_answer" in died[-1]["evalue"]
    result = graded_course["results"]["crash"]
    assert (result["score"], result["status"], result["retry"]) == (FULL - H.POINTS["q6"], "needs_manual", True)
    assert result["pending"]["grade_ids"][0] == H.TEST["q6"]
    q6 = next(t for t in result["tests"] if t["grade_id"] == H.TEST["q6"])
    assert q6["needs_manual"] and q6["feedback"].startswith("not run: the kernel died in ch01_q6_answer")
    assert "Score" in (graded_course["course"] / "feedback" / "crash" / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()


def test_a_written_answer_passes_through_to_the_formgrader(graded_course):
    """The instructor's written question (2 points) stops nothing: grade-class exits 0 and grades every test;
    the honest student's answer waits for a person on both paths (listed by the formgrader), the blank one's
    unanswered cell gets nbgrader's 0, and the totals say what is pending."""
    for book in (graded_course["plain"]["book"], graded_course["book"]):
        assert book["honest"][WRITTEN] == (None, True) and book["blank"][WRITTEN] == (0, False)
    for listed in (graded_course["plain"]["listed"], graded_course["listed"]):
        assert listed["honest"] == (True, True, FULL)
    honest = graded_course["results"]["honest"]
    assert (honest["score"], honest["max_score"], honest["status"]) == (FULL, TOTAL, "graded")
    assert honest["pending"] == {"points": WRITTEN_POINTS, "grade_ids": [WRITTEN]}
    assert honest["reason"].startswith(f"all {len(H.Q)} tests passed; 1 cell graded by hand (2 points) waits "
                                       f"for a manual grade in the formgrader: {WRITTEN}")
    assert graded_course["results"]["blank"]["pending"] is None
    from autograder.classroom import format_summary
    assert "with points pending a manual grade in the formgrader" in format_summary(graded_course["summary"])


FORMGRADER_AUTOGRADE = """
import json, sys
from nbgrader.apps import NbGraderAPI
from nbgrader.coursedir import CourseDirectory
from traitlets.config.loader import PyFileConfigLoader
config = PyFileConfigLoader("nbgrader_config.py", path=".").load_config()
api = NbGraderAPI(CourseDirectory(config=config), config=config)
print(json.dumps(api.autograde(sys.argv[1], sys.argv[2], force=True, create=True)["success"]))
"""


def test_the_formgraders_autograde_button_grades_the_same_way(graded_course):
    """The formgrader's Autograde button calls nbgrader's API in the Jupyter server's process, with the
    course's config: the same sandbox and outside check, the same scores into the same gradebook, for the
    crash too (its autograded notebook kept, q6 left to a person)."""
    course = graded_course["course"]
    before = _book(course)
    run = _run([sys.executable, "-c", FORMGRADER_AUTOGRADE, ASSIGNMENT, "crash"], cwd=course)
    assert run.returncode == 0 and run.stdout.strip() == "true", run.stderr[-3000:]
    assert _book(course) == before
    assert _formgrader_list(course)["crash"] == (True, True, AUTO["crash"])


def test_cli_gives_the_reader_no_more_than_a_blank(graded_course):
    scores = {r["student"]: r["score"] for r in graded_course["summary"]["rows"]}
    assert scores == AUTO
    for student in ("reader", "honest", "blank"):
        html = (graded_course["course"] / "feedback" / student / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
        _assert_no_source(html, f"grade-class, {student}", solutions_typed_in=student == "honest")


def test_cli_shows_progress_a_line_per_student(graded_course):
    lines = [line for line in graded_course["run"].stderr.splitlines() if line.startswith("graded ")]
    n = len(STUDENTS)
    assert [line.split(":")[0] for line in lines] == [f"graded {i} of {n}" for i in range(1, n + 1)]
    assert all("elapsed" in line and "left" in line for line in lines)
    assert any(f" honest {FULL}/{TOTAL} graded" in line for line in lines)


def test_results_are_private(graded_course):
    out = graded_course["out"]
    for folder in (out / "results", out / "results" / ASSIGNMENT):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    for f in (out / "gradebook.db", out / "grading-seed", out / f"{ASSIGNMENT}_grades.csv",
              *(out / "results" / ASSIGNMENT).glob("*.json")):
        assert stat.S_IMODE(f.stat().st_mode) == 0o600, f


def test_the_default_output_folder_is_the_users_own(tmp_path, monkeypatch):
    from autograder import classroom

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    inside = REPO / "submitted"                     # a class inside the checkout, not in a course folder
    assert classroom.default_out_dir(inside, "kv-course") == tmp_path / "data" / "kv-course" / "grading" / "kv-course"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert classroom.default_out_dir(inside, "kv-course") == \
        tmp_path / "home" / ".local" / "share" / "kv-course" / "grading" / "kv-course"
    outside = tmp_path / "course" / "submitted"     # nbgrader's layout: next to submitted/
    assert classroom.default_out_dir(outside, "kv-course") == tmp_path / "course"
    # the checkout's own course folder is a course: plain nbgrader's gradebook is there, so grade-class's too
    assert classroom.default_out_dir(REPO / "course" / "submitted", "kv-course") == REPO / "course"
    folder = classroom._private_dir(tmp_path / "data" / "x")
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700


def test_release_and_fetch_feedback_after_grade_class(graded_course, tmp_path):
    from nbgrader.utils import notebook_hash

    course, exchange = graded_course["course"], tmp_path / "exchange"
    exchange.mkdir()
    run = _run([sys.executable, "-m", "nbgrader", "release_feedback", ASSIGNMENT,
                f"--Exchange.root={exchange}", f"--CourseDirectory.root={course}"], cwd=course)
    assert run.returncode == 0, run.stderr[-3000:]
    released = sorted(p.name for p in (exchange / "kv-course" / "feedback").glob("*.html"))
    # nbgrader names each released file after the submission's secret and the notebook id
    secret = {s: (graded_course['submitted'] / s / ASSIGNMENT / 'submission_secret.txt').read_text() for s in STUDENTS}
    expected = sorted(f"{notebook_hash(secret=secret[s], notebook_id=ASSIGNMENT)}.html" for s in STUDENTS)
    assert released == expected
    # the student side: their cached submission (as nbgrader submit left it) finds its feedback
    fetched = _fetch_feedback(graded_course["submitted"], "honest", exchange, tmp_path)
    assert len(fetched) == 1 and "Score" in fetched[0].read_text()


def _fetch_feedback(submitted: Path, student: str, exchange: Path, tmp_path: Path) -> list:
    """``nbgrader fetch_feedback`` as ``student``, from the submission cache ``nbgrader submit`` left
    (a copy of their submitted folder); the feedback pages it brought."""
    folder = submitted / student / ASSIGNMENT
    timestamp = (folder / "timestamp.txt").read_text()
    cache = tmp_path / f"cache-{student}"
    mine = cache / "kv-course" / f"{student}+{ASSIGNMENT}+{timestamp}"
    mine.mkdir(parents=True)
    for name in (f"{ASSIGNMENT}.ipynb", "submission_secret.txt", "timestamp.txt"):
        shutil.copy2(folder / name, mine / name)
    home = tmp_path / f"home-{student}"
    home.mkdir()
    run = _run([sys.executable, "-m", "nbgrader", "fetch_feedback", ASSIGNMENT, "--course=kv-course",
                f"--Exchange.root={exchange}", f"--Exchange.cache={cache}", f"--student={student}"], cwd=home)
    assert run.returncode == 0, run.stderr[-3000:]
    return list((home / ASSIGNMENT / "feedback").rglob(f"{ASSIGNMENT}.html"))


def test_a_mixed_class_releases_feedback_to_everyone_with_a_secret(graded_course, tmp_path):
    """Two submissions through the exchange, one put into submitted/ by hand (no timestamp.txt, no
    submission_secret.txt), and a page an older grade-class left for it in feedback/: release_feedback
    stops at that page (FileNotFoundError), leaving whoever comes after it unreleased. The hand-placed student's page goes beside
    feedback/, the summary says where, and the other two release and fetch theirs."""
    from nbgrader.utils import notebook_hash

    from autograder.classroom import format_summary

    course = tmp_path / "course"
    for student in ("reader", "honest", "blank"):
        shutil.copytree(graded_course["submitted"] / student, course / "submitted" / student)
        shutil.copytree(graded_course["course"] / "feedback" / student, course / "feedback" / student)
    for name in ("timestamp.txt", "submission_secret.txt"):
        (course / "submitted" / "blank" / ASSIGNMENT / name).unlink()
    # the feedback folder as an older grade-class left it: every page, the hand-placed one without a secret
    stale = course / "feedback" / "blank" / ASSIGNMENT / f"{ASSIGNMENT}.html"
    for name in ("timestamp.txt", "submission_secret.txt"):
        (stale.parent / name).unlink()
    shutil.copy2(REPO / "course" / "nbgrader_config.py", course / "nbgrader_config.py")
    exchange = tmp_path / "exchange"
    exchange.mkdir()
    release = [sys.executable, "-m", "nbgrader", "release_feedback", ASSIGNMENT,
               f"--Exchange.root={exchange}", f"--CourseDirectory.root={course}"]
    # what an instructor met: release stops at the page without its files (FileNotFoundError), whoever is next
    run = _run(release, cwd=course)
    assert run.returncode != 0 and "FileNotFoundError" in run.stderr and str(stale.parent) in run.stderr
    shutil.rmtree(exchange)
    exchange.mkdir()

    run = _grade_class(course / "submitted", graded_course["out"], "--feedback", course / "feedback", "--json",
                       course=graded_course["course"])
    assert run.returncode == 0, run.stderr[-3000:]
    summary = json.loads(run.stdout)
    assert summary["graded_now"] == 0      # graded already (same notebooks): only the feedback is written
    fb = summary["feedback"]
    aside = tmp_path / "course" / "feedback-not-released"
    assert fb["unreleasable"] == ["blank"] and fb["unreleased_dir"] == str(aside)
    assert fb["files"]["blank"] == str(aside / "blank" / ASSIGNMENT / f"{ASSIGNMENT}.html")
    assert "Score" in (aside / "blank" / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
    assert not stale.exists()
    assert f"their feedback is in {aside}/<student>/{ASSIGNMENT}/" in format_summary(summary)

    run = _run(release, cwd=course)
    assert run.returncode == 0, run.stderr[-3000:]
    secrets = {s: (course / "submitted" / s / ASSIGNMENT / "submission_secret.txt").read_text()
               for s in ("honest", "reader")}
    released = sorted(p.name for p in (exchange / "kv-course" / "feedback").glob("*.html"))
    assert released == sorted(f"{notebook_hash(secret=v, notebook_id=ASSIGNMENT)}.html" for v in secrets.values())
    for student, score in (("honest", FULL), ("reader", 0)):
        fetched = _fetch_feedback(course / "submitted", student, exchange, tmp_path)
        assert len(fetched) == 1, student
        shown = re.search(r"Score:\s*([0-9.]+)\s*/\s*([0-9.]+)", fetched[0].read_text())
        assert shown and (float(shown.group(1)), float(shown.group(2))) == (score, TOTAL), student


def _grade_here(course: Path, *extra):
    """grade-class as docs/instructors.md gives it: from the course folder, on its submitted/."""
    return _run([sys.executable, "-m", "autograder", "grade-class", "submitted", "--assignment", ASSIGNMENT,
                 *extra], cwd=course)


def test_a_resumed_run_reuses_its_seed_and_regrades_only_stale_results(graded_course):
    """Skipped: whoever is stored with the same key. Graded again: a result of another grader version, and
    a kernel death (never kept as a grade), to the same score."""
    out, first = graded_course["out"], graded_course["summary"]
    assert first["seed"]["source"].startswith("random (kept in") and "value" in first["seed"]
    assert all(json.loads(b)["key"]["isolation"] == first["isolation"] for b in graded_course["first"].values())
    results = out / "results" / ASSIGNMENT
    # "blank" graded by another version of the grader: its stored key differs, so it is graded again
    stale = json.loads((results / "blank.json").read_text())
    stale["key"]["grader"] = "0" * 16
    (results / "blank.json").write_text(json.dumps(stale))
    run = _grade_here(graded_course["course"], "--json")
    assert run.returncode == 0, run.stderr[-3000:]
    summary = json.loads(run.stdout)
    assert summary["seed"] == first["seed"]                          # the stored seed, not a new one
    kept = sorted(set(STUDENTS) - {"blank", "crash"})
    assert summary["graded_now"] == 2 and sorted(summary["skipped"]) == kept
    for student in kept:
        assert (results / f"{student}.json").read_bytes() == graded_course["first"][student]
    assert json.loads((results / "crash.json").read_text())["score"] == FULL - H.POINTS["q6"]


def test_student_flag_regrades_one_and_keeps_the_rest(graded_course):
    """--student honest regrades honest only; the written answer's points a person gave in the formgrader
    stay (the same submission), and the gradebook stays consistent with the results."""
    from nbgrader.api import Gradebook

    out = graded_course["out"]
    results = out / "results" / ASSIGNMENT
    url = f"sqlite:///{graded_course['course'] / 'gradebook.db'}"
    with Gradebook(url, "kv-course") as gb:     # as the formgrader's grade API does it
        grade = gb.find_grade(WRITTEN, ASSIGNMENT, ASSIGNMENT, "honest")
        grade.manual_score, grade.needs_manual_grade = WRITTEN_POINTS, False
        gb.db.commit()
    before = {p.stem: p.read_bytes() for p in results.glob("*.json")}
    run = _grade_here(graded_course["course"], "--student", "honest", "--json")
    assert run.returncode == 0, run.stderr[-3000:]
    summary = json.loads(run.stdout)
    assert summary["graded_now"] == 1 and summary["students"] == len(STUDENTS) and summary["consistent"]
    assert (results / "honest.json").read_bytes() != before["honest"]      # graded again ...
    for student in set(STUDENTS) - {"honest"}:                                # ... the others kept
        assert (results / f"{student}.json").read_bytes() == before[student]
    assert _formgrader_list(graded_course["course"])["honest"] == (True, False, TOTAL)
    with open(summary["csv"]) as f:
        rows = {line.split(",")[0]: line for line in f.read().splitlines()[1:]}
    assert sorted(rows) == sorted(STUDENTS)                                   # a complete CSV
    unknown = _grade_here(graded_course["course"], "--student", "nobody")
    assert unknown.returncode == 2 and len(unknown.stderr.strip().splitlines()) == 1 and "nobody" in unknown.stderr


def test_a_points_edit_is_said_once_and_graded_with_the_new_points(notebooks, tmp_path):
    """The instructor gives q1 4 points instead of 3 after the release went out: a released notebook (q1's
    cells still say 3) is graded out of 12 with q1's 4, and the reason says what changed, once, instead of
    calling the student's cells tampered; grade-class's summary says it once for the class."""
    from autograder.classroom import _repointed, format_summary

    course = tmp_path / "course"
    source = H.load_source()
    for cell in source["cells"]:
        if H._meta(cell).get("grade_id") == H.TEST["q1"]:
            cell["metadata"]["nbgrader"]["points"] = H.POINTS["q1"] + 1
    (course / "source" / ASSIGNMENT).mkdir(parents=True)
    (course / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").write_text(json.dumps(source))
    shutil.copy2(REPO / "course" / "nbgrader_config.py", course / "nbgrader_config.py")
    (tmp_path / "work.ipynb").write_bytes(notebooks["honest"])
    run = _run([sys.executable, "-m", "autograder", "grade", tmp_path / "work.ipynb", "--assignment", ASSIGNMENT,
                "--course", course, "--json"])
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout)
    assert (result["score"], result["max_score"]) == (FULL + 1, FULL + 1)
    q1 = next(t for t in result["tests"] if t["grade_id"] == H.TEST["q1"])
    assert (q1["points"], q1["max_points"]) == (H.POINTS["q1"] + 1, H.POINTS["q1"] + 1)
    said = f"points changed in the course's source since the release ({H.TEST['q1']} 3 -> 4)"
    assert result["reason"].count(said) == 1 and "did not match" not in result["reason"], result["reason"]
    assert result["repointed"] == {H.TEST["q1"]: [3, 4]}
    # the class: every student's result carries it; the summary says it once, the rows not at all
    rows = [dict(result, student=s, reason=f"all {len(H.Q)} tests passed") for s in ("a", "b")]
    summary = {"assignment": ASSIGNMENT, "students": 2, "graded_now": 2, "skipped": [], "jobs": 1,
               "duration_s": 1, "rows": rows, "counts": {"graded": 2}, "isolation": "bwrap", "seed": None,
               "gradebook": "g", "csv": "c", "out": "o", "consistent": True, "repointed": _repointed(rows)}
    text = format_summary(summary)
    assert text.count("points changed in the course's source since the release") == 1
    assert f"({H.TEST['q1']} 3 -> 4): 2 submission(s) graded with the source's points" in text


# ---------------------------------------------------------------------------
# A broken grading environment, error statuses
# ---------------------------------------------------------------------------
def test_a_second_clone_without_its_install_stops_before_grading(notebooks, tmp_path):
    """A copy of the checkout run from its own folder: this process imports the copy's autograder,
    the sandboxed kernel the editable install's (another checkout, not visible in the sandbox)."""
    from autograder.packages import COURSE_PACKAGES

    clone = tmp_path / "clone"
    for part in (*COURSE_PACKAGES, "course"):
        shutil.copytree(REPO / part, clone / part, ignore=shutil.ignore_patterns("__pycache__"))
    submitted = _class(tmp_path / "class", {"honest": notebooks["honest"], "blank": notebooks["blank"]})
    out = tmp_path / "out"
    run = _grade_class(submitted, out, "--course", clone / "course", course=clone / "course",
                       cwd=clone, PYTHONPATH=str(clone))
    assert run.returncode == 5, (run.returncode, run.stdout, run.stderr[-2000:])
    assert run.stdout == "" and len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert "autograder" in run.stderr and "nothing was graded" in run.stderr
    assert not out.exists()                                                   # nothing recorded
    single = _run([sys.executable, "-m", "autograder", "grade", submitted / "honest" / ASSIGNMENT /
                   f"{ASSIGNMENT}.ipynb", "--assignment", ASSIGNMENT, "--course", clone / "course"],
                  cwd=clone, PYTHONPATH=str(clone))
    assert single.returncode == 5 and len(single.stderr.strip().splitlines()) == 1


def test_an_error_status_exits_4_with_its_json(tmp_path):
    empty = tmp_path / "empty.ipynb"
    empty.write_bytes(b"")
    run = _run([sys.executable, "-m", "autograder", "grade", empty, "--assignment", ASSIGNMENT, "--json"])
    assert run.returncode == 4, run.stderr[-2000:]
    assert json.loads(run.stdout)["status"] == "error"


def test_nbgrader_failing_everyone_while_the_outside_check_passes_is_an_error():
    from autograder.classroom import _nbgrader_failed_all

    def result(nbgrader, verdict):
        return {"status": "graded", "tests": [{"nbgrader_points": n, "verdict_points": v}
                                              for n, v in zip(nbgrader, verdict)]}
    assert _nbgrader_failed_all(result([0, 0, 0, 0], [3, 1, 0, 2]))       # the kernel could not check
    assert not _nbgrader_failed_all(result([0, 0, 0, 0], [0, 0, 0, 0]))   # an honest blank
    assert not _nbgrader_failed_all(result([3, 0, 0, 0], [3, 1, 1, 2]))   # nbgrader graded something


# ---------------------------------------------------------------------------
# The gradebook's database
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("url, words", [
    ("postgresql+pg8000://nobody@/kvtest", "driver"),          # a driver the project does not install
    ("mysql://nobody@localhost/kvtest", "driver"),
    ("not a url", "not a database URL"),
])
def test_a_bad_database_url_is_one_line_and_exit_2(notebooks, tmp_path, url, words):
    submitted = _class(tmp_path, {"blank": notebooks["blank"]})
    run = _grade_class(submitted, tmp_path / "out", "--db", url)
    assert run.returncode == 2 and run.stdout == "", run.stderr[-2000:]
    assert len(run.stderr.strip().splitlines()) == 1 and words in run.stderr, run.stderr
    assert not (tmp_path / "out" / "results").exists()


def test_a_wrong_password_is_one_line_and_exit_2(postgres_url, notebooks, tmp_path):  # noqa: F811
    url = postgres_url.replace("postgresql+psycopg2://postgres@", f"postgresql://{P.PASSWORD_ROLE}:wrong@")
    submitted = _class(tmp_path, {"blank": notebooks["blank"]})
    run = _grade_class(submitted, tmp_path / "out", "--db", url)
    assert run.returncode == 2 and run.stdout == "", run.stderr[-2000:]
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert "password authentication failed" in run.stderr and "wrong" not in run.stderr.replace(
        "password authentication", "")                          # the password itself is never shown


def test_a_plain_postgresql_url_uses_psycopg2(postgres_url):  # noqa: F811
    from nbgrader.api import Gradebook

    from autograder.course import prepare_environment
    from autograder.database import gradebook_url

    prepare_environment()       # nbgrader's schema head read from its files, not by running alembic
    plain = postgres_url.replace("postgresql+psycopg2://", "postgresql://")
    url = gradebook_url(plain)
    assert url == postgres_url
    right = gradebook_url(plain.replace("postgres@", f"{P.PASSWORD_ROLE}:{P.PASSWORD}@"))
    assert right.startswith("postgresql+psycopg2://")
    with Gradebook(url, "kv-course") as gb:
        gb.update_or_create_student("plain_url_student")
    with Gradebook(url, "kv-course") as gb:
        assert "plain_url_student" in [s.id for s in gb.students]


# ---------------------------------------------------------------------------
# Feedback pages: offline maths, exercises named; quiet logs
# ---------------------------------------------------------------------------
def _feedback_pages(plain_course, graded_course):
    yield "plain nbgrader", plain_course["feedback"]["honest"]
    yield "grade-class", (graded_course["course"] / "feedback" / "honest" / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()


def test_feedback_maths_is_mathml_and_nothing_is_fetched(plain_course, graded_course):
    tex = sum(H._src(c).count("$") for c in H.load_source()["cells"] if c["cell_type"] == "markdown")
    assert tex >= 2                                   # the chapter's prose has maths to show
    for course, html in _feedback_pages(plain_course, graded_course):
        assert "<math" in html and "</math>" in html, course
        assert "cdnjs" not in html and "MathJax" not in html, course     # no script from a CDN
        assert "<script src=" not in html, course


def test_feedback_names_each_exercise(plain_course, graded_course):
    for course, html in _feedback_pages(plain_course, graded_course):
        assert "Test cell" not in html, course
        for q in H.Q:
            assert f"Exercise {H.TEST[q]}</a>" in html, (course, q)


def test_plain_nbgrader_logs_no_known_noise(plain_course):
    autograde = plain_course["runs"]["autograde"].stderr
    assert "has changed!" not in autograde and "SAWarning" not in autograde
    feedback = plain_course["runs"]["generate_feedback"].stderr
    assert "display_data_priority" not in feedback
