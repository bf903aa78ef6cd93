"""What every ``kvlib`` subcommand shares: the one-line usage error and the two-column table."""

from __future__ import annotations

import argparse

__all__ = ["UsageError", "Parser", "print_table"]


class UsageError(ValueError):
    """Bad command-line input; printed as one line, exit 2."""


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, not argparse's usage block
        raise UsageError(f"{self.prog}: {message}")


def print_table(rows, indent: str = ""):
    """(label, value) rows, labels padded to one width."""
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{indent}{key:<{width}}  {value}")
