"""grade-class into a shared gradebook: PostgreSQL, a run killed midway, exports.

* A small class graded into a real PostgreSQL gradebook (``tests/pg_server.py``
  starts a throwaway server) named by the course folder's config, by ``grade-class``
  run there with no ``--db`` and by plain ``nbgrader autograde``: one gradebook,
  read back with nbgrader's ``Gradebook`` API.
* A run killed with SIGKILL (its whole process group) after the first students
  are graded, then run again: nobody is lost, nobody is graded twice (the
  students graded before the kill keep their result files byte for byte), no
  kernel outlives the killed run. On sqlite, and on PostgreSQL.
* The CSV has a row per student and a column per exercise; the feedback HTML
  holds no hidden test and no hidden case's numbers.

Expected scores are sums of the contract's points (q1 3, q2 1, q3 1, q4 2, q5 2, q6 2 = 11,
``hostile.FULL``): the honest notebook all of them, the blank release 0, a q2 without the
factor 2 for K and V all but q2's 1 (q3 and q4 do not call the q2 function in that notebook).

PostgreSQL or psycopg2 missing: those tests skip with one line, or fail under
REQUIRE_POSTGRES=1 (CI).
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from procs import run_in_group

import hostile as H
import pg_server as P
from pg_server import postgres_url  # noqa: F401 -- the fixture

REPO = H.REPO
ASSIGNMENT = H.ASSIGNMENT
FULL = H.FULL                  # the sum of the contract's points (tests/hostile)
TESTS = [H.TEST[q] for q in H.Q]
NO_KV_FACTOR = H._body("q2", "return layers * kv_heads * head_dim * dtype_bytes * seq_len")
# A right answer whose cell also writes active HTML and JavaScript outputs: the feedback an
# instructor opens must not run them.
ACTIVE_OUTPUT = H._body("q2", "return 2 * layers * kv_heads * head_dim * dtype_bytes * seq_len") + """
from IPython.display import HTML, Javascript, display
display(HTML('<b id="kept">bold stays</b><script>window.HOSTILE_SCRIPT = 1</script>'
             '<img src="x" onerror="window.HOSTILE_ONERROR = 1">'))
display(Javascript("window.HOSTILE_JS = 1"))
"""


def _class(root: Path, students: dict) -> Path:
    """``root/submitted/<student>/<id>/<id>.ipynb`` for ``{student: notebook bytes}``."""
    for student, data in students.items():
        folder = root / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        (folder / f"{ASSIGNMENT}.ipynb").write_bytes(data)
    return root / "submitted"


@pytest.fixture(scope="module")
def notebooks():
    kit = H.make_kit()
    return {"honest": H.dump(kit.notebook()), "blank": H.dump(kit.notebook(blank=tuple(H.Q))),
            "no_kv_factor": H.dump(kit.notebook({"q2": NO_KV_FACTOR}))}


EXPECTED = {"honest": FULL, "blank": 0, "no_kv_factor": FULL - 1}
EXPORTED = {**EXPECTED, "active_output": FULL}

# Due dates (the exported class): the course's late policy is nbgrader's LateSubmissionPlugin "zero", the due date
# 2027-03-01 17:00 UTC is set in the gradebook with nbgrader's own command, honest submitted a second early and
# active_output at 18:30, 5,400 s late (1 h 30 min): its penalty is its whole score, 11.
DUE = "2027-03-01 17:00:00 UTC"
SUBMITTED_AT = {"honest": ("2027-03-01 16:59:59.000000 UTC", "2027-03-01T16:59:59Z", 0),
                "active_output": ("2027-03-01 18:30:00.000000 UTC", "2027-03-01T18:30:00Z", 5400)}
FINAL = {**EXPORTED, "active_output": 0}        # the tests' points minus the late penalty
# The instructor's Canvas gradebook export (the roster): Canvas's student columns, the assignment's column
# "Title (id)", another assignment, read-only totals, the "Points Possible" row, the course's test student.
# nbgrader's ids are found by SIS Login ID (honest; ACTIVE_OUTPUT in another case), SIS User ID (no_kv_factor)
# or Canvas ID (blank).
ROSTER = """Student,ID,SIS User ID,SIS Login ID,Section,ch01_kv_formula (4242),Homework 0 (4240),Current Score,Final Score
    Points Possible,,,,,11.00,10.00,(read only),(read only)
"Lovelace, Ada",101,S-0101,honest,KV 2027 A,,9.00,90.00,90.00
"Hopper, Grace",102,no_kv_factor,grace.hopper,KV 2027 A,,8.00,80.00,80.00
"Turing, Alan",blank,S-0103,alan.turing,KV 2027 B,,7.00,70.00,70.00
"Babbage, Charles",104,S-0104,ACTIVE_OUTPUT,KV 2027 B,,10.00,100.00,100.00
"Student, Test",105,,,KV 2027 A,,,,
"""
CANVAS_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]   # Canvas's import, in its order


def _args(submitted: Path, out: Path, *extra) -> list:
    return [sys.executable, "-m", "autograder", "grade-class", str(submitted), "--assignment", ASSIGNMENT,
            "--course", str(REPO / "course"), "--out", str(out), *extra]


def _run(args, **env):
    return run_in_group(args, timeout=600, label=" ".join(map(str, args[1:4])),
                        env=dict(os.environ, PYTHONPATH=str(REPO), **env))


def _nbgrader(*args, cwd):
    """A real nbgrader command, run as an instructor would from the course folder (nbgrader runs ``alembic`` by
    name: the venv's bin/ goes first on PATH)."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    run = run_in_group([sys.executable, "-m", "nbgrader", *args], timeout=600, label=f"nbgrader {args[0]}", cwd=cwd,
                       env=dict(os.environ, PYTHONPATH=str(REPO), PATH=path))
    assert run.returncode == 0, (args, run.stderr[-2000:])
    return run


