"""What an executed notebook shows a learner before they open a folded answer.

A folded answer (``<details>…</details>``, as ``kvdisplay.worked_problem`` draws it) is pointless when one of
its figures is in view, unfolded, in the same section. ``leaks(nb)`` reads an *executed* notebook the way a
learner sees it (markdown cells, and every output as markdown, HTML or text: tables, errata, footnotes,
explorer lines, a plot's title and legend, which ``kvdisplay`` puts in the figure's text/plain output, and the
plot's alt text, which it puts in the image's metadata) and returns every answer figure found outside a fold
in its section.

The rules, so a reader can predict what the test sees:

* **A section** is the span from a fold's nearest heading to the next heading of the same or a higher level
  (``#`` lines in markdown cells and markdown outputs, or ``<h1>``-``<h6>``); a heading of a lower level inside it
  opens a subsection, still part of the span.
* **A fold's answer figures** are the numbers inside its ``<details>`` (its ``<summary>`` aside) that its
  question does not state. The question is the text of the same output before the fold, or, when a fold opens
  an output or cell, the markdown cell just above it.
* **A number** is digits with an optional decimal part, written with or without thousands separators
  (``1,500``, ``1 500`` with a thin space, ``1\\,500`` in LaTeX): ``1,500`` and ``1500`` are the same figure,
  and so are ``32.0`` and ``32``, ``3.220 GB`` and ``3.22 GB`` (trailing zeros of a decimal part are dropped).
  Digits glued to a word before them, or a whole number glued to a letter after it, are a name, not a figure
  (``H100``, ``8B``, ``Llama-3.1-8B``, ``fp8``, ``ch04``, ``GQA-8``; ``3.22GB`` is a figure), and so are HTML tags
  and their attributes (stripped first).
* **Trivially small numbers are skipped**: a whole number below 10 (a single digit: a count of GPUs, a dtype's
  bytes, a question's number) appears everywhere and says nothing of an answer, and so does a fraction whose
  digits, stripped of leading zeros and the point, are a single digit (``0.5``, ``2.0``). So do the powers of
  two from 16 to 1,048,576 and round thousands (``4,096``, ``8,192``, ``1,000``): they are the contexts, block
  sizes and batch sizes questions are posed in, not results. Everything else counts, ``12`` or ``1.2`` as much as
  ``122,532``.
* **What is folded**: text between ``<details>`` and ``</details>`` (nesting counted). A code cell's source is not
  read (the learner's own cells hold inputs; generator cells are hidden). An explorer is read from the widget
  state the executed notebook saves (its HTML and Output widgets), as it first draws.

Out of its reach, by these rules: a figure in another section (a teaching table a section above a question is
not seen, so a chapter's author still checks that by reading), and a figure written in words or drawn only as
pixels (a line's height on a plot).
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

_TAG = re.compile(r"<[^>]*>", re.S)
_FENCE = re.compile(r"^```.*?^```", re.S | re.M)
_MD_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$", re.M)
_HTML_HEADING = re.compile(r"<h([1-6])\b[^>]*>(.*?)</h\1>", re.S | re.I)
_DETAILS = re.compile(r"<details\b[^>]*>|</details\s*>", re.I)
_SUMMARY = re.compile(r"<summary\b[^>]*>.*?</summary\s*>", re.S | re.I)
# A thousands separator: a comma, a thin or narrow no-break space, or LaTeX's "\," thin space.
_SEP = r"(?:,|\u2009|\u202f|\\,|\{,\})"
# A figure: not glued to a word before it (H100, ch04, fp8, GQA-8, Llama-3.1); a whole number not glued to a
# letter after it either (8B, 70B, 4k), a decimal one may be (3.22GB).
_NUMBER = re.compile(r"(?<![\w.])(?<![A-Za-z]-)"                        # not glued to a word before it
                     r"(\d{1,3}(?:" + _SEP + r"\d{3})+|\d+)"              # the whole part
                     r"(?:(\.\d+)(?![\d.])|(?![\w]|\.\d|-[A-Za-z]))")   # a decimal part, or an unglued end
MIMES = ("text/markdown", "text/html", "text/latex", "text/plain")
IMAGES = ("image/png", "image/jpeg", "image/svg+xml")
ROUND_INPUTS = {str(2**i) for i in range(4, 21)}


def normalise(whole: str, fraction: str = "") -> str:
    """One spelling per figure: no thousands separators, no trailing zeros after the point.

    >>> normalise("1,500"), normalise("1\\\\,500"), normalise("3", ".220"), normalise("32", ".0")
    ('1500', '1500', '3.22', '32')
    """
    digits = re.sub(_SEP, "", whole).lstrip("0") or "0"
    fraction = fraction.rstrip("0").rstrip(".") if fraction else ""
    return digits + fraction


def trivial(figure: str) -> bool:
    """Too common to betray an answer: see the module's rules.

    >>> [trivial(f) for f in ("9", "13", "0.5", "1.2", "4096", "4000", "122532", "1500")]
    [True, False, True, False, True, True, False, False]
    """
    whole, _, fraction = figure.partition(".")
    if not fraction:
        number = int(whole)
        return number < 10 or whole in ROUND_INPUTS or (number % 1000 == 0)
    return len((whole + fraction).strip("0")) <= 1


def figures(text: str, markup: bool = True) -> dict[str, str]:
    """``{figure: as written}`` for every figure in ``text``, trivial ones kept; ``markup``: markdown or HTML,
    whose tags are stripped first (plain text and streams keep their ``<`` ``>``).

    >>> sorted(figures("<b style='width:42%'>1,500</b> tokens, 3.220 GB on 8 × H100 (Llama-3.1-8B)"))
    ['1500', '3.22', '8']
    """
    if markup:
        text = html.unescape(_TAG.sub(" ", text))
    found = {}
    for match in _NUMBER.finditer(text):
        found.setdefault(normalise(match.group(1), match.group(2) or ""), match.group(0))
    return found


def _split_folds(text: str):
    """``(outside, [folded, ...], before_first_fold)``: the text outside every fold, each top-level fold's
    inside (summary removed), and the text before the first fold."""
    outside, folds, depth, last, start, before = [], [], 0, 0, 0, None
    for match in _DETAILS.finditer(text):
        opening = not match.group(0).startswith("</")
        if opening:
            if depth == 0:
                outside.append(text[last:match.start()])
                if before is None:
                    before = text[:match.start()]
                start = match.end()
            depth += 1
        elif depth:
            depth -= 1
            if depth == 0:
                folds.append(_SUMMARY.sub(" ", text[start:match.start()], count=1))
                last = match.end()
    if depth:   # an unclosed fold runs to the end of the text, as a browser draws it
        folds.append(_SUMMARY.sub(" ", text[start:], count=1))
    else:
        outside.append(text[last:])
    return " ".join(outside), folds, text if before is None else before


def _headings(text: str):
    """``[(position, level, title)]`` of the headings a piece of markdown or HTML opens, in order."""
    unfenced = _FENCE.sub(lambda m: " " * len(m.group(0)), text)
    found = [(m.start(), len(m.group(1)), m.group(2).strip()) for m in _MD_HEADING.finditer(unfenced)]
    found += [(m.start(), int(m.group(1)), _TAG.sub("", m.group(2)).strip()) for m in _HTML_HEADING.finditer(text)]
    return sorted(found)


@dataclass
class Piece:
    """One thing the learner reads: a markdown cell or one output's richest text, where it is."""
    cell: int
    where: str
    text: str


