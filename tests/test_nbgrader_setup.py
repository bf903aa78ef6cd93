"""The course config's nbgrader set-up (``autograder.nbgrader_setup``), without a kernel: the output bound.

``LimitOutputSize`` stands in for nbgrader's ``LimitOutput`` in autograde, so the autograded notebook, and the
feedback page made from it, stays small whatever an answer cell prints. Sizes here are counted by hand: a cell
keeps 100,000 characters of text, one image 1,000,000 characters, the notebook 5,000,000 in all.
"""

from __future__ import annotations

import nbformat
from nbgrader.preprocessors import LimitOutput

from autograder import nbgrader_setup as S


def _cell(*outputs):
    return nbformat.v4.new_code_cell("print('x')", outputs=[nbformat.from_dict(o) for o in outputs])


def _run(*cells):
    nb = nbformat.v4.new_notebook(cells=list(cells))
    out, _ = S.LimitOutputSize().preprocess(nb, {})
    return out


def test_a_30_mb_print_is_cut_to_the_cells_bound_and_says_so():
    nb = _run(_cell({"output_type": "stream", "name": "stdout", "text": "x" * 30_000_000 + "\n"}))
    text = nb.cells[0].outputs[0]["text"]
    assert text.startswith("x" * 100_000 + "\n[output cut by the grader: 29,900,001 more characters")
    assert len(text) < 100_200
    # nbgrader's own LimitOutput counts lines: the one long line passes it whole
    stock, _ = LimitOutput().preprocess(nbformat.v4.new_notebook(cells=[_cell(
        {"output_type": "stream", "name": "stdout", "text": "x" * 30_000_000 + "\n"})]), {})
    assert len(stock.cells[0].outputs[0]["text"]) == 30_000_001


def test_the_bound_is_shared_by_a_cells_outputs_and_small_ones_pass_unchanged():
    small = {"output_type": "display_data", "data": {"text/plain": "a table", "image/png": "i" * 80_000},
             "metadata": {}}
    nb = _run(_cell({"output_type": "stream", "name": "stdout", "text": "y" * 60_000},
                    {"output_type": "execute_result", "execution_count": 1, "metadata": {},
                     "data": {"text/plain": "z" * 60_000, "text/html": "<b>" + "z" * 60_000 + "</b>"}}),
              _cell(small))
    first, second = nb.cells[0].outputs
    assert first["text"] == "y" * 60_000                                  # 60,000 of 100,000
    plain = second["data"]["text/plain"]
    assert plain.startswith("z" * 40_000 + "\n[output cut by the grader: 20,000 more characters")
    assert "text/html" not in second["data"] and "60,007 more characters" in plain     # dropped, and said so
    assert nb.cells[1].outputs[0]["data"] == {"text/plain": "a table", "image/png": "i" * 80_000}


def test_an_image_over_its_bound_is_replaced_by_a_line():
    nb = _run(_cell({"output_type": "display_data", "metadata": {},
                     "data": {"image/png": "p" * 1_500_000, "text/plain": "<Figure>"}}))
    data = nb.cells[0].outputs[0]["data"]
    assert "image/png" not in data
    assert data["text/plain"] == "<Figure>\n[output cut by the grader: 1,500,000 more characters; it keeps no " \
                                 "image/png output over 1,000,000 characters]"


def test_a_long_error_message_is_cut():
    nb = _run(_cell({"output_type": "error", "ename": "ValueError", "evalue": "e" * 250_000,
                     "traceback": ["line"] * 10}))
    error = nb.cells[0].outputs[0]
    assert error["evalue"].startswith("e" * 100_000 + "\n[output cut by the grader: 150,000 more")
    assert len("".join(error["traceback"])) < 200


def test_the_whole_notebook_is_bounded():
    """60 cells of 90,000 characters each: 5,400,000 would pass each cell's bound; the notebook keeps 5,000,000."""
    cells = [_cell({"output_type": "stream", "name": "stdout", "text": "w" * 90_000}) for _ in range(60)]
    nb = _run(*cells)
    kept = [c.outputs[0]["text"].count("w") for c in nb.cells]
    assert kept == [90_000] * 55 + [50_000] + [0] * 4                  # 55 x 90,000 + 50,000 = 5,000,000
    assert all(c.outputs[0]["text"].startswith("[output cut by the grader: 90,000 more") for c in nb.cells[56:])


def test_autograde_uses_it_in_place_of_nbgraders():
    chain = S.autograde_preprocessors()
    assert S.LimitOutputSize in chain and LimitOutput not in chain
    assert chain.index(S.LimitOutputSize) > chain.index(S.GradingStudentExecute)
