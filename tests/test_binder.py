"""The environment Binder builds from binder/, built here the same way, and the chapters run in it.

repo2docker, for this repository: Python from binder/runtime.txt, ``pip install -r
binder/requirements.txt`` into a fresh environment, then ``binder/postBuild`` from the
repository root with that environment first on PATH. This test does that with a new
virtual environment in a temp dir (never .venv) and a copy of the working tree's
committable files (``git ls-files --cached --others --exclude-standard``), so nothing is
written into the checkout. HOME and the Jupyter/IPython dirs point into the temp dir,
as on a fresh Binder image; pip keeps its configuration (/etc/pip.conf: local wheel indexes).

Then, with that environment's tools:

* ``jupyter labextension list`` shows nbgrader's, the widgets' and the course's alt-text reader
  (kvdisplay/labextension, installed by ``pip install .`` as data files) enabled and OK;
* postBuild's settings override (no news toast) is in place;
* the ``python3`` kernel, kvlib and the autograder are the environment's own;
* ``kvlib drill`` is registered by the install (the ``kvlib.commands`` entry point) and kvcoach installed;
* chapters/ch01 (the student release) runs with ``jupyter nbconvert --execute``, failing
  only in its exercise test cells, each of which fails;
* solutions/ch01 runs with no error at all;
* binder/requirements.txt is what ./dev.sh installs (README: "the same pins as ./dev.sh"),
  every line an exact pin, those exact versions are what got installed, and dev.sh's other
  requirements file (test-only extras) repins none of them differently.

About 70 s here: venv + pip ~50 s, postBuild ~5 s, labextension list 3 s, the notebooks ~12 s.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
BINDER = REPO / "binder"
CHAPTER = "ch01_kv_formula"
EXERCISE_ERRORS = {"AssertionError", "NotImplementedError"}
PIP_TIMEOUT_S = 600
RUN_TIMEOUT_S = 300


def _committable_files() -> list[Path]:
    """The working tree as git would commit it: tracked plus untracked-but-not-ignored files."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             cwd=REPO, capture_output=True, check=True, timeout=60).stdout
    except (OSError, subprocess.CalledProcessError):
        return []
    return sorted({Path(p.decode()) for p in out.split(b"\0") if p and (REPO / p.decode()).is_file()})


def _copy_repo(dest: Path) -> None:
    files = _committable_files()
    if files:
        for rel in files:
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, dest / rel)
    else:   # not a git checkout (an exported tarball): everything but what .gitignore names
        shutil.copytree(REPO, dest, dirs_exist_ok=True, ignore=shutil.ignore_patterns(
            ".git", ".venv", "artefacts", "build", "*.egg-info", "__pycache__", ".ipynb_checkpoints",
            ".hypothesis", "gradebook.db", "release", "submitted", "autograded", "feedback"))


def _base_python() -> str:
    """An interpreter of binder/runtime.txt's version (the one running the tests, if it is)."""
    wanted = (BINDER / "runtime.txt").read_text().strip()
    match = re.fullmatch(r"python-(\d+)\.(\d+)", wanted)
    assert match, f"binder/runtime.txt should say python-X.Y, says {wanted!r}"
    version = tuple(map(int, match.groups()))
    candidates = [getattr(sys, "_base_executable", None), sys.executable, shutil.which(f"python{wanted[7:]}")]
    for candidate in filter(None, candidates):
        probe = subprocess.run([candidate, "-c", "import sys; print(*sys.version_info[:2])"],
                               capture_output=True, text=True)
        if probe.returncode == 0 and tuple(map(int, probe.stdout.split())) == version:
            return candidate
    pytest.fail(f"no Python {wanted[7:]} here (binder/runtime.txt) to build the Binder environment with")


def _run(argv, *, env, cwd, timeout=RUN_TIMEOUT_S, check=True) -> subprocess.CompletedProcess:
    result = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True,
                            timeout=timeout)
    if check and result.returncode != 0:
        pytest.fail(f"{' '.join(map(str, argv))} exited {result.returncode}:\n"
                    f"{result.stdout[-4000:]}\n{result.stderr[-4000:]}")
    return result


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)", line)
            assert match, f"{path.relative_to(REPO)}: not an exact pin: {line!r}"
            pins[re.sub(r"[-_.]+", "-", match.group(1)).lower()] = match.group(2)
    return pins


