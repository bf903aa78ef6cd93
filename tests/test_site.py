"""The executed site (./dev.sh site) as files: built from the release, no solution or hidden test in it,
nothing fetched from outside, every page linked. The browser side is tests/browser/test_site.py.

One build per session (tests/site_build.py: CI's ./dev.sh site is reused when fresh); the checks
themselves read files, about a second.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from described import describes, img_alts
from site_build import REPO, builder, built_site, chapter_ids

MARKERS = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS")
REGION = re.compile(r"### BEGIN (SOLUTION|HIDDEN TESTS)\n(.*?)### END \1", re.S)
FETCHING = re.compile(r"<(?:script|img|iframe|source|embed|link)\b[^>]*?\b(?:src|href)=\"([^\"]+)\"", re.I)
CSS_URL = re.compile(r"url\(\s*['\"]?([^'\")]+)")


@pytest.fixture(scope="module")
def site() -> Path:
    return built_site()


def _flat(text: str) -> str:
    return " ".join(text.split())


def _page_text(page: str) -> str:
    """What a reader can see or select: tags gone, entities decoded, whitespace flattened."""
    return _flat(html.unescape(re.sub(r"<[^>]+>", " ", page)))


def _sources(path: Path) -> str:
    return "\n".join("".join(c["source"]) for c in json.loads(path.read_text(encoding="utf-8"))["cells"])


def secret_lines() -> list[str]:
    """Lines of the sources' solution regions and hidden tests that the release does not contain."""
    release = _flat("\n".join(_sources(p) for p in (REPO / "chapters").glob("ch*.ipynb")))
    lines = set()
    for source in (REPO / "course" / "source").glob("ch*/ch*.ipynb"):
        for _, body in REGION.findall(_sources(source)):
            lines |= {_flat(line) for line in body.splitlines()
                      if len(_flat(line)) >= 20 and _flat(line) not in release}
    return sorted(lines)


def leaks(text: str, secrets: list[str]) -> list[str]:
    flat = _flat(text)
    return [m for m in MARKERS if m in flat] + [s for s in secrets if s in flat]


def _everything(site: Path) -> dict[str, str]:
    """Every text file of the site, pages as their visible text."""
    out = {}
    for path in site.rglob("*"):
        if path.is_file() and path.suffix in (".html", ".js", ".ipynb", ".txt", ".json", ".css"):
            raw = path.read_text(encoding="utf-8", errors="replace")
            out[str(path.relative_to(site))] = _page_text(raw) if path.suffix == ".html" else raw
    return out


def test_the_leak_check_finds_a_solution_line():
    secrets = secret_lines()
    assert len(secrets) >= 20, secrets          # the sources have solutions and hidden tests to look for
    page = f"<p>intro</p><pre><span>{html.escape(secrets[0])}</span></pre>"
    assert leaks(_page_text(page), secrets) == [secrets[0]]
    assert leaks("### BEGIN HIDDEN TESTS", []) == ["BEGIN HIDDEN TESTS"]
    assert leaks(_page_text("<p>nothing secret</p>"), secrets) == []


def test_no_page_holds_a_solution_or_a_hidden_test(site):
    secrets = secret_lines()
    found = {name: hits for name, text in _everything(site).items() if (hits := leaks(text, secrets))}
    assert found == {}, {name: hits[:3] for name, hits in found.items()}


def test_built_from_the_release(site):
    """A page per chapter, and the notebook each page offers is the committed release, byte for byte."""
    assert sorted(p.stem for p in site.glob("ch*.html")) == chapter_ids()
    for chapter in chapter_ids():
        offered = site / "notebooks" / f"{chapter}.ipynb"
        assert offered.read_bytes() == (REPO / "chapters" / f"{chapter}.ipynb").read_bytes(), chapter


def test_nothing_is_fetched_from_outside(site):
    """Scripts, styles, images and fonts are the site's own files or data: URLs (links may leave)."""
    outside = []
    for path in [*site.rglob("*.html"), *site.rglob("*.css")]:
        text = path.read_text(encoding="utf-8", errors="replace")
        urls = FETCHING.findall(text) if path.suffix == ".html" else []
        urls += CSS_URL.findall(text)
        outside += [f"{path.relative_to(site)}: {u}" for u in urls
                    if re.match(r"(?:[a-z][a-z0-9+.-]*:)?//", u, re.I) and not u.startswith("data:")]
    assert outside == [], outside[:5]
    # maths is MathML: no MathJax script at all, not even a local one (class names such as mathjax_ignore stay)
    assert not [p.name for p in site.rglob("*.html") if re.search(r"<script[^>]*mathjax", p.read_text(encoding="utf-8"), re.I)]


