"""nbgrader preprocessors for the feedback the grading CLI writes (``grade-class --feedback``)."""

from __future__ import annotations

import re

from nbgrader.preprocessors import ClearHiddenTests, NbGraderPreprocessor
from nbgrader.utils import is_grade


class ClearHiddenTestsInTestCells(ClearHiddenTests):
    """nbgrader's ClearHiddenTests on test (grade) cells only.

    The stock preprocessor reads every cell and raises when a student's own
    cell mentions "BEGIN HIDDEN TESTS" (an unmatched marker, or one outside a
    grade cell), which would cost that student their feedback. Hidden tests
    live only in test cells, which autograde restored from the instructor's
    source, so those are the cells to clear.
    """

    def preprocess_cell(self, cell, resources, cell_index):
        if not is_grade(cell):
            return cell, resources
        return super().preprocess_cell(cell, resources, cell_index)


# --- active content ------------------------------------------------------------------------------
# A student's outputs end up in the feedback HTML an instructor opens, possibly from a Jupyter
# server holding their token: nothing in it may run. nbconvert's own sanitize_html escapes every
# tag outside a short list (so the chapter's tables and worked problems would show as raw <p>
# text); this keeps ordinary markup and drops what can execute: <script>, event handlers,
# javascript: links, frames and plugins, JavaScript and widget outputs, inline SVG.
_TAGS = frozenset(
    "a abbr b blockquote br caption code col colgroup dd del details div dl dt em figcaption figure "
    "h1 h2 h3 h4 h5 h6 hr i img ins kbd li mark ol p pre q s samp small span strong sub summary sup "
    "table tbody td tfoot th thead tr tt u ul var".split())
_ATTRIBUTES = frozenset("class id title style align colspan rowspan alt width height open".split())
# Maths is shown as MathML (made from the TeX here, ``math_to_mathml``): presentation elements only
# (no <maction>, no <annotation-xml>, which can carry HTML), with their layout attributes.
_MATHML_TAGS = frozenset(
    "math mrow mi mo mn ms mtext mspace msup msub msubsup mfrac msqrt mroot mover munder munderover "
    "mtable mtr mtd mstyle mpadded mphantom menclose merror semantics annotation".split())
_MATHML_ATTRIBUTES = frozenset(
    "xmlns display mathvariant stretchy fence separator lspace rspace accent accentunder linethickness "
    "columnalign rowalign columnspacing rowspacing displaystyle scriptlevel notation encoding symmetric "
    "largeop movablelimits minsize maxsize form".split())
_DROPPED_OUTPUTS = ("application/javascript", "application/vnd.jupyter.widget-view+json")


def _allowed_attribute(tag: str, name: str, value: str) -> bool:
    if tag in _MATHML_TAGS:
        return name in _MATHML_ATTRIBUTES
    if name == "style":  # colours and boxes, never a URL to fetch or run
        squeezed = "".join(value.lower().split()).replace("\\", "")
        return not any(bad in squeezed for bad in ("url(", "expression(", "javascript:", "@import"))
    if name in _ATTRIBUTES:
        return True
    if tag == "a" and name == "href":
        return value.strip().lower().startswith(("http://", "https://", "#", "mailto:"))
    if tag == "img" and name == "src":  # embedded images; an SVG in <img> cannot run scripts
        return value.strip().lower().startswith(("data:image/", "http://", "https://"))
    return False


def clean_html(html: str) -> str:
    """``html`` with everything that could run removed, ordinary markup and inline styles kept."""
    import bleach
    from bleach.css_sanitizer import ALLOWED_CSS_PROPERTIES, CSSSanitizer

    css = CSSSanitizer(allowed_css_properties=ALLOWED_CSS_PROPERTIES | {
        "background", "border-left", "border-right", "border-top", "border-bottom", "padding", "margin", "flex",
        "display", "gap", "font-family", "font-size", "line-height", "text-align"})
    return bleach.clean(html, tags=_TAGS | _MATHML_TAGS, attributes=_allowed_attribute,
                        protocols=["http", "https", "data", "mailto"], css_sanitizer=css, strip=True, strip_comments=True)


_MATH = re.compile(r"\$\$(.+?)\$\$|\$([^$\n]+?)\$", re.S)


def math_to_mathml(html: str) -> str:
    """``$...$`` and ``$$...$$`` in rendered Markdown as MathML, which browsers show with no script
    and no network (nbconvert's page would fetch MathJax from a CDN). TeX that latex2mathml cannot
    read stays as it was. The result still goes through ``clean_html``."""
    import html as _html

    from latex2mathml.converter import convert

    def replace(match):
        tex, block = (match.group(1), True) if match.group(1) is not None else (match.group(2), False)
        try:
            return convert(_html.unescape(tex), display="block" if block else "inline")
        except Exception:  # unknown commands and the like: the TeX itself is still readable
            return match.group(0)

    return _MATH.sub(replace, html)


def _svg_as_image(svg: str, alt: str | None = None) -> str:
    """``svg`` as an ``<img>``, with the alt text its output's metadata gives (kvdisplay's key), if any."""
    import base64
    import html as _html
    data = base64.b64encode(svg.encode("utf-8")).decode("ascii")
    return f'<img src="data:image/svg+xml;base64,{data}" alt="{_html.escape(alt or "SVG output")}">'


class SanitizeActiveContent(NbGraderPreprocessor):
    """nbconvert preprocessor: feedback without anything a student's notebook could make run.

    HTML and Markdown outputs are rendered and cleaned (``clean_html``), SVG is shown through an
    ``<img>`` (where scripts never run), JavaScript and widget outputs are removed, Markdown cells
    are cleaned the same way. Text, images (PNG/JPEG) and code are left alone.
    """

    def preprocess(self, nb, resources):
        from nbconvert.filters import markdown2html

        for cell in nb.cells:
            if cell.cell_type == "markdown":
                cell.source = clean_html(math_to_mathml(markdown2html(cell.source)))
            for output in cell.get("outputs", []):
                data = output.get("data")
                if not data:
                    continue
                for mime in _DROPPED_OUTPUTS:
                    data.pop(mime, None)
                html = []
                if "text/html" in data:
                    html.append(clean_html(_text(data.pop("text/html"))))
                elif "text/markdown" in data:
                    html.append(clean_html(math_to_mathml(markdown2html(_text(data["text/markdown"])))))
                svg = data.pop("image/svg+xml", None)
                if svg is not None and not html:   # nbconvert would show the HTML, not both
                    alt = ((output.get("metadata") or {}).get("image/svg+xml") or {}).get("alt")
                    html.append(_svg_as_image(_text(svg), alt if isinstance(alt, str) else None))
                data.pop("text/markdown", None)
                if html:
                    data["text/html"] = "".join(html)
                elif not data:
                    data["text/plain"] = "(output removed from the feedback: it could run code)"
        return nb, resources


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)
