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


def test_what_is_folded_after_the_question_or_trivial_does_not_leak():
    erratum_inside = kd.worked_problem(1, "How many 8,192-token sequences fit?", "bf16.", "$B$", [("S", "2", "x")],
                                       "373 sequences", "ok.", after=[kd.erratum("a sheet", "“370”", "rounding",
                                                                                 "<b>373</b>")]).data
    nb = _nb(new_markdown_cell("## 2. Before\n\nOn 8 GPUs, 4,096 tokens each, 3.22 GB"),   # above: inputs only
             new_markdown_cell("## 3. Sequences\n\n### A subsection\n\nOn 8 GPUs, 4,096 tokens each"),
             _shown(erratum_inside),
             new_markdown_cell("## 4. After\n\n373 again"))                  # after the question, unfolded
    assert leaks(nb) == []


def test_a_result_anywhere_above_its_question_leaks():
    # a teaching table two sections above the question prints its result: the learner read it on the way
    nb = _nb(new_markdown_cell("## 1. Tables\n\n| model | sequences |\n|---|---|\n| 8B | 373 |"),
             new_markdown_cell("## 2. Something else"),
             new_markdown_cell("## 3. Sequences"), _shown(QUESTION))
    assert _leaked(nb) == [("373", 0)]
    # a figure of the fold that is no result (its sanity line's 1,500 tokens spare) is checked in its section only
    nb.cells[0].source = "## 1. Tables\n\n1,500 tokens"
    assert _leaked(nb) == []


def test_a_later_questions_text_that_quotes_an_answer_leaks():
    # the learner reads Question 2 before opening Question 1's fold, even in another section
    nb = _nb(new_markdown_cell("## 3. Sequences"), _shown(QUESTION), new_markdown_cell("## 4. Later"),
             _shown(kd.worked_problem(2, "Question 1's 373 sequences grow to 16,384 tokens: how many fit?", "bf16.",
                                      "$B$", [("B", "186", "sequences")], "186 sequences", "half.").data))
    assert _leaked(nb) == [("373", 3)]


def test_a_near_figure_of_a_result_leaks_and_another_unit_does_not():
    # 451,330 tokens (the pool from a slightly different memory) gives away 451,342; 373 GB is no count of sequences
    question = kd.worked_problem(1, "How many tokens hold the pool?", "bf16.", "$T$", [("b", "2", "bytes")],
                                 "451,342 tokens", "ok.").data
    nb = _nb(new_markdown_cell("## 1. Pool\n\nFrom the table's memory: 451,330 tokens; 451,000 is round"),
             new_markdown_cell("## 2. Q"), _shown(question))
    assert [leak.written for leak in leaks(nb)] == ["451,330"]
    nb = _nb(new_markdown_cell("## 1. HBM\n\nAn MI300X holds 373 GB."), new_markdown_cell("## 3. Q"), _shown(QUESTION))
    assert leaks(nb) == []


def test_a_question_that_states_a_figure_as_its_input_is_no_leak():
    # Question 2 names the log's 652,144 tokens as its input; its answer, a window around it, is near it
    question = kd.worked_problem(2, "A log prints 652,144 tokens. Do they agree?", "bf16.", "$n$",
                                 [("n", "40,759", "blocks")], "652,128 to 652,208 tokens; it is inside", "ok.").data
    nb = _nb(new_markdown_cell("## 1. Logs\n\nThe log: 652,144 tokens"), new_markdown_cell("## 2. Q"), _shown(question))
    assert leaks(nb) == []


def test_several_questions_in_one_output_each_have_their_own_text():
    both = QUESTION + "\n\n" + kd.worked_problem(2, "Now 16,384 tokens each?", "bf16.", "$B$",
                                                   [("B", "186", "sequences")], "186 sequences", "half.").data
    nb = _nb(new_markdown_cell("## 3. Sequences"), _shown(both))
    assert leaks(nb) == []


def test_a_subsection_is_part_of_its_sections_span_but_not_of_its_parents():
    nb = _nb(new_markdown_cell("## 3. Sequences\n\n373 above the subsection"),
             new_markdown_cell("### 3.1 The question"), _shown(QUESTION),
             new_markdown_cell("#### 3.1.1 A deeper note\n\n373 in a deeper subsection"),
             new_markdown_cell("### 3.2 Next\n\n373 in the next subsection"))
    # the deeper note under the closed fold is in its span; the parent's line above is before the question
    assert _leaked(nb) == [("373", 0), ("373", 3)]


def test_names_are_not_figures():
    assert figures("Llama-3.1-8B on 8 × H100-SXM, fp8, ch04, GQA-8, <div style='width:42.0%'></div>") == {"8": "8"}
    assert figures("Question 13, Exercise 12, chapter 05, §6 and section 4.2: 4,321 B") == {"4321": "4,321"}


def test_a_folded_reference_is_no_answer_but_an_answer_still_is():
    # kvdisplay's folded references (a command's whole output, the notation table) are marked class="reference":
    # what they hide is out of view, but no question's answer, so a figure shown open elsewhere is no leak
    assert 'class="reference"' in kd.terminal("gpus", summary="GPUs (chapter 04)").data
    erratum = _shown("<div class='kv-erratum'><b>Computed:</b> <b>373 sequences</b></div>", "text/html")
    as_reference = QUESTION.replace("<details>", '<details class="reference">', 1)
    assert as_reference != QUESTION
    assert _leaked(_nb(new_markdown_cell("## 3. Sequences"), _shown(as_reference), erratum)) == []
    assert _leaked(_nb(new_markdown_cell("## 3. Sequences"), _shown(QUESTION), erratum)) == [("373", 2)]
