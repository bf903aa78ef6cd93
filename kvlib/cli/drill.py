"""``kvlib drill [--topic T] [--count N] [--seed S | --student ID]``: practice problems with named-slip feedback.

``--student ID`` asks that learner's own graded drills (``kvlib.drills.student_problem``, the
topics of ``GRADED_TOPICS``; with ``--topic``, that one), without showing the answers.
"""

from __future__ import annotations

import argparse

from ..argtypes import positive_int as _positive_int
from ..drills import GRADED_TOPICS, TOPICS, problem_set, run_drill, student_problem


def _cmd_drill(args):
    if args.student is not None:
        topics = [args.topic] if args.topic else list(GRADED_TOPICS)
        problems = [student_problem(args.student, t) for t in topics][:args.count]
        print(f"kvlib drill: {len(problems)} question(s) of student {args.student!r}"
              + (f", topic {args.topic}" if args.topic else "")
              + ". Answer with a number; units as asked. Answers are not shown (your graded questions).")
        run_drill(problems, timings=args.timings, reveal=False)
        return
    seed = 0 if args.seed is None else args.seed
    problems = problem_set(seed, 5 if args.count is None else args.count, args.topic)
    print(f"kvlib drill: {len(problems)} question(s), seed {seed}"
          + (f", topic {args.topic}" if args.topic else "") + ". Answer with a number; units as asked.")
    run_drill(problems, timings=args.timings)


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
                       help="that learner's own graded drills (ch09), answers not shown")
    p.add_argument("--timings", action="store_true", help="print how long each answer took")
    p.set_defaults(func=_cmd_drill)
    return p
