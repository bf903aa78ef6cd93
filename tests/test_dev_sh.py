"""./dev.sh open keeps a learner's edits out of chapters/: workspace/, never overwritten; --root DIR.

dev.sh runs in a scratch copy of the repository's top level whose .venv holds
a stamp matching the pins (so setup installs nothing) and a stand-in
``jupyter-lab`` that prints its working directory and arguments instead of
serving; the copy's chapters/ are the real ones.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FAKE_LAB = '#!/bin/sh\necho "cwd=$PWD"\nfor a in "$@"; do echo "arg=$a"; done\n'


@pytest.fixture()
def checkout(tmp_path):
    root = tmp_path / "kv-course"
    for rel in ("dev.sh", "pyproject.toml", "binder/requirements.txt", "tests/requirements.txt"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, root / rel)
    shutil.copytree(REPO / "chapters", root / "chapters")
    bindir = root / ".venv" / "bin"
    bindir.mkdir(parents=True)
    (bindir / "python").symlink_to(sys.executable)
    (bindir / "jupyter-lab").write_text(FAKE_LAB)
    (bindir / "jupyter-lab").chmod(0o755)
    pins = b"".join((root / rel).read_bytes() for rel in
                    ("binder/requirements.txt", "tests/requirements.txt", "pyproject.toml"))
    version = subprocess.run([str(bindir / "python"), "-VV"], capture_output=True, check=True).stdout
    (root / ".venv" / ".kv-course-setup").write_text(hashlib.sha256(pins + version).hexdigest() + "\n")
    return root


def _open(root: Path, *args) -> tuple[int, str, dict]:
    run = subprocess.run(["bash", str(root / "dev.sh"), "open", "--no-browser", "--port", "9", *args],
                         capture_output=True, text=True, timeout=60, env=dict(os.environ, PYTHON=sys.executable))
    lines = run.stdout.splitlines()
    opts = {}
    for line in lines:
        if line.startswith("arg=--") and "=" in line[6:]:
            key, value = line[6:].split("=", 1)
            opts[key] = value
    cwd = next((line[4:] for line in lines if line.startswith("cwd=")), None)
    return run.returncode, run.stderr, {"cwd": cwd, **opts}


def test_open_copies_chapters_into_workspace(checkout):
    rc, err, got = _open(checkout)
    assert rc == 0, err
    assert "installing" not in err                       # the stamp matched: nothing was installed
    workspace = checkout / "workspace"
    chapters = sorted(p.name for p in (checkout / "chapters").glob("*.ipynb"))
    assert chapters and sorted(p.name for p in workspace.glob("*.ipynb")) == chapters
    for name in chapters:
        assert (workspace / name).read_bytes() == (checkout / "chapters" / name).read_bytes()
    assert got["cwd"] == str(workspace) and got["ServerApp.root_dir"] == str(workspace)
    assert got["LabApp.default_url"] == "/lab/tree/ch00_orientation.ipynb"


def test_open_never_overwrites_the_learners_work(checkout):
    assert _open(checkout)[0] == 0
    mine = checkout / "workspace" / "ch01_kv_formula.ipynb"
    mine.write_text('{"my": "answers"}')
    new = checkout / "chapters" / "ch99_new_chapter.ipynb"
    shutil.copy2(checkout / "chapters" / "ch01_kv_formula.ipynb", new)
    released = {p.name: p.read_bytes() for p in (checkout / "chapters").glob("*.ipynb")}
    rc, err, _ = _open(checkout)
    assert rc == 0, err
    assert mine.read_text() == '{"my": "answers"}'                                  # kept
    assert (checkout / "workspace" / new.name).read_bytes() == new.read_bytes()   # the new one copied
    assert {p.name: p.read_bytes() for p in (checkout / "chapters").glob("*.ipynb")} == released


def test_open_root_serves_that_folder(checkout, tmp_path):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    shutil.copy2(checkout / "chapters" / "ch00_orientation.ipynb", scratch)
    rc, err, got = _open(checkout, "--root", str(scratch))
    assert rc == 0, err
    assert got["cwd"] == str(scratch) and got["ServerApp.root_dir"] == str(scratch)
    assert got["LabApp.default_url"] == "/lab/tree/ch00_orientation.ipynb"
    assert not (checkout / "workspace").exists()          # --root leaves workspace/ alone
    empty = tmp_path / "empty"
    empty.mkdir()
    rc, err, got = _open(checkout, f"--root={empty}")
    assert rc == 0 and got["ServerApp.root_dir"] == str(empty) and got["LabApp.default_url"] == "/lab"


def test_open_root_must_exist(checkout, tmp_path):
    rc, err, got = _open(checkout, "--root", str(tmp_path / "nope"))
    assert rc == 2 and "no such folder" in err and got["cwd"] is None


def test_workspace_is_git_ignored():
    ignored = subprocess.run(["git", "check-ignore", "-q", "workspace/ch01_kv_formula.ipynb"], cwd=REPO)
    assert ignored.returncode == 0
