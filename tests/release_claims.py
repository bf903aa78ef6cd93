"""What an executed chapter says an engine does by default, and whether it says in which release.

An engine's defaults move with its releases (vLLM's block: 16 tokens through 0.33, 64 from 0.34; its
``gpu_memory_utilization``: 0.90, 0.92, then 1.0 with the measured pool), so a figure stated as "the default"
names the release it holds for. ``unreleased_defaults(nb)`` reads an *executed* notebook as the learner sees
it (``leaks.pieces``: markdown cells and every output's text, folded answers and explorers included) and
returns each statement of an engine default that holds a figure and names no release.

The rules, so a reader can predict what the test sees:

* **A statement** is a clause of prose (ended by ``.``, ``?`` or ``!`` before a capital, or by ``;``), a list
  item, or a table row, each cell read after its header cell (a table of releases in columns: each header
  'release 0.N'). Fenced code (a log quoted as it was printed) is not
  prose and is skipped; inline code is read.
* **It states an engine default** when it says *default* (``default``, ``defaults``, ``by default``; not inside
  an identifier such as ``get_batch_defaults``), names an engine or one of its settings (``ENGINE_WORDS``) and
  holds a figure: a number that is not a release (nor a chapter, section, question or exercise number, nor
  glued to a letter as in ``gpt-oss-20b`` or ``H100``).
* **It names a release** when it holds a release number: ``0.N`` or ``0.N.M`` (``N`` below 100) after a release
  word (vLLM, SGLang, release(s), through, from, since, before, until, up to, to, and, or, in, between, a
  dash) or written ``vN.M``. ``0.92`` after "utilization" is a figure, not a release; ``0.20`` after
  "from" is a release.

So "16-token blocks by default" fails and "16-token blocks, vLLM's default through 0.33" passes.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

from leaks import pieces

_FENCE = re.compile(r"^```.*?^```", re.S | re.M)
_BREAK = re.compile(r"<br\s*/?>|</?(?:p|div|li|tr|ul|ol|table|h[1-6]|details|summary)\b[^>]*>", re.I)
_TAG = re.compile(r"<[^>]*>", re.S)
_DEFAULT = re.compile(r"(?<![\w-])defaults?(?![\w-])", re.I)
ENGINE_WORDS = re.compile(
    r"vLLM|SGLang|\bengine\b|\bblocks?\b|-token block|\bpages?\b|page.size|block.size|utili[sz]ation|"
    r"mem.fraction.static|max_num_seqs|max_num_batched_tokens|swa.full.tokens.ratio|hicache|--[a-z][a-z-]+",
    re.I)
_RELEASE_WORDS = (r"vLLM|SGLang|releases?|through|from|since|before|until|up to|to|and|or|in|between|after|"
                  r"by|of|as of|–|-")
RELEASE = re.compile(r"(?:\bv\d{1,2}\.\d{1,3}(?:\.\d{1,3})?(?:\.post\d+)?"
                     r"|(?:(?<![\w.])(?:" + _RELEASE_WORDS + r")\s{1,3})0\.\d{1,2}(?:\.\d{1,3})?(?:\.post\d+)?"
                     r"(?![\d.]\d))", re.I)
_FIGURE = re.compile(r"(?<![\w.])(?<![A-Za-z]-)\d[\d,]*(?:\.\d+)?(?![A-Za-z\d])")   # not a name: 20b, H100
_REFERENCE = re.compile(r"(?:\b(?:chapter|section|Question|Exercise|step)\s|§)\s?\d+", re.I)   # names, not figures
_SENTENCE_END = re.compile(r"(?<=[.?!])\s+(?=[A-Z(`*“\"])|(?<=;)\s+")


@dataclass(frozen=True)
class Claim:
    cell: int
    where: str
    text: str

    def __str__(self):
        return f"cell {self.cell} {self.where}: {self.text!r}"


def _plain(text: str, markup: bool) -> str:
    text = _FENCE.sub(" ", text)
    if markup:
        text = html.unescape(_TAG.sub(" ", _BREAK.sub("\n", text)))
    return text


def _row(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _table_rows(lines: list[str]) -> list[str]:
    """Each body row as one statement, every cell after its header cell. A header of release numbers under a
    first header cell that names vLLM, SGLang or a release (a table by release, in columns) reads 'release 0.8.5'."""
    header = _row(lines[0])
    by_release = bool(re.search(r"vLLM|SGLang|release", header[0], re.I))
    names = [f"release {h}" if by_release and re.fullmatch(r"v?0\.\d{1,2}(?:\.\d{1,3})?", h) else h for h in header]
    return [" | ".join(f"{h} {c}" for h, c in zip(names, _row(line)))
            for line in lines[2:] if not set(line) <= set("|-: ")]


_ITEM = re.compile(r"^\s*(?:[*+-]|\d+\.)\s")


def _paragraphs(block: str) -> list[str]:
    """A block's lines joined into paragraphs: a list item or a heading starts a new one, a wrapped line does not."""
    out = []
    for line in block.splitlines():
        if not out or _ITEM.match(line) or line.lstrip().startswith("#"):
            out.append(line.strip())
        else:
            out[-1] += " " + line.strip()
    return out


def statements(text: str, markup: bool = True) -> list[str]:
    """The statements of one piece of text: table rows (cells after their headers), list items, sentences.

    >>> statements("| a | b |\\n|---|---|\\n| 1 | 2 |\\n\\nOne. Two;\\nthree")
    ['a 1 | b 2', 'One.', 'Two;', 'three']
    """
    out = []
    for block in re.split(r"\n\s*\n", _plain(text, markup)):
        lines = block.strip().splitlines()
        if len(lines) > 1 and all(line.strip().startswith("|") for line in lines):
            out += _table_rows(lines)
            continue
        for paragraph in _paragraphs(block):
            for part in _SENTENCE_END.split(paragraph):
                part = " ".join(part.split())
                if part:
                    out.append(part)
    return out


def names_release(statement: str) -> bool:
    """Whether a statement holds a release number.

    >>> [names_release(s) for s in ("vLLM's default through 0.33", "utilization 0.92 by default", "from v0.21.0")]
    [True, False, True]
    """
    return bool(RELEASE.search(statement))


def states_default(statement: str) -> bool:
    """Whether a statement gives an engine's default with a figure (a number that is not a release).

    >>> [states_default(s) for s in ("16-token blocks by default", "the default seed is 4", "vLLM's default")]
    [True, False, False]
    """
    if not (_DEFAULT.search(statement) and ENGINE_WORDS.search(statement)):
        return False
    return bool(_FIGURE.search(_REFERENCE.sub(" ", RELEASE.sub(" ", statement))))


def unreleased_defaults(nb) -> list[Claim]:
    """Every statement of an engine default, with a figure, that names no release (each once)."""
    items = pieces(nb)
    output = lambda piece: piece.where.rsplit(" ", 1)[0]        # noqa: E731 -- 'output 0' of 'output 0 text/html'
    rich = {(p.cell, output(p)) for p in items if not p.where.endswith("text/plain")}
    found = {}
    for piece in items:
        if piece.where.endswith("text/plain") and (piece.cell, output(piece)) in rich:
            continue            # the same output's markdown or HTML says the same
        markup = not piece.where.endswith(("text/plain", "stream", "error"))
        for statement in statements(piece.text, markup):
            if states_default(statement) and not names_release(statement):
                found.setdefault(statement, Claim(piece.cell, piece.where, statement))
    return list(found.values())
