"""Chapter 09's drill mode in JupyterLab, as a learner uses it between sessions ([drills §2-§3]).

On a copy of chapter 09 in the scratch root (so ``test_lab.py``'s own page of the chapter is never
touched), in headless Chromium: run the setup cell and drill mode, draw a question on bytes per
token, watch the clock tick, answer it wrong (the K and V factor dropped, computed here from the
geometry the question states), see the worked steps and the step where the slip enters; then restart
the kernel (Kernel > Restart Kernel), run the setup and the history cell, and see the topic in the
history table; between the two, run plan mode and enter one right plan step by step to its full rubric (the plan
saved with its rubric scores), read back from ``$XDG_DATA_HOME/kv-course/drills.json`` (the server's scratch data
folder, see conftest), a 0600 file. About 15 s with the server and the browser already up.
"""

from __future__ import annotations

import json
import re
import stat
import time

import pytest

from kvcoach import plan_mode as pm

from .test_lab import TIMEOUT_MS, ChapterPage, _shut_down_kernels

pytestmark = pytest.mark.slow

CHAPTER = "ch09_interview_drills"
COPY = "ch09_drill_history"          # the copy this test opens
GEOMETRY = re.compile(r"num_hidden_layers (\d+), num_attention_heads \d+, num_key_value_heads (\d+), head_dim (\d+)")


def _cell_index(nb, starts: str) -> int:
    return next(i for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.source.startswith(starts))


def _run_cell(chapter: ChapterPage, index: int) -> None:
    cell = chapter.cells.nth(index)
    cell.scroll_into_view_if_needed()
    before = cell.locator(".jp-InputArea-prompt").inner_text().strip()
    cell.locator(".jp-InputArea-prompt").click()
    chapter.page.keyboard.press("Shift+Enter")
    chapter.wait_prompt_changes(index, before)
    chapter.wait_idle()


