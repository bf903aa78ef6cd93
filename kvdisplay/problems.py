"""Worked problems with folded answers, erratum boxes, footnotes.

A worked problem follows one shape: the question and its assumptions in view, then,
folded in ``<details>``, the formula, every substitution with what its symbol stands
for, the result in bold with its units, and one sanity line. An erratum box comes
inside the folded answer it corrects, after the answer (``worked_problem(..., after=[...])``); it quotes the
claim, says who makes it in plain words, where it goes wrong, and the computed figure. A rounding of a fraction of a
percent is a footnote, not an erratum.

Used in: ch01_kv_formula, ch02_gqa_tp.
"""

from __future__ import annotations

import html

from IPython.display import HTML, Markdown


def worked_problem(number: int, question: str, assumptions: str, formula: str, substitutions,
                   result: str, sanity: str, after=()) -> Markdown:
    """A worked problem whose answer stays folded until the learner opens it.

    ``substitutions`` is a list of ``(symbol, value, meaning)``: each is shown as
    "symbol = value (meaning)", so no number appears without what it stands for.
    ``symbol`` is LaTeX without the dollars.

    >>> text = worked_problem(1, "Bytes per token?", "bf16.", "$2 L K D b$",
    ...                       [("L", "32", "layers")], "131,072 B", "128 KiB.").data
    >>> "<details>" in text and "$L$ = 32 (layers)" in text and "**131,072 B**" in text
    True

    ``after`` holds what comments on the answer (``erratum(...)`` boxes, ``footnote(...)``
    lines, or plain Markdown text): it goes *inside* the fold, after the sanity line, so
    nothing that states a figure of the answer is in view before the learner opens it.

    >>> box = erratum("an explainer", "“2 + 2 = 5”", "the sum", "<b>4</b>")
    >>> text = worked_problem(2, "2 + 2?", "none.", "$a + b$", [("a", "2", "first")], "4",
    ...                       "small.", after=[box, footnote(1, "exact.")]).data
    >>> text.index("Sanity check") < text.index("Erratum") < text.index("exact.") < text.index("</details>")
    True

    Raises ValueError when a substitution has no meaning or the result is empty.

    Used in: ch01_kv_formula (Questions 1-5), ch02_gqa_tp, ch03_mla (Questions 1-4), ch04_pool_paging (Questions 1-4), ch06_crossover (Questions 1-3, 5), ch07_capacity_plan, ch00_orientation (Question 1), ch05_prefix_reuse (Questions 1-4), ch08_vllm_lab (Questions 1-3), ch09_interview_drills (Questions 1-7), ch10_state_and_sparsity.
    """  # noqa: E501
    lines = []
    for entry in substitutions:
        symbol, value, meaning = entry
        if not str(meaning).strip():
            raise ValueError(f"worked problem {number}: substitution {symbol!r} says nothing of what it is")
        lines.append(f"* ${symbol}$ = {value} ({meaning})")
    if not str(result).strip():
        raise ValueError(f"worked problem {number}: empty result")
    text = (f"**Question {number}.** {question}\n\n*Assumptions:* {assumptions}\n\n"
            "<details><summary>Show the answer</summary>\n\n"
            f"{formula}\n\n" + "\n".join(lines) + "\n\n"
            f"Result: **{result}**\n\n*Sanity check:* {sanity}\n\n"
            + "".join(f"{_text_of(item)}\n\n" for item in after) + "</details>")
    return Markdown(text)


def _text_of(item) -> str:
    # An IPython display object (HTML, Markdown) or a string, as markup to place in the fold.
    data = getattr(item, "data", item)
    if not isinstance(data, str) or not data.strip():
        raise ValueError(f"worked problem: an item after the answer is empty or not text: {item!r}")
    return data


ERRATUM_STYLE = ("border-left:5px solid #c0392b;background:#fdf0ee;padding:0.5em 1em;margin:0.6em 0;"
                 "line-height:1.5")


def erratum(who: str, claim: str, where_wrong: str, computed: str) -> HTML:
    """A red box for a real error in a published figure, shown after the folded answer.

    ``who`` says in plain words who makes the claim: the kind of source, with its date where it is known ("a
    worked-example sheet", "a 2024 serving blog"), never a popularity a learner cannot check ("widely shared");
    ``claim`` is the claim verbatim, in “…” (write the quotes in the notebook, so the source
    reads as a quotation; they are added if missing); it is escaped. ``where_wrong`` and
    ``computed`` are HTML the notebook built from kvlib figures.

    >>> box = erratum("an explainer", "“80 < 79”", "the order", "<b>80 > 79</b>").data
    >>> "“80 &lt; 79”" in box and "Erratum" in box
    True

    Used in: ch01_kv_formula, ch02_gqa_tp, ch04_pool_paging, ch06_crossover, ch07_capacity_plan, ch05_prefix_reuse, ch08_vllm_lab, ch09_interview_drills.
    """  # noqa: E501
    for name, value in (("who", who), ("claim", claim), ("where_wrong", where_wrong), ("computed", computed)):
        if not str(value).strip():
            raise ValueError(f"erratum: {name} is empty")
    claim = claim.strip().removeprefix("“").removesuffix("”")
    return HTML(f'<div class="kv-erratum" style="{ERRATUM_STYLE}">'
                f"<b>Erratum.</b> {html.escape(who[0].upper() + who[1:])} says "
                f"<i>“{html.escape(claim)}”</i><br>"
                f"<b>Where it goes wrong:</b> {where_wrong}<br>"
                f"<b>Computed:</b> {computed}</div>")


def footnote_ref(number: int) -> str:
    """The superscript that points at footnote ``number``: ``<sup>1</sup>``.

    Used in: ch01_kv_formula, ch04_pool_paging, ch07_capacity_plan, ch09_interview_drills.
    """
    return f"<sup>{int(number)}</sup>"


def footnote(number: int, text: str) -> Markdown:
    """A footnote in small print, for a rounding too small to be an error.

    >>> footnote(1, "0.07% high.").data
    '<small><sup>1</sup> 0.07% high.</small>'

    Used in: ch01_kv_formula, ch02_gqa_tp, ch04_pool_paging, ch06_crossover, ch07_capacity_plan, ch08_vllm_lab, ch09_interview_drills.
    """  # noqa: E501
    return Markdown(f"<small>{footnote_ref(number)} {text}</small>")