def test_index_lists_every_chapter_with_what_it_computes(site):
    index = (site / "index.html").read_text(encoding="utf-8")
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(ch\d\d_\w+)` \| (.+?) \|$", readme, re.M)
    assert [c for c, _ in rows] == chapter_ids()
    text = _page_text(index)
    for chapter, what in rows:
        assert f'href="{chapter}.html"' in index, chapter
        assert _page_text(re.sub(r"`([^`]+)`", r"\1", what)) in text, what


@pytest.mark.parametrize("chapter", chapter_ids())
def test_each_page_links_next_notebook_and_binder(site, chapter):
    page = (site / f"{chapter}.html").read_text(encoding="utf-8")
    ids = chapter_ids()
    binder = f"https://mybinder.org/v2/gh/OWNER/kv-course/HEAD?urlpath=lab/tree/chapters/{chapter}.ipynb"
    assert f'href="{binder}"' in page
    assert f'href="notebooks/{chapter}.ipynb"' in page
    nxt = ids.index(chapter) + 1
    if nxt < len(ids):
        assert f'class="kv-next" href="{ids[nxt]}.html"' in page
    else:
        assert 'class="kv-next"' not in page


@pytest.mark.parametrize("chapter", chapter_ids())
def test_maths_is_mathml_and_folds_are_closed(site, chapter):
    page = (site / f"{chapter}.html").read_text(encoding="utf-8")
    main = page.split("<main", 1)[1]
    shown = re.sub(r"<pre.*?</pre>|<code.*?</code>|<math.*?</math>", " ", main, flags=re.S)
    raw = re.findall(r"\$[^$\n]{1,80}\$", _page_text(shown))
    assert raw == [], raw[:3]                 # no TeX left for a script to typeset
    if "$" in _sources(REPO / "chapters" / f"{chapter}.ipynb"):
        assert "<math" in main
    assert "<details open" not in main


@pytest.mark.parametrize("chapter", chapter_ids())
def test_every_image_says_what_it_shows(site, chapter):
    """Each plot's alt text is the one kvdisplay wrote into its output's metadata (read by tools/site/conf.py for
    myst-nb, by the build for an explorer's plots): what it plots against what, not "plot", never nothing."""
    main = (site / f"{chapter}.html").read_text(encoding="utf-8").split("<main", 1)[1]
    alts = img_alts(main)
    assert [a for a in alts if not describes(a)] == []
    if re.search(r"kd\.(line_plot|bar_plot|roofline_plot|step_bytes_figure)\(", _sources(REPO / "chapters" / f"{chapter}.ipynb")):
        assert alts, "the chapter plots, its page shows no image"


# -- the build's own steps, in process on made-up notebooks (no kernel, no Sphinx) -------------------

def _widget_state():
    def model(name, **state):
        return {"model_name": name, "state": state}
    return {"box": model("VBoxModel", children=["IPY_MODEL_s", "IPY_MODEL_d", "IPY_MODEL_h", "IPY_MODEL_gone",
                                                  "IPY_MODEL_o"]),
            "s": model("IntSliderModel", description="layers L", value=32),
            "d": model("DropdownModel", description="GPU", index=1, _options_labels=["A100", "H100"]),
            "h": model("HTMLModel", value="<b>131,072 B</b> per token"),
            "gone": model("HTMLModel", value="the hidden answer", layout="IPY_MODEL_lay"),
            "lay": model("LayoutModel", display="none"),
            "o": model("OutputModel", outputs=[{"output_type": "display_data", "data": {"image/png": "iVBOR"},
                                                 "metadata": {"image/png": {"alt": 'Line plot of "x" & y'}}}])}


def test_an_explorer_becomes_its_first_view():
    build = builder()
    view = build._widget_html("box", _widget_state())
    assert "layers L = <b>32</b>" in view and "GPU = <b>H100</b>" in view
    assert "<b>131,072 B</b> per token" in view
    assert '<img alt="Line plot of &quot;x&quot; &amp; y" src="data:image/png;base64,iVBOR">' in view
    assert "hidden answer" not in view


def test_only_an_unanswered_exercise_may_fail():
    import nbformat
    build = builder()

    def notebook(ename, nbgrader):
        cell = nbformat.v4.new_code_cell("check(...)", metadata={"nbgrader": nbgrader})
        cell.outputs = [nbformat.v4.new_output("error", ename=ename, evalue="x", traceback=[])]
        hidden = nbformat.v4.new_code_cell("kd.worked_problem(...)", metadata={"jupyter": {"source_hidden": True}})
        return nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Title"), hidden, cell])

    nb = build.prepare(notebook("AssertionError", {"grade": True}), "ch01_kv_formula",
                       ("ch02_gqa_tp", "what"), "OWNER/kv-course", "HEAD")
    assert nb.cells[3].outputs == [] and nb.cells[2].metadata["tags"] == ["hide-input"]
    assert "kv-binder" in nb.cells[1].source and 'href="ch02_gqa_tp.html"' in nb.cells[-1].source
    with pytest.raises(RuntimeError, match="ch01_kv_formula: cell 2: KeyError"):
        build.prepare(notebook("KeyError", {"grade": True}), "ch01_kv_formula", None, "OWNER/kv-course", "HEAD")
    with pytest.raises(RuntimeError, match="AssertionError"):
        build.prepare(notebook("AssertionError", {}), "ch01_kv_formula", None, "OWNER/kv-course", "HEAD")
