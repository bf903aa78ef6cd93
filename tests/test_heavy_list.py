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
    ("tests/test_kvdisplay_vllm_lab.py::test_engine_cell_starts_the_cpu_engine_once", True),
    ("tests/test_kvdisplay_vllm_lab.py::test_engine_cell_starts_the_cpu_engine_once[x]", True),
    ("tests/test_kvdisplay_vllm_lab.py::test_view_lists_the_rows", False),       # same file, another test
    ("tests/test_verdict_extra.py::test_x", False),                               # a prefix of a file name only
    ("tests/test_notebooks.py::test_runs_cleanly[x]", False),                     # kernels: any worker
    ("kvlib/formulas.py::kvlib.formulas.kv_bytes_per_token", False),
])
def test_serial_entries_match_node_ids(nodeid, heavy):
    assert C.is_heavy(nodeid, C.heavy_entries("serial")) is heavy


def test_a_malformed_line_is_named(tmp_path, monkeypatch):
    bad = tmp_path / "heavy_tests.txt"
    bad.write_text("serial tests/browser\ntests/test_grading.py\n")
    monkeypatch.setattr(C, "HEAVY_LIST", bad)
    with pytest.raises(ValueError, match=r"heavy_tests.txt:2: expected 'serial PATH' or 'kernels PATH'"):
        C.heavy_entries()
