"""kvdisplay.text and kvdisplay.problems: Markdown, tables, worked problems, errata, footnotes.

Expected strings are written here by hand (not produced by the module)."""

from __future__ import annotations

import pytest

import kvdisplay as kd


def test_table_formats_ints_and_escapes_pipes():
    text = kd.table(["a", "b"], [[1048576, "x|y"]]).data
    assert text.splitlines() == ["| a | b |", "|---|---|", "| 1,048,576 | x\\|y |"]


def test_table_names_a_short_row():
    with pytest.raises(ValueError, match="row 2 has 1 cells, the header 2"):
        kd.table(["a", "b"], [[1, 2], [3]])


def test_config_fields_table_distinguishes_absent_from_null():
    text = kd.config_fields_table({"m": {"num_key_value_heads": None, "head_dim": 128}},
                                  ["num_key_value_heads", "head_dim", "n_layer"]).data
    rows = text.splitlines()
    assert rows[0] == "| field | m |"                       # models are columns: wide configs never clip
    assert rows[2:5] == ["| `num_key_value_heads` | null |", "| `head_dim` | 128 |", "| `n_layer` | — |"]


def test_worked_problem_folds_the_answer_and_labels_every_substitution():
    text = kd.worked_problem(7, "How big?", "bf16.", "$x = 2 L$", [("L", 80, "layers")], "160 B", "twice L.").data
    question, folded = text.split("<details>")
    assert "How big?" in question and "bf16." in question
    assert "160" not in question                                # nothing of the answer before the fold
    assert "$L$ = 80 (layers)" in folded and "**160 B**" in folded and "twice L." in folded
    assert folded.rstrip().endswith("</details>")


def test_worked_problem_refuses_an_unlabelled_substitution():
    with pytest.raises(ValueError, match="substitution 'L' says nothing"):
        kd.worked_problem(1, "q", "a", "f", [("L", 80, " ")], "r", "s")


def test_erratum_quotes_the_claim_once_and_escapes_it():
    box = kd.erratum("a 2024 serving blog", "“a < b”", "here", "<b>b</b>").data
    assert "A 2024 serving blog says <i>“a &lt; b”</i>" in box
    assert box.count("“") == 1 and "<b>b</b>" in box


def test_erratum_refuses_an_empty_part():
    with pytest.raises(ValueError, match="where_wrong is empty"):
        kd.erratum("someone", "claim", "", "x")


def test_footnote_and_its_reference_match():
    assert kd.footnote_ref(2) == "<sup>2</sup>"
    assert kd.footnote(2, "tiny.").data == "<small><sup>2</sup> tiny.</small>"


def test_show_json_is_a_json_code_block():
    assert kd.show_json({"a": None}).data == '```json\n{\n "a": null\n}\n```'