def _book(url: str) -> dict:
    """``{student: (score, {grade_id: score})}`` read back with nbgrader's Gradebook API."""
    from nbgrader.api import Gradebook

    with Gradebook(url, "kv-course") as gb:
        out = {}
        for student in gb.students:
            sub = gb.find_submission(ASSIGNMENT, student.id)
            out[student.id] = (sub.score, {g.name: g.score for nb in sub.notebooks for g in nb.grades})
        return out


# ---------------------------------------------------------------------------
# PostgreSQL
# ---------------------------------------------------------------------------
SECRET = "spring-2027 kv-course, shared by every grader"


def test_two_graders_into_postgres_with_one_secret(postgres_url, notebooks, tmp_path, monkeypatch):  # noqa: F811
    """Two graders at once (two processes, each its own share of the class) into one new PostgreSQL gradebook, with
    one class secret and one output folder (docs/instructors.md, "Several graders"): one seed, one gradebook; a
    third run finds everyone graded. Without a class secret, a server's gradebook is refused before anything runs."""
    from concurrent.futures import ThreadPoolExecutor

    from autograder.__main__ import main

    url = P.new_database(postgres_url, "kv_class")
    submitted = _class(tmp_path, {**notebooks, "honest_2": notebooks["honest"]})
    out = tmp_path / "out"
    monkeypatch.delenv("KV_COURSE_GRADING_SEED", raising=False)
    monkeypatch.delenv("KV_COURSE_GRADING_SEED_FILE", raising=False)
    assert main(["grade-class", str(submitted), "--assignment", ASSIGNMENT, "--course", str(REPO / "course"),
                 "--db", url, "--out", str(out)]) == 2 and not out.exists()
    # two graders start at once on the new, empty database: they set it up one at a time (database.exclusive)
    shares = (["honest", "blank"], ["no_kv_factor", "honest_2"])
    with ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(lambda share: _run(_args(submitted, out, "--db", url, "--jobs", "1", "--json",
                                                      *[a for s in share for a in ("--student", s)]),
                                                KV_COURSE_GRADING_SEED=SECRET), shares))
    for run in runs:
        assert run.returncode == 0, run.stderr[-3000:]
    summaries = [json.loads(run.stdout) for run in runs]
    assert [s["graded_now"] for s in summaries] == [2, 2] and all(s["consistent"] for s in summaries)
    assert summaries[0]["seed"] == summaries[1]["seed"] == {"source": "$KV_COURSE_GRADING_SEED",
                                                            "fingerprint": summaries[0]["seed"]["fingerprint"]}
    keys = {json.loads(p.read_text())["key"]["seed"] for p in (out / "results" / ASSIGNMENT).glob("*.json")}
    assert len(keys) == 1                                     # every result was graded with the one seed
    assert not (out / "gradebook.db").exists() and not (out / "grading-seed").exists()   # the server's; the secret
    book = _book(url)
    assert {s: score for s, (score, _) in book.items()} == {**EXPECTED, "honest_2": FULL}
    assert book["no_kv_factor"][1] == {**{H.TEST[q]: H.POINTS[q] for q in H.Q}, H.TEST["q2"]: 0}
    again = json.loads(_run(_args(submitted, out, "--db", url, "--json"), KV_COURSE_GRADING_SEED=SECRET).stdout)
    assert again["graded_now"] == 0 and sorted(again["skipped"]) == sorted(book)
    with open(again["csv"], newline="") as f:
        assert sorted(r["student"] for r in csv.DictReader(f)) == sorted(book)     # one CSV for the whole class
    # the slip report from the PostgreSQL gradebook: written by grade-class, and on request
    from autograder import report as R
    from nbgrader.api import Gradebook

    assert Path(again["report"]["html"]).is_file(), again["report"]
    kinds = {"honest": "right", "honest_2": "right", "no_kv_factor": "q2_no_kv_factor", "blank": "blank"}
    assert _got_report(R.class_report(out, ASSIGNMENT, db_url=url)) == _expected_report(kinds)
    with Gradebook(url, "kv-course") as gb:      # the instructor gives q2's point by hand (the formgrader)
        grade = gb.find_grade(H.TEST["q2"], ASSIGNMENT, ASSIGNMENT, "no_kv_factor")
        grade.manual_score = 1
        gb.db.commit()
    q2 = next(e for e in R.class_report(out, ASSIGNMENT, db_url=url).exercises
              if e.grade_id == H.TEST["q2"])
    assert (q2.counts["full"], q2.counts["zero"], q2.slips) == (3, 0, {})    # the gradebook's points count


