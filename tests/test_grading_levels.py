"""Every sandbox level grades, as root and as an unprivileged user, or stops before grading in one line.

``python -m autograder.sandbox`` lists four levels: bwrap, unshare+setpriv, rlimits, none. For each,
as root and as an unprivileged user (uid 65534 through ``setpriv``), the command an instructor runs,
``SANDBOX_LEVEL=<level> python -m autograder grade <notebook> --assignment ch01_kv_formula --json``,
either grades the source's solutions to full marks (11 of 11: the contract's points, q1 3 + q2 1 +
q3 1 + q4 2 + q5 2 + q6 2) with ``isolation`` the level asked for, or, where that level does not work
for that user here (``python -m autograder.sandbox`` run as them says so), stops before grading: exit
3, one line on stderr, nothing on stdout. A level the probe accepts must grade: a kernel that dies at
start at such a level (the job uid could not read root's connection file, once) fails here.

The preflight itself: a kernel that cannot start stops it in one line (a kernelspec that exits at
start), and at ``rlimits`` as root the job uid owns the kernel's connection-file copy and socket
folder, which is what let every kernel start (nothing is bound at that level).

Root only (to become another user). The user's half needs an interpreter that user may start: the
checkout and the interpreter get traversal (o+x) for the test's duration, as the hub test does; where it
still cannot start, that half skips in one line, unless REQUIRE_ISOLATION=1 (CI), which fails instead. The
eight runs go four at a time: about 40 s on 2 cores. The user's four say so (``SANDBOX_SHARED_JOBS=4``):
at rlimits their jobs share the user's uid, whose processes and threads RLIMIT_NPROC counts machine-wide.

A class graded at rlimits as that user (``grade-class --jobs 4``, eight honest copies, nothing set): the
four workers' kernels and outside checks share the uid, and every student gets 11 of 11. Before each
job's limit left room for the others, a job launched first was left no threads by those launched after
it: one student of the eight came back needs_manual or an nbgrader error ("Invalid Signature") in each
of three runs (about 25 s each on 2 cores).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from procs import grading_env, grant_traversal, restore_modes, run_in_group

import hostile as H
from autograder import sandbox as S

REPO = H.REPO
ASSIGNMENT = H.ASSIGNMENT
ROOT = os.geteuid() == 0
USER = 65534                     # nobody: an unprivileged uid every Linux has
LEVELS = tuple(reversed(S.LEVELS))

if sys.platform != "linux":  # pragma: no cover
    pytest.skip("the sandbox's levels are Linux's", allow_module_level=True)


def _as(uid: int | None) -> list:
    """The command prefix that runs a command as ``uid`` (None: as we are)."""
    if uid is None:
        return []
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]


def _env(home: Path, **extra) -> dict:
    """The grading environment with ``home`` as HOME (Jupyter's runtime files go there), no level forced
    and no REQUIRE_ISOLATION (CI's, which would refuse rlimits and none before trying them)."""
    return grading_env(drop=("REQUIRE_ISOLATION", "SANDBOX_LEVEL", "SANDBOX_SHARED_JOBS", "XDG_RUNTIME_DIR",
                             "JUPYTER_RUNTIME_DIR", "JUPYTER_DATA_DIR", "XDG_DATA_HOME"), HOME=str(home), **extra)


@contextlib.contextmanager
def _workspace(prefix: str):
    """A fresh folder under the system's temp folder (pytest's tmp_path is private to root), removed after;
    meanwhile the user may traverse to the venv's Python and the checkout, which may sit under a 0700 home (a
    pyenv under /root): traversal only (o+x, never o+r), as the hub test does."""
    base = Path(tempfile.mkdtemp(prefix=prefix))
    traversal = grant_traversal([Path(sys.executable).parent, Path(sys.executable).resolve().parent, REPO])
    try:
        for parent in base.parents:
            if not os.stat(parent).st_mode & 0o001:
                pytest.skip(f"{parent} is not searchable by other users")
        yield base
    finally:
        restore_modes(traversal)
        shutil.rmtree(base, ignore_errors=True)


def _open_to_all(base: Path) -> None:
    """Everything under ``base`` readable by the user, and its folders writable (homes, outputs)."""
    for p in [base, *base.rglob("*")]:
        p.chmod(0o777 if p.is_dir() else 0o644)


def _usable_or_skip(home: Path) -> str | None:
    """Why the user cannot run this interpreter (the caller leaves the user's half out), or None; under
    REQUIRE_ISOLATION=1 (CI, whose venv the hub test grades with as a user) that fails instead."""
    unusable = _interpreter_unusable(home)
    if unusable and S.require_isolation():
        pytest.fail(f"REQUIRE_ISOLATION=1 but {unusable}", pytrace=False)
    return unusable


def _interpreter_unusable(home: Path) -> str | None:
    """Why the unprivileged user cannot start this interpreter from a process of theirs (a kernel, the
    sandbox's probe do), or None: a venv made from a Python under root's own home is not theirs to run."""
    code = "import subprocess, sys; subprocess.run([sys.executable, '-c', '0'], check=True)"
    run = run_in_group([*_as(USER), sys.executable, "-c", code], timeout=60, cwd=home, env=_env(home))
    if run.returncode == 0:
        return None
    return (f"this interpreter ({os.path.realpath(sys.executable)}) cannot be started by uid {USER} "
            f"({(run.stderr.strip().splitlines() or ['?'])[-1][:160]})")


def _levels_for(uid: int | None, home: Path) -> dict:
    """``{level: "ok" or why not}`` as ``python -m autograder.sandbox`` says for that user."""
    run = run_in_group([*_as(uid), sys.executable, "-m", "autograder.sandbox"], timeout=120, cwd=home,
                       env=_env(home))
    assert run.returncode == 0, run.stderr[-2000:]
    found = {}
    for line in run.stdout.splitlines():
        name, _, state = line.partition(" ")
        if name in S.LEVELS:
            found[name] = state.strip()
    assert set(found) == set(S.LEVELS), run.stdout
    return found


@pytest.fixture(scope="module")
def runs():
    if not ROOT:
        pytest.skip("needs root to grade as another user too")
    with _workspace("kv-levels-") as base:
        notebook = base / "honest.ipynb"
        notebook.write_bytes(H.dump(H.make_kit().notebook()))
        homes = {who: base / f"home-{who}" for who in ("root", "user")}
        for home in homes.values():
            home.mkdir()
        _open_to_all(base)
        who_uid = {"root": None, "user": USER}
        unusable = _usable_or_skip(homes["user"])
        if unusable:
            del homes["user"]
        offered = {who: _levels_for(who_uid[who], homes[who]) for who in homes}
        pool_size = 4
        # the user's graders run beside each other, up to pool_size at once, and say so: at rlimits their jobs
        # share the user's uid, whose threads RLIMIT_NPROC counts machine-wide (autograder.sandbox.shared_jobs)
        shared = {"root": {}, "user": {"SANDBOX_SHARED_JOBS": str(pool_size)}}

        def grade(job):
            who, level = job
            home = homes[who]
            return job, run_in_group([*_as(who_uid[who]), sys.executable, "-m", "autograder", "grade",
                                      str(notebook), "--assignment", ASSIGNMENT, "--json"],
                                     timeout=500, cwd=home, env=_env(home, SANDBOX_LEVEL=level, **shared[who]))

        with ThreadPoolExecutor(pool_size) as pool:
            done = dict(pool.map(grade, [(who, level) for who in homes for level in LEVELS]))
        yield {"offered": offered, "runs": done, "unusable": unusable}


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("who", ["root", "user"])
def test_every_level_grades_full_marks_or_stops_in_one_line(runs, who, level):
    if who not in runs["offered"]:
        pytest.skip(runs["unusable"])
    run, state = runs["runs"][(who, level)], runs["offered"][who][level]
    if state == "ok":
        assert run.returncode == 0, (who, level, run.stderr[-2000:])
        result = json.loads(run.stdout)
        assert (result["score"], result["max_score"], result["status"]) == (H.FULL, H.FULL, "graded"), \
            (who, level, result["reason"])
        assert result["isolation"] == level and result["verdict"]["isolation"] == level
    else:
        assert run.returncode == 3 and run.stdout == "", (who, level, run.returncode, run.stderr[-2000:])
        assert len(run.stderr.strip().splitlines()) == 1 and f"SANDBOX_LEVEL={level} does not work" in run.stderr


@pytest.mark.skipif(not ROOT, reason="needs root to grade as another user")
def test_a_class_graded_at_rlimits_as_one_user_gets_every_score():
    students, jobs = [f"student{i}" for i in range(8)], 4
    with _workspace("kv-class-") as base:
        honest = H.dump(H.make_kit().notebook())
        for student in students:
            folder = base / "submitted" / student / ASSIGNMENT
            folder.mkdir(parents=True)
            (folder / f"{ASSIGNMENT}.ipynb").write_bytes(honest)
        home, out = base / "home", base / "out"
        home.mkdir()
        out.mkdir()
        _open_to_all(base)
        unusable = _usable_or_skip(home)
        if unusable:
            pytest.skip(unusable)
        run = run_in_group([*_as(USER), sys.executable, "-m", "autograder", "grade-class", str(base / "submitted"),
                            "--assignment", ASSIGNMENT, "--course", str(REPO / "course"), "--out", str(out),
                            "--jobs", str(jobs), "--json"],
                           timeout=500, cwd=home, env=_env(home, SANDBOX_LEVEL="rlimits"))
    assert run.returncode == 0, run.stderr[-2000:]
    summary = json.loads(run.stdout)
    assert (summary["isolation"], summary["jobs"]) == ("rlimits", jobs)
    assert {row["student"]: (row["score"], row["status"]) for row in summary["rows"]} == \
        {student: (H.FULL, "graded") for student in students}, [row["reason"] for row in summary["rows"]]


def test_root_has_every_level_here(runs):
    """As root, this machine (and CI, which installs bubblewrap) offers all four: the test above graded at each."""
    if S.require_isolation() or shutil.which("bwrap"):
        assert set(runs["offered"]["root"].values()) == {"ok"}, runs["offered"]["root"]


# ---------------------------------------------------------------------------
# The preflight, and the kernel's files at a level where nothing is bound
# ---------------------------------------------------------------------------
def test_a_kernel_that_cannot_start_stops_the_preflight_in_one_line(monkeypatch):
    from autograder import kernel_launcher, preflight
    from autograder.notebook import read

    def broken(kernels_dir, name="kv-sandboxed", **kw):
        spec = Path(kernels_dir) / name
        spec.mkdir(parents=True, exist_ok=True)
        die = "import sys; sys.stderr.write('PermissionError: cannot read the connection file\\n'); sys.exit(1)"
        (spec / "kernel.json").write_text(json.dumps({"argv": [sys.executable, "-c", die, "{connection_file}"],
                                                      "display_name": "broken", "language": "python"}))
        return spec

    monkeypatch.setattr(kernel_launcher, "write_kernelspec", broken)
    reference = read(H.SOURCE)
    with pytest.raises(preflight.EnvironmentFault) as caught:
        preflight.check(reference, ASSIGNMENT, S.detect_level(), timeout=30)
    message = str(caught.value)
    assert len(message.splitlines()) == 1
    assert "does not start at level" in message and "PermissionError: cannot read the connection file" in message


@pytest.mark.skipif(not ROOT, reason="a job uid of its own only as root")
def test_at_rlimits_as_root_the_job_uid_owns_the_kernels_files(tmp_path):
    from autograder import kernel_launcher

    sockets = Path(kernel_launcher.socket_dir())
    try:
        conn = tmp_path / "kernel-1.json"          # jupyter_client's file: root's, 0600
        conn.write_text(json.dumps({"transport": "ipc", "ip": str(sockets / "kernel")}))
        conn.chmod(0o600)
        cmd = [sys.executable, "-m", "ipykernel_launcher", "-f", str(conn)]
        uid = S.UID_BASE + 7
        rw, files = kernel_launcher._kernel_binds(cmd, uid)
        copy = files[0][0]
        assert rw == [str(sockets)] and sockets.parent == Path("/tmp")
        for path in (copy, os.path.dirname(copy), str(sockets)):
            assert os.stat(path).st_uid == uid, path
        unbound = kernel_launcher._unbound_kernel(cmd, copy)
        assert unbound[unbound.index("-f") + 1] == copy and unbound[:4] == cmd[:4]
    finally:
        shutil.rmtree(sockets, ignore_errors=True)


def test_the_level_is_part_of_a_stored_results_key():
    from autograder.classroom import grading_key

    course = REPO / "course"
    one, other = grading_key(course, ASSIGNMENT, 7, "bwrap"), grading_key(course, ASSIGNMENT, 7, "rlimits")
    assert one != other and (one["isolation"], other["isolation"]) == ("bwrap", "rlimits")
    assert {k: v for k, v in one.items() if k != "isolation"} == {k: v for k, v in other.items() if k != "isolation"}
