"""Running a grading command from a test: in a process group of its own, all of it killed past a timeout.

The grading CLI and nbgrader start kernels and sandboxes of their own; killing only the direct
child would leave them running after a test gives up, so the whole group goes.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def run_in_group(args, *, timeout: float = 600, label: str | None = None, **popen_kw) -> subprocess.CompletedProcess:
    """``subprocess.run(args, capture_output=True, text=True)`` in a new session; past ``timeout`` the
    group is killed and the test fails, naming ``label`` (default: the first words of ``args``)."""
    args = [str(a) for a in args]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, **popen_kw)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"{label or ' '.join(args[:4])} ran past {timeout} s:\n{err[-3000:]}")
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


def grading_env(drop=(), **env) -> dict:
    """This interpreter's environment for a grading command: the checkout importable, the venv's
    scripts first on PATH, no grading seed (and none of ``drop``) inherited; ``env`` on top."""
    environ = dict(os.environ, PYTHONPATH=str(REPO),
                   PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    for var in ("KV_COURSE_GRADING_SEED", *drop):
        environ.pop(var, None)
    environ.update(env)
    return environ


def grant_traversal(paths) -> list:
    """o+x (traversal only, never o+r) on every ancestor of ``paths`` lacking it; [(dir, old mode)] to undo with
    ``restore_modes``.

    A test that runs the venv's Python as another user (the hub's accounts, the sandbox levels as a user) needs
    the checkout and the interpreter the venv points to reachable; either may sit under a home that is 0700
    (e.g. a pyenv under /root)."""
    changed = []
    for path in paths:
        for parent in [*reversed(Path(path).parents), Path(path)]:
            mode = parent.stat().st_mode
            if stat.S_ISDIR(mode) and not mode & stat.S_IXOTH and parent not in [p for p, _ in changed]:
                os.chmod(parent, stat.S_IMODE(mode) | stat.S_IXOTH)
                changed.append((parent, stat.S_IMODE(mode)))
    return changed


def restore_modes(changed: list) -> None:
    """Give back the modes ``grant_traversal`` changed, innermost first."""
    for path, mode in reversed(changed):
        os.chmod(path, mode)
