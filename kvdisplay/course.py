"""How the course itself is shown: its notation table, and kvlib's command line run for real.

``notation_table`` renders the rows of ``kvlib.notation`` (the one table every chapter and
kvlib's docstrings point to); ``terminal`` runs ``python -m kvlib ...`` with the notebook's own
interpreter and shows the command and what it printed, so the text cannot drift from the tool.

Used in: ch00_orientation, ch01_kv_formula.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import textwrap

from IPython.display import Markdown

from .text import table


def _code(text: str) -> str:
    return f"`{text}`" if text else ""


def notation_table(symbols, summary: str | None = None) -> Markdown:
    """The notation table: letter (as LaTeX), name in code, kvlib's other names, where a config or vLLM gives it.

    ``symbols`` are ``kvlib.notation.Symbol`` rows (``kv.notation.SYMBOLS``). With ``summary`` the table is
    folded under that line (the whole table, kept as a reference a learner opens when a letter is new).

    >>> import kvlib.notation as n
    >>> print(notation_table([n.by_letter("K")]).data.splitlines()[2])
    | $K$ | `num_kv_heads` | `kv_heads` | `num_key_value_heads` | key/value heads per layer; a config without the field (or null) means K = H | count |
    >>> folded = notation_table(n.SYMBOLS, summary="Every letter").data
    >>> folded.startswith('<details class="reference"><summary>Every letter</summary>') and folded.endswith("</details>")
    True

    Used in: ch00_orientation, ch01_kv_formula, ch03_mla.
    """  # noqa: E501
    rows = []
    for s in symbols:
        where = [_code(f) for f in s.config_fields] + [f"vLLM `{e}`" for e in s.engine_settings]
        rows.append([f"${s.latex}$", _code(s.name), ", ".join(_code(k) for k in s.kvlib_keywords if k != s.name)
                     or "the same", ", ".join(where) or "—", s.meaning, s.unit])
    shown = table(["letter", "name in code", "kvlib also says", "config field or vLLM setting", "meaning", "unit"],
                  rows)
    if summary is None:
        return shown
    return Markdown(f'<details class="reference"><summary>{summary}</summary>\n\n{shown.data}\n\n</details>')


def terminal(*args: str, cwd=None, stdin: str | None = None, timeout: float = 60,
             summary: str | None = None) -> Markdown:
    """Run ``kvlib ARGS`` (as ``python -m kvlib``) and show ``$ kvlib ARGS`` and its output as a code block.

    With ``summary`` the block is folded under that line: output whose lines a later chapter teaches, kept as a
    reference a learner opens after that chapter rather than read before it.

    ``stdin`` is typed in (``kvlib drill`` reads answers from it) and shown after each prompt it
    answers only as far as the program echoes it. A non-zero exit raises RuntimeError with what
    the command printed, so a chapter that shows the CLI fails loudly when the CLI breaks.

    >>> print(terminal("gpus").data.splitlines()[1])
    $ kvlib gpus
    >>> terminal("gpus", summary="GPUs (chapter 04)").data.startswith('<details class="reference"><summary>GPUs')
    True

    Used in: ch00_orientation.
    """
    run = subprocess.run([sys.executable, "-m", "kvlib", *args], input=stdin, capture_output=True, text=True,
                         cwd=cwd, timeout=timeout)
    command = "kvlib " + " ".join(shlex.quote(a) for a in args)
    if run.returncode != 0:
        raise RuntimeError(f"`{command}` exited {run.returncode}: {run.stderr.strip() or run.stdout.strip()}")
    shown = f"```\n$ {command}\n{wrap_output(run.stdout.rstrip())}\n```"
    if summary is None:
        return Markdown(shown)
    return Markdown(f'<details class="reference"><summary>{summary}</summary>\n\n{shown}\n\n</details>')


#: The characters of a code block JupyterLab shows at 1,400 px before it wraps a line, anywhere in a word.
TERMINAL_WIDTH = 110


def wrap_output(text: str, width: int = TERMINAL_WIDTH) -> str:
    """``text`` with each line over ``width`` characters broken between words, its continuation lines indented
    to the line's value column (where a run of two or more spaces ends), so a browser never breaks a word.

    >>> print(wrap_output("weights    15.23 GB (14.19 GiB) as stored, embedding 1.02, lm_head 1.02", width=40))
    weights    15.23 GB (14.19 GiB) as
               stored, embedding 1.02,
               lm_head 1.02
    """
    out = []
    for line in text.splitlines():
        if len(line) <= width:
            out.append(line)
            continue
        column = re.match(r"\s*\S.*?\s{2,}", line)
        indent = " " * (column.end() if column and column.end() < width // 2 else len(line) - len(line.lstrip()))
        out += textwrap.wrap(line, width=width, subsequent_indent=indent, break_long_words=False,
                             break_on_hyphens=False, drop_whitespace=True) or [line]
    return "\n".join(out)