def test_drill_mode_shows_steps_after_a_miss_and_the_history_survives_a_restart(lab_server, browser, artefacts,
                                                                                step_timings):
    root = lab_server["root"]
    # A fresh copy without outputs: an earlier test may have run and saved the chapter, and a saved "[1]" prompt
    # would read the same after this test's first run (the CI rehearsal failed so: "cell 1 did not run").
    nb = json.loads((root / f"{CHAPTER}.ipynb").read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
    (root / f"{COPY}.ipynb").write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    started = time.monotonic()
    try:
        chapter = ChapterPage(COPY, page, lab_server, artefacts, step_timings)
        setup, mode, stats = (_cell_index(chapter.nb, "import kvlib as kv"), _cell_index(chapter.nb, "kd.drill_mode("),
                              _cell_index(chapter.nb, "kd.drill_stats("))
        with chapter.step("drills: open, run the setup and drill mode"):
            page.goto(f"{lab_server['url']}/lab/tree/{COPY}.ipynb?reset")
            chapter.wait_kernel_named()
            chapter.wait_idle()
            chapter.cells.nth(len(chapter.nb.cells) - 1).wait_for(state="attached")
            _run_cell(chapter, setup)
            _run_cell(chapter, mode)
        view = page.locator(".widget-html", has_text="score:")
        clock = page.locator(".widget-html", has_text=re.compile(r"^time "))
        with chapter.step("drills: a question, the clock, a wrong answer and its steps"):
            page.locator(".widget-dropdown select").select_option("kv_per_token")
            page.locator(".widget-button", has_text=re.compile("^new question$")).click()
            view.filter(has_text="(topic kv_per_token; answer in bytes, within 0.5% (any notation: ").wait_for()
            first = clock.inner_text()
            assert re.fullmatch(r"time \d+ s \(target 50 s\)", first.strip()), first
            deadline = time.monotonic() + 10          # the clock redraws itself while the question waits
            while clock.inner_text() == first and time.monotonic() < deadline:
                time.sleep(0.2)
            assert clock.inner_text() != first, "the clock did not move"
            layers, kv_heads, head_dim = map(int, GEOMETRY.search(view.inner_text()).groups())
            without_the_two = layers * kv_heads * head_dim * 2          # bf16, K and V counted once
            page.locator(".widget-text input").fill(str(without_the_two))
            page.locator(".widget-button", has_text=re.compile("^check$")).click()
            view.filter(has_text="worked steps:").wait_for()
        shown = view.inner_text()
        assert f"2 · {layers} · {kv_heads} · {head_dim} · 2 = {2 * without_the_two:,} bytes" in shown, shown
        assert re.search(rf"your {without_the_two:,}: the slip \[[\w+]+\] enters at step 1 ", shown), shown
        assert "score: 0 / 1" in shown
        view.scroll_into_view_if_needed()
        page.screenshot(path=str(artefacts / f"{COPY}-01-steps.png"))

        with chapter.step("drills: review draws the missed topic again and clears the last verdict and steps"):
            page.locator(".widget-button", has_text=re.compile("^review$")).click()
            view.filter(has_text="review: missed once, last ").wait_for()
            shown = view.inner_text()
            assert "worked steps:" not in shown and "✗" not in shown and "score: 0 / 1" in shown, shown

        with chapter.step("drills: plan mode, one plan entered step by step to its rubric"):
            # the right plan for the scenario shown, from kvlib (its figures are checked by hand in test_plan_mode.py)
            _run_cell(chapter, _cell_index(chapter.nb, "kd.plan_mode("))
            plan = page.locator(".kv-plan-mode")
            plan.locator(".widget-button", has_text=re.compile("^new scenario$")).click()
            plan_view = plan.locator(".widget-html", has_text="next:")
            seed = int(re.search(r"Scenario (\d+)\.", plan_view.inner_text()).group(1))
            s = pm.PlanSession(pm.draw(seed), clock=lambda: 0.0)
            s.answer("efficiency=0.7 allreduce_us=20 spike=1.3")
            lines = ["efficiency=0.7 allreduce_us=20 spike=1.3"] + [str(s.expected(k)) for k, _, _ in pm.STEPS]
            box, enter = plan.locator(".widget-text input"), plan.locator(".widget-button", has_text=re.compile("^enter$"))
            for n, line in enumerate(lines):
                box.fill(line)
                enter.click()
                plan.locator(".widget-html", has_text=re.compile(r"rubric" if n == len(lines) - 1 else rf"step {n + 1}/")
                              ).first.wait_for()
            summary = plan.locator(".widget-html", has_text="rubric 4/4").inner_text()
            assert "binding constraint named; sanity line right." in summary, summary
            plan.scroll_into_view_if_needed()
            page.screenshot(path=str(artefacts / f"{COPY}-02-plan.png"))

        with chapter.step("drills: restart the kernel, the history read back"):
            chapter.run_menu("Kernel", "Restart Kernel…")
            page.locator(".jp-Dialog .jp-mod-accept").click()
            page.locator(".jp-Dialog").wait_for(state="detached")
            chapter.wait_idle()
            # The setup cell's prompt may read [1] before and after (the count restarts): run it without waiting
            # for a new prompt; the history cell, queued behind it, never ran before, so its prompt does change.
            chapter.cells.nth(setup).scroll_into_view_if_needed()
            chapter.cells.nth(setup).locator(".jp-InputArea-prompt").click()
            page.keyboard.press("Shift+Enter")
            _run_cell(chapter, stats)
        table = chapter.cells.nth(stats).locator(".jp-OutputArea")
        text = table.inner_text()
        assert "Your drill history over" in text and re.search(r"bytes per token from a config kv_per_token\s+\d+", text), text
        # the plan entered above, with its scenario and its four scores of 1 (4 of 4)
        assert "Your plans (1)" in text and re.search(rf"scenario {seed}: [^\n]*?\s1\s+1\s+1\s+1\s+4 / 4", text), text
        table.scroll_into_view_if_needed()
        page.screenshot(path=str(artefacts / f"{COPY}-03-history.png"))
        saved = lab_server["data_home"] / "kv-course" / "drills.json"
        assert stat.S_IMODE(saved.stat().st_mode) == 0o600
        plans = [a for a in json.loads(saved.read_text())["attempts"] if a["topic"] == "plan"]
        assert [a["rubric"] for a in plans] == [{"assumptions": 1, "steps": 1, "binding": 1, "sanity": 1}], plans
        assert chapter.console == [], chapter.console
    finally:
        context.close()
        _shut_down_kernels(lab_server["url"], f"{COPY}.ipynb")
        step_timings.append((COPY, "drills: the whole test (server and browser up)", time.monotonic() - started))
