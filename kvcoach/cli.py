"""``kvlib drill``: practice problems with named-slip feedback, worked steps after a miss, and a history.

``kvlib drill [--topic T] [--count N] [--seed S]`` asks seeded practice questions; after a wrong
answer it prints the worked steps for that question's numbers and where the learner's number
comes from (``kvcoach.drill_steps``). At a terminal the prompt shows the clock's target for the
question (``kvcoach.drill_history.target_seconds``) and the time taken after each answer
(``--timings`` shows them for piped answers too).

History (``kvcoach.drill_history``, ``$XDG_DATA_HOME/kv-course/drills.json``): answers typed at a
terminal are recorded (``--no-history`` does not record); piped answers (a transcript, a notebook's
demonstration, a test) are a replay and never recorded. ``--stats`` prints the per-topic table,
every topic's coverage (asked, right, median time, slips) and its next review with the reason (a topic
never asked is due), then the plans run with ``--plan`` (date, scenario, the rubric's four scores and their
total); ``--review`` asks ``--count`` questions of the topics the review rule picks (missed
ones first) and says why each was picked ("missed twice, last 3 days ago").
``--assumptions`` asks a structured answer (``tokens=... utilization=... memory=cuda``) where an
assumption changes the figure, checked field by field (``kvcoach.drill_assumptions``); the question then
withholds the assumptions left to the learner (utilization, MFU), and the figure is judged with the stated ones.

``--plan`` asks a whiteboard capacity plan instead (``kvcoach.plan_mode``): a drawn scenario (``--seed``),
the assumptions it leaves open asked for, each step of the plan judged with the slip named where it
enters, and a rubric at the end, recorded with the plan's scores like a drill.

``--student ID`` asks that learner's own graded drills (``kvcoach.drills.student_problem``, the
topics of ``GRADED_TOPICS``; with ``--topic``, that one), without showing answers, steps or
where a number went wrong; those runs are never recorded (a graded question is the same every
time, so answering it again would only inflate the practice history).

kvlib's command line finds this command through the ``kvlib.commands`` entry point (pyproject.toml:
``drill = "kvcoach.cli:add_parser"``), so kvlib imports nothing of the coach.
"""

from __future__ import annotations

import argparse
import random
import sys
import time

from kvlib.argtypes import positive_int as _positive_int
from kvlib.cli.common import UsageError

from . import drill_assumptions, drill_history, drill_steps, plan_mode
from .drills import GRADED_TOPICS, TOPICS, problem_set, generate, student_problem

__all__ = ["ask", "add_parser"]


def _is_terminal(stream) -> bool:
    return bool(getattr(stream, "isatty", None) and stream.isatty())


def ask(problems, *, stdin=None, stdout=None, reveal: bool = True, timings: bool = False, assumptions: bool = False,
        history=None, session=None, clock=time.monotonic, wall=time.time) -> tuple:
    """Ask each problem, read one answer line each; return ``(correct, asked)``.

    Stops quietly at the end of input; echoes answers that are not typed at a terminal. At a
    terminal (or with ``timings``) the prompt shows the target and each answer its time.
    ``reveal=False`` (a graded question): no answer, no steps. ``history`` (a ``drill_history.History``)
    with ``session`` records each answer; ``clock`` times answers and ``wall`` dates them (tests pass both).
    """
    stdin = sys.stdin if stdin is None else stdin
    stdout = sys.stdout if stdout is None else stdout
    terminal = _is_terminal(stdin)
    timed = timings or terminal

    def say(*lines):
        for line in lines:
            print(line, file=stdout)

    correct = asked = 0
    slips: dict = {}
    start = clock()
    for n, p in enumerate(problems, 1):
        structured = assumptions and len(drill_assumptions.fields(p)) > 1
        target = drill_history.target_seconds(p)
        say("", f"Question {n}/{len(problems)} [{p.topic}]", drill_assumptions.open_question(p) if structured else
            p.question)
        if structured:
            say(f"answer as key=value: {drill_assumptions.prompt(p)}")
        else:
            say(p.units_line())
        units = "key=value" if structured else p.units
        print(f"answer ({units}; target {target} s)> " if timed else f"answer ({units})> ", end="", file=stdout,
              flush=True)
        asked_at = clock()
        line = stdin.readline()
        if not line:
            say("\n(end of input)")
            break
        seconds = clock() - asked_at
        text = line.strip()
        if not terminal:
            say(text)
        asked += 1
        if structured:
            verdict = drill_assumptions.check(p, text, reveal=reveal)
            ok, named = verdict.correct, verdict.slips
            figure = verdict.fields[0].stated or ""
            say(verdict.text())
        else:
            judged = p.verdict(text, reveal=reveal)
            ok, named, figure = judged.correct, judged.slips, text
            say(judged.feedback)
        correct += ok
        for key in named:                     # every slip the feedback named: the summary, --stats, the history
            slips[key] = slips.get(key, 0) + 1
        if reveal and not (structured and verdict.figure_ok()) and not ok:
            shown = drill_assumptions.as_stated(p, text) if structured else p    # the steps on the stated premise
            say(*drill_steps.worked_lines(shown), *drill_steps.where_lines(shown, figure))
        if timed:
            over = "" if seconds <= target else f", {seconds - target:.0f} s over"
            say(f"(answered in {seconds:.1f} s; target {target} s{over})")
        if history is not None and session is not None:
            history.record(session, p.topic, ok, seconds, slips=named, now=wall(), target=target)
    say(f"\nscore {correct}/{asked}" + (f" ({len(problems) - asked} not answered)" if asked < len(problems) else ""))
    if slips:
        say("slips: " + ", ".join(f"{k} x{v}" for k, v in sorted(slips.items())))
    if timed:
        say(f"time {clock() - start:.1f} s")
    return correct, asked