@pytest.fixture(scope="module")
def binder_env(tmp_path_factory):
    """{'repo', 'venv', 'env'}: a copy of the repo and the Binder-built environment."""
    tmp = tmp_path_factory.mktemp("binder")
    repo, venv, home = tmp / "repo", tmp / "venv", tmp / "home"
    repo.mkdir()
    home.mkdir()
    _copy_repo(repo)
    assert (repo / "binder" / "requirements.txt").is_file() and (repo / "binder" / "postBuild").is_file()

    env = {k: v for k, v in os.environ.items()
           if k not in {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "CONDA_PREFIX"}
           and not k.startswith(("JUPYTER", "IPYTHON", "MPL"))}
    env.update(HOME=str(home), VIRTUAL_ENV=str(venv), PYTHONNOUSERSITE="1",
               PATH=f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
               JUPYTER_CONFIG_DIR=str(home / ".jupyter"), JUPYTER_DATA_DIR=str(home / ".local/share/jupyter"),
               JUPYTER_RUNTIME_DIR=str(home / ".local/share/jupyter/runtime"), IPYTHONDIR=str(home / ".ipython"),
               MPLCONFIGDIR=str(home / ".config/matplotlib"))

    _run([_base_python(), "-m", "venv", venv], env=env, cwd=tmp)
    # repo2docker's own command (pip's configuration, with its local wheel indexes, still applies)
    _run([venv / "bin/python", "-m", "pip", "install", "--no-cache-dir", "-q", "-r", "binder/requirements.txt"],
         env=env, cwd=repo, timeout=PIP_TIMEOUT_S)
    # repo2docker: chmod +x binder/postBuild && ./binder/postBuild, from the repository root
    _run(["bash", "-c", "chmod +x binder/postBuild && ./binder/postBuild"], env=env, cwd=repo,
         timeout=PIP_TIMEOUT_S)
    return {"repo": repo, "venv": venv, "env": env, "tmp": tmp}


def test_binder_pins_are_the_setup_pins():
    """./dev.sh (the README's setup) installs binder/requirements.txt itself; any other requirements
    file it installs (tests/requirements.txt: test-only extras) agrees with it on every shared pin."""
    dev_sh = (REPO / "dev.sh").read_text()
    files = sorted(set(re.findall(r'"\$ROOT/([^"\s$]*requirements[^"\s$]*\.txt)"', dev_sh)))
    assert "binder/requirements.txt" in files, f"dev.sh does not install binder/requirements.txt: {files}"
    binder = _pins(BINDER / "requirements.txt")
    for rel in files:
        assert (REPO / rel).is_file(), f"dev.sh names {rel}, which does not exist"
        other = _pins(REPO / rel)
        clash = {name: (binder[name], other[name]) for name in binder.keys() & other.keys()
                 if binder[name] != other[name]}
        assert clash == {}, f"{rel} pins differently from binder/requirements.txt (binder, {rel}): {clash}"


def test_pinned_versions_installed(binder_env):
    venv, env = binder_env["venv"], binder_env["env"]
    freeze = _run([venv / "bin/python", "-m", "pip", "list", "--format=json"], env=env, cwd=binder_env["tmp"])
    installed = {re.sub(r"[-_.]+", "-", p["name"]).lower(): p["version"] for p in json.loads(freeze.stdout)}
    wrong = {name: (version, installed.get(name)) for name, version in _pins(BINDER / "requirements.txt").items()
             if installed.get(name) != version}
    assert wrong == {}, f"pinned vs installed: {wrong}"
    check = _run([venv / "bin/python", "-m", "pip", "check"], env=env, cwd=binder_env["tmp"], check=False)
    assert check.returncode == 0, check.stdout + check.stderr


