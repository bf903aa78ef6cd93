"""The executed site (./dev.sh site): the ten student chapters run headless, as web pages.

    python tools/build_site.py [--out site] [--jobs 2] [--repo OWNER/kv-course] [--branch HEAD]

Built from the release, ``chapters/*.ipynb`` (what a learner opens), never from ``course/source``
or ``solutions/``: no solution and no hidden test can reach a page. Each chapter is executed with
nbclient on a copy (widget state kept), then Sphinx with myst-nb renders the executed notebooks
(``tools/site/conf.py``; myst-nb executes nothing itself). What the build changes on its copies:

* a cell whose input is collapsed in JupyterLab (``source_hidden``: a generator that would give an
  answer away) gets myst-nb's ``hide-input`` tag: its code sits in a closed fold, its output shows;
* an unanswered exercise's error (``NotImplementedError`` in an answer cell, the check's
  ``AssertionError`` in a test cell) is left out; any other error stops the build, naming the cell;
* an explorer (ipywidgets) is replaced by its first view, from the widget state the run saved:
  the controls as a line of "name = value", the HTML the sliders redraw, the plots of its outputs;
* ``$...$`` in HTML outputs becomes MathML (as JupyterLab typesets it), Markdown's through myst;
* a line of links goes under the title: Binder launch, the notebook itself, the next chapter.

The pages need no network: maths is MathML (latex2mathml, as in the feedback pages), the theme's
assets are local, and nothing is loaded from a CDN. ``site/.kv-course-site`` holds the hash of
every input, so a caller can tell a stale build (``is_fresh``).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHAPTERS = REPO / "chapters"
CONF_DIR = REPO / "tools" / "site"
STAMP = ".kv-course-site"
CELL_TIMEOUT = 120
SITE_STUDENT = "site-reader"   # ch09 draws its graded questions from a learner id; the site's reader is one
EXERCISE_ERRORS = {"NotImplementedError", "AssertionError"}
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
LAB_ANCHOR = re.compile(r"(\]\(ch\d\d_\w+\.ipynb)#[^)\s]*\)")
INDEX_TITLE = "kv-course: the arithmetic of the LLM KV cache"


def inputs_hash() -> str:
    """Everything that changes the site: the release, this build, its config and pins, kvlib/kvcoach/kvdisplay."""
    digest = hashlib.sha256()
    files = [*sorted(CHAPTERS.glob("ch*.ipynb")), Path(__file__), *sorted(CONF_DIR.glob("*")),
             REPO / "README.md", *(path for package in ("kvlib", "kvcoach", "kvdisplay")
                                   for path in sorted((REPO / package).rglob("*.py")))]
    for path in files:
        if path.is_file():
            digest.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def is_fresh(out: Path) -> bool:
    stamp = out / STAMP
    return stamp.is_file() and json.loads(stamp.read_text()).get("inputs") == inputs_hash()


def chapter_table() -> list[tuple[str, str]]:
    """(id, what it lets you compute) from the README's chapter table, the one place it is written."""
    rows = re.findall(r"^\| `(ch\d\d_\w+)` \| (.+?) \|$", (REPO / "README.md").read_text(encoding="utf-8"), re.M)
    ids = sorted(p.stem for p in CHAPTERS.glob("ch*.ipynb"))
    if [r[0] for r in rows] != ids:
        sys.exit(f"build_site: README.md's chapter table lists {[r[0] for r in rows]}, chapters/ has {ids}")
    return rows


# -- execution -------------------------------------------------------------------------------------

def execute(path: Path, work: Path):
    """``path`` run on a copy in ``work`` (its own folder), widget state kept; the executed notebook."""
    import nbformat
    from nbclient import NotebookClient

    work.mkdir(parents=True)
    shutil.copy(path, work / path.name)
    nb = nbformat.read(work / path.name, as_version=4)
    client = NotebookClient(nb, timeout=CELL_TIMEOUT, kernel_name="python3", allow_errors=True,
                            store_widget_state=True, resources={"metadata": {"path": str(work)}},
                            extra_arguments=["--HistoryManager.hist_file=:memory:"])
    env = {**os.environ, "KV_COURSE_STUDENT": SITE_STUDENT, "MPLBACKEND": "module://matplotlib_inline.backend_inline"}
    env.pop("JUPYTERHUB_USER", None)
    client.execute(env=env)
    return nb


# -- the explorers' first view ---------------------------------------------------------------------

