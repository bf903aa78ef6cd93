"""ch00 shows a newcomer only what a newcomer can read: the engine's parts, latency and headroom come later.

Chapter 00 runs ``kvlib`` from a terminal before any chapter has taught a pool, a latency target or a traffic
spike. What it shows open (its markdown outside ``<details>``, and the output of every ``kd.terminal`` call made
without ``summary=``) must not print the lines chapters 04 and 07 teach; those outputs are folded under the
chapter to read first. The notation table stays whole, and folded.

The open commands are run for real, in process, through kvlib's CLI, so a CLI that starts printing such a line in
its short form fails here too.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import re
from pathlib import Path

from kvlib.cli import main as kvlib_main

SOURCE = Path(__file__).resolve().parents[1] / "course" / "source" / "ch00_orientation" / "ch00_orientation.ipynb"
#: Lines a later chapter teaches: vLLM's profiled parts of the pool (chapter 04), latency and headroom (chapter 07).
LATER = re.compile(r"torch peak|non-torch|CUDA graphs?|\bITL\b|spike|[x×]\s?1\.3\b", re.I)
FOLD = re.compile(r"<details\b[^>]*>.*?</details>", re.S)


def _cells():
    notebook = json.loads(SOURCE.read_text())
    for cell in notebook["cells"]:
        yield cell["cell_type"], "".join(cell["source"])


def _terminal_calls(code: str):
    """(args, folded) of each ``kd.terminal(...)`` call in ``code`` whose arguments are literal strings."""
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "terminal":
            args = [ast.literal_eval(a) for a in node.args]
            yield args, any(k.arg == "summary" for k in node.keywords)


def _printed(args: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = kvlib_main(args)
    assert code == 0, f"kvlib {' '.join(args)} exited {code} here: a command shown open must run from the checkout"
    return out.getvalue()


def _before_notation():
    """The cells of ch00 before its notation section (the one place the whole table belongs)."""
    for kind, source in _cells():
        if kind == "markdown" and re.search(r"^##\s+\d+\.\s+Notation", source, re.M):
            return
        yield kind, source


def test_open_text_of_ch00_names_nothing_taught_later():
    found = []
    for kind, source in _before_notation():
        if kind == "markdown":
            found += [f"markdown: {m.group(0)!r}" for m in LATER.finditer(FOLD.sub("", source))]
    assert not found, found


def test_open_kvlib_commands_of_ch00_print_nothing_taught_later():
    open_calls = folded_calls = 0
    found = []
    for kind, source in _before_notation():
        if kind != "code" or "terminal(" not in source:
            continue
        for args, folded in _terminal_calls(source):
            if folded:
                folded_calls += 1
                continue
            open_calls += 1
            if "drill" in args or "vllm-log" in args:   # stdin / a file the cell writes: checked by their topic
                found += [f"kvlib {args[0]} is shown open"] if "vllm-log" in args else []   # chapter 08's log
                continue
            found += [f"kvlib {' '.join(args)}: {m.group(0)!r}" for m in LATER.finditer(_printed(args))]
    assert not found, found
    assert open_calls >= 1 and folded_calls >= 1, (open_calls, folded_calls)   # some shown open, some folded


def test_the_full_commands_do_print_later_lines():
    # the folded outputs are the ones that need a later chapter: the pattern above does see them
    info = _printed(["info", "qwen2.5-7b", "--context", "32768", "--gpu", "l40s", "--vllm-version", "0.32.0"])
    plan = _printed(["plan", "qwen2.5-7b", "--users", "300", "--context", "16384", "--itl-ms", "40", "--gpu", "l40s",
                     "--gpus-per-node", "4", "--tp", "1", "--vllm-version", "0.32.0"])
    assert {"torch peak", "non-torch", "CUDA graphs"} <= {m.group(0) for m in LATER.finditer(info)}
    assert {"ITL", "x1.3"} <= {m.group(0) for m in LATER.finditer(plan)}


def test_ch00_keeps_the_whole_notation_table_folded():
    calls = [source for kind, source in _cells() if kind == "code" and "notation_table(" in source]
    assert len(calls) == 1
    call = next(n for n in ast.walk(ast.parse(calls[0])) if isinstance(n, ast.Call)
                and getattr(n.func, "attr", "") == "notation_table")
    assert ast.unparse(call.args[0]) == "kv.notation.SYMBOLS"                      # whole: every row
    assert any(k.arg == "summary" for k in call.keywords)                           # folded