def _history(args):
    """The history to record into, or None: --no-history, a graded run, or answers that are not typed."""
    if args.no_history or args.student is not None or not _is_terminal(sys.stdin):
        return None, None
    history = drill_history.load()
    return history, history.new_session("cli")


def _cmd_plan(args):
    clashes = [flag for flag, on in (("--topic", args.topic), ("--count", args.count), ("--student", args.student),
                                     ("--review", args.review), ("--stats", args.stats),
                                     ("--assumptions", args.assumptions)) if on]
    if clashes:
        raise UsageError(f"kvlib drill: --plan asks one whiteboard plan; it takes no {', '.join(clashes)}")
    history, session = _history(args)
    plan_mode.run(0 if args.seed is None else args.seed, stdin=sys.stdin, stdout=sys.stdout, history=history,
                  session=session, echo=not _is_terminal(sys.stdin))
    if history is not None and history.attempts:
        print(f"(recorded in {history.path}; kvlib drill --stats shows the table)")


def _cmd_drill(args):
    if args.plan:
        return _cmd_plan(args)
    if args.stats:
        if args.student is not None or args.review:
            raise UsageError("kvlib drill: --stats prints the history; it takes no --student or --review")
        print(drill_history.stats_table(drill_history.load(), [args.topic] if args.topic else list(TOPICS)))
        return
    if args.student is not None:
        if args.review or args.assumptions:
            raise UsageError("kvlib drill: --student asks the graded questions as they are: no --review or "
                             "--assumptions")
        topics = [args.topic] if args.topic else list(GRADED_TOPICS)
        problems = [student_problem(args.student, t) for t in topics][:args.count]
        print(f"kvlib drill: {len(problems)} question(s) of student {args.student!r}"
              + (f", topic {args.topic}" if args.topic else "")
              + ". Answer with a number; units as asked. Answers are not shown (your graded questions).")
        ask(problems, timings=args.timings, reveal=False)
        return
    count = 5 if args.count is None else args.count
    history, session = _history(args)
    if args.review:
        rng = random.Random(args.seed)          # no --seed: fresh numbers each review
        topics = [args.topic] if args.topic else list(TOPICS)
        known = history or drill_history.load()
        now = time.time()
        picked = drill_history.review_topics(known, topics, count, now=now)
        reasons = drill_history.review_reasons(known, dict.fromkeys(picked), now=now)
        problems = [generate(t, rng.getrandbits(63)) for t in picked]
        print(f"kvlib drill --review: {len(problems)} question(s), in review order: "
              + ", ".join(dict.fromkeys(picked)) + ".")
        for topic, why in reasons.items():        # why each topic was picked
            print(f"  {topic}: {why}")
    else:
        seed = 0 if args.seed is None else args.seed
        problems = problem_set(seed, count, args.topic)
        print(f"kvlib drill: {len(problems)} question(s), seed {seed}"
              + (f", topic {args.topic}" if args.topic else "") + ". Answer with a number; units as asked"
              + ("; where asked, as key=value pairs." if args.assumptions else "."))
    ask(problems, timings=args.timings, assumptions=args.assumptions, history=history, session=session)
    if history is not None and history.attempts:
        print(f"(recorded in {history.path}; kvlib drill --stats shows the table)")


def add_parser(subparsers):
    """Register ``kvlib drill`` on the ``kvlib`` command line."""
    def topic(text):
        if text not in TOPICS:
            raise argparse.ArgumentTypeError(f"unknown topic {text!r} (known: {', '.join(TOPICS)})")
        return text

    def seed(text):
        try:
            return int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None

    p = subparsers.add_parser("drill", help="practice problems with named-slip feedback",
                              description="Seeded KV-cache problems; answers are read from stdin, one per line.")
    p.add_argument("--topic", type=topic, default=None, help="one of: " + ", ".join(TOPICS))
    def student(text):
        if not text.strip():
            raise argparse.ArgumentTypeError("expected a non-empty student id")
        return text.strip()

    p.add_argument("--count", type=_positive_int, default=None, help="how many questions (default 5; with "
                                                                     "--student, all of them)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--seed", type=seed, default=None, help="same seed, same questions (default 0)")
    which.add_argument("--student", type=student, default=None, metavar="ID",
                       help="that learner's own graded drills (ch09), answers not shown, never recorded")
    p.add_argument("--timings", action="store_true", help="print the target and the time of each answer also "
                                                          "for piped answers (a terminal always shows them)")
    p.add_argument("--review", action="store_true", help="ask the topics your history says to review: missed "
                                                         "ones first, mastered ones least")
    p.add_argument("--stats", action="store_true", help="print your history per topic: asked, right, median "
                                                        "time, slips made; then your plans' rubric scores")
    p.add_argument("--no-history", action="store_true", help="do not record this run's answers")
    p.add_argument("--assumptions", action="store_true", help="answer as key=value pairs: the figure and the "
                                                              "assumptions it rests on (utilization, memory, dtype)")
    p.add_argument("--plan", action="store_true", help="size a cluster for a drawn scenario, step by step, timed "
                                                       "and scored against a rubric (--seed picks the scenario)")
    p.set_defaults(func=_cmd_drill)
    return p
