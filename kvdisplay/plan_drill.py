"""Plan mode in the notebook: a whiteboard capacity plan, timed, each step judged, a rubric at the end.

The state is ``kvcoach.plan_mode.PlanSession`` (the scenario, the assumptions, the steps, the rubric);
``plan_view(session)`` is its view as HTML (tests need no widgets), and ``plan_mode()`` wires ipywidgets
to the two: "new scenario", one answer box that takes each step in turn, "enter", a clock. A finished plan
is recorded in the drill history shared with ``kvlib drill --plan``, its rubric with it.

Used in: ch09_interview_drills.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import random
import time

from kvcoach import plan_mode as pm

from .drills import RIGHT_COLOR, WRONG_COLOR, _open_history

__all__ = ["plan_clock_text", "plan_view", "plan_mode"]


def plan_clock_text(session) -> str:
    """The plan's clock: seconds so far against the plan's target (it stops when the plan is complete).

    >>> ticks = iter([0.0, 95.0])
    >>> plan_clock_text(pm.PlanSession(pm.draw(1), clock=lambda: next(ticks)))
    'time 95 s (target 600 s)'

    Used in: ch09_interview_drills (through plan_mode).
    """
    if session is None:
        return "time –"
    seconds = session.elapsed()
    over = f", {seconds - pm.TARGET_SECONDS:.0f} s over" if seconds > pm.TARGET_SECONDS else ""
    return f"time {seconds:.0f} s (target {pm.TARGET_SECONDS} s{over})"


def plan_view(session) -> str:
    """Plan mode's view as HTML: the scenario, each step answered with its verdict, what to enter next, and the
    rubric once the plan is complete.

    >>> s = pm.PlanSession(pm.draw(1), clock=lambda: 0.0)
    >>> "assumptions: state what the scenario leaves open, as efficiency=&lt;" in plan_view(s)
    True

    Used in: ch09_interview_drills (through plan_mode).
    """
    parts = ["<div style='font-family:sans-serif;font-size:13px;line-height:1.6;max-width:1000px'>"]
    if session is None:
        parts.append("Press <b>new scenario</b> to draw a capacity question, then enter your plan one step at a "
                     "time in the box (press <b>enter</b> after each).</div>")
        return "".join(parts)
    parts.append(f"<div style='margin:4px 0 6px 0'><b>Scenario {session.scenario.seed}.</b> "
                 f"{html.escape(session.scenario.text())}</div>")
    for r in session.results:
        color = RIGHT_COLOR if r.ok else WRONG_COLOR
        mark = "✓" if r.ok else "✗"
        note = "" if r.scored else " <span style='color:#666'>(not scored: enter it again)</span>"
        feedback = "<br>".join(html.escape(line) for line in r.feedback.splitlines())
        parts.append(f"<div><code>{html.escape(r.key)}</code> {html.escape(r.text)} "
                     f"<span style='color:{color}'>{mark} {feedback}</span>{note}</div>")
    if session.done:
        summary = "<br>".join(html.escape(line) for line in session.summary().splitlines())
        parts.append(f"<div style='margin-top:6px;padding:4px 8px;background:#f6f6f6'><b>{summary}</b></div>")
    else:
        parts.append(f"<div style='margin-top:6px'>next: <b>{html.escape(session.prompt())}</b></div>")
    parts.append("</div>")
    return "".join(parts)


async def _tick(session, clock_w, seconds):
    """Redraw the clock every ``seconds`` until the plan is complete (or another scenario is drawn)."""
    while clock_w.session is session and not session.done:
        clock_w.value = plan_clock_text(session)
        await asyncio.sleep(seconds)
    clock_w.value = plan_clock_text(session)


def plan_mode(*, seed: int | None = None, clock=time.monotonic, history=True, tick: float | None = 1.0):
    """Plan mode as ipywidgets: "new scenario", an answer box, "enter", a clock and the view.

    ``seed``: the first scenario's (None: a random one; each "new scenario" draws the next seed).
    ``history``: True records each finished plan in the learner's drill history (shared with
    ``kvlib drill --plan``), False none, or a ``History``/path. Returns the ``VBox``; ``box.state()`` is the
    current ``PlanSession``, ``box.view`` the HTML widget, ``box.answer`` the text box and ``box.enter`` the
    button.

    Used in: ch09_interview_drills.
    """
    import ipywidgets as widgets

    kept, problem_text = _open_history(history)
    state = {"session": None, "seed": random.randrange(10**6) if seed is None else seed, "recorded": False}
    history_session = kept.new_session("notebook") if kept is not None else None
    new_w = widgets.Button(description="new scenario", button_style="primary")
    answer_w = widgets.Text(placeholder="efficiency=… allreduce_us=… spike=…, then one figure per step",
                            description="plan", layout=widgets.Layout(width="520px"))
    enter_w = widgets.Button(description="enter")
    clock_w = widgets.HTML(plan_clock_text(None))
    clock_w.session = None
    note = f"<div style='color:{WRONG_COLOR}'>{html.escape(problem_text)}</div>" if problem_text else ""
    view = widgets.HTML(note + plan_view(None))

    def redraw():
        view.value = note + plan_view(state["session"])
        clock_w.value = plan_clock_text(state["session"])

    def on_new(_=None):
        session = pm.PlanSession(pm.draw(state["seed"]), clock=clock)
        state.update(session=session, seed=state["seed"] + 1, recorded=False)
        clock_w.session = session
        answer_w.value = ""
        redraw()
        if tick:
            with contextlib.suppress(RuntimeError):      # no running loop (not a kernel): it redraws on clicks only
                asyncio.get_running_loop().create_task(_tick(session, clock_w, tick))

    def on_enter(_=None):
        session = state["session"]
        if session is None or session.done:
            return
        session.answer(answer_w.value)
        answer_w.value = ""
        if session.done and not state["recorded"] and kept is not None and session.plan is not None:
            session.record(kept, history_session)
            state["recorded"] = True
        redraw()

    new_w.on_click(on_new)
    enter_w.on_click(on_enter)
    box = widgets.VBox([widgets.HBox([new_w, clock_w]), widgets.HBox([answer_w, enter_w]), view])
    box.add_class("kv-plan-mode")
    box.state = lambda: state["session"]
    box.view, box.answer, box.enter, box.new, box.clock = view, answer_w, enter_w, new_w, clock_w
    return box