def test_lab_extensions_enabled(binder_env):
    venv, env = binder_env["venv"], binder_env["env"]
    listing = _run([venv / "bin/jupyter", "labextension", "list"], env=env, cwd=binder_env["repo"])
    text = listing.stdout + listing.stderr
    for extension in ("@jupyter/nbgrader", "@jupyter-widgets/jupyterlab-manager", "kv-course-alt-text"):
        line = next((ln for ln in text.splitlines() if extension in ln), None)
        assert line and "enabled" in line and "OK" in line, f"{extension} not enabled and OK:\n{text}"
    overrides = venv / "share/jupyter/lab/settings/overrides.json"
    assert overrides.is_file(), "postBuild did not write the lab settings overrides (news toast)"
    settings = json.loads(overrides.read_text())["@jupyterlab/apputils-extension:notification"]
    assert settings == {"checkForUpdates": False, "fetchNews": "false"}, settings


def test_kernel_and_packages_are_the_environments(binder_env):
    """python3 is the venv's kernel; kvlib and autograder are installed in it (not read from the copy)."""
    venv, env = binder_env["venv"], binder_env["env"]
    specs = json.loads(_run([venv / "bin/jupyter", "kernelspec", "list", "--json"], env=env,
                            cwd=binder_env["tmp"]).stdout)["kernelspecs"]
    assert Path(specs["python3"]["resource_dir"]).is_relative_to(venv), specs["python3"]
    probe = _run([venv / "bin/python", "-c",
                  "import sys, kvlib, autograder.checks.ch01 as c; print(sys.prefix); print(kvlib.__file__); "
                  "print(c.__file__)"], env=env, cwd=binder_env["tmp"]).stdout.split()
    site = venv / "lib"
    assert Path(probe[0]) == venv, probe
    assert all(Path(p).is_relative_to(site) for p in probe[1:]), probe



def test_kvlib_drill_is_registered(binder_env):
    """postBuild's install registers ``kvlib drill`` (the ``kvlib.commands`` entry point of pyproject.toml: kvlib
    imports nothing of the coach) and installs kvcoach beside kvlib."""
    venv, env = binder_env["venv"], binder_env["env"]
    helped = _run([venv / "bin/kvlib", "drill", "--help"], env=env, cwd=binder_env["tmp"]).stdout
    assert helped.startswith("usage: kvlib drill") and "--student ID" in helped, helped
    where = _run([venv / "bin/python", "-c", "import kvcoach.cli; print(kvcoach.cli.__file__)"], env=env,
                 cwd=binder_env["tmp"]).stdout.strip()
    assert Path(where).is_relative_to(venv / "lib"), where

def _execute(binder_env, folder: str, allow_errors: bool):
    repo, venv, env = binder_env["repo"], binder_env["venv"], binder_env["env"]
    out = binder_env["tmp"] / "executed" / folder
    argv = [venv / "bin/jupyter", "nbconvert", "--to", "notebook", "--execute", "--output-dir", out,
            "--ExecutePreprocessor.kernel_name=python3", "--ExecutePreprocessor.timeout=120",
            f"{folder}/{CHAPTER}.ipynb"]
    if allow_errors:
        argv.insert(5, "--allow-errors")
    _run(argv, env=env, cwd=repo)
    return nbformat.read(out / f"{CHAPTER}.ipynb", as_version=4)


def test_student_chapter_fails_only_in_exercise_checks(binder_env):
    nb = _execute(binder_env, "chapters", allow_errors=True)
    unexpected, checks, passing = [], 0, []
    for i, cell in enumerate(nb.cells):
        meta = cell.metadata.get("nbgrader", {})
        is_test = cell.cell_type == "code" and meta.get("grade") and not meta.get("solution")
        errors = [o for o in cell.get("outputs", []) if o.output_type == "error"]
        for error in errors:
            if not is_test or error.ename not in EXERCISE_ERRORS:
                unexpected.append(f"cell {i} ({meta.get('grade_id', 'not graded')}): {error.ename}: {error.evalue}")
        if is_test:
            checks += 1
            if not errors:
                passing.append(meta["grade_id"])
    assert unexpected == [], "\n".join(unexpected)
    assert checks, "no exercise test cells"
    assert passing == [], f"exercise checks that pass on the blank notebook: {passing}"


def test_solutions_run_cleanly(binder_env):
    nb = _execute(binder_env, "solutions", allow_errors=False)   # nbconvert exits non-zero on any error
    assert all(c.get("execution_count") for c in nb.cells if c.cell_type == "code")
