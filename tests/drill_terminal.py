"""What the drill CLI's tests share: a terminal to type into, a history file holding two plans (the history file
fixture is tests/conftest.py's)."""

from __future__ import annotations

import io


class Terminal(io.StringIO):
    """Standard input that says it is a terminal: the drills record answers typed at one only."""

    def isatty(self):
        return True


# two plans, written as the file holds them; 1,800,000,000 s is 2027-01-15 08:00 UTC (date -u -d @1800000000),
# 90,000 s (a day and an hour) later 2027-01-16 09:00 UTC
TWO_PLANS = {"version": 1, "sessions": [{"id": "a", "started": 1_800_000_000.0, "source": "cli"},
                                        {"id": "b", "started": 1_800_090_000.0, "source": "notebook"}],
             "attempts": [{"session": "a", "topic": "pool", "correct": True, "seconds": 20.0, "slips": [],
                           "slip": None, "at": 1_800_000_000.0, "target": 35},
                          {"session": "b", "topic": "plan", "correct": False, "seconds": 700.0,
                           "slips": ["gb_for_gib"], "slip": "gb_for_gib", "at": 1_800_090_000.0, "target": 600,
                           "scenario": "scenario 3: Qwen/Qwen2.5-7B, 8 x H200 (TP 1), 50 requests/s",
                           "rubric": {"assumptions": 0.6667, "steps": 0.4, "binding": 0.0, "sanity": 1.0}},
                          {"session": "a", "topic": "plan", "correct": False, "seconds": 500.0, "slips": [],
                           "slip": None, "at": 1_800_000_100.0, "target": 600,
                           "rubric": {"assumptions": 1.0, "steps": 0.8, "binding": 1.0, "sanity": 0.0}}]}