@dataclass(frozen=True)
class Leak:
    figure: str        # normalised
    written: str       # as the unfolded text writes it
    fold: str          # the fold's first words (its question)
    fold_cell: int
    cell: int          # where the figure is in view
    where: str
    section: str

    def __str__(self):
        return (f"{self.written!r} (answer of {self.fold!r}, cell {self.fold_cell}) in view in cell {self.cell} "
                f"{self.where}, section {self.section!r}")


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def _widget_text(states: dict, model_id: str, seen=None) -> str:
    """The text a widget (an explorer) shows as saved in the notebook: its HTML and labels, its Output widgets'
    outputs, and its children's, depth first; the controls' own values are inputs and are left out."""
    seen = set() if seen is None else seen
    if model_id in seen or model_id not in states:
        return ""
    seen.add(model_id)
    state = states[model_id].get("state", {})
    parts = []
    if states[model_id].get("model_name") in ("HTMLModel", "HTMLMathModel", "LabelModel"):
        parts.append(str(state.get("value", "")))
    for output in state.get("outputs", []):
        parts += [text for _, text in _output_text(output, states)]
    for child in state.get("children", []):
        parts.append(_widget_text(states, str(child).removeprefix("IPY_MODEL_"), seen))
    return "\n".join(p for p in parts if p)