def test_class_into_postgres(postgres_url, notebooks, tmp_path):  # noqa: F811
    """A course folder whose config names a PostgreSQL gradebook: grade-class, run there with no --db,
    --course or --out, grades into it (the gradebook nbgrader uses for that course); plain ``nbgrader
    autograde`` of a student then writes the same scores into the same gradebook. The seed is the class
    secret, which a server's gradebook requires: without it both paths refuse before grading anyone."""
    url = P.new_database(postgres_url, "kv_course_db")
    course = tmp_path / "course"
    shutil.copytree(REPO / "course" / "source" / ASSIGNMENT, course / "source" / ASSIGNMENT)
    (course / "nbgrader_config.py").write_text((REPO / "course" / "nbgrader_config.py").read_text()
                                               + f"\nc.CourseDirectory.db_url = {url!r}\n")
    _class(course, {**notebooks, "honest_2": notebooks["honest"]})
    here = [sys.executable, "-m", "autograder", "grade-class", "submitted", "--assignment", ASSIGNMENT, "--json"]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("KV_COURSE_GRADING_SEED_FILE", None)
    # a server's gradebook is shared: without a class secret both paths refuse before grading anyone
    env.pop("KV_COURSE_GRADING_SEED", None)
    refused = run_in_group([*here, "--jobs", "2"], timeout=600, cwd=course, env=env)
    assert refused.returncode == 2 and "class secret" in refused.stderr, refused.stderr[-3000:]
    env["KV_COURSE_GRADING_SEED"] = SECRET
    run = run_in_group([*here, "--jobs", "2"], timeout=600, cwd=course, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    summary = json.loads(run.stdout)
    assert summary["gradebook"] == url and summary["consistent"] and summary["graded_now"] == 4
    assert summary["out"] == str(course) and not (course / "gradebook.db").exists()   # the server's gradebook
    book = _book(url)
    assert {s: score for s, (score, _) in book.items()} == {**EXPECTED, "honest_2": FULL}
    assert book["no_kv_factor"][1] == {**{H.TEST[q]: H.POINTS[q] for q in H.Q}, H.TEST["q2"]: 0}
    plain = run_in_group([sys.executable, "-m", "nbgrader", "autograde", ASSIGNMENT, "--student", "no_kv_factor",
                          "--force"], timeout=600, cwd=course, env=env)
    assert plain.returncode == 0, plain.stderr[-3000:]
    assert _book(url) == book                   # plain nbgrader: the same gradebook, the same scores
    again = json.loads(run_in_group(here, timeout=600, cwd=course, env=env).stdout)
    assert again["graded_now"] == 0 and sorted(again["skipped"]) == sorted(book) and again["consistent"]
    # the slip report from the PostgreSQL gradebook: written by grade-class, and on request
    from autograder import report as R
    from nbgrader.api import Gradebook

    assert Path(again["report"]["html"]).is_file(), again["report"]
    kinds = {"honest": "right", "honest_2": "right", "no_kv_factor": "q2_no_kv_factor", "blank": "blank"}
    assert _got_report(R.class_report(course, ASSIGNMENT, db_url=url)) == _expected_report(kinds)
    with Gradebook(url, "kv-course") as gb:      # the instructor gives q2's point by hand (the formgrader)
        grade = gb.find_grade(H.TEST["q2"], ASSIGNMENT, ASSIGNMENT, "no_kv_factor")
        grade.manual_score = 1
        gb.db.commit()
    q2 = next(e for e in R.class_report(course, ASSIGNMENT, db_url=url).exercises
              if e.grade_id == H.TEST["q2"])
    assert (q2.counts["full"], q2.counts["zero"], q2.slips) == (3, 0, {})    # the gradebook's points count
    # plain nbgrader on a server's gradebook without the class secret: the outside check refuses that student
    refused = run_in_group([sys.executable, "-m", "nbgrader", "autograde", ASSIGNMENT, "--student", "blank",
                            "--force"], timeout=600, cwd=course, env={k: v for k, v in env.items()
                                                                       if k != "KV_COURSE_GRADING_SEED"})
    assert refused.returncode != 0 and "class secret" in refused.stdout + refused.stderr, refused.stderr[-3000:]


def test_graders_set_the_gradebook_up_one_at_a_time(postgres_url):  # noqa: F811
    """``database.exclusive``: a second grader's set-up waits for the first one's (PostgreSQL's advisory lock); two
    graders starting at once would otherwise both run nbgrader's generate_assignment into one database."""
    import threading

    from autograder.database import exclusive

    url = P.new_database(postgres_url, "kv_lock")
    events, first_in = [], threading.Event()

    def grader(name, hold):
        with exclusive(url, "kv-course gradebook set-up: kv-course"):
            events.append(f"{name} in")
            first_in.set()
            time.sleep(hold)
            events.append(f"{name} out")

    first = threading.Thread(target=grader, args=("A", 1.0))
    first.start()
    first_in.wait(10)
    second = threading.Thread(target=grader, args=("B", 0.0))
    second.start()
    first.join(20), second.join(20)
    assert events == ["A in", "A out", "B in", "B out"]


# ---------------------------------------------------------------------------
# Killed midway, run again
# ---------------------------------------------------------------------------
def _children(pid: int) -> list:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(entry))
            except (OSError, ValueError, IndexError):
                continue
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")[:200]
    except OSError:
        return "?"