def _widget_html(model_id: str, models: dict, depth: int = 0) -> str:
    """A widget's first view as static HTML, from its saved state (no widget JavaScript)."""
    model = models.get(model_id)
    if model is None or depth > 20:
        return ""
    state, name = model.get("state", {}), model.get("model_name", "")
    layout = models.get(str(state.get("layout", "")).removeprefix("IPY_MODEL_"), {}).get("state", {})
    if layout.get("display") == "none" or layout.get("visibility") == "hidden":
        return ""                     # hidden in the notebook too (an answer panel, say): not on the page
    children = [c.removeprefix("IPY_MODEL_") for c in state.get("children", [])]
    if name in ("HTMLModel", "HTMLMathModel"):
        return f'<div class="kv-widget-html">{state.get("value", "")}</div>'
    if name == "LabelModel":
        return f"<div>{html.escape(str(state.get('value', '')))}</div>"
    if name == "OutputModel":
        return "".join(_output_html(o) for o in state.get("outputs", []))
    if children:
        parts = [_widget_html(c, models, depth + 1) for c in children]
        controls = [p for p in parts if p.startswith('<span class="kv-control">')]
        rest = [p for p in parts if not p.startswith('<span class="kv-control">')]
        head = f'<p class="kv-controls">{" · ".join(controls)}</p>' if controls else ""
        return head + "".join(rest)
    if "description" in state and "value" in state or "index" in state:
        value = state.get("value")
        if value is None and "index" in state and state.get("_options_labels"):
            labels, index = state["_options_labels"], state["index"]
            value = labels[index] if isinstance(index, int) and 0 <= index < len(labels) else index
        label = state.get("description") or name.removesuffix("Model")
        return f'<span class="kv-control">{html.escape(str(label))} = <b>{html.escape(str(value))}</b></span>'
    return ""


def _output_html(output: dict) -> str:
    data = output.get("data", {})
    if "image/png" in data:   # its alt text where kvdisplay put it, the key nbconvert and conf.py read
        alt = ((output.get("metadata") or {}).get("image/png") or {}).get("alt") or ""
        return (f'<img alt="{html.escape(alt)}" '
                f'src="data:image/png;base64,{"".join(data["image/png"]).strip()}">')
    if "text/html" in data:
        return "".join(data["text/html"])
    if "image/svg+xml" in data:
        return "".join(data["image/svg+xml"])
    if output.get("output_type") == "stream":
        return f"<pre>{html.escape(''.join(output.get('text', '')))}</pre>"
    if "text/plain" in data:
        return f"<pre>{html.escape(''.join(data['text/plain']))}</pre>"
    return ""


def _static_widgets(nb) -> int:
    """Replace each widget output by its first view; the number replaced."""
    models = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    replaced = 0
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if WIDGET_VIEW in data:
                view = _widget_html(data.pop(WIDGET_VIEW)["model_id"], models)
                data.pop("text/plain", None)
                data["text/html"] = f'<div class="kv-explorer-static">{view}</div>'
                replaced += 1
    nb.metadata.pop("widgets", None)
    return replaced


def _html_maths(nb) -> None:
    """``$...$`` in HTML outputs (errata, explorers' views) as MathML: JupyterLab typesets them too."""
    from autograder.feedback import math_to_mathml

    for cell in nb.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if "text/html" in data:
                data["text/html"] = math_to_mathml("".join(data["text/html"]))
            if "text/markdown" in data:
                # an HTML block inside Markdown (an erratum box in a worked answer's fold) is passed through
                # as it is, so MyST's dollarmath never sees its $...$: convert those paragraphs here
                paragraphs = "".join(data["text/markdown"]).split("\n\n")
                data["text/markdown"] = "\n\n".join(math_to_mathml(p) if p.lstrip().startswith("<") else p
                                                      for p in paragraphs)


# -- the page ----------------------------------------------------------------------------------------

def binder_url(repo: str, branch: str, chapter: str) -> str:
    return f"https://mybinder.org/v2/gh/{repo}/{branch}?urlpath=lab/tree/chapters/{chapter}.ipynb"


def prepare(nb, chapter: str, next_chapter: tuple[str, str] | None, repo: str, branch: str):
    """The executed notebook as the site shows it (see the module docstring); raises on a real error."""
    import nbformat

    problems = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":   # JupyterLab's heading anchors ("#6.-Notation") are not Sphinx's
            cell.source = LAB_ANCHOR.sub(r"\1)", cell.source)
        if cell.metadata.get("jupyter", {}).get("source_hidden"):
            tags = cell.metadata.setdefault("tags", [])
            if "hide-input" not in tags:
                tags.append("hide-input")
        grading = cell.metadata.get("nbgrader", {})
        exercise = grading.get("solution") or grading.get("grade")
        kept = []
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                if exercise and output.get("ename") in EXERCISE_ERRORS:
                    continue
                problems.append(f"cell {index}: {output.get('ename')}: {output.get('evalue')}")
            kept.append(output)
        if "outputs" in cell:
            cell.outputs = kept
    if problems:
        raise RuntimeError(f"{chapter}: " + "; ".join(problems))
    _static_widgets(nb)
    _html_maths(nb)
    links = [f'<a class="kv-binder" href="{binder_url(repo, branch, chapter)}">Launch on Binder</a>',
             f'<a class="kv-notebook" href="notebooks/{chapter}.ipynb" download>The notebook ({chapter}.ipynb)</a>']
    if next_chapter:
        links.append(f'<a class="kv-next" href="{next_chapter[0]}.html">Next: {next_chapter[0]}</a>')
    bar = nbformat.v4.new_markdown_cell(f'<p class="kv-links">{" · ".join(links)}</p>')
    position = 1 if nb.cells and nb.cells[0].cell_type == "markdown" else 0
    nb.cells.insert(position, bar)
    if next_chapter:
        nb.cells.append(nbformat.v4.new_markdown_cell(
            f'<p class="kv-links kv-next-bottom">Next: <a class="kv-next" href="{next_chapter[0]}.html">'
            f'{next_chapter[0]}</a>, {html.escape(next_chapter[1])}</p>'))
    return nb


