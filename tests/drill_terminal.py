"""What the drill CLI's tests share: a terminal to type into (the history file fixture is tests/conftest.py's)."""

from __future__ import annotations

import io


class Terminal(io.StringIO):
    """Standard input that says it is a terminal: the drills record answers typed at one only."""

    def isatty(self):
        return True
