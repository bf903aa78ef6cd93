"""Every documented grading path is safe and honest (issue 13).

* A student whose answer cells read the course's source (solutions, hidden
  tests) from the checkout gets no more than an honest blank (0 of 11: the
  contract's points q1 3, q2 1, q3 1, q4 2, q5 2, q6 2), through plain ``nbgrader
  autograde`` with the course config and through ``grade-class``, and no
  feedback HTML from either shows the source.
* ``grade-class --feedback <course>/feedback`` writes what ``nbgrader
  release_feedback`` releases, and ``fetch_feedback`` brings it to the student.
* A grader whose sandbox cannot import the course (a copy of the checkout
  run without ``pip install -e``: the kernel imports ``autograder`` through
  the editable install of another checkout) exits 5 with one line and records
  nothing; ``error`` statuses exit 4.
* A resumed run reuses the stored random seed and skips exactly the students
  already graded; ``--student`` regrades one and keeps the rest.
* Bad database URLs and a wrong password: one line, exit 2.
* Results folders are 0700, files 0600; the default folder is the user's.

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


@pytest.fixture(scope="module")
def plain_course(notebooks, tmp_path_factory):
    """docs/instructors.md's plain nbgrader workflow, run from a copy of course/ (the config sandboxes the kernel)."""
    course = tmp_path_factory.mktemp("plain") / "course"
    shutil.copytree(REPO / "course", course, ignore=shutil.ignore_patterns(
        "gradebook.db", "release", "submitted", "autograded", "feedback", ".nbgrader.log"))
    _class(course, {"reader": notebooks["reader"], "honest": notebooks["honest"]})
    runs = {}
    for step in (["generate_assignment", ASSIGNMENT, "--force"], ["autograde", ASSIGNMENT],
                 ["generate_feedback", ASSIGNMENT]):
        runs[step[0]] = _run([sys.executable, "-m", "nbgrader", *step], cwd=course)
        assert runs[step[0]].returncode == 0, (step, runs[step[0]].stderr[-3000:])
    return {"course": course, "runs": runs}


