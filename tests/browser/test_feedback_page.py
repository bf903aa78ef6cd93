"""A real feedback page in Chromium: made by ``python -m autograder grade-class --feedback`` (nbgrader's
generate_feedback with the course's exporter and template) for one chapter 01 submission with a slip and a
plot of the learner's own, then read as its learner reads it.

Every image on it says what it shows (the chapter's plot and the learner's: kvdisplay describes any figure
the kernel displays, and nbconvert's template reads the alt text from the output's metadata) instead of
nbconvert's "No description has been provided for this image", and axe-core finds no serious or critical
fault (tests/browser/axe.py); every colour its code can take reads on the code's grey (WCAG AA, 4.5:1: for
every token of the highlighting style, not only those this page shows). One grading of one notebook, about
10 s on 2 cores, then a few seconds in the browser.
"""

from __future__ import annotations

import re
import sys

import pytest

import hostile as H
from described import describes, img_alts
from procs import REPO, grading_env, run_in_group

from .axe import serious_faults

ASSIGNMENT = H.ASSIGNMENT
STUDENT = "learner"
# The learner's own figure, drawn with matplotlib alone after the chapter's last cell
OWN_PLOT = ("import matplotlib.pyplot as plt\n"
            "plt.plot([1, 2, 4], [3, 5, 9], label='my estimate')\n"
            "plt.xlabel('batch (sequences)')\n"
            "plt.ylabel('memory (GB)')\n"
            "plt.legend()\n"
            "plt.show()\n")


@pytest.fixture(scope="module")
def feedback_html(tmp_path_factory):
    root = tmp_path_factory.mktemp("feedback")
    # Question 2 without K and V's factor 2: a failed check, with its message, on the page
    notebook = H.make_kit().notebook({"q2": H._body("q2", "return layers * kv_heads * head_dim * dtype_bytes * seq_len")})
    notebook["cells"].append({"cell_type": "code", "id": "learners-own-plot", "metadata": {}, "source": OWN_PLOT,
                              "outputs": [], "execution_count": None})
    folder = root / "submitted" / STUDENT / ASSIGNMENT
    folder.mkdir(parents=True)
    (folder / f"{ASSIGNMENT}.ipynb").write_bytes(H.dump(notebook))
    (folder / "timestamp.txt").write_text("2027-03-01 10:00:00.000000 UTC")
    (folder / "submission_secret.txt").write_text("00" * 64)
    run = run_in_group([sys.executable, "-m", "autograder", "grade-class", root / "submitted", "--assignment", ASSIGNMENT,
                        "--course", REPO / "course", "--out", root / "out", "--feedback", root / "feedback"],
                       env=grading_env())
    assert run.returncode == 0, run.stderr[-3000:]
    pages = list((root / "feedback").rglob(f"{ASSIGNMENT}.html"))
    assert len(pages) == 1, pages
    return pages[0]


def test_every_image_says_what_it_shows(feedback_html):
    page = feedback_html.read_text(encoding="utf-8")
    alts = img_alts(page)
    assert len(alts) >= 2, "the chapter's plot and the learner's own"
    assert [a for a in alts if not describes(a)] == []
    assert "No description has been provided" not in page
    assert any(a.startswith("Line plot of memory (GB) against batch (sequences)") and "my estimate rises" in a
               for a in alts), "the learner's own plot is described too"
    assert "✗ ch01_q2_kv_bytes_per_sequence" in page      # the failed check is on the page axe reads


INPUT_GREY = "f5f5f5"     # the darkest background the classic page puts under code (axe measured it)
_RULE = re.compile(r"([^{}<>]+)\{([^{}]*)\}")


def contrast(a: str, b: str) -> float:
    """WCAG 2.1's contrast ratio of two sRGB colours written as hex."""
    def luminance(colour: str) -> float:
        colour = "".join(c * 2 for c in colour) if len(colour) == 3 else colour
        channels = [int(colour[i:i + 2], 16) / 255 for i in (0, 2, 4)]
        linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]
    light, dark = sorted((luminance(a), luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def test_contrast_as_wcag_defines_it():
    assert round(contrast("000", "ffffff"), 2) == 21.0
    assert round(contrast("337ab7", "f5f5f5"), 2) == 4.18      # nbgrader's link blue on its grey: axe's 4.17


def test_every_code_colour_reads_on_its_grey(feedback_html):
    """The page's own stylesheets, in order (a later rule wins): the highlighting style's colour for each token,
    then accessible.css's darker ones."""
    styles = " ".join(re.findall(r"<style[^>]*>(.*?)</style>", feedback_html.read_text(encoding="utf-8"), re.S))
    styles = re.sub(r"/\*.*?\*/", " ", styles, flags=re.S)
    colours = {}
    for selectors, body in _RULE.findall(styles):
        colour = re.search(r"(?<![-\w])color:\s*#([0-9a-fA-F]{6}|[0-9a-fA-F]{3})\b", body)
        for selector in selectors.split(","):
            token = re.fullmatch(r"\s*\.highlight \.(\w+)\s*", selector)
            if token and colour:
                colours[token.group(1)] = colour.group(1)
    assert len(colours) >= 40, f"only {len(colours)} token colours found: the page's highlighting changed"
    short = {token: f"#{c} {contrast(c, INPUT_GREY):.2f}:1" for token, c in colours.items()
             if contrast(c, INPUT_GREY) < 4.5}
    assert short == {}, short


def test_the_page_has_no_serious_accessibility_fault(feedback_html, browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        page.goto(feedback_html.as_uri(), wait_until="load")
        drawn = page.locator("img").evaluate_all("imgs => imgs.map(i => i.complete && i.naturalWidth > 0)")
        assert drawn and all(drawn), drawn
        assert page.locator("html").get_attribute("lang") == "en"
        # code is left out (its token spans are most of the page; every colour they can take is checked above)
        faults = serious_faults(page, "{exclude: [['.highlight']]}")
        assert faults == [], f"{len(faults)} serious or critical accessibility faults:\n" + "\n".join(faults[:20])
    finally:
        context.close()
