"""Say the assumptions: a drill answer as the figure plus the assumptions it rests on, checked field by field.

An interviewer grades the stated assumptions as much as the number. For the topics where an
assumption changes the figure, a structured answer names them as ``key=value`` pairs::

    tokens=885,301 utilization=0.9 memory=cuda

``fields(problem)`` lists what a problem's structured answer holds: the figure (its key is the
unit word: ``tokens``, ``bytes``, ``sequences``, ``ms``, ``nodes``; ``answer`` also works), then
``utilization`` (the engine's share of GPU memory, where the question has one), ``mfu`` (the
share of the GPU's peak FLOP/s a prefill reaches, where it has one), ``memory``
(``cuda``, the memory CUDA reports, or ``label``, the data sheet's GB; where both are stated) and
``dtype`` (the KV cache's element type: ``bf16``/``fp16`` 2 bytes, ``fp8`` 1, ``fp32`` 4).
``check(problem, text)`` returns one verdict per field, each with its own message: the figure's
is ``Problem.check``'s (the slip named); a wrong assumption says what the question states, and
whether the figure follows from the assumption the learner stated (kvlib recomputes it with that
assumption: a consistent answer on a wrong premise, or a slip on top of it).

The assumptions of ``OPEN`` (the engine's share of memory, the MFU) are the learner's to make, so a
structured question does not state them (``open_question``: an interviewer waits to hear them, and
echoing them back would grade nothing): a stated value in its plausible range is right, and the figure
is judged against kvlib's with that value (``as_stated``). The memory figure and the element type stay
stated facts (the data sheet and CUDA's figure, the config's dtype) of which the learner names the one used.

>>> from kvcoach.drills import generate
>>> p = generate("pool", 1)
>>> fields(p)
('tokens', 'utilization', 'memory')
>>> "The engine takes 0.90 of what CUDA reports;" in p.question
True
>>> "The engine takes its share of what CUDA reports (state the share you assume);" in open_question(p)
True
>>> right = expected_value(p.quantity, **dict(p.inputs, utilization=0.9))   # kvlib's figure at the stated 0.9
>>> v = check(p, f"tokens={right} utilization=0.9 memory=label")
>>> v.correct, [f.ok for f in v.fields]
(False, [True, True, False])

Taught in ch09_interview_drills (drill mode's "state assumptions"); ``kvlib drill --assumptions``.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from types import MappingProxyType

from .slips import expected_value

__all__ = ["AssumptionError", "FieldVerdict", "StatedVerdict", "fields", "parse", "check", "prompt", "DTYPES", "OPEN",
           "open_question", "as_stated"]

#: Element types a learner may name, and their bytes per element.
DTYPES = {"bf16": 2, "bfloat16": 2, "fp16": 2, "float16": 2, "half": 2, "16bit": 2, "16-bit": 2,
          "fp8": 1, "float8": 1, "e4m3": 1, "fp8_e4m3": 1, "e5m2": 1, "fp8_e5m2": 1, "8bit": 1, "8-bit": 1,
          "fp32": 4, "float32": 4, "32bit": 4, "32-bit": 4}
_DTYPE_NAMES = {2: "bf16 (2 bytes per element)", 1: "fp8 (1 byte per element)", 4: "fp32 (4 bytes per element)"}
MEMORY = {"cuda": "cuda", "reported": "cuda", "cuda-reported": "cuda", "torch": "cuda", "label": "label",
          "datasheet": "label", "data-sheet": "label", "nominal": "label"}
FIGURE_ALIASES = ("answer", "value", "figure")
#: The assumptions a structured question leaves open: field -> (plausible range, how the question states it, what
#: it says instead). vLLM's gpu_memory_utilization defaults to 0.9-0.92 and is set from about half to nearly all of
#: the memory; a prefill's MFU runs from a tenth to about 0.8 of peak.
OPEN = {
    "utilization": ((0.5, 0.99), re.compile(r"The engine takes \d+(?:\.\d+)? of what CUDA reports"),
                    "The engine takes its share of what CUDA reports (state the share you assume)"),
    "mfu": ((0.1, 0.9), re.compile(r"\d+(?:\.\d+)?% MFU"), "an MFU you state"),
}


class AssumptionError(ValueError):
    """A structured answer that cannot be read; the message names the field."""


@dataclass(frozen=True)
class FieldVerdict:
    """One field of a structured answer: its name, what was stated (None: missing), the verdict, the message."""

    name: str
    stated: str | None
    ok: bool
    message: str


@dataclass(frozen=True)
class StatedVerdict:
    """A structured answer checked: right only when every field is; the figure's slip key, if one is named, and
    every slip key its feedback names (``slips``: two where the figure's feedback says "Or: ...")."""

    fields: tuple
    slip: str | None = None
    slips: tuple = ()

    @property
    def correct(self) -> bool:
        return all(f.ok for f in self.fields)

    def figure_ok(self) -> bool:
        return bool(self.fields) and self.fields[0].ok

    def text(self) -> str:
        """One line per field: '✓ tokens: ...' / '✗ memory: ...'."""
        return "\n".join(f"{'✓' if f.ok else '✗'} {f.name}: {f.message}" for f in self.fields)


def _figure_key(problem) -> str:
    return problem.units.split()[-1]     # 'token slots' -> 'slots'


def fields(problem) -> tuple:
    """The fields of ``problem``'s structured answer: the figure's key, then the assumptions it rests on."""
    i = problem.inputs
    out = [_figure_key(problem)]
    if "utilization" in i:
        out.append("utilization")
    if "mfu" in i:
        out.append("mfu")
    if "gpu_bytes" in i and "label_bytes" in i:
        out.append("memory")
    if "dtype_bytes" in i:
        out.append("dtype")
    return tuple(out)


def prompt(problem) -> str:
    """What to type: ``tokens=<figure> utilization=<share> memory=cuda|label`` for this problem."""
    hints = {"utilization": "utilization=<share of GPU memory>", "mfu": "mfu=<share of peak FLOP/s>",
             "memory": "memory=cuda|label",
             "dtype": "dtype=bf16|fp8|fp32"}
    names = fields(problem)
    return " ".join([f"{names[0]}=<your figure>"] + [hints[n] for n in names[1:]])


_KEY = re.compile(r"(?:^|[\s;])([A-Za-z_]+)\s*[=:]\s*")


def parse(text: str, problem) -> dict:
    """``{field: text}`` from ``key=value`` pairs (spaces or ';' between pairs; ``key: value`` too).

    A bare figure with no key is the figure. A key this problem does not ask, or one given twice,
    is refused with a one-line ``AssumptionError`` naming it.
    """
    text = str(text).strip()
    names = fields(problem)
    matches = list(_KEY.finditer(text))
    if not matches:
        return {names[0]: text} if text else {}
    out = {}
    lead = text[:matches[0].start()].strip(" ;")
    if lead:
        out[names[0]] = lead
    for n, m in enumerate(matches):
        end = matches[n + 1].start() if n + 1 < len(matches) else len(text)
        key, value = m.group(1).lower(), text[m.end():end].strip(" ;")
        if key in FIGURE_ALIASES or key == problem.units.lower():
            key = names[0]
        if key not in names:
            raise AssumptionError(f"unknown field {m.group(1)!r}: this question asks {', '.join(names)}")
        if key in out:
            raise AssumptionError(f"field {key!r} is given twice")
        out[key] = value
    return out


def open_question(problem) -> str:
    """The question as a structured answer asks it: the assumptions of ``OPEN`` are withheld, to be stated."""
    text = problem.question
    for name in fields(problem)[1:]:
        if name in OPEN:
            text = OPEN[name][1].sub(OPEN[name][2], text)
    return text


def _open_values(problem, stated: dict) -> dict:
    """``{field: share}`` of the open assumptions stated within their plausible range."""
    out = {}
    for name in fields(problem)[1:]:
        if name in OPEN and stated.get(name):
            u = _share_value(stated[name])
            low, high = OPEN[name][0]
            if u is not None and low <= u <= high:
                out[name] = u
    return out


def as_stated(problem, text):
    """``problem`` with the open assumptions ``text`` states (plausible ones) in place of the question's: its
    answer kvlib's figure with them, so its check and worked steps follow the learner's premise."""
    try:
        values = _open_values(problem, parse(text, problem))
    except AssumptionError:
        values = {}
    if not values:
        return problem
    inputs = dict(problem.inputs, **values)
    return dataclasses.replace(problem, inputs=MappingProxyType(inputs), params=MappingProxyType(
        dict(problem.params, **values)), answer=expected_value(problem.quantity, **inputs))


def _follows(problem, override: dict, figure) -> bool:
    """Whether ``figure`` is what kvlib computes with the learner's stated assumption instead of the question's."""
    try:
        value = expected_value(problem.quantity, **dict(problem.inputs, **override))
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return False
    if isinstance(figure, (int, float)) and isinstance(value, (int, float)):
        return math.isclose(figure, value, rel_tol=max(problem.tolerance, 1e-9))
    return False


def _number(text):
    try:
        value = float(str(text).replace(",", "").replace("_", ""))
    except ValueError:
        return None
    return int(value) if value.is_integer() and re.fullmatch(r"[-+]?[\d,_]+", str(text).strip()) else value


def check(problem, text, reveal: bool = True) -> StatedVerdict:
    """Check a structured answer field by field (see the module's docstring); never raises on a bad value.

    ``reveal=False``: the figure's message does not show the answer (``Problem.check``).
    """
    try:
        stated = parse(text, problem)
    except AssumptionError as e:
        return StatedVerdict((FieldVerdict("answer", str(text), False, str(e)),))
    names = fields(problem)
    figure_text = stated.get(names[0])
    judged = as_stated(problem, text)          # the figure follows the open assumptions the learner stated
    verdicts = []
    if not figure_text:
        verdicts.append(FieldVerdict(names[0], None, False, f"missing: give the figure as {names[0]}=..."))
        figure = None
        slip, named = None, ()
    else:
        judgement = judged.verdict(figure_text, reveal=reveal)
        ok, named = judgement.correct, judgement.slips
        verdicts.append(FieldVerdict(names[0], figure_text, ok, judgement.feedback))
        figure = _number(figure_text)
        slip = None if ok else judged.slip_key(figure_text)
    i = problem.inputs
    for name in names[1:]:
        value = stated.get(name)
        if not value:
            verdicts.append(FieldVerdict(name, None, False, _MISSING[name]))
            continue
        if name in OPEN:
            verdicts.append(_open_check(name, value.strip()))
            continue
        verdicts.append(_CHECKS[name](problem, i, value.strip(), figure))
    named = tuple(dict.fromkeys(((slip,) if slip else ()) + tuple(named if slip else ())))
    return StatedVerdict(tuple(verdicts), slip, named)


_MISSING = {
    "utilization": "missing: say which share of GPU memory the engine takes (utilization=...).",
    "mfu": "missing: say which share of the GPU's peak FLOP/s the prefill reaches (mfu=...).",
    "memory": "missing: say which memory figure you start from (memory=cuda for what CUDA reports, or label).",
    "dtype": "missing: say which element type the KV cache uses (dtype=bf16, fp8 ...).",
}


def _share_value(value):
    """A share typed as ``0.92`` or ``92%``; None when it is not a number."""
    value = str(value).strip()
    u = _number(value.rstrip("%"))
    return None if u is None else (u / 100 if value.endswith("%") else u)


def _open_check(name, value) -> FieldVerdict:
    """An open assumption: right when it is a share in its plausible range (the figure is judged with it)."""
    u = _share_value(value)
    low, high = OPEN[name][0]
    if u is None:
        return FieldVerdict(name, value, False, f"expected a share between 0 and 1 (0.92 or 92%), got {value!r}.")
    if not low <= u <= high:
        return FieldVerdict(name, value, False, f"{u:g} is outside the plausible range {low:g} to {high:g}; the "
                                                f"figure is judged with the question's own value.")
    return FieldVerdict(name, value, True, f"{u:g}, stated: the figure is judged with it.")


def _memory(problem, i, value, figure) -> FieldVerdict:
    said = MEMORY.get(value.lower())
    if said is None:
        return FieldVerdict("memory", value, False, f"expected cuda or label, got {value!r}.")
    if said == "cuda":
        return FieldVerdict("memory", value, True, "what CUDA reports: the engine sizes its budget from "
                                                  "torch.cuda.mem_get_info, not from the label.")
    follows = (" Your figure follows from the label's memory: the premise, not the arithmetic, is off."
               if _follows(problem, {"gpu_bytes": i["label_bytes"]}, figure) else "")
    return FieldVerdict("memory", value, False,
                        f"the label's {i['label_bytes'] / 10**9:,.0f} GB is the data sheet's figure; vLLM takes its "
                        f"share of the memory CUDA reports ({i['gpu_bytes'] / 2**30:,.2f} GiB).{follows}")


def _dtype(problem, i, value, figure) -> FieldVerdict:
    b = DTYPES.get(value.lower().replace(" ", ""))
    if b is None and _number(value) in (1, 2, 4):
        b = _number(value)
    if b is None:
        return FieldVerdict("dtype", value, False, f"expected bf16, fp16, fp8 or fp32 (or the bytes per element), "
                                                  f"got {value!r}.")
    if b == i["dtype_bytes"]:
        return FieldVerdict("dtype", value, True, f"{_DTYPE_NAMES[b]}, as the question states.")
    follows = (" Your figure follows from the element size you stated."
               if _follows(problem, {"dtype_bytes": b}, figure) else "")
    return FieldVerdict("dtype", value, False, f"the question's cache is {_DTYPE_NAMES[i['dtype_bytes']]}, not "
                                              f"{_DTYPE_NAMES[b]}.{follows}")


_CHECKS = {"memory": _memory, "dtype": _dtype}     # the OPEN fields are checked by _open_check
