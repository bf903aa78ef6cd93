"""ch09's plan mode widget in-process (ipywidgets): a scenario drawn, the steps entered one by one in the box, each
verdict in the view, the rubric at the end, the plan recorded in the history with its rubric.

Scenario 2's figures by hand (see tests/test_plan_mode.py): 131,072 B per token; a pool of
ceil(85,018,877,624 x 0.9) - 16,060,522,496 - 3e9 = 57,456,467,366 B; 101 sequences of 4,300 tokens; memory binds;
3,200 in flight / 808 per node -> 4 nodes; ceil(4 x 1.3) + 1 = 7; Little: 100 x (2 + 600 x 0.05) = 3,200.
"""

from __future__ import annotations

import kvdisplay as kd
from kvcoach import drill_history as H

RIGHT = ["efficiency=0.7 allreduce_us=20 spike=1.3", "131072", "57.456 GB", "101", "memory", "4", "7", "3.2e3"]


def _enter(box, text):
    box.answer.value = text
    box.enter.click()


def test_plan_mode_widget_runs_a_plan_to_its_rubric_and_records_it(tmp_path):
    history = H.load(tmp_path / "drills.json")
    ticks = iter(float(t) for t in range(0, 1000, 10))
    box = kd.plan_mode(seed=2, clock=lambda: next(ticks), history=history, tick=None)
    assert "Press <b>new scenario</b>" in box.view.value and box.state() is None
    box.new.click()
    assert "Scenario 2." in box.view.value and "next: <b>assumptions: state what the scenario leaves open" in \
        box.view.value
    _enter(box, "efficiency=quick")                    # unreadable: one line, not scored, asked again
    assert "efficiency: expected a number, got &#x27;quick&#x27;" in box.view.value
    assert "(not scored: enter it again)" in box.view.value and box.state().step.key == "assumptions"
    for text in RIGHT[:2]:
        _enter(box, text)
    _enter(box, "65.96 GB")                             # the pool without the engine's 0.9 share
    assert "not quite [no_utilization]" in box.view.value
    for text in RIGHT[3:]:
        _enter(box, text)
    view = box.view.value
    assert "rubric 3.8/4: assumptions stated 100%; steps right 80%; binding constraint named; sanity line right." \
        in view
    assert "kvlib&#x27;s plan: 7 nodes of 8 x H100-SXM (binding: memory)." in view and "next:" not in view
    assert box.answer.value == ""
    (attempt,) = H.load(tmp_path / "drills.json").attempts
    assert (attempt["topic"], attempt["slips"], attempt["rubric"]) == (
        "plan", ["no_utilization"], {"assumptions": 1, "steps": 0.8, "binding": 1, "sanity": 1})
    _enter(box, "8")                                    # the plan is complete: nothing more is judged or recorded
    assert len(H.load(tmp_path / "drills.json").attempts) == 1
    box.new.click()                                     # the next scenario, a fresh plan
    assert "Scenario 3." in box.view.value and box.state().results == []


def test_plan_clock_text_stops_when_the_plan_is_complete():
    ticks = iter([0.0, 30.0] + [40.0] * 8 + [650.0, 900.0])
    box = kd.plan_mode(seed=2, clock=lambda: next(ticks), history=False, tick=None)
    box.new.click()
    assert box.clock.value == "time 30 s (target 600 s)"
    for text in RIGHT:
        _enter(box, text)
    assert box.clock.value == "time 40 s (target 600 s)"           # the plan took 40 s; the clock stopped there
    assert kd.plan_clock_text(box.state()) == "time 40 s (target 600 s)"
