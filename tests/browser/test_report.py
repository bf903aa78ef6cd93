"""The class slip report (``python -m autograder report --html``) in headless Chromium: its tables and its
plot show, from the file alone (nothing fetched, no script).

The class: 10 students stored as grade-class stores them (``benchmarks/bench_report.py``: the right
answers, the blank release, and each slipped answer judged by the grader in-process), so no notebook
is graded here; about 3 s with the browser already up.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "tests"))

import bench_report as B  # noqa: E402
import hostile as H  # noqa: E402

KINDS = {f"pupil-{n:02d}": kind for n, kind in enumerate(
    ["right", "right", "right", "blank", "q1_bits", "q2_no_kv_factor", "q4_ceil", "q5_label_gib", "q5_label_gib",
     "right"], 1)}


def _result(student: str, passed: bool) -> dict:
    """A stored result with every test right (or, not ``passed``, the release's stubs everywhere)."""
    return {"assignment": H.ASSIGNMENT, "student": student, "status": "graded", "reason": "",
            "score": H.FULL if passed else 0, "max_score": H.FULL,
            "tests": [{"grade_id": H.TEST[q], "points": H.POINTS[q] if passed else 0, "max_points": H.POINTS[q],
                       "passed": passed, "needs_manual": False, "feedback": "", "slips": [], "slip": None,
                       "attempted": passed, "failures": {} if passed else {"error": 1}} for q in H.Q]}


def test_the_report_shows_its_tables_and_plot(browser, tmp_path, artefacts):
    from autograder import report as R

    made = B.templates(_result("right", True), _result("blank", False))
    results = {s: dict(made[k], student=s) for s, k in KINDS.items()}
    page_path = tmp_path / "report.html"
    R.write(R.build(results, None, H.ASSIGNMENT), html_path=page_path)

    page = browser.new_page()
    fetched, errors = [], []
    page.on("request", lambda r: fetched.append(r.url))
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(page_path.as_uri())
        rows = page.locator("table#exercises tbody tr")
        assert rows.count() == len(H.Q)
        q5 = page.locator("table#exercises tbody tr", has_text=H.TEST["q5"]).inner_text()
        # full marks: the 4 right and the 3 slipped elsewhere; zero: the 2 label-as-GiB; 1 blank
        assert "70% (7)" in q5 and "20% (2)" in q5 and "10% (1)" in q5
        slips = page.locator("table#slips").inner_text()
        assert "label_memory+gb_for_gib" in slips and "two at once" in slips and "2 (20%)" in slips
        plot = page.locator("img#plot")
        plot.scroll_into_view_if_needed()
        size = plot.evaluate("img => [img.complete, img.naturalWidth, img.naturalHeight]")
        assert size[0] and size[1] > 300 and size[2] > 200, size
        page.screenshot(path=str(artefacts / "report-01-class.png"), full_page=True)
    finally:
        page.close()
    assert errors == []
    assert [u for u in fetched if not u.startswith(("file:", "data:"))] == []
    assert not any(s in page_path.read_text() for s in KINDS)     # nobody named
