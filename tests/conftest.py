"""Shared pytest configuration for tests/: markers, the heavy tests' one worker, the browser steps' table."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
HEAVY_LIST = Path(__file__).with_name("heavy_tests.txt")
BROWSER_TIMINGS = REPO / "artefacts" / "browser" / "timings.txt"   # written by tests/browser/conftest.py
_STARTED = time.time()
# .ci/run installs vLLM's CPU engine beside the test run; this names the file where that install writes its
# exit status when it ends (its log beside it, ".log" added). While it is set, the engine tests run last
# and wait for that status.
ENGINE_PENDING_ENV = "KV_COURSE_ENGINE_PENDING"
ENGINE_WAIT_S = 45 * 60


def heavy_entries(kind: str | None = None) -> list[str]:
    """What tests/heavy_tests.txt names (of one kind, or all): files, folders or single tests, as node ids.

    (The list is absent in benchmarks/mutation.py's scratch copy, which runs only in-process kvlib tests.)
    """
    if not HEAVY_LIST.exists():
        return []
    entries = []
    for number, line in enumerate(HEAVY_LIST.read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split()
        if len(fields) != 2 or fields[0] not in ("serial", "kernels"):
            raise ValueError(f"{HEAVY_LIST.name}:{number}: expected 'serial PATH' or 'kernels PATH', got {line!r}")
        if kind in (None, fields[0]):
            entries.append(fields[1])
    return entries


def is_heavy(nodeid: str, entries: list[str]) -> bool:
    return any(nodeid == e or nodeid.startswith((e + "/", e + "::", e + "[")) for e in entries)


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "slow: builds an environment or drives a browser (a minute or more); still runs in "
        "./dev.sh test and CI, deselect locally with -m 'not slow'")
    config.addinivalue_line(
        "markers",
        "kernel: starts a Jupyter kernel or the sandboxed grader (seconds each); ./dev.sh quick leaves it "
        "out, ./dev.sh test and CI run it")
    config.addinivalue_line(
        "markers",
        "engine: starts vLLM's CPU engine (./dev.sh engine); with $KV_COURSE_ENGINE_PENDING set (.ci/run), runs "
        "after every other test and waits for the engine's install to end")


def _engine_order(item) -> int:
    # 0: the rest; 1: the browser tests (timed waits: not beside the engine's install); 2: engine starts
    if item.get_closest_marker("engine") is not None:
        return 2
    return 1 if item.nodeid.startswith("tests/browser/") else 0


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """With the engine still installing (.ci/run), the in-process and kernel tests go first, then the
    browser tests, then the engine tests: the install's ~12 minutes overlap the tests that need no engine.
    A stable sort, so each group keeps its order (and the browser tests' per-chapter fixtures)."""
    if os.environ.get(ENGINE_PENDING_ENV):
        items.sort(key=_engine_order)


def wait_for_engine_install(status_path: Path, timeout_s: float = ENGINE_WAIT_S, poll_s: float = 5.0) -> None:
    """Block until the background install writes its exit status; fail (with its log's tail) if it failed."""
    deadline = time.monotonic() + timeout_s
    while not status_path.exists() or not status_path.read_text().strip():
        if time.monotonic() > deadline:
            pytest.fail(f"vLLM's CPU engine install did not end within {timeout_s / 60:.0f} min ({status_path})",
                        pytrace=False)
        time.sleep(poll_s)
    status = status_path.read_text().strip()
    if status != "0":
        log = Path(str(status_path) + ".log")
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:]) if log.exists() else "(no log)"
        pytest.fail(f"./dev.sh engine failed (exit {status}):\n{tail}", pytrace=False)


def pytest_runtest_setup(item):
    pending = os.environ.get(ENGINE_PENDING_ENV)
    if pending and item.get_closest_marker("engine") is not None:
        wait_for_engine_install(Path(pending))


@pytest.hookimpl(optionalhook=True)   # pytest-xdist's hook: unknown where xdist is absent or disabled
def pytest_xdist_make_scheduler(config, log):
    """With ``-n N --dist loadfile`` (./dev.sh test): the serial heavy tests are one unit of work.

    So they run one after another on one worker, in their usual order and never beside each
    other (their timeouts were set for a serial run), while the other worker takes the in-process test
    files one by one. (pytest-xdist's own ``xdist_group`` marks cannot do it under pytest 9: its suffix
    on the node id no longer takes.)
    """
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    entries = heavy_entries("serial")

    class HeavyTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return "heavy tests" if is_heavy(nodeid, entries) else super()._split_scope(nodeid)

    return HeavyTogether(config, log)


def pytest_terminal_summary(terminalreporter):
    pending = os.environ.get(ENGINE_PENDING_ENV)
    if pending:   # .ci/run's background install: how it ended, its last lines
        status = Path(pending).read_text().strip() if Path(pending).exists() else ""
        terminalreporter.section("vLLM CPU engine install (./dev.sh engine, beside the tests)")
        terminalreporter.write_line(f"exit status: {status or 'still running'}")
        log = Path(pending + ".log")
        for line in (log.read_text(errors="replace").splitlines()[-3:] if log.exists() else []):
            terminalreporter.write_line(line)
    # The browser tests record their steps' times in a file (they may run on an xdist worker, whose own
    # terminal summary is never shown); print that table if this run wrote it.
    if not BROWSER_TIMINGS.exists() or BROWSER_TIMINGS.stat().st_mtime < _STARTED:
        return
    terminalreporter.section("browser steps (seconds)")
    for line in BROWSER_TIMINGS.read_text().splitlines():
        seconds, chapter, step = line.split("\t", 2)
        terminalreporter.write_line(f"{float(seconds):6.1f}  {chapter}  {step}")


@pytest.fixture(autouse=True)
def _no_drill_answer_reads():
    """Each test starts with no drill answer read (``kvcoach.drills.answer_reads``): a test that reads a
    student problem's ``.answer`` to compare must not make a later test's check refuse that student's value."""
    import sys

    drills = sys.modules.get("kvcoach.drills")
    if drills is not None and hasattr(drills, "_ANSWER_READS"):
        drills._ANSWER_READS.clear()
    yield


@pytest.fixture
def history_file(tmp_path, monkeypatch):
    """The drills' history file of this test alone (kvcoach.drill_history reads $XDG_DATA_HOME)."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    return tmp_path / "kv-course" / "drills.json"
