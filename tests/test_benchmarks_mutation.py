"""benchmarks/mutation.py's BENCHMARKS.md section survives benchmarks/run.py rewriting the file."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import mutation  # noqa: E402


def test_section_is_replaced_in_place_or_appended():
    section = f"{mutation.BEGIN}\nnew\n{mutation.END}"
    old = f"# Benchmarks\n\n{mutation.BEGIN}\nold\n{mutation.END}\n\n## after\n"
    assert mutation.write_section(old, section) == f"# Benchmarks\n\n{section}\n\n## after\n"
    assert mutation.write_section("# Benchmarks\n", section) == f"# Benchmarks\n\n{section}\n"


def test_run_py_keeps_the_mutation_section(tmp_path):
    import run  # benchmarks/run.py
    out = tmp_path / "BENCHMARKS.md"
    out.write_text(f"# Benchmarks\nold figures\n\n{mutation.BEGIN}\n| kvlib/formulas | 1 |\n{mutation.END}\n")
    kept = run._keep_mutation_section("# Benchmarks\nnew figures\n", out)
    assert kept.startswith("# Benchmarks\nnew figures\n") and "old figures" not in kept
    assert f"{mutation.BEGIN}\n| kvlib/formulas | 1 |\n{mutation.END}" in kept
    out.write_text("# Benchmarks\nno section\n")
    assert run._keep_mutation_section("fresh\n", out) == "fresh\n"


def test_old_rows_are_read_back():
    rows = mutation._old_rows(mutation.render({"kvlib/units": ["kvlib/units", 50, 4, 1, 0, 0, 54, 60, "94.3%",
                                                                "0.52", "2026-12-01"]}, "stamp", "cmd"))
    assert rows == {"kvlib/units": ["kvlib/units", "50", "4", "1", "0", "0", "54", "60", "94.3%", "0.52",
                                    "2026-12-01"]}


def test_rows_from_before_the_rate_column_read_as_complete_runs():
    old = (f"{mutation.BEGIN}\n| kvlib/units | 50 | 4 | 1 | 0 | 0 | 54 | 94.3% | 2026-12-01 |\n{mutation.END}")
    assert mutation._old_rows(old) == {"kvlib/units": ["kvlib/units", "50", "4", "1", "0", "0", "54", "54",
                                                       "94.3%", "-", "2026-12-01"]}
