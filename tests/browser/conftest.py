"""Fixtures for the browser tests: JupyterLab started the README's way, and Debian's Chromium.

JupyterLab is started with the README's first command plus a root folder,
``./dev.sh open --port P --no-browser --token '' --ip 127.0.0.1 --root DIR``, DIR a scratch
copy of chapters/ (what workspace/ is for a learner). Saving, checkpoints and nbgrader's
Validate (which saves first) therefore never touch the checkout.

The server runs in its own process group; teardown stops that group, then any process it
started that is still alive (kernels run in their own groups).

Needs /usr/bin/chromium (``apt-get install -y chromium``; another path with $CHROMIUM) and
playwright (tests/requirements.txt, which ./dev.sh setup installs). Without them the tests
are skipped with one reason, unless REQUIRE_BROWSER=1, which makes that a failure.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
ARTEFACTS = REPO / "artefacts" / "browser"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
REQUIRE = os.environ.get("REQUIRE_BROWSER") == "1"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
SERVER_START_S = 300   # dev.sh open runs ./dev.sh setup first: pip, if the pins changed
TIMINGS: list[tuple[str, str, float]] = []   # (chapter, step, seconds), written at the end


def missing_parts() -> list[str]:
    """What the browser tests need and this machine lacks."""
    missing = []
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        missing.append(f"{CHROMIUM} (apt-get install -y chromium)")
    if importlib.util.find_spec("playwright") is None:
        missing.append("playwright (./dev.sh setup installs tests/requirements.txt)")
    return missing


def _reason(missing: list[str]) -> str:
    return "browser tests need " + " and ".join(missing) + ("" if REQUIRE else "; REQUIRE_BROWSER=1 fails instead")


def pytest_collection_modifyitems(config, items):
    missing = missing_parts()
    if not missing or REQUIRE:
        return
    skip = pytest.mark.skip(reason=_reason(missing))
    for item in items:
        if HERE in Path(item.path).parents:
            item.add_marker(skip)


def pytest_sessionfinish(session):
    # tests/conftest.py prints this table in the terminal summary (also when these tests ran on a worker).
    if not TIMINGS:
        return
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    (ARTEFACTS / "timings.txt").write_text(
        "".join(f"{seconds:.1f}\t{chapter}\t{step}\n" for chapter, step, seconds in TIMINGS))


@pytest.fixture(scope="session")
def step_timings() -> list:
    """Where tests append (chapter, step, seconds); printed in the terminal summary."""
    return TIMINGS


@pytest.fixture(scope="session")
def artefacts() -> Path:
    """artefacts/browser/, emptied of the previous run's screenshots."""
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    for old in ARTEFACTS.glob("*.png"):
        old.unlink()
    return ARTEFACTS


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _proc_start(pid: int) -> str | None:
    """The process's start time (field 22 of /proc/PID/stat): tells a PID from its reuse."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _descendants(pid: int) -> dict[int, str]:
    """{pid: start time} of every process below ``pid``, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = {}, list(children.get(pid, []))
    while todo:
        child = todo.pop()
        start = _proc_start(child)
        if start is not None:
            found[child] = start
            todo.extend(children.get(child, []))
    return found


def _stop(proc: subprocess.Popen) -> None:
    """Stop the server's process group, then whatever it started that survived (kernels)."""
    started = _descendants(proc.pid)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)    # jupyter-server shuts its kernels down on SIGTERM
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    deadline = time.monotonic() + 10
    for pid, start in started.items():
        while _proc_start(pid) == start and time.monotonic() < deadline:
            time.sleep(0.1)
        if _proc_start(pid) == start:        # still the very process the server started
            with contextlib.suppress(ProcessLookupError):
                if os.getpgid(pid) == pid:   # a kernel leads its own group
                    os.killpg(pid, signal.SIGKILL)
                else:
                    os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope="session")
def lab_server(tmp_path_factory):
    """JupyterLab from ``./dev.sh open ... --root DIR`` on a free port, DIR a scratch copy of chapters/.

    Yields {'url', 'root', 'log', 'pid', 'data_home'}: the server (and its kernels) run with XDG_DATA_HOME
    in the scratch folder, so drill mode's history (kvcoach.drill_history) never touches the user's own."""
    missing = missing_parts()
    if missing:
        pytest.fail(_reason(missing))         # only reached with REQUIRE_BROWSER=1
    dev_sh = REPO / "dev.sh"
    if "--root" not in dev_sh.read_text():
        pytest.fail("./dev.sh open has no --root DIR: the browser tests would write into the checkout")

    scratch = tmp_path_factory.mktemp("lab")
    root = scratch / "root"                  # what workspace/ is for a learner: copies of chapters/
    root.mkdir()
    for notebook in sorted((REPO / "chapters").glob("*.ipynb")):
        shutil.copy2(notebook, root / notebook.name)

    data_home = scratch / "data"             # $XDG_DATA_HOME/kv-course/drills.json: the drill history
    data_home.mkdir()
    port = _free_port()
    log_path = scratch / "lab.log"
    command = [str(dev_sh), "open", "--port", str(port), "--no-browser", "--token", "", "--ip", "127.0.0.1",
               "--root", str(root)]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True,
                                env=dict(os.environ, XDG_DATA_HOME=str(data_home)))
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"{' '.join(command)} exited with {proc.returncode}:\n"
                            f"{log_path.read_text(errors='replace')[-3000:]}")
            try:
                with urllib.request.urlopen(f"{url}/api/status", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"JupyterLab did not answer on {url} within {SERVER_START_S} s:\n"
                            f"{log_path.read_text(errors='replace')[-3000:]}")
            time.sleep(0.25)
        yield {"url": url, "root": root, "log": log_path, "pid": proc.pid, "data_home": data_home}
    finally:
        _stop(proc)


@pytest.fixture(scope="session")
def browser():
    """Debian's Chromium, headless, driven by Playwright (never a downloaded browser)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()
