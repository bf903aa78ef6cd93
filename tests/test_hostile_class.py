"""The hostile corpus graded as one class, end to end, by both grading paths at once:
``python -m autograder grade-class --jobs 2`` and, beside it, plain ``nbgrader autograde`` in a course
folder of its own (the course config's sandboxed kernel and outside check; the corpus's cases, not the
attacks on the CLI's own intake below).

Every case of ``tests/hostile`` (and a few attacks on the grading machinery
itself: a fake ``autograder`` package and ``sitecustomize.py`` next to the
notebook, a symlink to the instructor's source) is one student of a class
that also holds honest students. One run grades them all in two workers, with
``--feedback``. Then, for every student:

* the score is at most the corpus's honest maximum (``max_score``: points only
  for exercises whose own code is right and ran), and at most the out-of-process
  verdict's exact score (``verdict_score``): the grader takes the minimum; on both
  paths, and a kernel that died keeps the points of what ran before it;
* the status is the corpus's where it names one; the report says what happened
  (a reason; every failed test has feedback: never a silent zero);
* the honest students get full marks (q1 3 + q2 1 + q3 1 + q4 2 + q5 2 + q6 2, the contract) and the
  blank release 0, in the same batch as the bombs;
* the gradebook (read back with nbgrader's ``Gradebook``), the CSV and the JSON
  results agree, test by test;
* nothing escaped: no ``HOSTILE-<nonce>`` marker anywhere the canaries aim
  (the checkout, kvlib, autograder, course/source, the class's folders, the
  gradebook's folder), no ``HOSTILE-ESCAPE`` in any output, result or feedback,
  no connection to the grader's listener, the other students' files and the
  checkout byte for byte unchanged.

Isolation weaker than ``unshare+setpriv`` skips the module (the canaries would
write into the checkout), unless REQUIRE_ISOLATION=1, which fails it.
About 3-4 minutes on 2 cores (the hanging cases cost 8 s per cell, the
out-of-process check of a hang 26 s; plain nbgrader, in four course folders side by side with
grade-class, adds about 40 s: its cost is waiting on hangs, not CPU).
"""

from __future__ import annotations

import csv
import hashlib
import json
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from procs import grading_env, run_in_group

import hostile as H
from autograder import sandbox as S

REPO = H.REPO
ASSIGNMENT = H.ASSIGNMENT
FULL = H.FULL                 # the sum of the contract's points
TIMEOUT = 8                   # per cell [s]: the chapter's heaviest cell takes about 2 s
LEVEL = S.detect_level()
STRONG = S.rank(LEVEL) >= S.rank("unshare+setpriv")

if not STRONG:
    if S.require_isolation():
        pytest.fail(f"REQUIRE_ISOLATION=1 but isolation here is {LEVEL!r}", pytrace=False)
    pytest.skip(f"isolation here is {LEVEL!r}: the escape canaries would not be contained",
                allow_module_level=True)

#: Attacks on the grading machinery, beyond the corpus: (max score, status, what it does).
EXTRA = {
    # The kernel launcher runs on the host, as root, in the notebook's folder: an ``autograder``
    # package or a sitecustomize.py there must never be imported by it.
    "launcher_hijack": (FULL, "graded", "an autograder/ package and sitecustomize.py beside the notebook"),
    # The notebook is a symlink to the instructor's source (solutions, hidden tests).
    "symlink_to_source": (0, "error", "the notebook is a symlink to course/source"),
}
HIJACK = '''import os
open(os.path.join({where!r}, "HOSTILE-" + {nonce!r}), "x").close()
print("HOSTILE" + "-ESCAPE launcher_hijack")
'''
CONTROLS = ("honest", "honest_2", "blank")
PLAIN_SHARES = 4              # plain nbgrader's course folders, graded side by side
PLAIN_TIMEOUT = 10            # per cell [s] there: five graders share the two cores at the start


def run_group(args, *, timeout, **kw) -> subprocess.CompletedProcess:
    return run_in_group(args, timeout=timeout, label="grade-class", **kw)