def _kill_midway_and_rerun(tmp_path: Path, notebooks: dict, db_args: list):
    students = {f"s{i}_{name}": data for i, (name, data) in enumerate(
        [*notebooks.items(), *notebooks.items()])}      # six students, two of each
    submitted = _class(tmp_path, students)
    out = tmp_path / "out"
    results = out / "results" / ASSIGNMENT
    # The killed run cannot clean up its temp dirs: give it (short: socket paths) ones of its own.
    scratch = Path(tempfile.mkdtemp(prefix="kvk-", dir="/tmp" if os.path.isdir("/tmp") else None))
    env = dict(os.environ, PYTHONPATH=str(REPO), TMPDIR=str(scratch))
    proc = subprocess.Popen(_args(submitted, out, "--jobs", "1", *db_args), env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    try:
        while not list(results.glob("*.json")):
            assert proc.poll() is None, "grade-class ended before anyone was graded"
            assert time.monotonic() < deadline, "nobody graded within 300 s"
            time.sleep(0.1)
        kernels = _children(proc.pid)          # the kernel launcher(s) of the student in flight
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    done = {p.stem: p.read_bytes() for p in results.glob("*.json")}
    assert 1 <= len(done) < len(students), sorted(done)
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in kernels) and time.monotonic() < deadline:
        time.sleep(0.2)
    survivors = {pid: _cmdline(pid) for pid in kernels if _alive(pid)}
    shutil.rmtree(scratch, ignore_errors=True)
    assert survivors == {}, f"outlived the killed grader: {survivors}"

    run = _run(_args(submitted, out, "--jobs", "2", "--json", *db_args))
    assert run.returncode == 0, run.stderr[-3000:]
    summary = json.loads(run.stdout)
    assert sorted(summary["skipped"]) == sorted(done)                       # nobody graded twice ...
    assert summary["graded_now"] == len(students) - len(done)               # ... nobody lost
    assert summary["students"] == len(students) and summary["consistent"]
    for student, data in done.items():
        assert (results / f"{student}.json").read_bytes() == data, student  # not regraded
    scores = {r["student"]: r["score"] for r in summary["rows"]}
    assert scores == {s: EXPECTED[s.split("_", 1)[1]] for s in students}
    return summary


def test_killed_midway_sqlite(notebooks, tmp_path):
    summary = _kill_midway_and_rerun(tmp_path, notebooks, [])
    from nbgrader.api import Gradebook
    with Gradebook(summary["gradebook"], "kv-course") as gb:
        assert len(gb.students) == 6 and len(gb.find_assignment(ASSIGNMENT).submissions) == 6


def test_killed_midway_postgres(postgres_url, notebooks, tmp_path, monkeypatch):  # noqa: F811
    url = P.new_database(postgres_url, "kv_killed")
    monkeypatch.setenv("KV_COURSE_GRADING_SEED", SECRET)          # a server's gradebook needs the class secret
    summary = _kill_midway_and_rerun(tmp_path, notebooks, ["--db", url])
    book = _book(url)
    assert len(book) == 6 and {s: score for s, (score, _) in book.items()} == \
        {r["student"]: r["score"] for r in summary["rows"]}


# ---------------------------------------------------------------------------
# Exports: the CSV and the feedback HTML
# ---------------------------------------------------------------------------
def _late_course(root: Path) -> Path:
    """The course (config and chapter 01's source) with nbgrader's late policy set to "zero"."""
    course = root / "course"
    (course / "source").mkdir(parents=True)
    shutil.copytree(REPO / "course" / "source" / ASSIGNMENT, course / "source" / ASSIGNMENT)
    config = (REPO / "course" / "nbgrader_config.py").read_text()
    (course / "nbgrader_config.py").write_text(config + '\nc.LateSubmissionPlugin.penalty_method = "zero"\n')
    return course


@pytest.fixture(scope="module")
def exported(notebooks, tmp_path_factory):
    root = tmp_path_factory.mktemp("exports")
    active = H.dump(H.make_kit().notebook({"q2": ACTIVE_OUTPUT}))
    submitted = _class(root, {**notebooks, "active_output": active})
    for student, (stamp, _, _) in SUBMITTED_AT.items():
        (submitted / student / ASSIGNMENT / "timestamp.txt").write_text(stamp + "\n")
    course, out = _late_course(root), root / "out"
    out.mkdir()
    book = f"sqlite:///{out / 'gradebook.db'}"
    _nbgrader("db", "assignment", "add", ASSIGNMENT, f"--duedate={DUE}", f"--db={book}", cwd=course)
    (root / "roster.csv").write_text(ROSTER)
    env_seed = "a class secret nobody in the class knows"
    args = _args(submitted, out, "--jobs", "2", "--feedback", str(root / "feedback"), "--json", "--lms", "canvas",
                 "--roster", str(root / "roster.csv"))
    args[args.index("--course") + 1] = str(course)
    run = _run(args, KV_COURSE_GRADING_SEED=env_seed)
    assert run.returncode == 0, run.stderr[-3000:]
    return {"root": root, "summary": json.loads(run.stdout), "secret": env_seed, "course": course, "book": book}


def test_csv_has_a_row_per_student_and_a_column_per_exercise(exported):
    with open(exported["summary"]["csv"], newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["student"] for r in rows] == sorted(EXPORTED)
    assert list(rows[0]) == ["student", "assignment", "status", "score", "max_score", *TESTS, "submitted_at",
                             "late_seconds", "late_penalty", "isolation", "reason"]
    by = {r["student"]: r for r in rows}
    assert {s: float(r["score"]) for s, r in by.items()} == FINAL
    assert [float(by["no_kv_factor"][t]) for t in TESTS] == [3, 0, 1, 2, 2, 2]   # the contract's points, q2 lost
    assert [float(by["honest"][t]) for t in TESTS] == [3, 1, 1, 2, 2, 2]
    assert [float(by["active_output"][t]) for t in TESTS] == [3, 1, 1, 2, 2, 2]  # all right, and late
    assert all(float(r["max_score"]) == FULL and r["isolation"] == exported["summary"]["isolation"] for r in rows)


