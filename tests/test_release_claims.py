"""tests/release_claims.py: which statements give an engine default, and which of them name the release.

The sentences are written here, each with the verdict a reader of the rules gives it; the two of [december 2026]'s
"Done when" come first.
"""

import nbformat
import pytest

from release_claims import names_release, states_default, statements, unreleased_defaults


@pytest.mark.parametrize("text,flagged", [
    ("16-token blocks by default", True),
    ("16-token blocks, vLLM's default through 0.33", False),
    ("64-token blocks, vLLM's default from 0.34", False),
    ("A block holds 16 tokens (16 by default on a GPU) for every layer.", True),
    ("vLLM's default gpu_memory_utilization is 0.92.", True),                     # 0.92 is a figure, not a release
    ("vLLM's default gpu_memory_utilization is 0.92 from 0.20 to 0.33.", False),
    ("The default is 1.0 in vLLM 0.34 (the measured pool).", False),
    ("SGLang's page size is 1, the default (`--page-size`).", True),
    ("SGLang's page size is 1, the default of SGLang 0.5.23 (`--page-size`).", False),
    ("CUDA graph memory profiling is enabled (default since v0.21.0)", False),
    ("vLLM's default max_num_seqs of 256 on an A100", True),
    ("the default seed is 4", False),                                            # no engine or setting named
    ("blocks are handed out by the engine", False),                               # no default, no figure
    ("with chunked prefill (vLLM V1's default), as chapter 06 shows", False),     # a chapter number is a name
])
def test_a_default_names_its_release(text, flagged):
    [statement] = statements(text)
    assert (states_default(statement) and not names_release(statement)) == flagged


def test_a_table_by_release_names_the_release_in_its_header():
    by_column = "| vLLM release | 0.8.5 | 0.20.0 |\n|---|---|---|\n| default `gpu_memory_utilization` | 0.90 | 0.92 |"
    by_row = "| vLLM | default utilization |\n|---|---|\n| 0.20.2 | 0.92 |"
    without = "| input | value | from |\n|---|---|---|\n| utilization | 0.92 | vLLM's default |"
    for table, flagged in ((by_column, False), (by_row, False), (without, True)):
        [row] = statements(table)
        assert (states_default(row) and not names_release(row)) == flagged, row


def test_fenced_logs_are_not_prose_and_wrapped_lines_are_one_sentence():
    text = "A quoted log:\n\n```\nblock_size=16 (default)\n```\n\nvLLM cuts the pool into blocks of 16\ntokens by default."
    assert statements(text) == ["A quoted log:", "vLLM cuts the pool into blocks of 16 tokens by default."]


def test_an_executed_notebook_is_read_as_the_learner_sees_it():
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("vLLM's block: 16 tokens by default."),
        nbformat.v4.new_code_cell("x", outputs=[nbformat.v4.new_output(
            "display_data", data={"text/markdown": "64-token blocks, vLLM's default from 0.34.",
                                  "text/plain": "<IPython.core.display.Markdown object>"})]),
        nbformat.v4.new_code_cell("y", outputs=[nbformat.v4.new_output(
            "display_data", data={"text/html": "<details><summary>Answer</summary>SGLang pages of 1 token by "
                                               "default</details>"})]),
    ])
    assert [(c.cell, c.text) for c in unreleased_defaults(nb)] == [
        (0, "vLLM's block: 16 tokens by default."), (2, "Answer SGLang pages of 1 token by default")]   # folds read too