def _snapshot() -> dict:
    """Every file of the parts of the checkout the grader or a student could touch: path -> sha256.

    (Other top-level files are left out: a developer may be editing them while the test runs.)
    """
    out = {}
    for folder in ("course", "kvlib", "autograder", "chapters", "solutions", "tools", "binder"):
        for p in sorted((REPO / folder).rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts:
                out[str(p.relative_to(REPO))] = hashlib.sha256(p.read_bytes()).hexdigest()
    for name in ("pyproject.toml", "dev.sh", ".gitignore"):   # top level: what the grader runs by
        out[name] = hashlib.sha256((REPO / name).read_bytes()).hexdigest()
    out["HOSTILE-*"] = sorted(p.name for p in REPO.glob("HOSTILE-*"))
    return out


def _git_status() -> str:
    paths = ["course", "kvlib", "autograder", "chapters", "solutions", "tools", "binder", "pyproject.toml"]
    out = subprocess.run(["git", "status", "--porcelain", "--ignored", "--", *paths], cwd=REPO,
                         capture_output=True, text=True).stdout
    # bytecode caches come and go with whatever else imports the package meanwhile (another xdist worker)
    return "".join(line for line in out.splitlines(keepends=True) if "__pycache__" not in line)


def _plain_book(course: Path) -> dict:
    """``{student: (score, needs manual grading, {grade_id: auto_score})}`` of plain nbgrader's gradebook;
    a notebook nbgrader could not grade at all (an unreadable file) scores 0."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "kv-course") as gb:
        out = {}
        for student in gb.students:
            sub = gb.find_submission(ASSIGNMENT, student.id)
            out[student.id] = (sub.score, sub.needs_manual_grade,
                               {g.name: g.auto_score for nb in sub.notebooks for g in nb.grades})
        return out


def _tree(folder: Path) -> dict:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and not p.is_symlink()}


@pytest.fixture(scope="module")
def hostile_class(tmp_path_factory):
    base = tmp_path_factory.mktemp("hostile-class")
    base.chmod(0o755)
    submitted, out, feedback = base / "submitted", base / "out", base / "feedback"
    # Plain nbgrader grades the corpus in course folders of its own, a share each, beside grade-class: its
    # cost is waiting (cells and runners that hang until their limits), not CPU.
    plains = [base / f"plain-{k}" for k in range(PLAIN_SHARES)]
    kit = H.make_kit()
    targets = H.default_targets(
        others=[str(submitted)] + [str(p / d) for p in plains for d in ("submitted", "autograded")],
        gradebooks=[str(out / "gradebook.db")] + [str(p / "gradebook.db") for p in plains],
        write_dirs=H.default_targets().write_dirs + [str(submitted), str(submitted / "honest" / ASSIGNMENT),
                                                     str(out), str(base)]
        + [str(p / d) for p in plains for d in ("", "submitted")])
    targets.hidden = [str(H.SOURCE)] + targets.hidden
    kit.targets = targets
    before, status_before = _snapshot(), _git_status()
    with H.Listener(targets.nonce) as listener:
        targets.port = listener.port
        expect = {}
        plain_of = {}
        for i, (name, data, max_score, status) in enumerate(H.corpus(targets=targets)):
            plain_of[name] = plains[i % PLAIN_SHARES]          # the slow cases, listed together, spread out
            for folder in (submitted / name / ASSIGNMENT, plain_of[name] / "submitted" / name / ASSIGNMENT):
                folder.mkdir(parents=True)
                (folder / f"{ASSIGNMENT}.ipynb").write_bytes(data)
            expect[name] = (max_score, H.BY_NAME[name].verdict_score, status)
        for plain in plains:
            shutil.copytree(REPO / "course" / "source" / ASSIGNMENT, plain / "source" / ASSIGNMENT)
            shutil.copy2(REPO / "course" / "nbgrader_config.py", plain / "nbgrader_config.py")
        honest = H.build(H.BY_NAME["honest"], kit)
        (submitted / "honest_2" / ASSIGNMENT).mkdir(parents=True)
        (submitted / "honest_2" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").write_bytes(honest)
        # links the grader itself must never follow (nbgrader copies a submission's files as root)
        (submitted / "honest_2" / ASSIGNMENT / "data.bin").symlink_to("/dev/zero")
        (submitted / "honest_2" / ASSIGNMENT / "notes").symlink_to(REPO / "course")
        expect["honest_2"] = (FULL, FULL, "graded")
        hijack = submitted / "launcher_hijack" / ASSIGNMENT
        (hijack / "autograder").mkdir(parents=True)
        (hijack / f"{ASSIGNMENT}.ipynb").write_bytes(honest)
        code = HIJACK.format(where=str(out), nonce=targets.nonce)
        for rel in ("autograder/__init__.py", "autograder/sandbox.py", "autograder/__main__.py",
                    "sitecustomize.py", "usercustomize.py", "ipykernel_launcher.py"):
            (hijack / rel).write_text(code)
        link = submitted / "symlink_to_source" / ASSIGNMENT
        link.mkdir(parents=True)
        (link / f"{ASSIGNMENT}.ipynb").symlink_to(H.SOURCE)
        for name, (max_score, status, _) in EXTRA.items():
            expect[name] = (max_score, max_score, status)
        for p in [base, *base.rglob("*")]:  # readable by anyone: only the sandbox may stop a reader
            if not p.is_symlink():
                p.chmod(0o777 if p.is_dir() else 0o666)
        class_before = _tree(submitted)
        env = grading_env()     # the checkout importable, the venv's tools (nbgrader, alembic) first on PATH
        nbgrader = [sys.executable, "-m", "nbgrader"]

        def job(which):
            if which == "cli":
                return run_group([sys.executable, "-m", "autograder", "grade-class", str(submitted),
                                  "--assignment", ASSIGNMENT, "--course", str(REPO / "course"), "--jobs", "2",
                                  "--timeout", str(TIMEOUT), "--out", str(out), "--feedback", str(feedback),
                                  "--json"], cwd=base, env=env, timeout=600)
            # docs/instructors.md's plain path: the course config's sandboxed kernel and outside check
            made = run_group([*nbgrader, "generate_assignment", ASSIGNMENT, "--force"], cwd=which, env=env,
                             timeout=300)
            assert made.returncode == 0, made.stderr[-3000:]
            return run_group([*nbgrader, "autograde", ASSIGNMENT, f"--Execute.timeout={PLAIN_TIMEOUT}"], cwd=which,
                             env=env, timeout=600)

        with ThreadPoolExecutor(1 + PLAIN_SHARES) as pool:
            done = dict(zip(["cli", *plains], pool.map(job, ["cli", *plains])))
        run = done["cli"]
        connections = listener.connections
    results = {p.stem: json.loads(p.read_text()) for p in (out / "results" / ASSIGNMENT).glob("*.json")}
    yield {"run": run, "base": base, "out": out, "feedback": feedback, "results": results, "expect": expect,
           "plain_of": plain_of, "plain_book": {k: v for p in plains for k, v in _plain_book(p).items()},
           "targets": targets, "connections": connections, "before": before, "status_before": status_before,
           "class_before": class_before, "submitted": submitted}
    H.remove_markers(targets)


def test_the_batch_finishes_and_everyone_is_graded(hostile_class):
    run = hostile_class["run"]
    summary = json.loads(run.stdout)
    # exit 4 when a submission's status is error (docs/instructors.md: exit statuses), else 0
    assert run.returncode == (4 if summary["counts"]["error"] else 0), run.stderr[-3000:]
    assert summary["students"] == len(hostile_class["expect"]) >= 25 + len(EXTRA)
    assert summary["graded_now"] == summary["students"] and summary["jobs"] == 2
    assert summary["consistent"] and summary["isolation"] == LEVEL
    assert set(hostile_class["results"]) == set(hostile_class["expect"])


@pytest.mark.parametrize("name", [c.name for c in H.CASES] + ["honest_2", *EXTRA])
def test_each_student(hostile_class, name):
    result = hostile_class["results"][name]
    max_score, verdict_score, status = hostile_class["expect"][name]
    assert result["max_score"] == FULL and len(result["tests"]) == len(H.Q)
    assert result["score"] <= max_score, (name, result["score"], result["reason"])
    assert result["score"] <= verdict_score, (name, result["score"], result["reason"])
    assert result["score"] == sum(t["points"] for t in result["tests"])
    if status is not None:
        assert result["status"] == status, (name, result["status"], result["reason"])
    assert result["status"] in ("graded", "needs_manual", "error")
    assert result["isolation"] == LEVEL
    # never a silent zero: a reason, and every failed test says why
    assert result["reason"].strip()
    for t in result["tests"]:
        assert t["points"] in (0, t["max_points"]), t
        assert t["passed"] or t["feedback"].strip(), (name, t)
    if result["status"] == "needs_manual":
        assert "manual" in result["reason"]
    if result["score"] == 0 and result["status"] == "graded":
        assert f"{len(H.Q)} of {len(H.Q)} tests failed" in result["reason"]


@pytest.mark.parametrize("name", [c.name for c in H.CASES])
def test_each_case_through_plain_nbgrader(hostile_class, name):
    """``nbgrader autograde`` with the course config (no grading CLI): every case gets no more than its honest
    score and no more than the outside check's, test by test the lower of the two; a notebook nbgrader
    cannot read gets nothing."""
    max_score, verdict_score, _ = hostile_class["expect"][name]
    score, _, grades = hostile_class["plain_book"].get(name, (0, None, {}))
    assert score <= max_score and score <= verdict_score, (name, score, grades)
    autograded = hostile_class["plain_of"][name] / "autograded" / name / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    assert not autograded.is_file() or b"HOSTILE-ESCAPE" not in autograded.read_bytes()


def test_plain_nbgrader_controls_and_crashes(hostile_class):
    """The controls score as they should beside the bombs, and a kernel that died keeps what ran before it:
    os._exit after q3's answer keeps q1 and q2 (4 points), the segfault after q4's keeps q1-q3 (5), and the
    formgrader lists both as needing a manual grade."""
    book = hostile_class["plain_book"]
    assert book["honest"][:2] == (FULL, False) and book["blank"][:2] == (0, False)
    for name, kept in (("os_exit", ("q1", "q2")), ("segfault", ("q1", "q2", "q3"))):
        score, manual, grades = book[name]
        assert (score, manual) == (H.pts(*kept), True), (name, grades)
        assert all(grades[H.TEST[q]] is None for q in H.Q if q not in kept), (name, grades)
    for name in ("monkeypatch_checks", "patch_failure_message", "patch_showtraceback", "test_cells_pass"):
        assert book[name][0] == 0, (name, book[name])


def test_controls_in_the_same_batch(hostile_class):
    results = hostile_class["results"]
    for name in ("honest", "honest_2", "launcher_hijack", "sys_exit"):
        assert (results[name]["score"], results[name]["status"]) == (FULL, "graded"), results[name]["reason"]
        assert results[name]["reason"].startswith(f"all {len(H.Q)} tests passed")
    assert "ignored 2 link(s) or special file(s) in the submission folder: data.bin, notes" \
        in results["honest_2"]["reason"]
    assert (results["blank"]["score"], results["blank"]["status"]) == (0, "graded")
    assert "not written yet" in results["blank"]["tests"][0]["feedback"]


def test_the_report_names_what_happened(hostile_class):
    r = hostile_class["results"]

    def fb(name, q):
        return next(t["feedback"] for t in r[name]["tests"] if t["grade_id"] == H.TEST[q])

    assert "kernel died" in r["os_exit"]["reason"] and "kernel died" in r["segfault"]["reason"]
    assert f"{TIMEOUT} s limit" in r["infinite_loop"]["reason"] and "timed out" in fb("infinite_loop", "q1")
    # the notebook's own check was fooled; the outside check was not, and says so
    for name in ("monkeypatch_checks", "patch_showtraceback", "forged_output", "test_cells_pass"):
        assert r[name]["score"] == 0, r[name]["reason"]
    assert "outside the notebook" in r["monkeypatch_checks"]["reason"]
    assert "not written yet" in fb("monkeypatch_checks", "q2")
    assert "must not call kvlib" in fb("calls_kvlib", "q1")
    assert "not int" in fb("always_equal", "q1") or "returned an object" in fb("always_equal", "q1")
    assert "empty" in r["empty_file"]["reason"] and "not valid JSON" in r["truncated_json"]["reason"]
    assert "another assignment" in r["other_assignment"]["reason"] or r["other_assignment"]["score"] == 0
    assert "ch01_kv_formula.ipynb is a symbolic link" in r["symlink_to_source"]["reason"]


def test_nothing_escaped(hostile_class):
    targets = hostile_class["targets"]
    assert hostile_class["connections"] == 0
    assert H.escape_markers(targets) == []
    nonce = targets.nonce
    found = []
    for root in (hostile_class["base"], REPO / "course", REPO / "kvlib", REPO / "autograder"):
        found += [str(p) for p in root.rglob(f"HOSTILE-{nonce}")]
    found += [str(p) for p in REPO.glob("HOSTILE-*")]
    assert found == []
    # no escape printed anything, anywhere a grader or a student would look
    feedback = hostile_class["feedback"]
    for folder in (hostile_class["out"], feedback, feedback.with_name(feedback.name + "-not-released")):
        for p in folder.rglob("*"):
            if p.is_file() and p.suffix in (".json", ".ipynb", ".html", ".csv"):
                assert b"HOSTILE-ESCAPE" not in p.read_bytes(), p
    assert "HOSTILE-ESCAPE" not in hostile_class["run"].stdout + hostile_class["run"].stderr
    # the class's submissions, the checkout and course/source are unchanged
    assert _tree(hostile_class["submitted"]) == hostile_class["class_before"]
    assert _snapshot() == hostile_class["before"]
    assert _git_status() == hostile_class["status_before"]


def test_gradebook_csv_and_json_agree(hostile_class):
    from nbgrader.api import Gradebook

    out, results = hostile_class["out"], hostile_class["results"]
    summary = json.loads(hostile_class["run"].stdout)
    with Gradebook(summary["gradebook"], "kv-course") as gb:
        assert sorted(s.id for s in gb.students) == sorted(results)
        for student, result in results.items():
            sub = gb.find_submission(ASSIGNMENT, student)
            assert (sub.score, sub.max_score) == (result["score"], FULL), student
            grades = {g.name: (g.score, g.needs_manual_grade) for nb in sub.notebooks for g in nb.grades}
            assert grades == {t["grade_id"]: (t["points"], t["needs_manual"]) for t in result["tests"]}, student
    with open(out / f"{ASSIGNMENT}_grades.csv", newline="") as f:
        rows = {row["student"]: row for row in csv.DictReader(f)}
    assert set(rows) == set(results)
    for student, result in results.items():
        row = rows[student]
        assert (float(row["score"]), row["status"], row["isolation"]) == \
            (result["score"], result["status"], LEVEL)
        for t in result["tests"]:
            assert float(row[t["grade_id"]]) == t["points"]


def test_feedback_for_everyone_graded(hostile_class):
    feedback, results = hostile_class["feedback"], hostile_class["results"]
    summary = json.loads(hostile_class["run"].stdout)["feedback"]
    # no feedback only where nbgrader left no autograded notebook: rejected files, dead kernels
    assert summary["failed"] == {}
    assert summary["written"] + len(summary["missing"]) == len(results)
    for student in summary["missing"]:
        assert results[student]["status"] in ("error", "needs_manual"), student
    hidden_lines = [line.strip() for c in H.load_source()["cells"] if "### BEGIN HIDDEN TESTS" in H._src(c)
                    for line in H._src(c).split("### BEGIN HIDDEN TESTS")[1].splitlines()[1:-1]]
    assert len(hidden_lines) == len(H.Q) and all("hidden=True" in line for line in hidden_lines)
    # no submission here came through nbgrader's exchange: every page is where release does not look
    assert sorted(summary["unreleasable"]) == sorted(summary["files"]) and not list(feedback.rglob("*.html"))
    for student in set(results) - set(summary["missing"]):
        html = Path(summary["files"][student]).read_text(encoding="utf-8")
        assert "### BEGIN HIDDEN TESTS" not in html and not any(line in html for line in hidden_lines), student
    fooled = Path(summary["files"]["monkeypatch_checks"]).read_text(encoding="utf-8")
    assert "[grader] checked outside the notebook" in fooled
    # bounded whatever a cell printed (30 MB in huge_print's answer cell, 8 MB in big_output's test cell): a cell
    # keeps 100,000 characters of output (autograder.nbgrader_setup.LimitOutputSize) and says what was cut
    sizes = {s: Path(path).stat().st_size for s, path in summary["files"].items()}
    assert max(sizes.values()) <= sizes["honest"] + 250_000, sorted(sizes.items(), key=lambda kv: -kv[1])[:3]
    for name in ("huge_print", "big_output"):
        page = Path(summary["files"][name]).read_text(encoding="utf-8")
        assert "[output cut by the grader:" in page, name
        autograded = Path(json.loads(hostile_class["run"].stdout)["autograded"]) / name / ASSIGNMENT
        assert (autograded / f"{ASSIGNMENT}.ipynb").stat().st_size < 1_000_000, name
