"""The executed site in Chromium: every page from a local HTTP server, its plots drawn with their alt text, a
worked answer's fold that opens, the explorers' first view, maths laid out, not one request that leaves
localhost, and no serious or critical fault for axe-core (tests/browser/axe.py).

The site is built once per session (tests/site_build.py; CI's ./dev.sh site when fresh) and served
by a standard-library HTTP server on 127.0.0.1 in this process. Every request of every page is
recorded (and one to anywhere else is aborted, so a page cannot hang on it). One browser context;
eleven pages, about 15 s on 2 cores once the site is built.
"""

from __future__ import annotations

import functools
import http.server
import json
import re
import threading

import pytest

from described import describes
from site_build import REPO, built_site, chapter_ids

from .axe import serious_faults

PLOTTERS = re.compile(r"kd\.(?:line_plot|bar_plot|roofline_plot|step_bytes_figure|figure_img)\(")


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):   # keep pytest's output for failures
        pass


@pytest.fixture(scope="module")
def site_url():
    site = built_site()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def site_page(browser, site_url):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    requests: list[str] = []

    def record(route):
        requests.append(route.request.url)
        if route.request.url.startswith(site_url + "/"):
            route.continue_()
        else:
            route.abort()

    context.route("**/*", record)
    page = context.new_page()
    try:
        yield page, requests
    finally:
        context.close()


def _source(chapter: str) -> str:
    cells = json.loads((REPO / "chapters" / f"{chapter}.ipynb").read_text(encoding="utf-8"))["cells"]
    return "\n".join("".join(c["source"]) for c in cells)


def _open(page, url: str) -> None:
    page.goto(url, wait_until="load")   # images are files or data: URLs, loaded by then


def test_index_links_every_chapter(site_page, site_url):
    page, requests = site_page
    _open(page, f"{site_url}/index.html")
    links = page.locator("article a[href$='.html']")
    hrefs = {links.nth(i).get_attribute("href") for i in range(links.count())}
    assert {f"{c}.html" for c in chapter_ids()} <= hrefs
    assert page.locator("article table tr").count() == len(chapter_ids()) + 1


@pytest.mark.parametrize("chapter", chapter_ids())
def test_page_shows_its_figures_and_a_fold_opens(site_page, site_url, chapter):
    page, requests = site_page
    _open(page, f"{site_url}/{chapter}.html")
    source = _source(chapter)

    images = page.locator("article img")
    drawn = images.evaluate_all("imgs => imgs.map(i => i.complete && i.naturalWidth > 0)")
    assert all(drawn), f"{drawn.count(False)} of {len(drawn)} images not drawn"
    if PLOTTERS.search(source):
        assert len(drawn) >= 1, "the chapter plots, the page shows no image"
    alts = images.evaluate_all("imgs => imgs.map(i => i.getAttribute('alt'))")
    assert [a for a in alts if not describes(a)] == [], "images whose alt text does not say what they show"

    if "_explorer(" in source:
        static = page.locator(".kv-explorer-static").first
        static.scroll_into_view_if_needed()
        assert static.is_visible() and " = " in static.inner_text()

    if "$" in source:
        box = page.locator("article math").first.bounding_box()
        assert box and box["width"] > 0 and box["height"] > 0, "maths not laid out"

    fold = page.locator("article details:has(> summary:text-is('Show the answer'))").first
    assert fold.count() == 1, "no worked answer on the page"
    fold.scroll_into_view_if_needed()
    answer = fold.locator("p:not(summary p)").first
    assert fold.evaluate("d => d.open") is False and not answer.is_visible()
    fold.locator("summary").first.click()
    assert fold.evaluate("d => d.open") is True
    answer.wait_for(state="visible", timeout=5000)

    outside = [u for u in requests if not u.startswith(site_url + "/")]
    assert outside == [], outside[:5]
    assert any(u.endswith(f"/{chapter}.html") for u in requests)


@pytest.mark.parametrize("name", ["index", *chapter_ids()])
def test_page_has_no_serious_accessibility_fault(site_page, site_url, name):
    """axe-core on each page as it loads (folds closed): contrast, names, landmarks, headings, alt text... The
    code blocks are left out here: their colours are the theme's one highlighting style on every page, checked
    once below, and their token spans are two thirds of a page's elements (half of axe's time)."""
    page, _ = site_page
    _open(page, f"{site_url}/{name}.html")
    faults = serious_faults(page, "{exclude: [['.highlight']]}")
    assert faults == [], f"{len(faults)} serious or critical accessibility faults:\n" + "\n".join(faults[:20])


def test_code_blocks_have_no_serious_accessibility_fault(site_page, site_url):
    page, _ = site_page
    _open(page, f"{site_url}/ch01_kv_formula.html")
    assert page.locator(".highlight").count() >= 5
    faults = serious_faults(page, "{include: [['.highlight']]}")
    assert faults == [], f"{len(faults)} serious or critical accessibility faults:\n" + "\n".join(faults[:20])


def test_links_to_notebooks_resolve(site_page, site_url):
    page, requests = site_page
    for chapter in chapter_ids():
        response = page.request.get(f"{site_url}/notebooks/{chapter}.ipynb")
        assert response.ok, chapter
        assert response.body() == (REPO / "chapters" / f"{chapter}.ipynb").read_bytes()