def test_a_late_submission_is_penalised_as_the_course_configures(exported):
    """nbgrader's late policy on the grade-class path: the due date from the gradebook, the time from timestamp.txt,
    the "zero" penalty of the course config, stored as nbgrader stores it; nbgrader's own export agrees."""
    from nbgrader.api import Gradebook

    with open(exported["summary"]["csv"], newline="") as f:
        by = {r["student"]: r for r in csv.DictReader(f)}
    for student, (_, iso, late) in SUBMITTED_AT.items():
        assert (by[student]["submitted_at"], float(by[student]["late_seconds"])) == (iso, late), by[student]
    assert (float(by["active_output"]["late_penalty"]), float(by["active_output"]["score"])) == (FULL, 0)
    assert (float(by["honest"]["late_penalty"]), float(by["honest"]["score"])) == (0, FULL)
    assert (by["blank"]["submitted_at"], float(by["blank"]["late_seconds"])) == ("", 0)    # handed in by hand
    rows = {r["student"]: r for r in exported["summary"]["rows"]}
    assert (rows["active_output"]["points"], rows["active_output"]["score"]) == (FULL, 0)
    with Gradebook(exported["book"], "kv-course") as gb:
        late = gb.find_submission(ASSIGNMENT, "active_output")
        assert (late.score, late.late_submission_penalty, late.total_seconds_late) == (FULL, FULL, 5400)
        assert gb.find_submission(ASSIGNMENT, "honest").late_submission_penalty == 0
    export = exported["root"] / "nbgrader-export.csv"
    _nbgrader("export", f"--db={exported['book']}", f"--to={export}", cwd=exported["course"])
    with open(export, newline="") as f:
        book = {r["student_id"]: r for r in csv.DictReader(f)}
    assert {s: float(r["score"]) for s, r in book.items()} == FINAL
    assert float(book["active_output"]["late_submission_penalty"]) == FULL
    assert book["active_output"]["duedate"].startswith("2027-03-01 17:00:00")


def _canvas_import(path: Path) -> dict:
    """What Canvas's gradebook importer reads (app/models/gradebook_importer.rb): a header whose first cells hold
    "Student" and "ID", the student columns ending at "Section", assignment columns "Title (id)"; a row whose first
    cell holds "Points Possible"; then students. Returns {"columns", "points", "scores": {(ID, SIS User ID,
    SIS Login ID): cell}}; fails where Canvas would refuse the file."""
    import re

    with open(path, newline="", encoding="utf-8") as f:
        table = list(csv.reader(f))
    header, points = table[0], table[1]
    assert "Student" in header[0] and "ID" in header[1] and header[:5] == CANVAS_COLUMNS, header
    assert "Section" in header[4] and len(set(map(len, table))) == 1
    assert "Points Possible" in points[0] and points[1:5] == ["", "", "", ""]
    titled = [re.fullmatch(r"(.+?)\s*\((\d+)\)", h) for h in header[5:]]
    return {"columns": [(m.group(1), m.group(2)) if m else (h, None) for m, h in zip(titled, header[5:])],
            "points": points[5:], "scores": {tuple(row[1:4]): row[5:] for row in table[2:]}}


def test_the_canvas_file_is_canvas_gradebook_import(exported):
    summary = exported["summary"]
    path = Path(summary["csv"]).with_name(f"{ASSIGNMENT}_canvas.csv")
    assert summary["lms"]["file"] == str(path) and path.stat().st_mode & 0o777 == 0o600
    got = _canvas_import(path)
    assert got["columns"] == [("ch01_kv_formula", "4242")] and got["points"] == ["11"]
    assert got["scores"] == {("101", "S-0101", "honest"): ["11"],            # SIS Login ID
                             ("102", "no_kv_factor", "grace.hopper"): ["10"],  # SIS User ID: q2's 1 lost
                             ("blank", "S-0103", "alan.turing"): ["0"],       # Canvas ID
                             ("104", "S-0104", "ACTIVE_OUTPUT"): ["0"],      # 11 points, 11 late penalty
                             ("105", "", ""): [""]}                          # the test student: no submission
    assert summary["lms"]["not_submitted"] == 1 and summary["lms"]["blank"] == {}


def _grade_class_main(exported, *extra) -> tuple[int, str]:
    from autograder.__main__ import main

    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["grade-class", str(exported["root"] / "submitted"), "--assignment", ASSIGNMENT, "--course",
                     str(exported["course"]), "--out", str(exported["root"] / "out-refused"), *extra])
    return code, err.getvalue()


def test_a_bad_roster_is_one_line_before_anyone_is_graded(exported, tmp_path):
    lines = ROSTER.splitlines()
    no_login = tmp_path / "no_login.csv"
    no_login.write_text("\n".join(line.replace("SIS Login ID", "Login") for line in lines) + "\n")
    missing = tmp_path / "missing.csv"
    missing.write_text("\n".join(line for line in lines if "Hopper" not in line) + "\n")
    twice = tmp_path / "twice.csv"
    twice.write_text(ROSTER + '"Other, Ada",106,S-0106,HONEST,KV 2027 B,,,,\n')
    cases = [(["--lms", "canvas", "--roster", str(no_login)], "no 'SIS Login ID' column"),
             (["--lms", "canvas", "--roster", str(missing)], "student no_kv_factor not in the roster"),
             (["--lms", "canvas", "--roster", str(twice)], "student honest match more than one row"),
             (["--lms", "canvas", "--roster", str(tmp_path / "nowhere.csv")], "no such file"),
             (["--lms", "canvas"], "--lms canvas needs --roster FILE"),
             (["--roster", str(missing)], "--roster goes with --lms canvas")]
    for extra, says in cases:
        code, err = _grade_class_main(exported, *extra)
        assert code == 2 and err.count("\n") == 1 and says in err, (extra, err)
    assert not (exported["root"] / "out-refused").exists()       # nothing graded, nothing written