def test_plain_nbgrader_autograde_gives_the_reader_no_more_than_a_blank(plain_course):
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{plain_course['course'] / 'gradebook.db'}", "kv-course") as gb:
        assert gb.find_submission(ASSIGNMENT, "reader").score == 0
        assert gb.find_submission(ASSIGNMENT, "honest").score == FULL   # the sandboxed kernel grades
    autograded = (plain_course["course"] / "autograded" / "reader" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text()
    assert "LEAKED-SOURCE" not in autograded


def test_plain_nbgrader_feedback_shows_no_source(plain_course):
    assert len(_source_lines()) >= 10 and len(_hidden_test_lines()) >= 4   # the check has things to find
    for student in ("reader", "honest"):
        html = (plain_course["course"] / "feedback" / student / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
        _assert_no_source(html, f"plain nbgrader, {student}", solutions_typed_in=student == "honest")


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
# The grading CLI: a small class, graded once, then resumed and regraded in part
# ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cli_class(notebooks, tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    course = root / "course"          # an nbgrader course folder: feedback/ is where release_feedback looks
    submitted = _class(course, {s: notebooks[s] for s in ("reader", "honest", "blank")})
    out = root / "out"
    run = _grade_class(submitted, out, "--jobs", "2", "--feedback", course / "feedback", "--json")
    assert run.returncode == 0, run.stderr[-3000:]
    results = out / "results" / ASSIGNMENT
    return {"root": root, "course": course, "submitted": submitted, "out": out, "run": run,
            "summary": json.loads(run.stdout), "first": {p.stem: p.read_bytes() for p in results.glob("*.json")}}


def test_cli_gives_the_reader_no_more_than_a_blank(cli_class):
    scores = {r["student"]: r["score"] for r in cli_class["summary"]["rows"]}
    assert scores == {"reader": 0, "honest": FULL, "blank": 0}
    for student in ("reader", "honest", "blank"):
        html = (cli_class["course"] / "feedback" / student / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
        _assert_no_source(html, f"grade-class, {student}", solutions_typed_in=student == "honest")


def test_cli_shows_progress_a_line_per_student(cli_class):
    lines = [line for line in cli_class["run"].stderr.splitlines() if line.startswith("graded ")]
    assert [line.split(":")[0] for line in lines] == ["graded 1 of 3", "graded 2 of 3", "graded 3 of 3"]
    assert all("elapsed" in line and "left" in line for line in lines)
    assert any(f" honest {FULL}/{FULL} graded" in line for line in lines)


def test_results_are_private(cli_class):
    out = cli_class["out"]
    for folder in (out / "results", out / "results" / ASSIGNMENT, out / "autograded"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    for f in (out / "gradebook.db", out / "grading-seed", out / f"{ASSIGNMENT}_grades.csv",
              *(out / "results" / ASSIGNMENT).glob("*.json")):
        assert stat.S_IMODE(f.stat().st_mode) == 0o600, f


def test_the_default_output_folder_is_the_users_own(tmp_path, monkeypatch):
    from autograder import classroom

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    inside = REPO / "course" / "submitted"          # a class inside the checkout
    assert classroom.default_out_dir(inside, "kv-course") == tmp_path / "data" / "kv-course" / "grading" / "kv-course"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert classroom.default_out_dir(inside, "kv-course") == \
        tmp_path / "home" / ".local" / "share" / "kv-course" / "grading" / "kv-course"
    outside = tmp_path / "course" / "submitted"     # nbgrader's layout: next to submitted/
    assert classroom.default_out_dir(outside, "kv-course") == tmp_path / "course"
    folder = classroom._private_dir(tmp_path / "data" / "x")
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700


def test_release_and_fetch_feedback_after_grade_class(cli_class, tmp_path):
    from nbgrader.utils import notebook_hash

    course, exchange, cache = cli_class["course"], tmp_path / "exchange", tmp_path / "cache"
    shutil.copy2(REPO / "course" / "nbgrader_config.py", course / "nbgrader_config.py")
    exchange.mkdir()
    run = _run([sys.executable, "-m", "nbgrader", "release_feedback", ASSIGNMENT,
                f"--Exchange.root={exchange}", f"--CourseDirectory.root={course}"], cwd=course)
    assert run.returncode == 0, run.stderr[-3000:]
    released = sorted(p.name for p in (exchange / "kv-course" / "feedback").glob("*.html"))
    # nbgrader names each released file after the submission's secret and the notebook id
    expected = sorted(f"{notebook_hash(secret=(cli_class['submitted'] / s / ASSIGNMENT / 'submission_secret.txt').read_text(), notebook_id=ASSIGNMENT)}.html"
                      for s in ("reader", "honest", "blank"))
    assert released == expected
    # the student side: their cached submission (as nbgrader submit left it) finds its feedback
    fetched = _fetch_feedback(cli_class["submitted"], "honest", exchange, tmp_path)
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


def test_a_mixed_class_releases_feedback_to_everyone_with_a_secret(cli_class, tmp_path):
    """Two submissions through the exchange, one put into submitted/ by hand (no timestamp.txt, no
    submission_secret.txt), and a page an older grade-class left for it in feedback/: release_feedback
    stops at that page (FileNotFoundError), leaving whoever comes after it unreleased. The hand-placed student's page goes beside
    feedback/, the summary says where, and the other two release and fetch theirs."""
    from nbgrader.utils import notebook_hash

    from autograder.classroom import format_summary

    course = tmp_path / "course"
    shutil.copytree(cli_class["submitted"], course / "submitted")
    for name in ("timestamp.txt", "submission_secret.txt"):
        (course / "submitted" / "blank" / ASSIGNMENT / name).unlink()
    # the feedback folder as an older grade-class left it: every page, the hand-placed one without a secret
    shutil.copytree(cli_class["course"] / "feedback", course / "feedback")
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

    run = _grade_class(course / "submitted", cli_class["out"], "--feedback", course / "feedback", "--json")
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
        assert shown and (float(shown.group(1)), float(shown.group(2))) == (score, FULL), student


def test_a_resumed_run_reuses_its_seed_and_regrades_only_stale_results(cli_class):
    out, first = cli_class["out"], cli_class["summary"]
    assert first["seed"]["source"].startswith("random (kept in") and "value" in first["seed"]
    results = out / "results" / ASSIGNMENT
    # "blank" graded by another version of the grader: its stored key differs, so it is graded again
    stale = json.loads((results / "blank.json").read_text())
    stale["key"]["grader"] = "0" * 16
    (results / "blank.json").write_text(json.dumps(stale))
    run = _grade_class(cli_class["submitted"], out, "--json")
    assert run.returncode == 0, run.stderr[-3000:]
    summary = json.loads(run.stdout)
    assert summary["seed"] == first["seed"]                          # the stored seed, not a new one
    assert summary["graded_now"] == 1 and sorted(summary["skipped"]) == ["honest", "reader"]
    for student in ("honest", "reader"):
        assert (results / f"{student}.json").read_bytes() == cli_class["first"][student]


def test_student_flag_regrades_one_and_keeps_the_rest(cli_class):
    out = cli_class["out"]
    results = out / "results" / ASSIGNMENT
    before = {p.stem: p.read_bytes() for p in results.glob("*.json")}
    run = _grade_class(cli_class["submitted"], out, "--student", "honest", "--json")
    assert run.returncode == 0, run.stderr[-3000:]
    summary = json.loads(run.stdout)
    assert summary["graded_now"] == 1 and summary["students"] == 3 and summary["consistent"]
    assert (results / "honest.json").read_bytes() != before["honest"]      # graded again ...
    for student in ("reader", "blank"):                                       # ... the others kept
        assert (results / f"{student}.json").read_bytes() == before[student]
    with open(summary["csv"]) as f:
        rows = {line.split(",")[0]: line for line in f.read().splitlines()[1:]}
    assert sorted(rows) == ["blank", "honest", "reader"]                     # a complete CSV
    unknown = _grade_class(cli_class["submitted"], out, "--student", "nobody")
    assert unknown.returncode == 2 and len(unknown.stderr.strip().splitlines()) == 1 and "nobody" in unknown.stderr


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
def _feedback_pages(plain_course, cli_class):
    for course in (plain_course["course"], cli_class["course"]):
        yield course, (course / "feedback" / "honest" / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()


def test_feedback_maths_is_mathml_and_nothing_is_fetched(plain_course, cli_class):
    tex = sum(H._src(c).count("$") for c in H.load_source()["cells"] if c["cell_type"] == "markdown")
    assert tex >= 2                                   # the chapter's prose has maths to show
    for course, html in _feedback_pages(plain_course, cli_class):
        assert "<math" in html and "</math>" in html, course
        assert "cdnjs" not in html and "MathJax" not in html, course     # no script from a CDN
        assert "<script src=" not in html, course


def test_feedback_names_each_exercise(plain_course, cli_class):
    for course, html in _feedback_pages(plain_course, cli_class):
        assert "Test cell" not in html, course
        for q in H.Q:
            assert f"Exercise {H.TEST[q]}</a>" in html, (course, q)


def test_plain_nbgrader_logs_no_known_noise(plain_course):
    autograde = plain_course["runs"]["autograde"].stderr
    assert "has changed!" not in autograde and "SAWarning" not in autograde
    feedback = plain_course["runs"]["generate_feedback"].stderr
    assert "display_data_priority" not in feedback
