"""autograder.feedback.SanitizeActiveContent: feedback HTML keeps the markup, runs nothing.

The attacks are the usual ways HTML runs code (a <script>, an event handler, a
javascript: link, a frame, an SVG with a script, a JavaScript output); the
kept markup is what chapter 01's own outputs use (tables, <details>, styled
erratum boxes). Expected text is written here, not taken from the module.
"""

from __future__ import annotations

import base64
import copy

import nbformat
from nbconvert import HTMLExporter

from autograder.feedback import SanitizeActiveContent, clean_html
from hostile import active_parts

ATTACKS = [
    "<script>window.HOSTILE = 1</script>",
    '<img src="x" onerror="window.HOSTILE = 1">',
    '<a href="javascript:window.HOSTILE = 1">link</a>',
    '<a href=" JaVaScRiPt:window.HOSTILE=1">link</a>',
    '<iframe src="https://example.org/HOSTILE"></iframe>',
    '<object data="https://example.org/HOSTILE.swf"></object>',
    '<div onmouseover="window.HOSTILE = 1">hover</div>',
    '<svg onload="window.HOSTILE = 1"><circle r="5"/></svg>',
    '<form action="https://example.org/HOSTILE"><input name="q"></form>',
    '<div style="background:url(javascript:window.HOSTILE)">x</div>',
    '<div style="background: u\\rl( https://example.org/HOSTILE.png )">x</div>',   # a fetch when opened
    '<meta http-equiv="refresh" content="0;url=https://example.org/HOSTILE">',
    '<base href="https://example.org/HOSTILE/">',
]


def test_each_attack_loses_its_active_part():
    for attack in ATTACKS:
        cleaned = clean_html(attack)
        assert [p for p in active_parts(cleaned) if "HOSTILE" in p] == [], (attack, cleaned)
        lowered = cleaned.lower()
        for bad in ("<script", "<iframe", "<object", "<svg", "<form", "<meta", "<base", "javascript:", "url(", "onerror",
                    "onload", "onmouseover"):
            assert bad not in lowered, (attack, cleaned)


def test_the_chapters_own_markup_survives():
    box = ('<div style="border-left:5px solid #c0392b;background:#fdf0ee;padding:0.5em 1em">'
           "<b>Erratum</b><br><i>It says:</i> 80 GiB</div>")
    cleaned = clean_html(box)
    assert "border-left:5px solid #c0392b" in cleaned and "background:#fdf0ee" in cleaned
    assert "<b>Erratum</b>" in cleaned and "<i>It says:</i>" in cleaned
    table = "<table><thead><tr><th>model</th></tr></thead><tbody><tr><td>8B</td></tr></tbody></table>"
    assert clean_html(table) == table
    details = "<details><summary>Show the answer</summary><p><strong>131,072 B</strong></p></details>"
    assert clean_html(details) == details
    image = '<img src="data:image/png;base64,iVBORw0KGgo=" alt="plot">'
    assert 'src="data:image/png;base64,iVBORw0KGgo="' in clean_html(image)


def _notebook(outputs, markdown="A *note* with $2LKD$ and <script>window.HOSTILE = 1</script>"):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(markdown), nbformat.v4.new_code_cell("print('x')", outputs=outputs)]
    return nb


def test_the_preprocessor_cleans_outputs_and_markdown_cells():
    svg = '<svg xmlns="http://www.w3.org/2000/svg"><script>window.HOSTILE = 1</script><circle r="5"/></svg>'
    outputs = [
        nbformat.v4.new_output("display_data", data={"text/html": "<b>kept</b><script>window.HOSTILE = 1</script>",
                                                     "text/plain": "<IPython.core.display.HTML object>"}),
        nbformat.v4.new_output("display_data", data={"text/markdown": "**bold** <img src=x onerror='HOSTILE()'>"}),
        nbformat.v4.new_output("display_data", data={"application/javascript": "window.HOSTILE = 1"}),
        nbformat.v4.new_output("display_data", data={"image/svg+xml": svg}),
        nbformat.v4.new_output("stream", name="stdout", text="<script>plain text stays text</script>\n"),
    ]
    nb = _notebook(outputs)
    raw, _ = HTMLExporter(template_name="classic").from_notebook_node(copy.deepcopy(nb))
    assert {"window.HOSTILE = 1", "HOSTILE()"} <= set(active_parts(raw))   # the attacks are live as written
    nb, _ = SanitizeActiveContent().preprocess(nb, {})
    html, _ = HTMLExporter(template_name="classic").from_notebook_node(nb)
    assert [p for p in active_parts(html) if "HOSTILE" in p] == []
    assert "<b>kept</b>" in html and "<strong>bold</strong>" in html and "<em>note</em>" in html
    # maths becomes MathML (shown offline, no MathJax): 2, L, K, D as a number and three identifiers
    assert 'xmlns="http://www.w3.org/1998/Math/MathML"' in html and "$2LKD$" not in html
    assert "<mrow><mn>2</mn><mi>L</mi><mi>K</mi><mi>D</mi></mrow></math>" in html
    assert "could run code" in html                          # the JavaScript output says where it went
    encoded = base64.b64encode(svg.encode()).decode()
    assert f'src="data:image/svg+xml;base64,{encoded}"' in html   # an <img>: its script cannot run
    assert "&lt;script&gt;plain text stays text&lt;/script&gt;" in html


def test_mathml_keeps_no_link_or_script_a_student_put_in_tex():
    from autograder.feedback import clean_html, math_to_mathml
    from nbconvert.filters import markdown2html

    html = clean_html(math_to_mathml(markdown2html(
        r"$\href{javascript:alert(1)}{x}$ and $$<script>alert(1)</script>$$")))
    assert "javascript" not in html and "<script" not in html and "href" not in html