def test_the_seed_is_the_class_secret_and_is_not_written_down(exported):
    summary, root = exported["summary"], exported["root"]
    assert summary["seed"]["source"] == "$KV_COURSE_GRADING_SEED" and "value" not in summary["seed"]
    for p in (root / "out").rglob("*"):
        if p.is_file():
            assert exported["secret"].encode() not in p.read_bytes(), p


def _ints(value) -> list:
    """The ints of an expected value or a slip's value: itself, or the elements of a tuple (q6's pair)."""
    items = value if type(value) is tuple else (value,)
    return [int(v) for v in items if isinstance(v, (int, float)) and not isinstance(v, bool)]


def _hidden_numbers(shown_to_all: str = "") -> set:
    """Every distinctive number of the hidden cases (inputs and expected values), as text, both for the
    checks' default seed (the notebook's hidden tests) and for any seed: none may reach a student.
    ``shown_to_all``: what the chapter itself prints for every learner (the blank release's feedback, whose
    checks fail on visible cases only), such as a model's parameter count in section 9."""
    from autograder.checks import ch01, schema
    from kvcoach import slips

    release = json.dumps(H.default_release()) + json.dumps(H.load_source())
    visible = set()   # what a visible failure may show: the case, its answer, the answers of known slips
    for ex in ch01.EXERCISES.values():
        for case in ex.visible_cases:
            visible |= {json.dumps(case)} | {f"{v} {v:,}" for v in _ints(ex.expected(case))}
            _, candidates = slips.QUANTITIES[ex.quantity](dict(ex.slip_inputs(case)))
            visible |= {f"{v} {v:,}" for _, value in candidates for v in _ints(value)}
    numbers = set()
    for ex in ch01.EXERCISES.values():
        for case in ex.hidden_cases(schema.DEFAULT_HIDDEN_SEED):
            values = _ints(ex.expected(case)) + [v for v in case["kwargs"].values() if type(v) is int]
            for v in values:
                if v >= 100_000:
                    for text in (str(v), f"{v:,}"):
                        if text not in release and text not in shown_to_all and not any(text in s for s in visible):
                            numbers.add(text)
    return numbers


def _feedback_html(exported, student: str) -> str:
    """A student's feedback page, where grade-class wrote it (these submissions have no exchange secret:
    beside the feedback folder, where release does not look)."""
    return Path(exported["summary"]["feedback"]["files"][student]).read_text(encoding="utf-8")


def test_feedback_html_has_no_hidden_tests_or_hidden_cases(exported):
    assert exported["summary"]["feedback"]["written"] == len(EXPORTED)
    blank = _feedback_html(exported, "blank")
    hidden = _hidden_numbers(shown_to_all=blank)
    assert len(hidden) >= 10     # the check below has something to find
    for student in EXPORTED:
        html = _feedback_html(exported, student)
        assert "bytes_per_token_from_config" in html and "### BEGIN HIDDEN TESTS" not in html
        assert "hidden=True" not in html, student
        leaked = sorted(n for n in hidden if n in html)
        assert leaked == [], (student, leaked[:5])
    # the scores in the feedback are the gradebook's
    html = _feedback_html(exported, "no_kv_factor")
    assert "factor 2 for K and V is missing" in html
    assert f"Score: {FULL - 1}" in html or f"{FULL - 1}.0 / {FULL}.0" in html or f"{FULL - 1} / {FULL}" in html


def test_feedback_runs_no_script_a_student_wrote(exported):
    html = _feedback_html(exported, "active_output")
    assert 'id="kept"' in html and "bold stays" in html     # the output is there, made harmless
    assert [p for p in H.active_parts(html) if "HOSTILE" in p] == []


def test_the_same_notebook_rendered_unsanitised_would_run_them(exported):
    """Shows the check above can fail: nbconvert's default keeps the student's scripts."""
    from nbconvert import HTMLExporter

    autograded = Path(exported["summary"]["autograded"]) / "active_output" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    html, _ = HTMLExporter(template_name="classic").from_filename(str(autograded))
    active = " ".join(p for p in H.active_parts(html) if "HOSTILE" in p)
    assert "HOSTILE_SCRIPT" in active and "HOSTILE_ONERROR" in active and "HOSTILE_JS" in active


