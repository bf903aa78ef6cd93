"""What an executed notebook shows a learner before they open a folded answer.

A folded answer (``<details>…</details>``, as ``kvdisplay.worked_problem`` draws it) is pointless when one of
its figures is in view, unfolded, before the learner opens it. ``leaks(nb)`` reads an *executed* notebook the
way a learner sees it (markdown cells, and every output as markdown, HTML or text: tables, errata, footnotes,
explorer lines, a plot's title and legend, which ``kvdisplay`` puts in the figure's text/plain output, and the
plot's alt text, which it puts in the image's metadata) and returns every answer figure found in view: anywhere
in the fold's section, anywhere in the chapter above it, and in the text of any question of the chapter.

The rules, so a reader can predict what the test sees:

* **A section** is the span from a fold's nearest heading to the next heading of the same or a higher level
  (``#`` lines in markdown cells and markdown outputs, or ``<h1>``-``<h6>``); a heading of a lower level inside it
  opens a subsection, still part of the span.
* **A fold's answer figures** are the numbers inside its ``<details>`` (its ``<summary>`` aside) that its
  question does not state.
* **A number** is digits with an optional decimal part, written with or without thousands separators
  (``1,500``, ``1 500`` with a thin space, ``1\\,500`` in LaTeX): ``1,500`` and ``1500`` are the same figure,
  and so are ``32.0`` and ``32``, ``3.220 GB`` and ``3.22 GB`` (trailing zeros of a decimal part are dropped).
  Digits glued to a word before them, or a whole number glued to a letter after it, are a name, not a figure
  (``H100``, ``8B``, ``Llama-3.1-8B``, ``fp8``, ``ch04``, ``GQA-8``; ``3.22GB`` is a figure), and so are HTML tags
  and their attributes (stripped first) and a number that names a part of the course (``Question 13``,
  ``Exercise 2``, ``chapter 05``, ``§6``).
* **Trivially small numbers are skipped**: a whole number below 10 (a single digit: a count of GPUs, a dtype's
  bytes, a question's number) appears everywhere and says nothing of an answer, and so does a fraction whose
  digits, stripped of leading zeros and the point, are a single digit (``0.5``, ``2.0``). So do the powers of
  two from 16 to 1,048,576 and round thousands (``4,096``, ``8,192``, ``1,000``): they are the contexts, block
  sizes and batch sizes questions are posed in, not results. Everything else counts, ``12`` or ``1.2`` as much as
  ``122,532``.
* **Where an answer figure must not be**: (1) anywhere in the fold's section outside a fold, above or below it
  (a table or explorer above the question, an erratum under the closed fold); (2) anywhere in the chapter
  above the fold, for the figures of its *results* (a worked problem's ``Result: **…**``, else the table it
  answers with, else its bold text) that have three significant digits or more (``327,680``, ``2.68``; an
  ``80`` or a ``15`` recurs in a chapter by chance), and for any figure within 0.1 % of a whole result of four
  digits or more (``451,330`` beside ``451,342``); (3) in the text of any other question of the chapter,
  before or after it (a learner reads Question 2 before opening Question 1's fold), for the same figures. A
  figure the question itself states is its input, never its answer. In (2) and (3) a figure written with
  another unit is another quantity (``192 GB`` of HBM is not a crossover at ``192`` tokens).
* **A question's text** is the text of the same output before its fold, since the previous fold of that output
  (several questions in one output each have their own), or the markdown cell just above when the fold opens
  the output.
* **What is folded**: text between ``<details>`` and ``</details>`` (nesting counted). A code cell's source is not
  read (the learner's own cells hold inputs; generator cells are hidden). An explorer is read from the widget
  state the executed notebook saves (its HTML and Output widgets), as it first draws.

Out of its reach, by these rules: an intermediate figure (a sanity line's, a substitution's) outside its
section, a figure rounded to another precision (``0.45 M`` for ``451,342``), and a figure written in words or
drawn only as pixels (a line's height on a plot): a chapter's author still checks those by reading.
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
#: A fold that holds reference, not an answer (``kvdisplay.course``'s folded terminal output and notation table):
#: what it hides is out of view, but it is no question's answer.
REFERENCE = re.compile(r"<details\b[^>]*\bclass=[\"']reference[\"']", re.I)
# A thousands separator: a comma, a thin or narrow no-break space, or LaTeX's "\," thin space.
_SEP = r"(?:,|\u2009|\u202f|\\,|\{,\})"
# A figure: not glued to a word before it (H100, ch04, fp8, GQA-8, Llama-3.1); a whole number not glued to a
# letter after it either (8B, 70B, 4k), a decimal one may be (3.22GB).
_NUMBER = re.compile(r"(?<![\w.])(?<![A-Za-z]-)"                        # not glued to a word before it
                     r"(\d{1,3}(?:" + _SEP + r"\d{3})+|\d+)"              # the whole part
                     r"(?:(\.\d+)(?![\d.])|(?![\w]|\.\d|-[A-Za-z]))")   # a decimal part, or an unglued end
# A number that names a part of the course, not a figure: "Question 13", "Exercise 2", "chapter 04", "§6".
_NAMED = re.compile(r"(?:\b(?:questions?|exercises?|chapters?|sections?)\s+|§\s*)\d+(?:[.]\d+)?", re.I)
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
    text = _NAMED.sub(" ", text)
    found = {}
    for match in _NUMBER.finditer(text):
        found.setdefault(normalise(match.group(1), match.group(2) or ""), match.group(0))
    return found


def _split_folds(text: str):
    """``(outside, [folded, ...], before_first_fold)``: the text outside every fold, each top-level fold's
    inside (summary removed), and the text before the first fold."""
    outside, folds, _ = _fold_spans(text)
    return " ".join(outside), [fold for fold, _, _ in folds], outside[0] if folds else text


def _fold_spans(text: str):
    """``(outside, [(folded, its question, offset), ...], ends)``: the pieces of text outside every fold
    (``outside[k]`` precedes the k-th fold), each top-level fold's inside (summary removed) with the text just
    before it since the previous fold (its question, when it has one of its own) and where it opens."""
    outside, folds, depth, last, start, opened = [], [], 0, 0, 0, 0
    for match in _DETAILS.finditer(text):
        opening = not match.group(0).startswith("</")
        if opening:
            if depth == 0:
                outside.append(text[last:match.start()])
                start, opened = match.end(), match.start()
            depth += 1
        elif depth:
            depth -= 1
            if depth == 0:
                folds.append((_SUMMARY.sub(" ", text[start:match.start()], count=1), outside[-1], opened))
                last = match.end()
    if depth:   # an unclosed fold runs to the end of the text, as a browser draws it
        folds.append((_SUMMARY.sub(" ", text[start:], count=1), outside[-1], opened))
    else:
        outside.append(text[last:])
    return outside, folds, None


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


_BOLD = re.compile(r"\*\*(.+?)\*\*|<(b|strong)\b[^>]*>(.*?)</\2\s*>", re.S | re.I)


_TABLE_ROW = re.compile(r"^\s*\|.*\|\s*$", re.M)


_RESULT = re.compile(r"Result:\s*\*\*(.+?)\*\*", re.S)


def results(fold: str) -> str:
    """The text of a fold's results: a worked problem's ``Result: **…**``; else the rows of the table it answers
    with; else its bold spans; else the whole fold. (An erratum's figures, a substitution's inputs and the
    sanity line's are the answer's, checked in its section; its results are checked in the whole chapter.)"""
    for found in (_RESULT.findall(fold), _TABLE_ROW.findall(fold),
                  [m.group(1) or m.group(3) for m in _BOLD.finditer(fold)]):
        if found:
            return " ".join(found)
    return fold


#: The unit written after a figure: a figure in one unit is not the same figure in another (192 GB of HBM is
#: not a crossover at 192 tokens; 1.03 FLOP/B is not a 1.03× speed-up).
UNIT = re.compile(r"\s?(×|%|FLOP/B|[kMGT]?B/s|TFLOP/s|[KMGT]i?B|kB|B|tokens?|sequences?|GPUs?|blocks?|ms|s)(?![\w/])")


def units(text: str, markup: bool = True) -> dict[str, set]:
    """``{figure: {unit or None, ...}}`` for every figure of ``text``, as :func:`figures` finds them.

    >>> {figure: sorted(found, key=str) for figure, found in units("192 GB, 192 tokens, 1.03× and 1.030 FLOP/B, 42").items()}
    {'192': ['GB', 'tokens'], '1.03': ['FLOP/B', '×'], '42': [None]}
    """
    if markup:
        text = html.unescape(_TAG.sub(" ", text))
    text = _NAMED.sub(" ", text)
    found = {}
    for match in _NUMBER.finditer(text):
        unit = UNIT.match(text, match.end())
        found.setdefault(normalise(match.group(1), match.group(2) or ""), set()).add(unit and unit.group(1))
    return found


def same_units(these: set, those: set) -> bool:
    """Two writings of a figure can be the same quantity: one has no unit, or they share one."""
    return None in these or None in those or bool(these & those)


def distinctive(figure: str) -> bool:
    """Three significant digits or more (``327,680``, ``2.68``, ``192``): a figure that does not recur in a
    chapter by chance, as ``80`` (GiB on a label), ``15`` (models in a table) or ``0.82`` do.

    >>> [distinctive(f) for f in ("327680", "2.68", "192", "80", "0.82", "15")]
    [True, True, True, False, False, False]
    """
    return len(figure.replace(".", "").strip("0")) >= 3 if "." in figure else len(figure.rstrip("0")) >= 3


def near(figure: str, other: str) -> bool:
    """``other`` is within 0.1 % of a whole ``figure`` of four digits or more: the same pool counted from a
    slightly different memory (451,330 beside 451,342) gives the answer away as well as the figure itself.

    >>> near("451342", "451330"), near("451342", "451000"), near("451342", "450000"), near("2.68", "2.681")
    (True, False, False, False)
    """
    if "." in figure or len(figure) < 4 or figure == other or trivial(other):
        return False
    try:
        return abs(float(other) - int(figure)) <= int(figure) / 1000
    except ValueError:
        return False


@dataclass
class _Fold:
    piece: int           # index in pieces()
    offset: int          # where in that piece's text the fold opens
    question: str        # its question's text
    question_piece: int  # the piece its question is in
    words: str
    answer: set          # every figure of the fold its question does not state, trivial ones left out
    results: set         # the figures of its results among them, three significant digits or more
    result_units: dict   # {figure: units it is written with in the results}
    stated: set          # the figures its question states (inputs, never an answer)


def _folds(items) -> list[_Fold]:
    found, last_markdown, last_markdown_piece = [], "", -1
    for i, piece in enumerate(items):
        if piece.where.endswith(("text/plain", " alt")):
            continue
        for fold, before, offset in _fold_spans(piece.text)[1]:
            if REFERENCE.match(piece.text, offset):
                continue      # a reference folded away (a command's whole output, the notation table): no answer
            own = bool(before.strip())
            question = before if own else last_markdown
            stated = set(figures(question))
            words = " ".join(_TAG.sub(" ", question).split()[:8])
            answer = {f for f in figures(fold) if f not in stated and not trivial(f)}
            result_units = units(results(fold))
            found.append(_Fold(i, offset, question, i if own else last_markdown_piece, words, answer,
                               {f for f in answer & set(result_units) if distinctive(f)}, result_units, stated))
        if piece.where == "markdown":
            last_markdown, last_markdown_piece = piece.text, i
    return found


def leaks(nb) -> list[Leak]:
    """Every answer figure of every fold that is in view, unfolded: anywhere in the fold's section (a table or
    explorer above it, an erratum under it), anywhere in the chapter before it (its results), and in the text of
    any question of the chapter (a later question read before the fold is opened)."""
    items = pieces(nb)
    opened = [_headings(p.text) if p.where == "markdown" or p.where.endswith(("markdown", "html")) else []
              for p in items]
    folds = _folds(items)
    outside = [_split_folds(p.text)[0] for p in items]
    markup = [not p.where.endswith(("text/plain", "stream", "error", " alt")) for p in items]
    shown = [figures(text, flag) for text, flag in zip(outside, markup)]
    shown_units = [units(text, flag) for text, flag in zip(outside, markup)]
    found = {}

    def seen(fold, figure_set, j, written_in, where, title, close=False, in_units=None):
        for figure, written in written_in.items():
            if close and figure in fold.stated:
                continue
            if figure in figure_set or close and any(near(result, figure) for result in figure_set):
                if close and figure in fold.result_units and in_units is not None and \
                        not same_units(fold.result_units[figure], in_units.get(figure, {None})):
                    continue
                found.setdefault((figure, fold.words, items[j].cell), Leak(
                    figure, written, fold.words, items[fold.piece].cell, items[j].cell, where, title))

    for fold in folds:
        title, first, end = _section(opened, fold.piece, fold.offset)
        for j in range(first, end):                               # its section, above and below
            seen(fold, fold.answer, j, shown[j], items[j].where, title)
            seen(fold, fold.results, j, shown[j], items[j].where, title, close=True, in_units=shown_units[j])
        for j in range(0, first):                                 # the chapter before its section
            seen(fold, fold.results, j, shown[j], items[j].where, "before its section", close=True,
                 in_units=shown_units[j])
        for other in folds:                                       # every question's text
            if other is not fold and other.question_piece >= 0:
                seen(fold, fold.results, other.question_piece, figures(other.question),
                     f"the text of question {other.words!r}", "a question", close=True,
                     in_units=units(other.question))
    return list(found.values())
