"""What the tests accept as a plot's alt text: the figure described the way ``kvdisplay.alt_text.figure_alt``
describes a panel (the kind of plot and what it plots against what, or its bars), not a word like "plot"
or "figure", never nothing. Read by the executed notebooks' test, the site's and the browser's."""

from __future__ import annotations

import html
import re

DESCRIBED = re.compile(r"(Line plot|Scatter plot|Bar chart|Horizontal bar chart) of .+?( against |: \d+ bars?\.)")
_IMG = re.compile(r"<img\b[^>]*>", re.I)
_ALT = re.compile(r"""\balt=(["'])(.*?)\1""", re.S)


def describes(alt: str | None) -> bool:
    """``alt`` says what a plot shows (see the module doc).

    >>> describes("Line plot of memory (GB) against batch (sequences). cache rises."), describes("plot")
    (True, False)
    """
    return bool(alt) and DESCRIBED.search(alt) is not None


def img_alts(markup: str) -> list[str | None]:
    """The alt text of every ``<img>`` in ``markup`` (entities decoded), None where a tag has none.

    >>> img_alts("<p><img src='a.png' alt='A &amp; B'><img src=b.png></p>")
    ['A & B', None]
    """
    alts = []
    for tag in _IMG.findall(markup):
        match = _ALT.search(tag)
        alts.append(html.unescape(match.group(2)) if match else None)
    return alts
