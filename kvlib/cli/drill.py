"""``kvlib drill [--topic T] [--count N] [--seed S]``: practice problems with named-slip feedback."""

from __future__ import annotations

import argparse

from ..argtypes import positive_int as _positive_int
from ..drills import TOPICS, problem_set, run_drill


def _cmd_drill(args):
    problems = problem_set(args.seed, args.count, args.topic)
    print(f"kvlib drill: {len(problems)} question(s), seed {args.seed}"
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
    p.add_argument("--count", type=_positive_int, default=5)
    p.add_argument("--seed", type=seed, default=0, help="same seed, same questions (default 0)")
    p.add_argument("--timings", action="store_true", help="print how long each answer took")
    p.set_defaults(func=_cmd_drill)
    return p