def _output_text(output, states=None) -> list[tuple[str, str]]:
    if output.get("output_type") == "stream":
        return [("stream", output.get("text", ""))]
    if output.get("output_type") == "error":
        return [("error", f"{output.get('ename', '')}: {output.get('evalue', '')}")]
    data = output.get("data", {})
    if states is not None and isinstance(data.get(WIDGET_VIEW), dict):
        return [("widget", _widget_text(states, data[WIDGET_VIEW].get("model_id", "")))]
    texts = [(mime, "".join(data[mime]) if isinstance(data[mime], list) else data[mime])
             for mime in MIMES if isinstance(data.get(mime), (str, list))]
    return texts + [(f"{mime} alt", alt) for mime, alt in image_alts(output)]


def image_alts(output) -> list[tuple[str, str]]:
    """``[(image MIME type, its alt text)]`` of an output: what a screen reader reads for a plot
    (kvdisplay puts it in the output's metadata, ``{"image/png": {"alt": ...}}``)."""
    metadata = output.get("metadata") or {}
    return [(mime, metadata[mime]["alt"]) for mime in IMAGES
            if mime in output.get("data", {}) and isinstance((metadata.get(mime) or {}).get("alt"), str)]


def pieces(nb) -> list[Piece]:
    """Everything the learner reads in an executed notebook, in order: markdown cells, then each code
    cell's outputs (every text MIME type of each; a front end shows one, the test reads them all)."""
    states = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    out = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            out.append(Piece(index, "markdown", cell.source))
        elif cell.cell_type == "code":
            for number, output in enumerate(cell.get("outputs", [])):
                for mime, text in _output_text(output, states):
                    out.append(Piece(index, f"output {number} {mime}", text))
    return out


def _section(opened, i: int, offset: int):
    """``(title, first, end)``: the section that position ``offset`` of piece ``i`` is in, as piece indices:
    from its nearest heading's piece up to the piece of the next heading of the same or a higher level."""
    flat = [(j, pos, level, title) for j, heads in enumerate(opened) for pos, level, title in heads]
    before = [h for h in flat if (h[0], h[1]) < (i, offset)]
    if not before:
        return "(before the first heading)", 0, len(opened)
    first, pos, level, title = before[-1]
    end = next((j for j, p, lv, _ in flat if (j, p) > (first, pos) and lv <= level), len(opened))
    return title, first, max(end, i + 1)


def leaks(nb) -> list[Leak]:
    """Every answer figure of every fold that is in view, unfolded, in the fold's section."""
    items = pieces(nb)
    opened = [_headings(p.text) if p.where == "markdown" or p.where.endswith(("markdown", "html")) else []
              for p in items]
    found, last_markdown = {}, ""
    for i, piece in enumerate(items):
        if piece.where.endswith(("text/plain", " alt")):
            continue
        _, inside, before = _split_folds(piece.text)
        if inside:
            question = before if before.strip() else last_markdown
            stated = set(figures(question))
            words = " ".join(_TAG.sub(" ", question).split()[:8])
            title, first, end = _section(opened, i, len(before))
            for fold in inside:
                answer = {f for f in figures(fold) if f not in stated and not trivial(f)}
                for j in range(first, end):
                    outside = _split_folds(items[j].text)[0]
                    markup = not items[j].where.endswith(("text/plain", "stream", "error", " alt"))
                    for figure, written in figures(outside, markup).items():
                        if figure in answer:
                            found.setdefault((figure, words, items[j].cell), Leak(
                                figure, written, words, piece.cell, items[j].cell, items[j].where, title))
        if piece.where == "markdown":
            last_markdown = piece.text
    return list(found.values())
