"""After a miss, the worked steps: what ``kvlib drill`` and drill mode show under a wrong practice answer.

``worked_lines(problem)`` is the substitution chain of ``Problem.steps()`` for this question's
numbers, one numbered line per step. ``where_lines(problem, answer)`` says where the learner's
number comes from: the step a named slip enters (``Problem.slip_step``), or the step the number
equals when the learner stopped short (``Problem.matching_step``). Neither is shown for a graded
question (``kvlib drill --student``), which reveals nothing.

>>> from kvcoach.drills import generate
>>> p = generate("kv_per_token", 1)        # Qwen3-0.6B: 28 layers, 8 KV heads of 128, 16 query heads, bf16
>>> print(worked_lines(p)[-1])
  2. bytes per token, all layers: 2 · L · K · D · b = 2 · 28 · 8 · 128 · 2 = 114,688 bytes
>>> where_lines(p, "229376")
['your 229,376: the slip [query_heads] enters at step 1 (bytes per token, one layer).']
>>> where_lines(p, "4096")                 # one layer's bytes is also the slip 'layers left out'
['your 4,096: the slip [missing_layers] enters at step 2 (bytes per token, all layers).']
>>> pool = generate("pool", 1)             # an H200 at 0.9: the engine's budget, before weights and the rest
>>> where_lines(pool, "135,098,196,295")
["your 135,098,196,295 is step 1 (the engine's budget): the question asks for step 3 (tokens the pool holds)."]
>>> where_lines(pool, "116,038,196,295")   # the bytes left: within 0.5% of the tokens in bytes, a named slip
['your 116,038,196,295: the slip [bytes_for_tokens] enters at step 3 (tokens the pool holds).']

Used by kvcoach.cli and kvdisplay.drills; taught in ch09_interview_drills.
"""

from __future__ import annotations

__all__ = ["worked_lines", "where_lines"]


def worked_lines(problem) -> list:
    """``['worked steps:', '  1. label: formula = substitution = value units', ...]``."""
    return ["worked steps:"] + [f"  {n}. {step.text()}" for n, step in enumerate(problem.steps(), 1)]


def _typed(answer) -> str:
    text = str(answer).strip()
    digits = text.replace(",", "").replace("_", "")
    try:
        value = float(digits)
    except ValueError:
        return text
    return f"{int(value):,}" if value.is_integer() and digits.lstrip("+-").isdigit() else text


def where_lines(problem, answer) -> list:
    """Where a wrong ``answer`` comes from, in one line (or none when neither a slip's step nor a step matches)."""
    steps = problem.steps()
    key = problem.slip_key(answer)
    if key:
        n = problem.slip_step(key)
        if n is not None:
            return [f"your {_typed(answer)}: the slip [{key}] enters at step {n + 1} ({steps[n].label})."]
    n = problem.matching_step(answer)
    if n is not None:
        return [f"your {_typed(answer)} is step {n + 1} ({steps[n].label}): the question asks for step "
                f"{len(steps)} ({steps[-1].label})."]
    return []