def test_the_readmes_plain_nbgrader_workflow_gives_the_same_safe_feedback(tmp_path):
    """docs/instructors.md, nbgrader: generate_assignment, autograde, generate_feedback with the course config
    and nbgrader alone. A student's comment quoting the hidden-test marker must not cost them their
    feedback (nbgrader's stock ClearHiddenTests raises on it); their scripts must not run."""
    course = tmp_path / "course"
    shutil.copytree(REPO / "course", course, ignore=shutil.ignore_patterns(
        "gradebook.db", "release", "submitted", "autograded", "feedback", ".nbgrader.log"))
    quoting = H._body("q2", "# nbgrader hides its tests after a line '### BEGIN HIDDEN TESTS'\n"
                            "return 2 * layers * kv_heads * head_dim * dtype_bytes * seq_len")
    kit = H.make_kit()
    _class(course, {"active_output": H.dump(kit.notebook({"q2": ACTIVE_OUTPUT})),
                    "quoting": H.dump(kit.notebook({"q2": quoting}))})
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    for step in (["generate_assignment", ASSIGNMENT, "--force"], ["autograde", ASSIGNMENT],
                 ["generate_feedback", ASSIGNMENT]):
        run = subprocess.run([sys.executable, "-m", "nbgrader", *step], cwd=course, env=env,
                             capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, (step, run.stderr[-3000:])
    for student, quoted in (("active_output", 0), ("quoting", 1)):
        html = (course / "feedback" / student / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text(encoding="utf-8")
        assert html.count("### BEGIN HIDDEN TESTS") == quoted     # the student's comment, never a test cell
        assert "hidden=True" not in html
        assert [p for p in H.active_parts(html) if "HOSTILE" in p] == [], student
    html = (course / "feedback" / "quoting" / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text(encoding="utf-8")
    assert "nbgrader hides its tests after a line" in html     # the student's own comment is shown


def test_the_same_feedback_without_clearing_would_show_hidden_tests(exported, tmp_path):
    """Shows the check above can fail: the autograded notebooks do hold the hidden tests."""
    autograded = Path(exported["summary"]["autograded"]) / "honest" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    text = autograded.read_text(encoding="utf-8")
    assert "### BEGIN HIDDEN TESTS" in text and "hidden=True" in text


# ---------------------------------------------------------------------------
# The seed, and isolation required
# ---------------------------------------------------------------------------
def _grade_one(path: Path, **env):
    return _run([sys.executable, "-m", "autograder", "grade", str(path), "--assignment", ASSIGNMENT,
                 "--course", str(REPO / "course"), "--json"], **env)


def test_answers_memorised_for_the_public_seed_fail(tmp_path):
    """q2 answered from a table of every case the notebook's tests use (visible, and hidden with the
    checks' public seed): the notebook passes it, the outside check (the class's secret seed) does not."""
    from autograder.checks import ch01, schema

    ex = ch01.EXERCISES[H.TEST["q2"]]
    table = {tuple(c["kwargs"][p] for p in ex.params): ex.expected(c)
             for c in (*ex.visible_cases, *ex.hidden_cases(schema.DEFAULT_HIDDEN_SEED))}
    body = f"return {table!r}.get((layers, kv_heads, head_dim, dtype_bytes, seq_len), 0)"
    nb = tmp_path / "memorised.ipynb"
    nb.write_bytes(H.dump(H.make_kit().notebook({"q2": H._body("q2", body)})))
    run = _grade_one(nb, KV_COURSE_GRADING_SEED="spring-2027 kv-course")
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads(run.stdout)
    q2 = next(t for t in result["tests"] if t["grade_id"] == H.TEST["q2"])
    assert (q2["nbgrader_points"], q2["verdict_points"], q2["points"]) == (1, 0, 0)
    assert "hidden case" in q2["feedback"] and "outside the notebook" in q2["feedback"]
    assert result["score"] == FULL - 1 and result["status"] == "graded"
    assert result["seed"]["source"] == "$KV_COURSE_GRADING_SEED"


def test_required_isolation_missing_exits_3_before_grading(tmp_path, notebooks):
    nb = tmp_path / "honest.ipynb"
    nb.write_bytes(notebooks["honest"])
    run = _grade_one(nb, REQUIRE_ISOLATION="1", SANDBOX_LEVEL="rlimits", SANDBOX_MIN_LEVEL="bwrap")
    assert run.returncode == 3 and run.stdout == ""
    assert len(run.stderr.strip().splitlines()) == 1 and "REQUIRE_ISOLATION=1" in run.stderr
    submitted = _class(tmp_path / "class", {"honest": notebooks["honest"]})
    run = _run(_args(submitted, tmp_path / "out"), REQUIRE_ISOLATION="1", SANDBOX_LEVEL="rlimits",
               SANDBOX_MIN_LEVEL="bwrap")
    assert run.returncode == 3 and not (tmp_path / "out" / "gradebook.db").exists()


# ---------------------------------------------------------------------------
# The class slip report (autograder.report): from these real results, and a generated class of 200
# ---------------------------------------------------------------------------
Q_OF = {H.TEST[q]: q for q in H.Q}
#: What each slipped answer of benchmarks/bench_report.py does, by construction: the exercise it breaks
#: and the catalogue's key for that mistake (the factor 2 dropped; bits for bytes; a ceiling for the floor;
#: the label's GB read as GiB: two slips at once).
SLIP_OF = {"q1_bits": ("q1", "bits_not_bytes"), "q2_no_kv_factor": ("q2", "missing_kv_factor"),
           "q4_ceil": ("q4", "ceil_not_floor"), "q5_label_gib": ("q5", "label_memory+gb_for_gib")}


def _bench_report():
    sys.path.insert(0, str(REPO / "benchmarks"))
    import bench_report
    return bench_report


def _expected_report(kinds: dict) -> dict:
    """{q: (full, zero, not attempted, {slip: students})} of a class, from what each kind does."""
    out = {}
    for q in H.Q:
        slipped = [k for k in kinds.values() if k in SLIP_OF and SLIP_OF[k][0] == q]
        blank = sum(k == "blank" for k in kinds.values())
        slips = {SLIP_OF[slipped[0]][1]: len(slipped)} if slipped else {}
        out[q] = (len(kinds) - blank - len(slipped), len(slipped), blank, slips)
    return out


def _got_report(built) -> dict:
    return {Q_OF[e.grade_id]: (e.counts["full"], e.counts["zero"], e.counts["not_attempted"], e.slips)
            for e in built.exercises}


def test_grade_class_writes_the_slip_report_beside_its_csv(exported):
    from autograder import report as R

    summary = exported["summary"]
    written = summary["report"]
    assert Path(written["html"]) == Path(summary["csv"]).with_name(f"{ASSIGNMENT}_report.html")
    assert Path(written["csv"]) == Path(summary["csv"]).with_name(f"{ASSIGNMENT}_report.csv")
    built = R.class_report(summary["out"], ASSIGNMENT)
    # honest and active_output right everywhere; no_kv_factor drops the factor 2 in q2; blank tries nothing
    kinds = {"honest": "right", "active_output": "right", "no_kv_factor": "q2_no_kv_factor", "blank": "blank"}
    assert _got_report(built) == _expected_report(kinds)
    assert [(s.key, sorted(s.students), s.combined) for s in built.slips] == [("missing_kv_factor", ["no_kv_factor"], False)]
    assert built.ranked[0].grade_id == H.TEST["q2"]          # 2 of 4 lost points there (1 on the others)
    page = Path(written["html"]).read_text(encoding="utf-8")
    assert "missing_kv_factor" in page and 'src="data:image/png;base64,' in page
    for student in ("honest", "active_output", "no_kv_factor"):     # nobody named without --names
        assert student not in page and student not in Path(written["csv"]).read_text()


def test_report_command_names_students_only_when_asked(exported, tmp_path, capsys):
    from autograder.__main__ import main

    out = exported["summary"]["out"]
    assert main(["report", out, "--assignment", ASSIGNMENT, "--html", str(tmp_path / "r.html"),
                 "--csv", str(tmp_path / "r.csv")]) == 0
    text = capsys.readouterr().out
    assert "missing_kv_factor" in text and "no_kv_factor" not in text
    assert "no_kv_factor" not in (tmp_path / "r.html").read_text() + (tmp_path / "r.csv").read_text()
    assert main(["report", out, "--assignment", ASSIGNMENT, "--names", "--html", str(tmp_path / "n.html"),
                 "--csv", str(tmp_path / "n.csv")]) == 0
    assert "no_kv_factor" in capsys.readouterr().out
    assert "no_kv_factor" in (tmp_path / "n.html").read_text() and "no_kv_factor" in (tmp_path / "n.csv").read_text()
    rows = list(csv.DictReader(open(tmp_path / "n.csv", newline="")))
    q2 = next(r for r in rows if r["section"] == "exercise" and r["grade_id"] == H.TEST["q2"])
    assert (q2["full"], q2["zero"], q2["not_attempted"], q2["students"]) == ("2", "1", "1", "4")


def test_report_command_bad_input_is_one_line(exported, tmp_path, capsys):
    from autograder.__main__ import main

    assert main(["report", str(tmp_path / "nowhere"), "--assignment", ASSIGNMENT]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"no such folder: {tmp_path / 'nowhere'}" in err
    assert main(["report", exported["summary"]["out"], "--assignment", "ch99_nothing"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ch99_nothing" in err and f"graded there: {ASSIGNMENT}" in err
    assert main(["report", exported["summary"]["out"], "--assignment", ASSIGNMENT,
                 "--html", str(tmp_path / "no" / "dir" / "r.html")]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_report_counts_a_generated_class_of_200_exactly(exported, tmp_path):
    """200 students (right, slipped, blank), stored as grade-class stores them; the right and blank results
    are real ones, each slipped one the right result with its exercise judged again by the grader's own
    judging, in-process (benchmarks/bench_report.py). Then a second run regrades 20 of them."""
    from autograder import report as R
    from autograder.classroom import _record
    from nbgrader.api import Gradebook

    B = _bench_report()
    results = Path(exported["summary"]["results"])
    right, blank = (json.loads((results / f"{s}.json").read_text()) for s in ("honest", "blank"))
    made = B.templates(right, blank)
    kinds = B.class_kinds(200)
    assert len(kinds) == 200 and set(kinds.values()) == {"right", "blank", *SLIP_OF}
    out = tmp_path / "class"
    B.write_class(out, Path(exported["summary"]["out"]) / "gradebook.db", kinds, made)
    built = R.class_report(out, ASSIGNMENT)
    assert len(built.students) == 200 and built.errors == []
    assert _got_report(built) == _expected_report(kinds)
    by_key = {s.key: s for s in built.slips}
    for kind, (q, key) in SLIP_OF.items():
        assert sorted(by_key[key].students) == sorted(s for s, k in kinds.items() if k == kind)
        assert by_key[key].exercises == {H.TEST[q]: sum(k == kind for k in kinds.values())}
        assert by_key[key].combined == ("+" in key) and R.example_text(by_key[key]).startswith(H.TEST[q])
    lost = {q: full for q, (full, _, _, _) in _expected_report(kinds).items()}
    assert [Q_OF[e.grade_id] for e in built.ranked][:1] == [min(lost, key=lambda q: (lost[q], -H.POINTS[q]))]

    # a second run: 20 slipped students resubmit right answers and are graded again; the latest counts
    again = sorted(s for s, k in kinds.items() if k in SLIP_OF)[:20]
    with Gradebook(f"sqlite:///{out / 'gradebook.db'}") as gb:
        for student in again:
            _record(gb, ASSIGNMENT, dict(made["right"], student=student), out / "results" / ASSIGNMENT)
            kinds[student] = "right"
    assert _got_report(R.class_report(out, ASSIGNMENT)) == _expected_report(kinds)
