"""The leak finder of tests/leaks.py on small notebooks built here, in process (no kernel): it sees an answer's
figure outside its fold however it is written, and leaves alone what is folded, in another section, or trivial.
The executed chapters go through it in tests/test_notebooks.py."""

from __future__ import annotations

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

import kvdisplay as kd
from leaks import figures, leaks

QUESTION = kd.worked_problem(
    1, "How many 8,192-token sequences fit on one H100?", "bf16; a 4 GB reserve.", "$B = M / S$",
    [("S", "1.07 GB (1.00 GiB)", "one sequence")], "373 sequences (1,500 tokens spare), 3.22 GB free",
    "373 × 8,192 tokens.").data


def _shown(markdown: str, mime: str = "text/markdown"):
    """A code cell whose output shows ``markdown`` (as a worked problem's cell does)."""
    return new_code_cell("", outputs=[new_output("display_data", data={mime: markdown, "text/plain": "<obj>"})])


def _nb(*cells):
    nb = new_notebook(cells=list(cells))
    return nbformat.from_dict(nb)


def _leaked(nb):
    return sorted((leak.figure, leak.cell) for leak in leaks(nb))


def test_an_erratum_under_the_closed_fold_leaks():
    nb = _nb(new_markdown_cell("## 3. Sequences"), _shown(QUESTION),
             _shown("<div class='kv-erratum'><b>Computed:</b> <b>373 sequences</b></div>", "text/html"))
    assert _leaked(nb) == [("373", 2)]


def test_a_figure_leaks_however_it_is_written():
    # thousands separators (a comma, a thin space, LaTeX's \,), trailing zeros, the unit glued on or not
    for written in ("1500 tokens", "1\u2009500 tokens", "$1\\,500$", "3.220 GB", "3.22GB", "3.2200"):
        nb = _nb(new_markdown_cell("## 3. Sequences\n\nA table: " + written), _shown(QUESTION))
        assert len(leaks(nb)) == 1, written


def test_a_table_above_the_question_and_the_next_questions_text_leak():
    table = kd.table(["context", "sequences"], [[8192, 373]]).data
    nb = _nb(new_markdown_cell("## 3. Sequences"), _shown(table), _shown(QUESTION),
             _shown("**Question 2.** With 3.22 GB free, how many more?"))
    assert _leaked(nb) == [("3.22", 3), ("373", 1)]


def test_a_plot_legend_leaks_through_the_figure_text():
    fig = kd.line_plot([1, 2], {"crossover at 1,500 tokens": [1, 2]}, xlabel="batch (sequences)",
                       ylabel="bytes (GB)", title="where the cache overtakes")
    assert kd.figure_text(fig) == "figure: where the cache overtakes | legend: crossover at 1,500 tokens"
    nb = _nb(new_markdown_cell("## 3. Sequences"), _shown(QUESTION),
             new_code_cell("", outputs=[new_output("display_data", data={
                 "image/png": "iVBOR", "text/plain": kd.figure_text(fig)})]))
    assert _leaked(nb) == [("1500", 2)]


def test_a_plots_alt_text_leaks_like_its_legend():
    # a screen reader reads the alt text kvdisplay puts in the image's metadata: an answer there is in view
    alt = "Line plot of memory (GB) against batch (sequences). weights, flat at 1,500 GB."
    nb = _nb(new_markdown_cell("## 3. Sequences"), _shown(QUESTION),
             new_code_cell("", outputs=[new_output("display_data", data={"image/png": "iVBOR", "text/plain": "x"},
                                                   metadata={"image/png": {"alt": alt}})]))
    assert _leaked(nb) == [("1500", 2)]
    nb.cells[2].outputs[0].metadata = {}
    assert _leaked(nb) == []


def test_an_explorer_line_leaks_through_its_saved_widget_state():
    states = {"box": {"model_name": "VBoxModel", "state": {"children": ["IPY_MODEL_html"]}},
              "html": {"model_name": "HTMLModel", "state": {"value": "<b>373</b> sequences fit"}}}
    nb = _nb(new_markdown_cell("## 3. Sequences"), new_code_cell("", outputs=[new_output("display_data", data={
        "application/vnd.jupyter.widget-view+json": {"model_id": "box"}, "text/plain": "VBox()"})]), _shown(QUESTION))
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": states}}
    assert _leaked(nb) == [("373", 1)]


def test_what_is_folded_in_another_section_or_trivial_does_not_leak():
    erratum_inside = kd.worked_problem(1, "How many 8,192-token sequences fit?", "bf16.", "$B$", [("S", "2", "x")],
                                       "373 sequences", "ok.", after=[kd.erratum("a sheet", "“370”", "rounding",
                                                                                 "<b>373</b>")]).data
    nb = _nb(new_markdown_cell("## 2. Before\n\n373 of them, 3.22 GB"),   # another section, above
             new_markdown_cell("## 3. Sequences\n\n### A subsection\n\nOn 8 GPUs, 4,096 tokens each"),
             _shown(erratum_inside),
             new_markdown_cell("## 4. After\n\n373 again"))                  # the next section
    assert leaks(nb) == []


def test_a_subsection_is_part_of_its_sections_span_but_not_of_its_parents():
    nb = _nb(new_markdown_cell("## 3. Sequences\n\n373 above the subsection"),
             new_markdown_cell("### 3.1 The question"), _shown(QUESTION),
             new_markdown_cell("#### 3.1.1 A deeper note\n\n373 in a deeper subsection"),
             new_markdown_cell("### 3.2 Next\n\n373 in the next subsection"))
    assert _leaked(nb) == [("373", 3)]


def test_names_are_not_figures():
    assert figures("Llama-3.1-8B on 8 × H100-SXM, fp8, ch04, GQA-8, <div style='width:42.0%'></div>") == {"8": "8"}