def index_page(rows, repo: str, branch: str) -> str:
    lines = [f"# {INDEX_TITLE}", "",
             "The course's ten chapters, executed: every figure, plot and table as it comes out of a run, "
             "worked answers folded as in the notebooks. To run a chapter and answer its exercises, open it "
             "on Binder or with `./dev.sh open`.", "",
             "| chapter | what it lets you compute | run it |", "|---|---|---|"]
    for chapter, what in rows:
        lines.append(f"| [{chapter}]({chapter}.ipynb) | {what} | "
                     f'<a href="{binder_url(repo, branch, chapter)}">Binder</a> · '
                     f'<a href="notebooks/{chapter}.ipynb" download>notebook</a> |')
    lines += ["", "```{toctree}", ":hidden:", ":maxdepth: 1", "", *[c for c, _ in rows], "```", ""]
    return "\n".join(lines)


def build(out: Path, jobs: int, repo: str, branch: str) -> dict:
    import nbformat

    started = time.monotonic()
    rows = chapter_table()
    chapters = [CHAPTERS / f"{c}.ipynb" for c, _ in rows]
    with tempfile.TemporaryDirectory(prefix="kv-site-") as tmp:
        tmp = Path(tmp)
        src = tmp / "src"
        (src / "_extra" / "notebooks").mkdir(parents=True)
        for path in chapters:        # the notebook a learner downloads: the release as committed
            shutil.copy(path, src / "_extra" / "notebooks" / path.name)
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            runs = {path.stem: pool.submit(execute, path, tmp / "run" / path.stem) for path in chapters}
            executed = {name: run.result() for name, run in runs.items()}
        executed_s = time.monotonic() - started
        for i, (chapter, _) in enumerate(rows):
            nxt = rows[i + 1] if i + 1 < len(rows) else None
            nbformat.write(prepare(executed[chapter], chapter, nxt, repo, branch), src / f"{chapter}.ipynb")
        (src / "index.md").write_text(index_page(rows, repo, branch), encoding="utf-8")
        staging = tmp / "html"
        env = {**os.environ, "KV_SITE_REPO": repo, "KV_SITE_BRANCH": branch, "KV_SITE_EXTRA": str(src / "_extra")}
        subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-q", "-W", "--keep-going", "-j", "1",
                        "-c", str(CONF_DIR), "-d", str(tmp / "doctrees"), str(src), str(staging)],
                       check=True, env=env)
        (staging / ".buildinfo").unlink(missing_ok=True)
        if out.exists():
            shutil.rmtree(out)
        shutil.copytree(staging, out)
    figures = {"inputs": inputs_hash(), "chapters": len(chapters), "execute_s": round(executed_s, 1),
               "total_s": round(time.monotonic() - started, 1),
               "bytes": sum(p.stat().st_size for p in out.rglob("*") if p.is_file()),
               "files": sum(1 for p in out.rglob("*") if p.is_file())}
    (out / STAMP).write_text(json.dumps(figures) + "\n")
    return figures


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--out", type=Path, default=REPO / "site", help="where the pages go (default site/)")
    parser.add_argument("--jobs", type=int, default=2, help="chapters executed at once (default 2)")
    parser.add_argument("--repo", default=os.environ.get("KV_COURSE_REPO", "OWNER/kv-course"),
                        help="GitHub owner/name for the Binder links (default $KV_COURSE_REPO or OWNER/kv-course)")
    parser.add_argument("--branch", default="HEAD", help="the branch or commit Binder launches (default HEAD)")
    parser.add_argument("--if-stale", action="store_true", help="do nothing when --out was built from these inputs")
    args = parser.parse_args(argv)
    if not re.fullmatch(r"[\w.-]+/[\w.-]+", args.repo):
        parser.error(f"--repo: expected OWNER/NAME, got {args.repo!r}")
    if args.if_stale and is_fresh(args.out):
        print(f"build_site: {args.out} is up to date")
        return 0
    try:
        figures = build(args.out.resolve(), args.jobs, args.repo, args.branch)
    except (RuntimeError, subprocess.CalledProcessError) as error:
        print(f"build_site: {error}", file=sys.stderr)
        return 1
    print(f"build_site: {figures['chapters']} chapters in {args.out} ({figures['files']} files, "
          f"{figures['bytes'] / 1e6:.1f} MB) in {figures['total_s']} s ({figures['execute_s']} s executing)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
