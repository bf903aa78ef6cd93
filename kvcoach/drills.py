"""Drills: seeded KV-cache problems, checked with the autograder's slip catalogue.

``generate(topic, seed)`` returns a frozen Problem over the bundled models
and GPUs: the question, its parameters, kvlib's exact answer, a tolerance,
and ``check(answer) -> (correct, feedback)``, which names the slip when a
wrong answer equals a known mistake recomputed (``kvcoach.slips.diagnose``,
the catalogue the autograder uses). The same seed gives the same problem on
every machine: only ``random.Random(seed)`` draws, over sorted lists.

>>> p = generate("kv_per_token", seed=3)
>>> p.check(p.answer)[0]
True
>>> seed_for_student("ada") == seed_for_student("ada") != seed_for_student("alan")
True

``kvlib drill`` asks them in the terminal. Taught in ch09_interview_drills
and in every chapter's practice section.
"""

from __future__ import annotations

import functools
import hashlib
import math
import random
import re
import sys
import time
from dataclasses import dataclass, field
from types import MappingProxyType

from kvlib import formulas
from kvlib import serving as formulas_serving
from kvlib.assumptions import DEFAULT_OVERHEAD_BYTES
from kvlib.config import course_models, load_model
from kvlib.feasibility import check_deployment, tp_refusal
from kvlib.gpus import GPUS
from kvlib.offload import (attention_pairs, prefill_attention_flops, prefill_linear_flops,
                           prefill_params_per_token)
from kvlib.params import routed_expert_params
from kvlib.roofline import all_experts_batch, crossover_context, expected_experts_touched, weight_bytes_read
from kvlib.spec import FULL
from kvlib.units import GB, GiB, parse_bytes
from kvlib.vllm.engine import default_utilization
from kvlib.weights import stored_weights

from . import slips
from .guard import GuardedField
from .slips import COMBINED, PREFIX_MIX_KEYS, base_key, diagnose

__all__ = ["FAMILIES_2026", "GRADED_KINDS", "GRADED_TOPICS", "KINDS", "TOPICS", "MAX_REPEATS", "TOLERANCE",
           "EXACT_UNITS", "Problem", "Question", "Step", "Verdict", "DrillError", "answer_reads", "generate",
           "problem_set", "read_answer", "seed_for_student", "student_problem", "swallowed_slips", "tolerance_for",
           "units_line", "variety_key"]


class DrillError(ValueError):
    """Unknown topic or bad drill input; the message names it."""


@dataclass(frozen=True)
class Step:
    """One step of a worked answer: what it computes, its formula, this question's numbers, the result.

    ``Problem.steps()`` gives the chain for one problem, each value computed
    by kvlib's own function for that step; the last one is the answer.
    """

    label: str         # what this step computes, e.g. "bytes per token, all layers"
    formula: str       # symbols, plain text, e.g. "2 · L · K · D · b"
    substitution: str  # this question's numbers, e.g. "2 · 32 · 8 · 128 · 2"
    value: object      # the step's result (int for bytes/counts)
    units: str         # "bytes", "tokens", "ms", ...

    def text(self) -> str:
        """One line: 'label: formula = substitution = value units'."""
        return f"{self.label}: {self.formula} = {self.substitution} = {_amount(self.value, self.units)}"


@dataclass(frozen=True)
class Question:
    """A problem as a learner may hold it: what is asked, never the answer (``Problem.public()``).

    ``params`` are the figures the question states (model and GPU names,
    layers, heads, budgets ...); a worked answer computes from them.
    """

    topic: str
    question: str
    units: str
    tolerance: float            # relative; 0 means exact
    params: MappingProxyType = field(hash=False)

    def tolerance_text(self) -> str:
        """'exact' or 'within 0.5%'."""
        return _tolerance_text(self.tolerance)

    def units_line(self) -> str:
        """The line under the question: units, tolerance, the notations read (``units_line``)."""
        return units_line(self.units, self.tolerance)


@dataclass(frozen=True)
class Verdict:
    """``Problem.verdict``'s judgement: right or not, the feedback, every slip key the feedback names (in its
    order; empty when none) and the number read (None when the text was not one)."""

    correct: bool
    feedback: str
    slips: tuple = ()
    value: object = None


@dataclass(frozen=True)
class Problem:
    """One question with its exact answer and a slip-aware checker."""

    topic: str
    seed: int
    question: str
    answer: object              # kvlib's value, in ``units``
    units: str
    tolerance: float            # relative; 0 means exact
    quantity: str               # the kvcoach.slips quantity that checks it
    params: MappingProxyType = field(hash=False)   # what the question states
    inputs: MappingProxyType = field(hash=False, repr=False)  # diagnose's keywords
    template: str = ""          # the question's wording within its topic ("decode_rate/user"); "" = the topic

    def verdict(self, answer, reveal: bool = True) -> "Verdict":
        """The judgement of ``answer``: right or not, the feedback, and every slip the feedback names.

        ``answer`` is read by ``read_answer`` (any notation: '16640000000', '16.64e9', '16.64 GB', '2.5x',
        '131,072'); it is right within the problem's ``tolerance`` (the units line states it), and a wrong one
        is named as a slip when it lies within the same tolerance of the slipped value. ``reveal=False``:
        the feedback never shows the answer, nor how far off a wrong one is (a learner's graded question).
        """
        value, problem, swapped = read_answer(answer, self.units)
        shown = f" The answer is {_amount(self.answer, self.units)}." if reveal else ""
        if problem:
            return Verdict(False, problem + shown)
        value = self._comparable(value)
        d = self._diagnose(value)
        if d.correct:
            return Verdict(True, f"correct: {_amount(self.answer, self.units)}." if reveal else "correct.", (), value)
        if _unnamed(d) and swapped is not None and self._diagnose(self._comparable(swapped[0])).correct:
            return Verdict(False, f"not quite [gb_for_gib]: {_unit_mixup(swapped[1])}{shown}", ("gb_for_gib",),
                           value)
        if d.slip is None:
            how = "it matches no known slip: recheck each step."
            return Verdict(False, f"not quite ({self.tolerance_text()}): {how}" if not reveal else
                           f"not quite: {d.message}{shown}", (), value)
        named = (d.slip.key,)
        if reveal and " Or: " in d.message:        # two slips give this number: the feedback names both
            both = slips.matching(self.quantity, value, rel_tol=self._rel_tol(), unit=self.units, **self.inputs)
            named += tuple(k for k in both[1:2] if k != d.slip.key)
        if not reveal:
            return Verdict(False, f"not quite [{d.slip.key}] ({self.tolerance_text()}): {d.slip.message}", named,
                           value)
        return Verdict(False, f"not quite [{d.slip.key}]: {d.message}{shown}", named, value)

    def check(self, answer, reveal: bool = True) -> tuple[bool, str]:
        """``(correct, feedback)`` of ``verdict``; the feedback names the slip when it recognises one.

        A GiB figure labelled GB (or the reverse) is named as the GB/GiB slip.
        """
        v = self.verdict(answer, reveal=reveal)
        return v.correct, v.feedback

    def tolerance_text(self) -> str:
        """'exact' or 'within 0.5%'."""
        return _tolerance_text(self.tolerance)

    def units_line(self) -> str:
        """What the answer is asked in, its tolerance and the notations read (``units_line``)."""
        return units_line(self.units, self.tolerance)

    def public(self) -> Question:
        """The question without its answer (and without the checker that knows it).

        >>> q = generate("kv_per_token", seed=3).public()
        >>> q.units, q.tolerance_text(), hasattr(q, "answer")
        ('bytes', 'within 0.5%', False)
        """
        return Question(topic=self.topic, question=self.question, units=self.units, tolerance=self.tolerance,
                        params=MappingProxyType(dict(self.params)))

    def slip_key(self, answer) -> str | None:
        """The key of the first slip the feedback on ``answer`` names, or None (the answer is not shown)."""
        named = self.verdict(answer, reveal=False).slips
        return named[0] if named else None

    def _rel_tol(self) -> float:
        return self.tolerance or 1e-9

    def _comparable(self, value):
        """A whole number typed as a float (1.31072e5) is the count it names; within a tolerance, a float."""
        if self.tolerance:
            return float(value)
        if isinstance(value, float) and value.is_integer() and isinstance(self.answer, int):
            return int(value)
        return value

    def _diagnose(self, value):
        return diagnose(self.quantity, value, rel_tol=self._rel_tol(), unit=self.units, **self.inputs)

    def steps(self) -> tuple:
        """The worked answer for this problem's numbers: a tuple of ``Step``; the last value is ``answer``.

        >>> p = generate("kv_per_token", seed=3)
        >>> p.steps()[-1].value == p.answer
        True
        """
        self.answer   # the chain ends on the answer: from a notebook it counts as reading it (answer_reads)
        return self._chain()

    def _chain(self) -> tuple:
        chain = _QUANTITY_CHAINS.get(self.quantity) or _CHAINS[self.topic][0]
        return chain(dict(self.inputs))

    def slip_step(self, slip_key: str):
        """The index in ``steps()`` of the step where slip ``slip_key`` enters (None if the topic does not know it).

        A variant key (``gb_for_gib@up``) is read as its catalogue key; two slips at once (``a+b``) as the
        earlier step of the two. A unit slip (the answer in GB, seconds for ms, off by one) enters at the last step.

        >>> p = generate("kv_per_token", seed=3)
        >>> p.steps()[p.slip_step("missing_layers")].label
        'bytes per token, all layers'
        """
        if not isinstance(slip_key, str) or not slip_key:
            return None
        where = _CHAINS[self.topic][1]
        last = len(self._chain()) - 1
        found = []
        for part in base_key(slip_key).split(COMBINED):
            if part in where:
                found.append(where[part] % (last + 1))
            elif part in _LAST_STEP_SLIPS or part.startswith("answer_in_"):
                found.append(last)
        return min(found) if found else None

    def matching_step(self, answer):
        """The index of an intermediate step whose value ``answer`` equals (None: none, or it is the answer).

        ``answer`` is read as ``check`` reads it ('1.07 GB', '131,072'); a step
        matches within the problem's tolerance (exactly, for whole numbers).
        A learner who stopped one step short is told which step they reached.
        """
        value, problem, _ = read_answer(answer, self.units)
        if problem or value is None:
            return None
        value = self._comparable(value)
        chain = self._chain()
        tol = self._rel_tol()
        if _same_value(value, chain[-1].value, tol):
            return None
        for n, step in enumerate(chain[:-1]):
            if _same_value(value, step.value, tol) and not _same_value(step.value, chain[-1].value, 1e-9):
                return n
        return None


def _same_value(a, b, tol) -> bool:
    if isinstance(a, bool) or isinstance(b, bool) or not isinstance(b, (int, float)):
        return False
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    return abs(a - b) <= tol * max(abs(a), abs(b)) + 1e-12


def _unnamed(d) -> bool:
    """No slip named, or only a generic unit mix-up: the typed unit's own mix-up says it better."""
    return d.slip is None or d.slip.key in PREFIX_MIX_KEYS


def _fmt(x) -> str:
    """A figure as feedback and worked steps show it: 131,072; 1,234.5; 4.26e13 (a rate of 10^7 or more, as a
    float, in the scientific notation an answer may take); 0.9217.

    >>> _fmt(131072), _fmt(1234.5), _fmt(42_600_000_000_000.0), _fmt(0.92174)
    ('131,072', '1,234.5', '4.26e13', '0.9217')
    """
    if isinstance(x, int):
        return f"{x:,}"
    if abs(x) >= 1e7:
        mantissa, exponent = f"{x:.6g}".split("e") if "e" in f"{x:.6g}" else (f"{x:.6g}", "0")
        return f"{mantissa}e{int(exponent)}"
    if abs(x) >= 100:
        return f"{x:,.1f}"
    return f"{x:.4g}"


_SINGULAR = {"nodes": "node", "sequences": "sequence", "tokens": "token", "bytes": "byte", "dollars": "dollar",
             "token slots": "token slot", "slot-steps": "slot-step", "steps": "step", "heads": "head"}


#: A compute rate of 10^12 FLOP/s or more is shown in the unit a data sheet uses: 181 TFLOP/s, 7.916 PFLOP/s.
_FLOP_RATE_UNITS = ((1e15, "PFLOP/s"), (1e12, "TFLOP/s"))


def _amount(x, units: str) -> str:
    """A figure with its unit, singular for one: '1 node', '3 nodes', '1.5 ms'; a compute rate in TFLOP/s or
    PFLOP/s as a data sheet gives it.

    >>> _amount(1, "nodes"), _amount(3, "nodes"), _amount(1.0, "sequences")
    ('1 node', '3 nodes', '1 sequence')
    >>> _amount(42_600_000_000_000.0, "FLOP/s"), _amount(7.916e15, "FLOP/s"), _amount(5e9, "FLOP/s")
    ('42.6 TFLOP/s', '7.916 PFLOP/s', '5e9 FLOP/s')
    """
    if units == "FLOP/s" and isinstance(x, (int, float)):
        for size, unit in _FLOP_RATE_UNITS:
            if abs(x) >= size:
                return f"{x / size:,.4g} {unit}"
    one = x == 1 and (isinstance(x, int) or float(x).is_integer())
    return f"{_fmt(int(x) if one else x)} {_SINGULAR.get(units, units) if one else units}".rstrip()


# --- one reading of an answer, whatever its notation ([interview 2026 §1]) ----------------------------------
#: The relative tolerance of every drill answer that is not a small count: the figure an interviewer checks,
#: to about three significant figures. ``tolerance_for`` gives each unit's; the units line states it.
TOLERANCE = 0.005
#: Counts whose rounding is the question (how many sequences fit, how many nodes, from which batch, how many
#: slot-steps, token slots or engine steps): exact, so a floor taken as a ceiling is a slip, not a near miss.
EXACT_UNITS = frozenset({"sequences", "nodes", "slot-steps", "token slots", "steps"})


def tolerance_for(units: str) -> float:
    """The relative tolerance of an answer in ``units``: 0 (exact) for the counts of ``EXACT_UNITS``, else 0.5%.

    >>> tolerance_for("bytes"), tolerance_for("nodes")
    (0.005, 0.0)
    """
    return 0.0 if units in EXACT_UNITS else TOLERANCE


def _tolerance_text(tolerance: float) -> str:
    return "exact" if not tolerance else f"within {tolerance * 100:g}%"


#: The words and shorthands an answer may carry for each unit the drills ask in: a unit's usual shorthand
#: counts as the unit ("2.5x" for times, "$0.47" for dollars, "tok/s").
_UNIT_WORDS = {"bytes": {"b", "byte", "bytes"}, "tokens": {"token", "tokens", "tok", "toks"},
               "ms": {"ms", "msec", "millisecond", "milliseconds"},
               "sequences": {"seq", "seqs", "sequence", "sequences"}, "nodes": {"node", "nodes"},
               "token slots": {"token slots", "token slot", "slots", "slot", "tokens", "token"},
               "slot-steps": {"slot-steps", "slot-step", "slot steps", "slot step", "slotsteps"},
               "times": {"x", "×", "times"},
               "tokens/s": {"tokens/s", "token/s", "tok/s", "t/s", "tps", "tokens per second"},
               "dollars": {"$", "usd", "dollars", "dollar"}}
#: Other units of the same quantity, converted: a time typed in seconds or microseconds for an answer in ms.
_SCALED_UNITS = {"ms": {"s": 1e3, "sec": 1e3, "second": 1e3, "seconds": 1e3, "us": 1e-3, "µs": 1e-3}}
#: Examples of the notations read, per unit, for the units line.
_EXAMPLE_UNIT = {"bytes": "GB", "times": "x", "dollars": "$", "tokens/s": "tok/s"}

_NUMBER = re.compile(r"""^\s*(?P<dollar>\$)?\s*
    (?P<number>[-+]?(?:\d[\d_,\u202f\u2009 ]*)?\.?\d+(?:[eE][-+]?\d+)?)
    (?:\s*[x×*·]\s*10\s*(?:\^|\*\*)\s*(?P<power>[-+]?\d+))?
    \s*(?P<unit>[^\d\s].*?)?\s*$""", re.VERBOSE)
_GROUPED = re.compile(r"[-+]?\d{1,3}(?:([,_\u202f\u2009 ])\d{3})*(?:\.\d*)?(?:[eE][-+]?\d+)?")

_SWAP = {"kb": "kib", "mb": "mib", "gb": "gib", "tb": "tib"}
_SWAP.update({v: k for k, v in _SWAP.items()})


def units_line(units: str, tolerance: float) -> str:
    """The line under a drill question: its units, its tolerance, and the notations an answer may take.

    >>> units_line("bytes", 0.005)
    'answer in bytes, within 0.5% (any notation: 16640000000, 16.64e9, 16,640,000,000 or 16.64 GB)'
    >>> units_line("times", 0.005)
    'answer in times, within 0.5% (any notation: 2.5, 2.5e0 or 2.5x)'
    """
    if units == "bytes":
        examples = "16640000000, 16.64e9, 16,640,000,000 or 16.64 GB"
    elif units == "times":
        examples = "2.5, 2.5e0 or 2.5x"
    elif units == "dollars":
        examples = "0.47, 4.7e-1 or $0.47"
    elif units == "ms":
        examples = "9.92, 9.92e0, 9.92 ms or 0.00992 s"
    else:
        examples = f"12800, 1.28e4, 12,800 or 12,800 {units}"
    return f"answer in {units}, {_tolerance_text(tolerance)} (any notation: {examples})"


def _unit_mixup(unit: str) -> str:
    """The decimal/binary mix-up of the unit typed, with its own size: 2.4% for KB, 7.4% for GB.

    >>> _unit_mixup("mib")
    'you mixed MB (10^6) and MiB (2^20): a 4.9% error.'
    """
    decimal = unit[0].upper() + "B"
    power = "kmgt".index(unit[0]) + 1
    error = 1024 ** power / 1000 ** power - 1
    return f"you mixed {decimal} (10^{3 * power}) and {decimal[0]}iB (2^{10 * power}): a {error:.1%} error."


def read_answer(answer, units: str):
    """``(value, problem, swapped)``: one reading of a drill answer, the same whatever its notation.

    Plain (``16640000000``), scientific (``16.64e9``, ``16.64 x 10^9``), with thousands separators
    (``16,640,000,000``) or with the unit or its shorthand (``16.64 GB``, ``2.5x``, ``$0.47``, ``9.92 ms``,
    ``0.00992 s`` for an answer in ms); the value is in the question's ``units``. ``problem``: one line
    when the text is not such a number (None otherwise). ``swapped``: for a byte unit with a decimal/binary
    twin, (the value read in the twin unit, the unit typed), so a GiB figure labelled GB is named.

    >>> [read_answer(t, "bytes")[0] for t in ("16640000000", "16.64e9", "16,640,000,000", "16.64 GB")]
    [16640000000, 16640000000.0, 16640000000, 16640000000]
    >>> read_answer("2.5x", "times")[0], read_answer("0.00992 s", "ms")[0]
    (2.5, 9.92)
    >>> read_answer("13,1072", "bytes")[1]
    "'13,1072': a comma groups thousands (131,072); decimals take a point."
    """
    if isinstance(answer, bool):
        return None, f"expected a number, got {answer!r}.", None
    if isinstance(answer, (int, float)):
        return answer, None, None
    text = str(answer).strip()
    if not text:
        return None, "no answer.", None
    match = _NUMBER.match(text)
    if not match:
        return None, f"expected a number, got {text!r}.", None
    number = match.group("number").strip()
    if any(sep in number for sep in ",_\u202f\u2009 ") and not _GROUPED.fullmatch(number):
        return None, f"{text!r}: a comma groups thousands (131,072); decimals take a point.", None
    seps = set(re.findall(r"[,_\u202f\u2009 ]", number))
    if len(seps) > 1:
        return None, f"{text!r}: group thousands one way (131,072).", None
    number = re.sub(r"[,_\u202f\u2009 ]", "", number)
    if match.group("power"):
        number = f"{number}e{match.group('power')}"
    unit = " ".join((match.group("unit") or "").lower().split())
    if match.group("dollar"):
        if unit and unit not in _UNIT_WORDS["dollars"] or units != "dollars":
            return None, f"the answer is asked in {units}, not dollars.", None
        unit = ""
    whole = re.fullmatch(r"[-+]?\d+", number) is not None
    if unit and units == "bytes" and unit not in _UNIT_WORDS["bytes"]:
        try:
            value = parse_bytes(number.lstrip("+") + unit)
        except ValueError:
            return None, f"unknown unit {match.group('unit')!r}.", None
        swapped = (parse_bytes(number.lstrip("+") + _SWAP[unit]), unit) if unit in _SWAP else None
        return value, None, swapped
    if unit in _SCALED_UNITS.get(units, {}):
        return float(number) * _SCALED_UNITS[units][unit], None, None
    if unit and unit not in _UNIT_WORDS.get(units, {units}):
        return None, f"the answer is asked in {units}, not {match.group('unit')!r}.", None
    return (int(number) if whole else float(number)), None, None


# --- what the problems draw from ---------------------------------------------------
@functools.lru_cache(maxsize=None)
def _spec(model_id):
    return load_model(model_id)


@functools.lru_cache(maxsize=None)
def _bf16_weights(model_id) -> int:
    return _spec(model_id).weight_bytes(2)


@functools.lru_cache(maxsize=None)
def _gqa_models() -> tuple:
    """Bundled full-attention, non-MLA models (sorted ids): one formula holds for every layer.

    Models bundled after the drills' seeds were fixed are left out (``_NOT_DRAWN``), so a student's
    seed keeps drawing the same problems."""
    return tuple(m for m in course_models()
                 if m not in _NOT_DRAWN and not _spec(m).is_mla and all(kind == FULL for kind in _spec(m).layer_kinds))


_NOT_DRAWN = frozenset({"Qwen/Qwen2.5-3B"})   # bundled for ch07's TP lesson


@functools.lru_cache(maxsize=None)
def _mla_models() -> tuple:
    return tuple(m for m in course_models() if _spec(m).is_mla)


def _geometry(spec, dtype_bytes=2) -> dict:
    return {"layers": spec.num_layers, "kv_heads": spec.num_kv_heads, "head_dim": spec.head_dim,
            "dtype_bytes": dtype_bytes, "num_heads": spec.num_heads, "hidden_size": spec.hidden_size}


def _config_text(spec, dtype_bytes=2) -> str:
    dtype = {2: "bf16 (2 bytes per element)", 1: "fp8 (1 byte per element)"}[dtype_bytes]
    return (f"{spec.name} (config.json: num_hidden_layers {spec.num_layers}, num_attention_heads "
            f"{spec.num_heads}, num_key_value_heads {spec.num_kv_heads}, head_dim {spec.head_dim}, "
            f"hidden_size {spec.hidden_size}), KV cache in {dtype}")


def _gb_value(rng, low, high) -> int:
    """A byte count stated to 0.01 GB, so the question gives it exactly."""
    return rng.randint(round(low * 100), round(high * 100)) * 10**7


def _round_gb(n_bytes) -> int:
    return round(n_bytes / 10**7) * 10**7


def _gb_text(n_bytes) -> str:
    return f"{n_bytes / GB:,.2f} GB"


_CONTEXTS = (1024, 2048, 4096, 8192, 16384, 32768)


# --- only deployments that could run (kvlib.feasibility) ---------------------------------
# A draw that breaks one of vLLM's rules is drawn again from the same generator, so a seed whose
# first draw could run keeps its problem.
def _within_context(spec, context) -> bool:
    return spec.max_position_embeddings is None or context <= spec.max_position_embeddings


def _runs(spec, gpu, **kwargs) -> bool:
    """``check_deployment(spec, gpu, **kwargs).fits`` (kvlib's serving assumptions where the question names none)."""
    return check_deployment(spec, gpu, **kwargs).fits


def _problem(topic, seed, question, quantity, inputs, units, template=None, **params):
    expected = diagnose(quantity, 0, **inputs).expected
    return Problem(topic=topic, seed=seed, question=question, answer=expected, units=units,
                   tolerance=tolerance_for(units),
                   quantity=quantity, params=MappingProxyType(dict(params, **inputs)),
                   inputs=MappingProxyType(dict(inputs)), template=template or topic)


def _keeps_apart(quantity, inputs, key, units, tolerance=0.0, twins=()) -> bool:
    """Whether the feedback on slip ``key``'s number leads with ``key`` (or one of its ``twins``).

    Every variant of ``key`` (``kvcoach.slips.variants``) is judged as a learner's answer, as the check judges it
    (``kvcoach.slips.matching`` within the problem's tolerance): the first slip named must be ``key`` or a twin,
    a slip that gives the same number on every draw (bf16 for fp8 and an extra factor 2). True where the slip
    gives the right answer (it cannot be made on this draw). [diagnosis]: a forgotten batch of 32 beside 32 layers
    read as "missing layers"; the graded topics draw again instead (``_SEPARATE``), so only the draws where the
    lead was wrong change.
    """
    _, table = slips.variants(quantity, unit=units, **inputs)
    allowed = {key, *twins}
    for k, value in table:
        if base_key(k) != key or value is None:
            continue
        named = slips.matching(quantity, value, rel_tol=tolerance or 1e-9, unit=units, **inputs)
        if named and base_key(named[0]) not in allowed:
            return False
    return True


#: The slip each graded topic's draws keep apart from every other ([diagnosis §3]: the one learners make that the
#: feedback named wrongly), with its twins.
_SEPARATE = {
    "pool": ("ignored_utilization", ()),
    "crossover": ("crossover_not_divided", ()),
    "step_time": ("missing_batch", ()),
    "mla_vs_gqa": ("wrong_16bit_vs_fp8", ("extra_factor_2",)),
    "tp_per_gpu": ("query_heads", ("total_not_per_gpu",)),   # H / t = K: the same number, both named
    "plan_step": ("floor_nodes", ()),
}


def _apart(topic, quantity, inputs, units, tolerance=None) -> bool:
    key, twins = _SEPARATE[topic]
    return _keeps_apart(quantity, inputs, key, units, tolerance_for(units) if tolerance is None else tolerance, twins)


# --- one generator per topic ---------------------------------------------------------
def _kv_per_token(rng, seed):
    spec = _spec(rng.choice(_gqa_models()))
    inputs = _geometry(spec)
    q = f"{_config_text(spec)}. How many bytes of KV cache does one token take, across all layers?"
    return _problem("kv_per_token", seed, q, "kv_bytes_per_token", inputs, "bytes", model=spec.name)


def _per_sequence(rng, seed):
    while True:
        spec = _spec(rng.choice(_gqa_models()))
        context = rng.choice(_CONTEXTS)
        if _within_context(spec, context):
            break
    inputs = dict(_geometry(spec), seq_len=context)
    q = f"{_config_text(spec)}. How many bytes of KV cache does one sequence of {context:,} tokens hold?"
    return _problem("per_sequence", seed, q, "kv_bytes_per_sequence", inputs, "bytes", model=spec.name)


def _concurrency(rng, seed):
    spec = _spec(rng.choice(_gqa_models()))
    while True:
        context = rng.choice(_CONTEXTS)
        budget = _gb_value(rng, 10, 70)
        if budget >= spec.kv_bytes_per_sequence(context) and _within_context(spec, context):
            break
    inputs = dict(_geometry(spec), seq_len=context, budget_bytes=budget)
    q = (f"{_config_text(spec)}. After weights and overhead, {_gb_text(budget)} (10^9 bytes) is left for the KV "
         f"cache. How many sequences of {context:,} tokens fit at once?")
    return _problem("concurrency", seed, q, "max_concurrency", inputs, "sequences", model=spec.name)


def _pool(rng, seed):
    gpus = [GPUS[n] for n in GPUS if n in _GPU_NAMES and GPUS[n].memory_bytes >= 40 * GB]
    while True:
        gpu = rng.choice(gpus)
        models = [m for m in _gqa_models() if _bf16_weights(m) < 0.6 * gpu.cuda_memory_bytes]
        spec = _spec(rng.choice(models))
        utilization = rng.choice((default_utilization("0.19.1"), default_utilization("0.20.0")))  # before 0.20, from 0.20
        weights = _round_gb(spec.weight_bytes(2))
        other = rng.choice((2, 3)) * GB
        cuda_gib = round(gpu.cuda_memory_bytes / GiB, 2)
        cuda_bytes = round(cuda_gib * GiB)
        bpt = spec.kv_bytes_per_token()
        inputs = {"gpu_bytes": cuda_bytes, "label_bytes": gpu.memory_bytes, "utilization": utilization,
                  "weight_bytes": weights, "other_bytes": other, "bytes_per_token": bpt}
        if _runs(spec, gpu, seq_len=1, weight_bytes=weights, utilization=utilization, other_bytes=other,
                 gpu_memory_bytes=cuda_bytes) and _apart("pool", "kv_pool_tokens", inputs, "tokens"):
            break
    q = (f"{spec.name} on one {gpu.name} (label {gpu.memory_bytes / GB:.0f} GB; CUDA reports {cuda_gib:.2f} GiB). "
         f"The engine takes {utilization:.2f} of what CUDA reports; the bf16 weights are {_gb_text(weights)}, "
         f"activations and other allocations {_gb_text(other)}, and one token's KV is {bpt:,} bytes. "
         f"How many tokens does the KV pool hold?")
    return _problem("pool", seed, q, "kv_pool_tokens", inputs, "tokens", model=spec.name, gpu=gpu.name)


def _block_waste(rng, seed):
    n = rng.randrange(50, 501, 10)
    bs = rng.choice((8, 16, 32, 64, 128, 256))
    # drawn after the figures (so a seed keeps them): a deployment that holds the n sequences
    spec, gpu, tp, _, context, dep = _deployment(rng, batches=(n,), contexts=(1024, 2048, 4096))
    inputs = {"num_seqs": n, "block_size": bs}
    q = (f"{spec.name} on {_tp_text(gpu, tp)} runs {n} sequences (up to {context:,} tokens each) with KV blocks of "
         f"{bs} tokens; their lengths are uniform modulo the block size. How many token slots do their partially "
         f"filled last blocks waste, on average, in all?")
    return _problem("block_waste", seed, q, "block_waste_tokens", inputs, "token slots",
                    deployments=(dep,), model=spec.name,
                    gpu=gpu.name)


def _mla_vs_gqa(rng, seed):
    while True:
        spec = _spec(rng.choice(_mla_models()))
        dtype = rng.choice((2, 1))
        layers = rng.choice((spec.num_layers, spec.num_layers, 27, 60))
        qk = (spec.qk_nope_head_dim or 0) + spec.qk_rope_head_dim
        inputs = {"layers": layers, "latent_dim": spec.kv_lora_rank, "rope_dim": spec.qk_rope_head_dim,
                  "dtype_bytes": dtype, "num_heads": spec.num_heads, "qk_head_dim": qk}
        if _apart("mla_vs_gqa", "mla_bytes_per_token", inputs, "bytes"):
            break
    who = spec.name if layers == spec.num_layers else f"A model shaped like {spec.name} but with {layers} layers"
    gqa = _spec("meta-llama/Llama-3.1-8B").kv_bytes_per_token(dtype)
    q = (f"{who} uses multi-head latent attention: kv_lora_rank {spec.kv_lora_rank}, qk_rope_head_dim "
         f"{spec.qk_rope_head_dim}, {spec.num_heads} heads with a query/key head dim of {qk}, num_hidden_layers "
         f"{layers}, KV cache in {'bf16' if dtype == 2 else 'fp8'} ({dtype} byte(s) per element). How many bytes "
         f"of KV cache does one token take? (Llama 3.1 8B, a GQA model, takes {gqa:,}.)")
    return _problem("mla_vs_gqa", seed, q, "mla_bytes_per_token", inputs, "bytes", model=spec.name)


def _tp_per_gpu(rng, seed):
    while True:
        spec = _spec(rng.choice(_gqa_models()))
        tps = [t for t in (2, 4, 8, 16) if tp_refusal(spec, t) is None]   # vLLM's query- and KV-head rules
        if not tps:
            continue
        tp = rng.choice(tps)
        inputs = dict(_geometry(spec), tp=tp)
        # H / t query heads equal to 2 K_g must not read as fp32 first (H / t = K: every KV head, named with it)
        if _apart("tp_per_gpu", "kv_bytes_per_token_per_gpu", inputs, "bytes"):
            break
    q = (f"{_config_text(spec)}, served with tensor parallelism over {tp} GPUs. How many bytes of KV cache does "
         f"one token take on each GPU?")
    p = _problem("tp_per_gpu", seed, q, "kv_bytes_per_token_per_gpu", inputs, "bytes", model=spec.name)
    assert p.answer == spec.kv_bytes_per_token(tp=tp)  # the catalogue and the spec agree
    return p


def _not_the_layers(choices: tuple, batch: int, spec) -> int:
    # a batch equal to the layer count (32 and 32) makes "batch forgotten" and "layers forgotten" the same
    # wrong number, so no diagnosis can tell them apart: take the next choice instead (no other draw changes)
    if batch != spec.num_kv_layers:
        return batch
    i = choices.index(batch)
    return choices[i + 1] if i + 1 < len(choices) else choices[i - 1]


def _crossover(rng, seed):
    batches = (8, 16, 32, 64, 128)
    while True:   # the crossover must lie within the model's context
        spec = _spec(rng.choice(_gqa_models()))
        batch = _not_the_layers(batches, rng.choice(batches), spec)
        # a mixture of experts reads only the experts its batch touches: the step's weight read is those bytes
        weights = _round_gb(_moe_read(spec, batch) if spec.num_experts else spec.weight_bytes(2))
        inputs = dict(_geometry(spec), weight_bytes=weights, batch_size=batch)
        if _within_context(spec, weights / (spec.kv_bytes_per_token() * batch)) and \
                _apart("crossover", "crossover_context", inputs, "tokens"):
            break
    read = (f"; {_moe_text(spec, batch)}: a step reads {_gb_text(weights)} (10^9 bytes) of its bf16 weights "
            f"({_gb_text(_round_gb(spec.weight_bytes(2)))})" if spec.num_experts else
            f"; its bf16 weights are {_gb_text(weights)} (10^9 bytes)")
    q = (f"{_config_text(spec)}{read}. At a batch of {batch} "
         f"sequences, at what context does one decode step read as many KV bytes as weight bytes?")
    return _problem("crossover", seed, q, "crossover_context", inputs, "tokens", model=spec.name)


def _step_time(rng, seed):
    batches = (1, 8, 16, 32, 64)
    while True:   # weights and the batch's cache must fit the GPU's pool
        spec = _spec(rng.choice(_gqa_models()))
        gpu = rng.choice([GPUS[n] for n in GPUS if n in _GPU_NAMES and GPUS[n].memory_bytes >= 40 * GB])
        held = _round_gb(spec.weight_bytes(2))
        batch, context = _not_the_layers(batches, rng.choice(batches), spec), rng.choice(_CONTEXTS)
        # a mixture of experts reads only the experts its batch touches: the step's weights are those bytes
        weights = _round_gb(_moe_read(spec, batch)) if spec.num_experts else held
        bw = gpu.bandwidth_bytes_per_s
        inputs = dict(_geometry(spec), weight_bytes=weights, seq_len=context, batch_size=batch,
                      bandwidth_bytes_per_s=bw)
        # a small cache beside the weights puts a forgotten batch within 0.5% of forgotten layers: draw again
        if _runs(spec, gpu, batch_size=batch, seq_len=context, weight_bytes=held) and \
                _apart("step_time", "decode_step_ms", inputs, "ms"):
            break
    read = (f"; {_moe_text(spec, batch)}: {_gb_text(weights)} of its bf16 weights ({_gb_text(held)}) per step"
            if spec.num_experts else f"; bf16 weights {_gb_text(weights)}")
    q = (f"{_config_text(spec)}{read}. On one {gpu.name} ({bw / 1e12:g} TB/s, "
         f"10^12 bytes/s), a batch of {batch} sequence(s) of {context:,} tokens decodes. How long is one step at the "
         f"bandwidth limit, in milliseconds?")
    return _problem("step_time", seed, q, "decode_step_ms", inputs, "ms", model=spec.name,
                    gpu=gpu.name)


def _fp8(rng, seed):
    spec = _spec(rng.choice(_gqa_models()))
    budget = _gb_value(rng, 10, 70)
    inputs = dict(_geometry(spec, dtype_bytes=1), budget_bytes=budget)
    q = (f"{_config_text(spec, dtype_bytes=1)}. {_gb_text(budget)} (10^9 bytes) is left for the KV cache. "
         f"How many tokens does it hold?")
    return _problem("fp8", seed, q, "pool_tokens", inputs, "tokens", model=spec.name)


def _plan_step(rng, seed):
    while True:
        spec = _spec(rng.choice(_gqa_models()))
        tp = 8
        if tp_refusal(spec, tp) is not None:
            continue
        users = rng.choice((200, 500, 1000, 2000, 5000))
        context = rng.choice((2048, 4096, 6000, 8192, 16384))
        pool = _gb_value(rng, 40, 70)
        inputs = dict(_geometry(spec), users=users, seq_len=context, pool_bytes_per_gpu=pool, tp=tp)
        if pool >= spec.kv_bytes_per_sequence(context, tp=tp) and _within_context(spec, context) and \
                _apart("plan_step", "nodes_for_memory", inputs, "nodes"):
            break
    q = (f"{_config_text(spec)}. Nodes of 8 GPUs each serve one replica with tensor parallelism 8; every GPU has "
         f"{_gb_text(pool)} (10^9 bytes) left for KV. How many nodes hold {users:,} concurrent sequences of "
         f"{context:,} tokens? (memory only, no headroom)")
    return _problem("plan_step", seed, q, "nodes_for_memory", inputs, "nodes", model=spec.name)


# --- serving families beyond the cache size ([drills §1]; formulas in kvlib.serving) ------------------
# These draw from every bundled model (MLA, mixtures of experts, sliding-window, GQA, MHA) where the topic's
# formula holds and every GPU, and keep only deployments check_deployment passes.
@functools.lru_cache(maxsize=None)
def _all_models() -> tuple:
    return tuple(course_models())


@functools.lru_cache(maxsize=None)
def _served_weights(model_id) -> tuple:
    """(weight bytes as served, words for them): the checkpoint as shipped (kvlib.weights.stored_weights);
    DeepSeek-V3 in fp8, one byte per parameter (its bundled config carries no quantization block)."""
    spec = _spec(model_id)
    if spec.is_mla:
        return spec.weight_bytes(1), "fp8 weights (1 byte per parameter)"
    stored = stored_weights(model_id)
    if stored.scheme == "bf16":
        return stored.bytes_per_rank, "bf16 weights"
    return stored.bytes_per_rank, f"weights as shipped ({stored.scheme})"


def _moe_read(spec, tokens, dtype_bytes=2) -> int:
    """Weight bytes one step of ``tokens`` tokens reads (kvlib.roofline.weight_bytes_read, the whole input table
    counted as the drills' weights do): for a mixture of experts only the experts its tokens touch."""
    return weight_bytes_read(spec, tokens, dtype_bytes=dtype_bytes, embedding_rows=False)


def _moe_text(spec, tokens) -> str:
    """How many experts a step of ``tokens`` tokens reads, in words (uniform routing)."""
    e, k = spec.num_experts, spec.num_experts_per_tok
    routed = "one token routed uniformly touches" if tokens == 1 else f"{tokens} tokens routed uniformly touch"
    return (f"a mixture of experts ({e} routed experts per MoE layer, {k} per token): {routed} "
            f"E (1 - (1 - k/E)^B) = {expected_experts_touched(e, k, tokens):.2f} of them per layer, "
            f"and a step reads only those")


_TPS = (1, 2, 4, 8)
# the cards the drill families were written and checked for; a newer row (B300, GB200, an NVLink domain) joins
# only once every family handles it
_GPU_NAMES = ("A10", "A100-40GB", "A100-80GB", "A10G", "B200", "H100-PCIe", "H100-SXM", "H200", "L4", "L40S",
              "MI300X", "RTX-3090", "RTX-4090", "T4")


def _gpu(rng, names=_GPU_NAMES):
    return GPUS[rng.choice(names)]


def _deployment(rng, *, models=None, batches=(1,), contexts=_CONTEXTS, tps=_TPS, extra=lambda spec, tp, t, b: 0,
                weights=None, gpus=_GPU_NAMES):
    """Draw (spec, gpu, tp, batch, context, check) until check_deployment passes (and TP is one vLLM accepts).

    ``check`` is the keywords check_deployment(spec, gpu, ...) passed with: a problem keeps them in its
    params as ``deployments`` (every check its draw passed), so a test can run them again.

    ``extra(spec, tp, context, batch)`` adds bytes per GPU besides the weights (a draft model);
    ``weights(spec)`` the weight bytes (default: as served); ``gpus`` the cards drawn from (names of GPUS)."""
    models = models or _all_models()
    while True:
        spec = _spec(rng.choice(models))
        gpu = _gpu(rng, gpus)
        tp = rng.choice(tps)
        batch, context = rng.choice(batches), rng.choice(contexts)
        if tp_refusal(spec, tp) is not None or not _within_context(spec, context):
            continue
        w = _served_weights(spec.name)[0] if weights is None else weights(spec)

        def runs(n):
            return _runs(spec, gpu, tp=n, batch_size=batch, seq_len=context, weight_bytes=w,
                         other_bytes=DEFAULT_OVERHEAD_BYTES + extra(spec, n, context, batch))

        # the fewest GPUs that run it: nobody splits a model over more GPUs than it needs
        smaller = [n for n in tps if n < tp and tp_refusal(spec, n) is None]
        if runs(tp) and not any(runs(n) for n in smaller):
            dep = {"tp": tp, "batch_size": batch, "seq_len": context, "weight_bytes": w,
                   "other_bytes": DEFAULT_OVERHEAD_BYTES + extra(spec, tp, context, batch)}
            return spec, gpu, tp, batch, context, dep


def _tp_text(gpu, tp) -> str:
    return f"one {gpu.name}" if tp == 1 else f"{tp} x {gpu.name} (tensor parallelism {tp})"


def _params_text(spec) -> str:
    active, total = spec.num_params_active(), spec.num_params()
    if active != total:
        return f"{active:,} active parameters per token (of {total:,}, a mixture of experts)"
    return f"{total:,} parameters"


def _prefill_params_sentence(spec) -> str:
    """The parameters a prefill multiplies each token by (``prefill_params_per_token``), stated as long_ttft
    states them: the input embedding is a lookup, not a matmul; a tied table stays once, as the LM head."""
    p_m = prefill_params_per_token(spec.name)
    lookup = ("the embedding lookup excluded" if p_m != spec.num_params_active() else
              "its embedding table tied to the LM head, so multiplied by once")
    return f"It multiplies each token by {p_m:,} parameters ({lookup}; the model has {_params_text(spec)})."


def _mfu(rng) -> float:
    return rng.choice((0.4, 0.5, 0.6))


def _ttft(rng, seed):
    spec, gpu, _, _, prompt, dep = _deployment(rng, tps=(1,), contexts=(500, 1000, 2000, 4000, 8000))
    mfu = _mfu(rng)
    f = gpu.bf16_flop_per_s
    inputs = {"num_params": prefill_params_per_token(spec.name), "active_params": spec.num_params_active(),
              "total_params": spec.num_params(), "prompt_tokens": prompt, "peak_flop_per_s": f, "mfu": mfu}
    q = (f"{spec.name} on {_tp_text(gpu, 1)} ({f / 1e12:g} TFLOP/s dense bf16). {_prefill_params_sentence(spec)} "
         f"A prompt of {prompt:,} tokens is prefilled at {mfu:.0%} MFU. Counting the linear layers only (2 FLOPs per "
         f"parameter multiplied per token), what is the time to first token, in milliseconds?")
    return _problem("ttft", seed, q, "ttft_ms", inputs, "ms",
                    deployments=(dep,), model=spec.name, gpu=gpu.name)


def _moe_ridge_words(subject, experts, top_k) -> str:
    """How a mixture of experts' decode reaches the ridge, in words (``ridge_batch`` and ``low_precision_compute``)."""
    return (f" {subject} is a mixture of experts ({experts} routed experts per MoE layer, {top_k} per token): count its "
            f"routed experts alone (the dense parts turn compute-bound first); a batch of B tokens routed uniformly "
            f"reads E (1 - (1 - k/E)^B) of them per layer, and each token does 2 FLOPs per parameter of its own {top_k} "
            f"experts.")


def _ridge_batch(rng, seed):
    while True:
        gpu = _gpu(rng)
        kind = rng.choice(("bf16", "fp8", "int4"))
        if kind == "fp8" and gpu.fp8_flop_per_s is None:
            continue
        b = {"bf16": 2, "fp8": 1, "int4": 0.5}[kind]
        f = gpu.fp8_flop_per_s if kind == "fp8" else gpu.bf16_flop_per_s
        spec = _spec(rng.choice(_all_models()))
        # a mixture of experts: its experts turn compute-bound only once the batch covers them
        experts = (spec.num_experts, spec.num_experts_per_tok) if spec.num_experts else ()
        batch = formulas_serving.ridge_batch(f, gpu.bandwidth_bytes_per_s, b, *experts)
        tp = rng.choice(_TPS)
        weights = formulas.weight_bytes(spec.num_params(), b)
        if tp_refusal(spec, tp) is None and _runs(spec, gpu, tp=tp, batch_size=batch, seq_len=1024,
                                                 weight_bytes=weights):
            break
    compute = {"bf16": "bf16 weights and bf16 compute", "fp8": "fp8 weights and fp8 compute",
               "int4": "int4 weights (0.5 byte each) dequantized to bf16 compute"}[kind]
    inputs = {"peak_flop_per_s": f, "bandwidth_bytes_per_s": gpu.bandwidth_bytes_per_s, "dtype_bytes": b}
    moe = ""
    if experts:
        inputs.update(num_experts=experts[0], top_k=experts[1])
        moe = _moe_ridge_words(spec.name, *experts)
    q = (f"{spec.name} on {_tp_text(gpu, tp)}: {compute}; peak {f / 1e12:g} TFLOP/s dense, "
         f"{gpu.bandwidth_bytes_per_s / 1e12:g} TB/s (10^12 bytes/s). Counting only the weight reads and the "
         f"linear layers' 2 FLOPs per parameter per sequence (short contexts: KV reads left out), from which "
         f"batch on does a decode step reach the GPU's ridge point and turn compute-bound?{moe}")
    return _problem("ridge_batch", seed, q, "ridge_batch", inputs, "sequences",
                    deployments=(dict(tp=tp, batch_size=batch, seq_len=1024, weight_bytes=weights),),
                    model=spec.name, gpu=gpu.name,
                    template=f"ridge_batch/{kind}")


def _decode_rate(rng, seed):
    # a mixture of experts in bf16: the bytes a step reads are exact by parameter (its experts touched)
    spec, gpu, tp, batch, context, dep = _deployment(
        rng, batches=(1, 8, 16, 32, 64, 128),
        weights=lambda s: s.weight_bytes(2) if s.num_experts else _served_weights(s.name)[0])
    per = rng.choice(("user", "gpu"))
    w, words = _served_weights(spec.name)
    if spec.num_experts:
        w = spec.weight_bytes(2)
        words = f"bf16 weights, {w:,} bytes in all; {_moe_text(spec, batch)}, {_moe_read(spec, batch):,} bytes"
        w = _moe_read(spec, batch)
    s_g = spec.kv_bytes_per_sequence(context, tp=tp)
    bw = gpu.bandwidth_bytes_per_s
    inputs = {"weight_bytes": w, "kv_bytes_per_sequence_per_gpu": s_g, "batch_size": batch, "seq_len": context,
              "bandwidth_bytes_per_s": bw, "tp": tp, "per": per}
    ask = ("how many tokens per second does one user get" if per == "user" else
           "how many tokens per second does each GPU produce (the batch's tokens over the GPUs)")
    q = (f"{spec.name} ({words}{'' if spec.num_experts else f': {w:,} bytes in all'}) on {_tp_text(gpu, tp)}, "
         f"{bw / 1e12:g} TB/s each. "
         f"{batch} sequence(s) of {context:,} tokens decode together; one sequence's KV cache is {s_g:,} bytes on "
         f"each GPU. At the bandwidth limit (each GPU reads its share of the weights and its part of every cache "
         f"once per step), {ask}?")
    return _problem("decode_rate", seed, q, "decode_rate", inputs, "tokens/s",
                    deployments=(dep,), model=spec.name,
                    gpu=gpu.name, template=f"decode_rate/{per}")


def _chunked_prefill(rng, seed):
    while True:
        spec, gpu, _, batch, context, dep = _deployment(rng, tps=(1,), batches=(8, 16, 32, 64),
                                                   contexts=(2048, 4096, 8192, 16384))
        chunk = rng.choice((256, 512, 1024, 2048, 4096))
        if batch + chunk <= 8192 and _runs(spec, gpu, batch_size=batch + 1, seq_len=context,
                                           weight_bytes=_served_weights(spec.name)[0]):
            break
    mfu = _mfu(rng)
    w, words = _served_weights(spec.name)
    kv = batch * spec.kv_bytes_per_sequence(context)
    bw, f = gpu.bandwidth_bytes_per_s, gpu.bf16_flop_per_s
    inputs = {"weight_bytes": w, "kv_bytes": kv, "num_params": prefill_params_per_token(spec.name),
              "active_params": spec.num_params_active(), "total_params": spec.num_params(), "batch_size": batch,
              "chunk_tokens": chunk, "bandwidth_bytes_per_s": bw, "peak_flop_per_s": f, "mfu": mfu}
    q = (f"{spec.name} ({words}, {w:,} bytes) on one {gpu.name} ({bw / 1e12:g} TB/s, {f / 1e12:g} TFLOP/s dense "
         f"bf16, {mfu:.0%} MFU). {_prefill_params_sentence(spec)} A step carries {batch} decodes of {context:,}-token "
         f"sequences (their caches: {kv:,} bytes) and a {chunk:,}-token chunk of a new prompt (chunked prefill). "
         f"The step takes the longer of its reads (weights once, the decodes' caches) and its linear-layer FLOPs "
         f"(2 per parameter multiplied per token, chunk and decodes). What inter-token latency do the decodes see in "
         f"that step, in milliseconds?")
    return _problem("chunked_prefill", seed, q, "chunked_itl_ms", inputs, "ms",
                    deployments=(dep, dict(dep, batch_size=batch + 1)), model=spec.name,
                    gpu=gpu.name)


def _batching(rng, seed):
    slots = rng.choice((4, 6, 8, 12, 16))
    while True:
        outputs = tuple(rng.randrange(50, 1001, 50) for _ in range(slots))
        if len(set(outputs)) > 1:
            break
    prompt = rng.choice((256, 512, 1000, 2000))
    spec, gpu, tp, _, _, dep = _deployment(rng, batches=(slots,), contexts=(prompt + max(outputs),))
    kind = rng.choice(("speedup", "idle"))
    inputs = {"output_tokens": outputs}
    listed = ", ".join(str(o) for o in outputs)
    head = (f"{spec.name} on {_tp_text(gpu, tp)}: a static batch of {slots} requests ({prompt:,}-token prompts) "
            f"generates {listed} tokens; it runs until its longest output ends, a finished request's slot idling "
            f"meanwhile. Continuous batching refills a slot as soon as its request ends (requests keep waiting).")
    if kind == "speedup":
        q = head + " How many times more tokens per decode step does continuous batching deliver?"
        return _problem("batching", seed, q, "batching_speedup", inputs, "times",
                        deployments=(dep,), model=spec.name,
                        gpu=gpu.name, template="batching/speedup")
    q = head + " How many slot-steps does the static batch leave idle (a slot-step: one slot for one decode step)?"
    return _problem("batching", seed, q, "idle_slot_steps", inputs, "slot-steps",
                    deployments=(dep,), model=spec.name, gpu=gpu.name,
                    template="batching/idle")


def _prefix_hit(rng, seed):
    shared = rng.randint(300, 4000)
    user = rng.randint(20, 400)
    bs = rng.choice((16, 16, 32))
    spec, gpu, _, _, _, dep = _deployment(rng, tps=(1,), contexts=(shared + user,))
    mfu = _mfu(rng)
    f = gpu.bf16_flop_per_s
    inputs = {"num_params": prefill_params_per_token(spec.name), "active_params": spec.num_params_active(),
              "total_params": spec.num_params(), "prompt_tokens": shared + user, "shared_tokens": shared,
              "block_size": bs, "peak_flop_per_s": f, "mfu": mfu}
    q = (f"{spec.name} on one {gpu.name} ({f / 1e12:g} TFLOP/s dense bf16, {mfu:.0%} MFU) with prefix caching, "
         f"blocks of {bs} tokens. {_prefill_params_sentence(spec)} Every request starts with the same "
         f"{shared:,}-token system prompt, then {user:,} tokens of its own. Once the system prompt is cached, what "
         f"is a request's time to first token, counting the linear layers only (2 FLOPs per parameter multiplied "
         f"per prefilled token), in milliseconds?")
    return _problem("prefix_hit", seed, q, "cached_ttft_ms", inputs, "ms",
                    deployments=(dep,), model=spec.name,
                    gpu=gpu.name)


# Draft models that share the target's tokenizer (a draft must: it proposes the target's tokens).
_DRAFTS = {"meta-llama/Llama-3.3-70B-Instruct": ("meta-llama/Llama-3.1-8B",),
           "meta-llama/Llama-2-70b-chat-hf": ("meta-llama/Llama-2-7b-hf",),
           "Qwen/Qwen2.5-32B": ("Qwen/Qwen2.5-3B", "Qwen/Qwen2.5-7B"),
           "Qwen/Qwen2.5-7B": ("Qwen/Qwen2.5-3B",),
           "mistralai/Mixtral-8x7B-v0.1": ("mistralai/Mistral-7B-v0.1",)}


def _draft_extra(draft, tp, context, batch) -> int:
    """Bytes per GPU the draft adds when it is split like the target (weights and cache over ``tp`` GPUs)."""
    total = _served_weights(draft.name)[0] + draft.kv_bytes_per_sequence(context) * batch
    return -(-total // tp)


def _spec_decode(rng, seed):
    target_id = rng.choice(sorted(_DRAFTS))
    draft = _spec(rng.choice(_DRAFTS[target_id]))
    contexts = [t for t in _CONTEXTS if not draft.sliding_window or t <= draft.sliding_window]
    spec, gpu, tp, batch, context, dep = _deployment(
        rng, models=(target_id,), batches=(1, 4, 8, 16, 32), contexts=tuple(contexts),
        extra=lambda s, tp, t, b: _draft_extra(draft, tp, t, b))
    w_d = _served_weights(draft.name)[0]
    if rng.random() < 0.5:
        inputs = dict(_geometry(draft), draft_weight_bytes=w_d, seq_len=context, batch_size=batch)
        q = (f"{spec.name} on {_tp_text(gpu, tp)} serves {batch} sequence(s) of {context:,} tokens with "
             f"speculative decoding; the draft model is {_config_text(draft)}, bf16 weights {w_d:,} bytes. How "
             f"many bytes does the draft add, in all (its weights and its own KV cache of every sequence)?")
        return _problem("spec_decode", seed, q, "spec_extra_bytes", inputs, "bytes",
                        deployments=(dep,), model=spec.name, gpu=gpu.name,
                        template="spec_decode/memory", draft=draft.name)
    w_t = _served_weights(spec.name)[0]
    alpha, gamma = rng.choice((0.6, 0.7, 0.8, 0.9)), rng.choice((2, 3, 4, 5, 6))
    inputs = {"acceptance": alpha, "draft_tokens": gamma, "draft_weight_bytes": w_d, "weight_bytes": w_t}
    cost = ", so a draft step costs W_draft / W_target of a target step"
    if spec.num_experts:
        # a mixture of experts: one token's step reads its top-k experts, a verify of gamma + 1 tokens the experts
        # they touch, so the verify costs W_verify / W_one target steps and a draft step W_draft / W_one
        one, verify = _moe_read(spec, 1), _moe_read(spec, gamma + 1)
        inputs.update(weight_bytes=one, verify_weight_bytes=verify, total_weight_bytes=w_t)
        w_t = one
        cost = (f". Here {spec.name} is {_moe_text(spec, 1)}: a plain step reads {one:,} bytes, while the verify of "
                f"{gamma + 1} tokens reads the experts they touch, {verify:,} bytes on average "
                f"({expected_experts_touched(spec.num_experts, spec.num_experts_per_tok, gamma + 1):.2f} experts per "
                f"layer); a draft step costs W_draft / W_one of a plain target step and the verify W_verify / W_one")
        head = f"{spec.name} (bf16 weights {inputs['total_weight_bytes']:,} bytes in all)"
    else:
        head = f"{spec.name} (bf16 weights {w_t:,} bytes)"
    q = (f"{head} on {_tp_text(gpu, tp)} decodes one sequence with "
         f"{draft.name} as its draft (bf16 weights {w_d:,} bytes). Each step drafts {gamma} tokens, each accepted "
         f"with probability {alpha:g} until the first rejection, and the target verifies them in one step that "
         f"adds a token of its own. At batch 1 a step's cost is its weight read{cost}. What is the expected "
         f"speed-up over plain decoding?")
    return _problem("spec_decode", seed, q, "spec_speedup", inputs, "times",
                    deployments=(dep,), model=spec.name,
                    gpu=gpu.name, template="spec_decode/speedup", draft=draft.name)


def _bf16_served(spec):
    return spec.weight_bytes(2)


def _quant_speedup(rng, seed):
    bits = rng.choice((8, 4.25, 4.5))
    models = tuple(m for m in _all_models() if _served_weights(m)[1] == "bf16 weights")
    while True:
        spec, gpu, tp, _, context, dep = _deployment(rng, models=models, weights=_bf16_served)
        quant = formulas.weight_bytes(spec.num_params(), bits / 8)
        if _runs(spec, gpu, tp=tp, seq_len=context, weight_bytes=quant):
            break
    w = spec.weight_bytes(2)
    kv = spec.kv_bytes_per_sequence(context)
    inputs = {"weight_bytes": w, "quant_weight_bytes": quant, "kv_bytes": kv, "bits_per_weight": bits}
    weights = (f"Its bf16 weights are {w:,} bytes; quantized weight-only to {bits:g} bits per parameter (scales "
               f"included) they are {quant:,} bytes.")
    if spec.num_experts:
        # one token reads its top-k experts only: the step's weight bytes, bf16 and quantized
        inputs.update(weight_bytes=_moe_read(spec, 1), quant_weight_bytes=_moe_read(spec, 1, bits / 8),
                      total_weight_bytes=w, total_quant_weight_bytes=quant)
        weights = (f"Its bf16 weights are {w:,} bytes ({quant:,} quantized weight-only to {bits:g} bits per "
                   f"parameter, scales included), but it is {_moe_text(spec, 1)}: a step reads "
                   f"{inputs['weight_bytes']:,} bytes of them in bf16, {inputs['quant_weight_bytes']:,} quantized.")
    q = (f"{spec.name} on {_tp_text(gpu, tp)} decodes one sequence of {context:,} tokens (its KV cache: {kv:,} "
         f"bytes, kept in bf16). {weights} At batch 1 a step is bandwidth-bound: how many "
         f"times faster is a decode step with the quantized weights?")
    return _problem("quant_speedup", seed, q, "quant_speedup", inputs, "times",
                    deployments=(dep, dict(dep, weight_bytes=quant)), model=spec.name,
                    gpu=gpu.name, template=f"quant_speedup/{bits:g}")


def _allreduce(rng, seed):
    spec, gpu, tp, batch, context, dep = _deployment(rng, tps=(2, 4, 8), batches=(1, 8, 16, 32, 64, 128, 256))
    inputs = {"layers": spec.num_layers, "tokens": batch, "hidden_size": spec.hidden_size, "dtype_bytes": 2,
              "tp": tp}
    q = (f"{spec.name} (num_hidden_layers {spec.num_layers}, hidden_size {spec.hidden_size}) on "
         f"{_tp_text(gpu, tp)}. A decode step of {batch} sequence(s) ({context:,}-token contexts) all-reduces the "
         f"bf16 activations (2 bytes each) after attention and after the MLP in every layer, with a ring "
         f"all-reduce. How many bytes does each GPU send in one step?")
    return _problem("allreduce", seed, q, "allreduce_bytes", inputs, "bytes",
                    deployments=(dep,), model=spec.name, gpu=gpu.name)


def _read_per_step(spec, tokens) -> int:
    """Weight bytes a decode step of ``tokens`` sequences reads (the whole input table counted): a dense model's
    weights as served; a mixture of experts only the experts its tokens touch (kvlib.roofline.weight_bytes_read),
    exact by parameter at one dtype, so in bf16 (``_decode_rate``'s rule) -- fp8 for DeepSeek's MLA models, as
    served (``_served_weights``)."""
    if not spec.num_experts:
        return _served_weights(spec.name)[0]
    return _moe_read(spec, tokens, dtype_bytes=1 if spec.is_mla else 2)


def _held_per_step(spec) -> int:
    """The weights ``_read_per_step`` reads a share of, held whole (what the deployment must fit)."""
    if not spec.num_experts:
        return _served_weights(spec.name)[0]
    return spec.weight_bytes(1 if spec.is_mla else 2)


def _cost(rng, seed):
    spec, gpu, tp, batch, context, dep = _deployment(rng, batches=(8, 16, 32, 64, 128), weights=_held_per_step)
    w = _read_per_step(spec, batch)
    step = formulas_serving.tp_decode_step_seconds(w, spec.kv_bytes_per_sequence(context, tp=tp), batch,
                                                   gpu.bandwidth_bytes_per_s, tp)
    price = rng.randrange(50, 601, 5) / 100
    head = f"{spec.name} on {_tp_text(gpu, tp)} at ${price:.2f} per GPU-hour"
    if rng.random() < 0.5:
        rate = round(formulas_serving.decode_tokens_per_s(step, batch))
        inputs = {"price_per_gpu_hour": price, "gpus": tp, "tokens_per_s": rate}
        q = (f"{head} generates {rate:,} tokens/s in all ({batch} sequences of {context:,} tokens). What does a "
             f"million generated tokens cost, in dollars?")
        template = "cost/rate"
    else:
        step_ms = round(step * 1e3, 2)
        inputs = {"price_per_gpu_hour": price, "gpus": tp, "batch_size": batch, "step_ms": step_ms}
        q = (f"{head} decodes {batch} sequences of {context:,} tokens together, one token each every "
             f"{step_ms:g} ms. What does a million generated tokens cost, in dollars?")
        template = "cost/step"
    return _problem("cost", seed, q, "cost_per_million", inputs, "dollars",
                    deployments=(dep,), model=spec.name,
                    gpu=gpu.name, template=template)


TOPICS = {
    "kv_per_token": _kv_per_token,
    "per_sequence": _per_sequence,
    "concurrency": _concurrency,
    "pool": _pool,
    "block_waste": _block_waste,
    "mla_vs_gqa": _mla_vs_gqa,
    "tp_per_gpu": _tp_per_gpu,
    "crossover": _crossover,
    "step_time": _step_time,
    "fp8": _fp8,
    "plan_step": _plan_step,
    # serving families beyond the cache size ([drills §1]): not graded
    "ttft": _ttft,
    "ridge_batch": _ridge_batch,
    "decode_rate": _decode_rate,
    "chunked_prefill": _chunked_prefill,
    "batching": _batching,
    "prefix_hit": _prefix_hit,
    "spec_decode": _spec_decode,
    "quant_speedup": _quant_speedup,
    "allreduce": _allreduce,
    "cost": _cost,
}


# --- the worked steps of each topic (Problem.steps) ----------------------------------------------
# Each chain computes every step with kvlib's function for it, from the problem's inputs; its last value is
# the problem's answer (tests/test_drills.py holds every topic to that). ``_CHAINS[topic]`` is
# (chain(inputs) -> tuple of Step, {slip key: index of the step where the slip enters}); a negative index
# counts from the end.
_LAST_STEP_SLIPS = frozenset({"gb_for_gib", "kb_for_kib", "tb_for_tib", "seconds_for_ms", "ms_for_seconds",
                              "off_by_one", "per_node_not_per_gpu", "per_gpu_not_per_node", "bytes_for_tokens",
                              "blocks_for_tokens", "tokens_for_blocks", "sequences_for_nodes"})


def _n(x) -> str:
    """A number as a substitution shows it: 131,072; 0.92; 3.35e+12 B/s as 3,350,000,000,000."""
    if isinstance(x, float) and x.is_integer() and abs(x) >= 1:
        x = int(x)
    if isinstance(x, int):
        return f"{x:,}"
    return f"{x:.6g}"


def _times(*xs) -> str:
    return " · ".join(_n(x) for x in xs)


def _token_steps(i) -> list:
    """Bytes per token: one layer (2 · K · D · b), then all layers (2 · L · K · D · b)."""
    L, K, D, b = i["layers"], i["kv_heads"], i["head_dim"], i["dtype_bytes"]
    return [Step("bytes per token, one layer", "2 · K · D · b", _times(2, K, D, b),
                 formulas.kv_bytes_per_token(1, K, D, b), "bytes"),
            Step("bytes per token, all layers", "2 · L · K · D · b", _times(2, L, K, D, b),
                 formulas.kv_bytes_per_token(L, K, D, b), "bytes")]


#: Where the slips of bytes per token enter a chain that starts with ``_token_steps`` (indices 0 and 1).
_TOKEN_SLIP_STEPS = {"query_heads": 0, "missing_kv_factor": 0, "hidden_over_heads": 0, "bits_not_bytes": 0,
                     "fp32_bytes": 0, "wrong_16bit_vs_fp8": 0, "ignored_dtype_bytes": 0, "missing_layers": 1}


def _chain_kv_per_token(i):
    return tuple(_token_steps(i))


def _chain_per_sequence(i):
    steps = _token_steps(i)
    bpt, t = steps[-1].value, i["seq_len"]
    steps.append(Step("bytes per sequence", "b_tok · T", _times(bpt, t), formulas.kv_bytes_per_sequence(bpt, t),
                      "bytes"))
    return tuple(steps)


def _chain_concurrency(i):
    steps = list(_chain_per_sequence(i))
    per_seq, budget = steps[-1].value, i["budget_bytes"]
    steps.append(Step("sequences that fit", "floor(budget / (b_tok · T))", f"floor({_n(budget)} / {_n(per_seq)})",
                      formulas.max_concurrency(budget, per_seq), "sequences"))
    return tuple(steps)


def _chain_pool(i):
    m, u, w, o, bpt = i["gpu_bytes"], i["utilization"], i["weight_bytes"], i["other_bytes"], i["bytes_per_token"]
    return (Step("the engine's budget", "floor(M · u)", f"floor({_n(m)} · {_n(u)})",
                 formulas.kv_pool_bytes(m, u, 0, 0), "bytes"),
            Step("bytes left for the KV pool", "floor(M · u − W − O)",
                 f"floor({_n(m)} · {_n(u)} − {_n(w)} − {_n(o)})", formulas.kv_pool_bytes(m, u, w, o), "bytes"),
            Step("tokens the pool holds", "floor(floor(M · u − W − O) / b_tok)",
                 f"floor({_n(formulas.kv_pool_bytes(m, u, w, o))} / {_n(bpt)})",
                 formulas.kv_pool_tokens(m, u, w, o, bpt), "tokens"))


def _chain_block_waste(i):
    n, bs = i["num_seqs"], i["block_size"]
    return (Step("expected empty slots in one last block", "(bs − 1) / 2", f"({_n(bs)} − 1) / 2",
                 formulas.block_waste_tokens(1, bs), "token slots"),
            Step("expected empty slots, all sequences", "B · (bs − 1) / 2", f"{_n(n)} · ({_n(bs)} − 1) / 2",
                 formulas.block_waste_tokens(n, bs), "token slots"))


def _chain_mla_vs_gqa(i):
    L, r, rope, b = i["layers"], i["latent_dim"], i["rope_dim"], i["dtype_bytes"]
    return (Step("numbers cached per token and layer", "d_c + d_R", f"{_n(r)} + {_n(rope)}", r + rope, "elements"),
            Step("bytes per token, one layer", "(d_c + d_R) · b", f"({_n(r)} + {_n(rope)}) · {_n(b)}",
                 formulas.mla_bytes_per_token(1, r, rope, b), "bytes"),
            Step("bytes per token, all layers", "L · (d_c + d_R) · b", f"{_n(L)} · ({_n(r)} + {_n(rope)}) · {_n(b)}",
                 formulas.mla_bytes_per_token(L, r, rope, b), "bytes"))


def _heads_step(i):
    k, tp = i["kv_heads"], i["tp"]
    return Step("KV heads on each GPU", "K_g = max(1, K / t)", f"max(1, {_n(k)} / {_n(tp)})",
                formulas.kv_heads_per_gpu(k, tp), "heads")


def _per_gpu_token_steps(i):
    steps = [_heads_step(i)]
    steps += _token_steps(dict(i, kv_heads=steps[0].value))
    steps[1] = Step("bytes per token on one GPU, one layer", "2 · K_g · D · b", steps[1].substitution,
                    steps[1].value, "bytes")
    steps[2] = Step("bytes per token on one GPU, all layers", "2 · L · K_g · D · b", steps[2].substitution,
                    steps[2].value, "bytes")
    return steps


def _chain_tp_per_gpu(i):
    return tuple(_per_gpu_token_steps(i))


def _chain_crossover(i):
    steps = _token_steps(i)
    bpt, w, batch = steps[-1].value, i["weight_bytes"], i["batch_size"]
    steps.append(Step("token-slots whose KV weighs as much as the weights", "W / b_tok", f"{_n(w)} / {_n(bpt)}",
                      formulas.crossover_tokens(w, bpt), "tokens"))
    steps.append(Step("context per sequence at the crossover", "W / (b_tok · B)", f"{_n(w)} / ({_n(bpt)} · {_n(batch)})",
                      crossover_context(w, bpt, batch), "tokens"))
    return tuple(steps)


def _chain_step_time(i):
    steps = _token_steps(i)
    bpt, w, t, batch, bw = steps[-1].value, i["weight_bytes"], i["seq_len"], i["batch_size"], i["bandwidth_bytes_per_s"]
    kv = formulas.kv_bytes_total(bpt, t, batch)
    steps.append(Step("KV bytes read in one step", "b_tok · T · B", _times(bpt, t, batch), kv, "bytes"))
    steps.append(Step("bytes read in one step", "W + b_tok · T · B", f"{_n(w)} + {_n(kv)}", w + kv, "bytes"))
    steps.append(Step("step time at the bandwidth limit", "(W + b_tok · T · B) / BW · 1000",
                      f"{_n(w + kv)} / {_n(bw)} · 1000", formulas.decode_step_seconds(w, bpt, t, batch, bw) * 1e3,
                      "ms"))
    return tuple(steps)


def _chain_fp8(i):
    steps = _token_steps(i)
    bpt, budget = steps[-1].value, i["budget_bytes"]
    steps.append(Step("tokens the budget holds", "floor(budget / b_tok)", f"floor({_n(budget)} / {_n(bpt)})",
                      formulas.max_concurrency(budget, bpt), "tokens"))
    return tuple(steps)


def _chain_plan_step(i):
    steps = _per_gpu_token_steps(i)
    bpt, t, pool, users = steps[-1].value, i["seq_len"], i["pool_bytes_per_gpu"], i["users"]
    per_seq = formulas.kv_bytes_per_sequence(bpt, t)
    per_node = formulas.max_concurrency(pool, per_seq)
    steps.append(Step("bytes of one sequence on one GPU", "S_g = 2 · L · K_g · D · b · T", _times(bpt, t), per_seq,
                      "bytes"))
    steps.append(Step("sequences one node holds (every GPU holds its share of each)", "floor(M_kv / S_g)",
                      f"floor({_n(pool)} / {_n(per_seq)})", per_node, "sequences"))
    steps.append(Step("nodes for the load", "ceil(U / floor(M_kv / S_g))", f"ceil({_n(users)} / {_n(per_node)})",
                      -(-users // per_node), "nodes"))
    return tuple(steps)


def _shifted(table: dict, by: int) -> dict:
    return {k: v + by for k, v in table.items()}


_CHAINS = {
    "kv_per_token": (_chain_kv_per_token, dict(_TOKEN_SLIP_STEPS)),
    "per_sequence": (_chain_per_sequence, dict(_TOKEN_SLIP_STEPS, missing_seq_len=2)),
    "concurrency": (_chain_concurrency, dict(_TOKEN_SLIP_STEPS, missing_seq_len=2, ceil_not_floor=3,
                                             tokens_not_sequences=3, gb_for_gib=3)),
    "pool": (_chain_pool, {"label_memory": 0, "gb_for_gib": 0, "ignored_utilization": 0, "ceil_not_floor": 2,
                           "bytes_for_tokens": 2}),
    "block_waste": (_chain_block_waste, {"block_size_not_minus_one": 0, "worst_case_waste": 0, "half_floored": 0,
                                         "one_sequence_waste": 1}),
    "mla_vs_gqa": (_chain_mla_vs_gqa, {"missing_rope": 0, "mla_as_mha": 0, "qk_head_dim_added": 0,
                                       "extra_factor_2": 1, "bits_not_bytes": 1, "wrong_16bit_vs_fp8": 1,
                                       "ignored_dtype_bytes": 1, "missing_layers": 2}),
    "tp_per_gpu": (_chain_tp_per_gpu, dict(_shifted(_TOKEN_SLIP_STEPS, 1), query_heads=0, total_not_per_gpu=0,
                                           split_replicated=0, tp_floor_missing=0)),
    "crossover": (_chain_crossover, dict(_TOKEN_SLIP_STEPS, crossover_not_divided=3, gb_for_gib=2)),
    "step_time": (_chain_step_time, dict(_TOKEN_SLIP_STEPS, missing_batch=2, missing_seq_len=2, kv_only_step=3,
                                         weights_only_step=3, seconds_for_ms=4)),
    "fp8": (_chain_fp8, dict(_TOKEN_SLIP_STEPS, ceil_not_floor=2, gb_for_gib=2)),
    "plan_step": (_chain_plan_step, dict(_shifted(_TOKEN_SLIP_STEPS, 1), query_heads=0, total_not_per_gpu=0,
                                         split_replicated=0, tp_floor_missing=0, missing_seq_len=3,
                                         gb_for_gib=4, ceil_not_floor=5, floor_nodes=5)),
}


# the serving families' chains (kvlib.serving's functions, step by step)
def _pct(x) -> str:
    return f"{x:g}"


def _chain_ttft(i):
    p, t, f, mfu = i["num_params"], i["prompt_tokens"], i["peak_flop_per_s"], i["mfu"]
    flops = prefill_linear_flops(p, t)
    return (Step("prefill FLOPs of the linear layers: P multiplied per token, the embedding lookup excluded", "2 · P · T",
                 _times(2, p, t), flops, "FLOP"),
            Step("FLOP/s reached", "eta · F", f"{_pct(mfu)} · {_n(f)}", mfu * f, "FLOP/s"),
            Step("time to first token", "2 · P · T / (eta · F) · 1000", f"{_n(flops)} / {_n(mfu * f)} · 1000",
                 formulas_serving.prefill_seconds(p, t, f, mfu) * 1e3, "ms"))


def _chain_ridge_batch(i):
    f, bw, b = i["peak_flop_per_s"], i["bandwidth_bytes_per_s"], i["dtype_bytes"]
    if i.get("num_experts"):
        e, k = i["num_experts"], i["top_k"]
        batch = formulas_serving.ridge_batch(f, bw, b, e, k)
        touched = expected_experts_touched(e, k, batch)
        return (Step("the GPU's ridge point", "I* = F / BW", f"{_n(f)} / {_n(bw)}", f / bw, "FLOP/B"),
                Step("the batch if every expert is read", "I* · b · N_e / (2 k_e)",
                     f"{_n(f / bw)} · {_n(b)} · {e} / (2 · {k})", f / bw * b * e / (2 * k), "sequences"),
                Step("experts touched at that batch", "N_B = N_e (1 − (1 − k_e / N_e)^B)",
                     f"{e} (1 − (1 − {k} / {e})^{batch})", touched, "experts"),
                Step("first batch whose experts reach the ridge", "smallest B with 2 k_e B / (N_B · b) ≥ I*",
                     f"2 · {k} · {batch} / ({_n(touched)} · {_n(b)})", batch, "sequences"))
    return (Step("the GPU's ridge point", "I* = F / BW", f"{_n(f)} / {_n(bw)}", f / bw, "FLOP/B"),
            Step("intensity one sequence adds", "2 / b", f"2 / {_n(b)}", 2 / b, "FLOP/B"),
            Step("first batch at the ridge", "ceil(I* · b / 2)", f"ceil({_n(f / bw)} · {_n(b)} / 2)",
                 formulas_serving.ridge_batch(f, bw, b), "sequences"))


def _chain_decode_rate(i):
    w, s, b, bw, tp = (i["weight_bytes"], i["kv_bytes_per_sequence_per_gpu"], i["batch_size"],
                       i["bandwidth_bytes_per_s"], i["tp"])
    w_g = formulas.weight_bytes_per_gpu(w, tp)
    step = formulas_serving.tp_decode_step_seconds(w, s, b, bw, tp)
    steps = [Step("weight bytes on each GPU", "ceil(W / t)", f"ceil({_n(w)} / {_n(tp)})", w_g, "bytes"),
             Step("bytes each GPU reads per step", "ceil(W / t) + B · S_g", f"{_n(w_g)} + {_n(b)} · {_n(s)}",
                  w_g + b * s, "bytes"),
             Step("step time at the bandwidth limit", "(ceil(W / t) + B · S_g) / BW · 1000",
                  f"{_n(w_g + b * s)} / {_n(bw)} · 1000", step * 1e3, "ms")]
    if i["per"] == "gpu":
        steps.append(Step("tokens per second per GPU", "B / (t · step)", f"{_n(b)} / ({_n(tp)} · {_n(step)})",
                          formulas_serving.decode_tokens_per_s(step, b, tp), "tokens/s"))
    else:
        steps.append(Step("tokens per second for one user", "1 / step", f"1 / {_n(step)}",
                          formulas_serving.decode_tokens_per_s(step), "tokens/s"))
    return tuple(steps)


def _chain_chunked_prefill(i):
    w, kv, p, b, c = i["weight_bytes"], i["kv_bytes"], i["num_params"], i["batch_size"], i["chunk_tokens"]
    bw, f, mfu = i["bandwidth_bytes_per_s"], i["peak_flop_per_s"], i["mfu"]
    read_ms = (w + kv) / bw * 1e3
    flops = prefill_linear_flops(p, b + c)
    compute_ms = formulas_serving.prefill_seconds(p, b + c, f, mfu) * 1e3
    return (Step("read time: weights and the decodes' caches", "(W + KV) / BW · 1000",
                 f"({_n(w)} + {_n(kv)}) / {_n(bw)} · 1000", read_ms, "ms"),
            Step("tokens the step computes", "B + C", f"{_n(b)} + {_n(c)}", b + c, "tokens"),
            Step("the step's FLOPs: P multiplied per token, the embedding lookup excluded", "2 · P · (B + C)",
                 f"2 · {_n(p)} · {_n(b + c)}", flops, "FLOP"),
            Step("compute time", "2 · P · (B + C) / (eta · F) · 1000", f"{_n(flops)} / ({_pct(mfu)} · {_n(f)}) · 1000",
                 compute_ms, "ms"),
            Step("the step, so the decodes' ITL", "max(read, compute)", f"max({_n(read_ms)}, {_n(compute_ms)})",
                 formulas_serving.mixed_step_seconds(w, kv, p, b + c, bw, f, mfu) * 1e3, "ms"))


def _chain_batching(i):
    o = tuple(i["output_tokens"])
    listed = " + ".join(_n(x) for x in o)
    steps = [Step("tokens the batch generates", "sum(T_o)", listed, sum(o), "tokens"),
             Step("decode steps the static batch runs", "max(T_o)", f"max({', '.join(_n(x) for x in o)})", max(o),
                  "steps")]
    return steps


def _chain_batching_speedup(i):
    o = tuple(i["output_tokens"])
    steps = _chain_batching(i)
    static = formulas_serving.static_batch_tokens_per_step(o)
    steps.append(Step("static batch: tokens per step", "sum(T_o) / max(T_o)", f"{_n(sum(o))} / {_n(max(o))}", static,
                      "tokens"))
    steps.append(Step("continuous over static", "B / (sum(T_o) / max(T_o))", f"{_n(len(o))} / {_n(static)}",
                      formulas_serving.continuous_batching_speedup(o), "times"))
    return tuple(steps)


def _chain_idle_slots(i):
    o = tuple(i["output_tokens"])
    steps = _chain_batching(i)
    steps.append(Step("slot-steps the batch holds", "B · max(T_o)", _times(len(o), max(o)), len(o) * max(o),
                      "slot-steps"))
    steps.append(Step("idle slot-steps", "B · max(T_o) − sum(T_o)", f"{_n(len(o) * max(o))} − {_n(sum(o))}",
                      len(o) * max(o) - sum(o), "slot-steps"))
    return tuple(steps)


def _chain_prefix_hit(i):
    p, t, s, bs, f, mfu = (i["num_params"], i["prompt_tokens"], i["shared_tokens"], i["block_size"],
                           i["peak_flop_per_s"], i["mfu"])
    hit = formulas_serving.prefix_hit_tokens(s, bs)
    flops = prefill_linear_flops(p, t - hit)
    return (Step("cached tokens: whole blocks of the system prompt", "T_c = floor(T_p / bs) · bs",
                 f"floor({_n(s)} / {_n(bs)}) · {_n(bs)}", hit, "tokens"),
            Step("tokens still prefilled", "T − T_c", f"{_n(t)} − {_n(hit)}", t - hit, "tokens"),
            Step("their FLOPs: P multiplied per token, the embedding lookup excluded", "2 · P · (T − T_c)",
                 _times(2, p, t - hit), flops, "FLOP"),
            Step("time to first token", "2 · P · (T − T_c) / (eta · F) · 1000",
                 f"{_n(flops)} / ({_pct(mfu)} · {_n(f)}) · 1000",
                 formulas_serving.prefill_seconds(p, t - hit, f, mfu) * 1e3, "ms"))


def _chain_spec_memory(i):
    steps = _token_steps(i)
    bpt, w, t, b = steps[-1].value, i["draft_weight_bytes"], i["seq_len"], i["batch_size"]
    kv = formulas.kv_bytes_total(bpt, t, b)
    steps = [Step("draft: " + s.label, s.formula, s.substitution, s.value, s.units) for s in steps]
    steps.append(Step("the draft's KV cache, every sequence", "b_tok · T · B", _times(bpt, t, b), kv, "bytes"))
    steps.append(Step("what the draft adds", "W_d + b_tok · T · B", f"{_n(w)} + {_n(kv)}",
                      formulas_serving.speculative_extra_bytes(w, bpt, t, b), "bytes"))
    return tuple(steps)


def _chain_spec_speedup(i):
    a, g, w_d, w_t = i["acceptance"], i["draft_tokens"], i["draft_weight_bytes"], i["weight_bytes"]
    c = w_d / w_t
    e = formulas_serving.speculative_expected_tokens(a, g)
    steps = [Step("a draft step's cost, in target steps", "c_d = W_d / W", f"{_n(w_d)} / {_n(w_t)}", c, "ratio"),
             Step("tokens per verification", "(1 − alpha^(gamma + 1)) / (1 − alpha)",
                  f"(1 − {_pct(a)}^{g + 1}) / (1 − {_pct(a)})", e, "tokens")]
    if "verify_weight_bytes" not in i:
        return tuple(steps) + (
            Step("cost of one verification, in target steps", "gamma · c_d + 1", f"{g} · {_n(c)} + 1", g * c + 1,
                 "steps"),
            Step("speed-up", "E / (gamma · c_d + 1)", f"{_n(e)} / {_n(g * c + 1)}",
                 formulas_serving.speculative_speedup(a, g, c), "times"))
    v = i["verify_weight_bytes"] / w_t
    return tuple(steps) + (
        Step("the verify's cost, in target steps (the experts gamma + 1 tokens touch)", "c_v = W_v / W",
             f"{_n(i['verify_weight_bytes'])} / {_n(w_t)}", v, "steps"),
        Step("cost of one verification, in target steps", "gamma · c_d + c_v", f"{g} · {_n(c)} + {_n(v)}",
             g * c + v, "steps"),
        Step("speed-up", "E / (gamma · c_d + c_v)", f"{_n(e)} / {_n(g * c + v)}",
             formulas_serving.speculative_speedup(a, g, c, v), "times"))


def _chain_quant_speedup(i):
    w, wq, kv = i["weight_bytes"], i["quant_weight_bytes"], i["kv_bytes"]
    return (Step("bytes a bf16 step reads", "W + KV", f"{_n(w)} + {_n(kv)}", w + kv, "bytes"),
            Step("bytes a quantized step reads", "W_q + KV", f"{_n(wq)} + {_n(kv)}", wq + kv, "bytes"),
            Step("speed-up", "(W + KV) / (W_q + KV)", f"{_n(w + kv)} / {_n(wq + kv)}",
                 formulas_serving.weight_only_speedup(w, wq, kv), "times"))


def _chain_allreduce(i):
    L, n, d, b, tp = i["layers"], i["tokens"], i["hidden_size"], i["dtype_bytes"], i["tp"]
    m = n * d * b
    sent = formulas_serving.ring_allreduce_bytes_sent(m, tp)
    return (Step("one all-reduce's message", "B · d · b", _times(n, d, b), m, "bytes"),
            Step("bytes one GPU sends per all-reduce (ring)", "2 · (t − 1) / t · B · d · b",
                 f"2 · ({tp} − 1) / {tp} · {_n(m)}", sent, "bytes"),
            Step("per step: two all-reduces in each layer", "L · 2 · 2 · (t − 1) / t · B · d · b",
                 f"{_n(L)} · 2 · {_n(sent)}", formulas_serving.tp_allreduce_bytes_per_step(L, n, d, b, tp), "bytes"))


def _chain_cost(i):
    price, gpus = i["price_per_gpu_hour"], i["gpus"]
    steps = []
    if "tokens_per_s" in i:
        rate = i["tokens_per_s"]
    else:
        rate = i["batch_size"] / (i["step_ms"] / 1e3)
        steps.append(Step("tokens per second", "B / step", f"{_n(i['batch_size'])} / {_n(i['step_ms'] / 1e3)}", rate,
                          "tokens/s"))
    steps.append(Step("dollars per second", "C_h · N / 3600", f"{_n(price)} · {gpus} / 3600",
                      price * gpus / 3600, "dollars/s"))
    steps.append(Step("seconds for a million tokens", "10^6 / (tokens/s)", f"1,000,000 / {_n(rate)}", 1e6 / rate, "s"))
    steps.append(Step("dollars per million tokens", "C_h · N / (3600 · tokens/s) · 10^6",
                      f"{_n(price)} · {gpus} / (3600 · {_n(rate)}) · 1,000,000",
                      formulas_serving.cost_per_million_tokens(price, gpus, rate), "dollars"))
    return tuple(steps)


#: Topics with several templates: the chain of the problem's quantity where it is not the topic's first one.
_QUANTITY_CHAINS = {"idle_slot_steps": _chain_idle_slots, "spec_speedup": _chain_spec_speedup}


_CHAINS.update({
    "ttft": (_chain_ttft, {"prefill_missing_factor_2": 0, "moe_total_params": 0, "embedding_counted": 0,
                           "ignored_mfu": 1, "mfu_multiplied": 1, "seconds_for_ms": 2}),
    "ridge_batch": (_chain_ridge_batch, {"ridge_as_batch": 1, "ridge_no_factor_2": 1, "batch_rounded_down": 2}),
    "decode_rate": (_chain_decode_rate, {"weights_not_split": 0, "kv_only_step": 1, "weights_only_step": 1,
                                         "missing_batch": 1, "total_not_per_gpu": 1, "per_replica_not_per_gpu": 3,
                                         "per_sequence_rate": 3, "batch_rate_for_user": 3}),
    "chunked_prefill": (_chain_chunked_prefill, {"chunk_ignored": 1, "decodes_not_in_flops": 1, "ignored_mfu": 3,
                                                 "embedding_counted": 2, "moe_total_params": 2,
                                                 "mfu_multiplied": 3, "sum_not_max": 4, "seconds_for_ms": 4}),
    "batching": (_chain_batching_speedup,
                 {"mean_for_max": 1, "static_rate_not_speedup": 3, "batching_inverted": 3, "tokens_not_waste": 3,
                  "allocated_not_waste": 3}),
    "prefix_hit": (_chain_prefix_hit, {"partial_block_shared": 0, "no_cache": 0, "hit_not_miss": 1,
                                       "prefill_missing_factor_2": 2, "moe_total_params": 2, "embedding_counted": 2,
                                       "ignored_mfu": 3,
                                       "mfu_multiplied": 3,
                                       "seconds_for_ms": 3}),
    "spec_decode": (_chain_spec_memory,
                    dict(_TOKEN_SLIP_STEPS, draft_cost_ignored=2, no_bonus_token=1, acceptance_linear=1,
                         missing_batch=2, draft_kv_missing=3, draft_weights_missing=3, acceptance_exponent_gamma=1)),
    "quant_speedup": (_chain_quant_speedup, {"kv_left_out": 0, "quant_ratio_inverted": 2}),
    "allreduce": (_chain_allreduce, {"ring_factor_missing": 1, "bits_not_bytes": 0, "ignored_dtype_bytes": 0,
                                     "one_allreduce_per_layer": 2, "allreduce_layers_missing": 2,
                                     "all_gpus_not_one": 2}),
    "cost": (_chain_cost, {"per_sequence_rate": 0, "price_of_one_gpu": -3, "hours_not_seconds": -3,
                           "per_token_not_million": -1, "per_thousand_not_million": -1}),
})


# --- the families of a 2026 inference interview ([interview 2026 §2]) ------------------------------------------------
# moe_decode: a mixture of experts at decode -- the experts one layer reads at batch B, the weight bytes a step
# reads, the batch from which every expert is read (kvlib.roofline). requests_concurrency: Little's law, and the
# steps a prompt's chunked prefill takes under a token budget (kvlib.serving). Models and GPUs of 2026: Llama 4,
# Qwen3 MoE and Qwen3-Next, DeepSeek-V3.2, Kimi K2, gpt-oss, Nemotron 3; H200, B200, B300, GB200.
#: Mixtures of experts of 2026, bundled configs (sorted ids).
MOE_MODELS = ("Qwen/Qwen3-30B-A3B", "Qwen/Qwen3-Next-80B-A3B-Thinking", "deepseek-ai/DeepSeek-V3.2",
              "meta-llama/Llama-4-Scout-17B-16E-Instruct", "moonshotai/Kimi-K2-Instruct",
              "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "openai/gpt-oss-120b", "openai/gpt-oss-20b")
#: The cards these families are written for (single GPUs; the NVL72 rack is a domain, not a card).
GPUS_2026 = ("B200", "B300", "GB200", "H200")


#: The question types (kinds) of each family that asks more than one, in the order its generator draws them; the
#: template of a question is "<topic>/<kind>". ``generate(topic, seed, kind=...)`` asks one type: the rest of the
#: draw is the seed's own (a seed whose first draw was that type gives the same question either way).
KINDS = MappingProxyType({
    "moe_decode": ("experts", "bytes", "all_read"),
    "requests_concurrency": ("littles_law", "prefill_steps"),
    "disagg_transfer": ("bytes", "time", "pd_ratio"),
    "expert_parallel": ("bytes", "vs_tp"),
    "eagle_mtp": ("tokens", "speedup"),
    "low_precision_compute": ("prefill", "ridge"),
    "hybrid_state": ("state", "sequence"),
    "indexer_cache": ("bytes", "pool"),
})


def _kind(asked, drawn):
    """The question type asked for (``generate``'s ``kind``), else the one the seed drew (drawn either way, so
    the rest of the draw does not depend on the asking)."""
    return asked or drawn


def _bf16(spec) -> int:
    return spec.weight_bytes(2)


def _moe_figures(spec) -> dict:
    layers, per_expert = routed_expert_params(spec)
    return {"num_params": spec.num_params(), "moe_layers": layers, "expert_params": per_expert,
            "num_experts": spec.num_experts, "top_k": spec.num_experts_per_tok}


def _moe_head(spec, f) -> str:
    return (f"{spec.name} is a mixture of experts: {f['num_experts']} routed experts in each of its "
            f"{f['moe_layers']} MoE layers (config.json: {f['num_experts']} experts, {f['top_k']} per token), each "
            f"token sent to its top {f['top_k']}")


# --- moe_decode ------------------------------------------------------------------------------------
def _moe_decode(rng, seed, kind=None):
    kind = _kind(kind, rng.choice(KINDS["moe_decode"]))
    while True:
        spec, gpu, tp, batch, context, dep = _deployment(
            rng, models=MOE_MODELS, batches=(4, 8, 16, 32, 64, 128), contexts=(2048, 4096, 8192),
            weights=_bf16, gpus=GPUS_2026)
        f = _moe_figures(spec)
        # a batch that already reads (nearly) every expert asks nothing about routing: draw again
        if kind == "all_read" or expected_experts_touched(f["num_experts"], f["top_k"], batch) < 0.99 * \
                f["num_experts"]:
            break
    where = (f"On {_tp_text(gpu, tp)} (bf16 weights), a decode step carries {batch} sequences of {context:,} "
             f"tokens; each token is routed independently and uniformly.")
    common = dict(deployments=(dep,), model=spec.name, gpu=gpu.name)
    if kind == "experts":
        inputs = {k: f[k] for k in ("num_experts", "top_k")} | {"batch_size": batch}
        q = (f"{_moe_head(spec, f)}. {where} On average, how many distinct routed experts does one MoE layer read "
             f"in that step?")
        return _problem("moe_decode", seed, q, "moe_experts_read", inputs, "experts", template="moe_decode/experts",
                        **common)
    if kind == "bytes":
        inputs = dict(f, model=spec.name, batch_size=batch, weight_dtype_bytes=2)
        dense = f["num_params"] - f["moe_layers"] * f["num_experts"] * f["expert_params"]
        q = (f"{_moe_head(spec, f)}. It has {f['num_params']:,} parameters; each routed expert holds "
             f"{f['expert_params']:,}, and the other {dense:,} (attention, shared experts, routers, embeddings) are "
             f"read whole every step. {where} Counting 2 bytes per parameter and the routed experts the batch "
             f"touches on average, how many weight bytes does one step read, across all its GPUs?")
        return _problem("moe_decode", seed, q, "moe_step_bytes", inputs, "bytes", template="moe_decode/bytes",
                        **common)
    inputs = {k: f[k] for k in ("num_experts", "top_k")}
    q = (f"{_moe_head(spec, f)}, routed independently and uniformly. Served on {_tp_text(gpu, tp)}, from which "
         f"decode batch on is fewer than one routed expert per MoE layer expected to stay unread (so a step reads "
         f"every expert, in effect)?")
    return _problem("moe_decode", seed, q, "all_experts_batch", inputs, "sequences", template="moe_decode/all_read",
                    **common)


def _miss_step(e, k):
    return Step("chance one token misses a given expert", "1 − k_e / N_e", f"1 − {k} / {e}", 1 - k / e,
                "probability")


def _chain_moe_experts(i):
    e, k, b = i["num_experts"], i["top_k"], i["batch_size"]
    return (_miss_step(e, k),
            Step("chance all B tokens miss it", "(1 − k_e / N_e)^B", f"(1 − {k} / {e})^{b}", (1 - k / e) ** b,
                 "probability"),
            Step("experts one MoE layer reads", "N_B = N_e (1 − (1 − k_e / N_e)^B)", f"{e} (1 − (1 − {k} / {e})^{b})",
                 expected_experts_touched(e, k, b), "experts"))


def _chain_moe_bytes(i):
    p, le, pe, e, k, b, batch = (i["num_params"], i["moe_layers"], i["expert_params"], i["num_experts"], i["top_k"],
                                 i["weight_dtype_bytes"], i["batch_size"])
    routed = le * e * pe
    dense = (p - routed) * b
    total = weight_bytes_read(i["model"], batch, dtype_bytes=b, embedding_rows=False)
    touched = expected_experts_touched(e, k, batch)
    return (Step("routed expert parameters", "L_e · N_e · P_e", f"{_n(le)} · {_n(e)} · {_n(pe)}", routed,
                 "parameters"),
            Step("dense part, read whole every step", "(P − L_e · N_e · P_e) · b", f"({_n(p)} − {_n(routed)}) · {b}",
                 dense, "bytes"),
            Step("experts one MoE layer reads", "N_B = N_e (1 − (1 − k_e / N_e)^B)",
                 f"{e} (1 − (1 − {k} / {e})^{batch})", touched, "experts"),
            Step("routed expert bytes read", "ceil(L_e · N_B · P_e · b)",
                 f"ceil({_n(le)} · {_n(touched)} · {_n(pe)} · {b})", total - dense, "bytes"),
            Step("weight bytes one step reads", "W_r = (P − L_e · N_e · P_e) · b + ceil(L_e · N_B · P_e · b)",
                 f"{_n(dense)} + {_n(total - dense)}", total, "bytes"))


def _chain_all_experts(i):
    e, k = i["num_experts"], i["top_k"]
    return (_miss_step(e, k),
            Step("the batch where one expert is left unread", "ln N_e / (−ln(1 − k_e / N_e))",
                 f"ln {e} / (−ln(1 − {k} / {e}))", math.log(e) / -math.log1p(-k / e), "sequences"),
            Step("first batch with fewer than one expert unread", "floor(ln N_e / (−ln(1 − k_e / N_e))) + 1",
                 f"floor({_n(math.log(e) / -math.log1p(-k / e))}) + 1", all_experts_batch(e, k), "sequences"))


# --- requests_concurrency --------------------------------------------------------------------------
#: 2026 models these questions name (dense and mixtures of experts alike: the figures are the traffic's).
_SERVED = ("Qwen/Qwen3-30B-A3B", "deepseek-ai/DeepSeek-V3.2", "meta-llama/Llama-4-Scout-17B-16E-Instruct",
           "moonshotai/Kimi-K2-Instruct", "openai/gpt-oss-120b", "openai/gpt-oss-20b")


def _requests_concurrency(rng, seed, kind=None):
    kind = _kind(kind, rng.choice(KINDS["requests_concurrency"]))
    spec = _spec(rng.choice(_SERVED))
    if kind == "littles_law":
        rate = rng.choice((2, 5, 8, 10, 20, 40))
        ttft = rng.choice((0.2, 0.4, 0.5, 1.0, 1.5, 2.0))
        t_o = rng.choice((150, 300, 500, 800, 1200))
        itl = rng.choice((8, 12, 20, 25, 40, 50))
        inputs = {"rate_per_s": rate, "ttft_s": ttft, "output_tokens": t_o, "itl_ms": itl}
        q = (f"A chat service on {spec.name} receives {rate} requests per second, steadily. Each request waits "
             f"{ttft:g} s for its first token, then streams {t_o:,} more tokens at {itl:g} ms per token. On "
             f"average, how many requests are in the system at once (queued, prefilling or decoding)?")
        return _problem("requests_concurrency", seed, q, "requests_in_system", inputs, "requests",
                        template="requests_concurrency/littles_law", model=spec.name)
    while True:
        prompt = rng.choice((6144, 10000, 16384, 20000, 32768, 50000))
        budget = rng.choice((512, 1024, 2048, 4096))
        decodes = rng.choice((64, 96, 128, 192, 256))
        if decodes < budget // 2 and (spec.max_position_embeddings is None or prompt <= spec.max_position_embeddings):
            break
    inputs = {"prompt_tokens": prompt, "token_budget": budget, "decode_tokens": decodes}
    q = (f"vLLM serves {spec.name} with chunked prefill and max_num_batched_tokens = {budget:,}: each step first "
         f"schedules the {decodes} running decodes (one token each), then gives a waiting prompt the rest of the "
         f"budget as a chunk. A {prompt:,}-token prompt arrives; the decodes keep running. How many engine steps "
         f"does its prefill take?")
    return _problem("requests_concurrency", seed, q, "prefill_steps", inputs, "steps",
                    template="requests_concurrency/prefill_steps", model=spec.name)


def _chain_littles_law(i):
    rate, ttft, t_o, itl = i["rate_per_s"], i["ttft_s"], i["output_tokens"], i["itl_ms"]
    decode = t_o * itl / 1e3
    return (Step("decode time of one request", "T_o · tau", f"{_n(t_o)} · {_n(itl / 1e3)}", decode, "s"),
            Step("time one request spends in the system", "TTFT + T_o · tau", f"{_n(ttft)} + {_n(decode)}",
                 ttft + decode, "s"),
            Step("requests in the system (Little's law)", "lambda · (TTFT + T_o · tau)",
                 f"{_n(rate)} · {_n(ttft + decode)}", formulas_serving.littles_law_concurrency(rate, ttft + decode),
                 "requests"))


def _chain_prefill_steps(i):
    t, c, n = i["prompt_tokens"], i["token_budget"], i["decode_tokens"]
    return (Step("prompt tokens one step takes", "C − n_d", f"{_n(c)} − {_n(n)}", c - n, "tokens"),
            Step("engine steps of the prefill", "ceil(T_p / (C − n_d))", f"ceil({_n(t)} / {_n(c - n)})",
                 formulas_serving.prefill_steps(t, c, n), "steps"))


# disagg_transfer: the prompt's cache handed from a prefill instance to a decode instance (DistServe, Splitwise,
# vLLM's KV connectors), its time over the NICs, and the P:D ratio (kvlib.serving)
_DISAGG_MODELS = ("Qwen/Qwen3-30B-A3B", "deepseek-ai/DeepSeek-V3", "meta-llama/Llama-4-Scout-17B-16E-Instruct",
                  "moonshotai/Kimi-K2-Instruct", "openai/gpt-oss-120b", "openai/gpt-oss-20b")


def _fp8(spec) -> int:
    return spec.weight_bytes(1)


def _disagg_transfer(rng, seed, kind=None):
    kind = _kind(kind, rng.choice(KINDS["disagg_transfer"]))
    spec, gpu, tp, _, prompt, dep = _deployment(rng, models=_DISAGG_MODELS, contexts=(2048, 4096, 8192, 16384, 32768),
                                                weights=_fp8, gpus=GPUS_2026)
    output = rng.choice((200, 500, 1000, 2000))
    common = dict(deployments=(dep,), model=spec.name, gpu=gpu.name)
    head = (f"{spec.name} (fp8 weights, a bf16 KV cache) is served disaggregated: a prefill instance on "
            f"{_tp_text(gpu, tp)} computes each prompt's cache and hands it to a decode instance on other GPUs")
    if kind == "bytes":
        inputs = {"model": spec.name, "prompt_tokens": prompt, "output_tokens": output}
        q = (f"{head}. Its config.json: {_cache_layout(spec)[2]}. A request has a {prompt:,}-token prompt and will "
             f"generate {output:,} tokens. How many bytes of KV cache move from prefill to decode for it?")
        return _problem("disagg_transfer", seed, q, "disagg_transfer_bytes", inputs, "bytes",
                        template="disagg_transfer/bytes", **common)
    if kind == "time":
        moved = formulas_serving.disagg_transfer_bytes(spec.name, prompt)
        gbit = rng.choice((200, 400, 800))
        inputs = {"transfer_bytes": moved, "tp": tp, "link_gbit_per_s": gbit}
        nics = (f"one NIC of {gbit} Gb/s" if tp == 1 else
                f"one NIC per GPU, {gbit} Gb/s each, and each of its {tp} GPUs sends its share of the cache")
        q = (f"{head}. A {prompt:,}-token prompt's cache is {moved:,} bytes; the prefill instance has {nics} (RDMA "
             f"at line rate). How long does the hand-over take, in milliseconds?")
        return _problem("disagg_transfer", seed, q, "disagg_transfer_ms", inputs, "ms",
                        template="disagg_transfer/time", **common)
    r_p = rng.choice((15_000, 20_000, 30_000, 45_000, 60_000))
    r_d = rng.choice((1_200, 2_000, 3_000, 4_500, 6_000))
    inputs = {"prompt_tokens": prompt, "output_tokens": output, "prefill_tokens_per_gpu_s": r_p,
              "decode_tokens_per_gpu_s": r_d}
    q = (f"{head}. Requests bring {prompt:,}-token prompts and generate {output:,} tokens. A prefill GPU "
         f"processes {r_p:,} prompt tokens per second; a decode GPU, at the batch that meets the ITL SLO, generates "
         f"{r_d:,} tokens per second. How many prefill GPUs does the deployment need per decode GPU?")
    return _problem("disagg_transfer", seed, q, "pd_ratio", inputs, "ratio", template="disagg_transfer/pd_ratio",
                    **common)


def _cache_layout(spec) -> tuple:
    """(bytes per token in one layer, (kind, layers, tokens a layer of that kind keeps or None), ...) of a model whose
    KV layers share one geometry (GQA: 2 K D b; MLA: (d_c + d_R) b), and its config's words."""
    if spec.is_mla:
        per_layer = (spec.kv_lora_rank + spec.qk_rope_head_dim) * 2
        words = f"kv_lora_rank {spec.kv_lora_rank}, qk_rope_head_dim {spec.qk_rope_head_dim} (MLA)"
    else:
        per_layer = 2 * spec.num_kv_heads * spec.head_dim * 2
        words = f"num_key_value_heads {spec.num_kv_heads}, head_dim {spec.head_dim}"
    kinds = {}
    for kind in spec.layer_kinds:
        kinds[kind] = kinds.get(kind, 0) + 1
    window = {"sliding": spec.sliding_window, "chunked": spec.attention_chunk_size}
    groups = tuple((kind, n, window.get(kind)) for kind, n in sorted(kinds.items()))
    words = f"num_hidden_layers {spec.num_layers}, {words}" + "".join(
        f"; {n} of the layers {'slide over' if kind == 'sliding' else 'attend in chunks of'} {w:,} tokens"
        for kind, n, w in groups if w)
    return per_layer, groups, words


def _chain_disagg_bytes(i):
    spec = _spec(i["model"])
    t = i["prompt_tokens"]
    per_layer, groups, _ = _cache_layout(spec)
    moved = formulas_serving.disagg_transfer_bytes(spec.name, t)
    if spec.is_mla:
        one = Step("bytes per token, one layer", "(d_c + d_R) · b", f"({spec.kv_lora_rank} + {spec.qk_rope_head_dim}) · 2",
                   per_layer, "bytes")
    else:
        one = Step("bytes per token, one layer", "2 · K · D · b", _times(2, spec.num_kv_heads, spec.head_dim, 2),
                   per_layer, "bytes")
    if len(groups) == 1:
        return (one, Step("the prompt's cache, every layer", "L · (2 · K · D · b) · T_p" if not spec.is_mla else
                          "L · (d_c + d_R) · b · T_p", _times(spec.num_layers, per_layer, t), moved, "bytes"))
    full = sum(n for kind, n, w in groups if not w)
    capped = [(n, w) for kind, n, w in groups if w]
    held = " + ".join(f"{n} · min({_n(t)}, {_n(w)})" for n, w in capped)
    return (one, Step("the prompt's cache: full layers hold T_p, windowed ones at most w",
                      "(2 · K · D · b) · (L_full · T_p + L_window · min(T_p, w))",
                      f"{_n(per_layer)} · ({full} · {_n(t)} + {held})",
                      moved, "bytes"))


def _chain_disagg_ms(i):
    s, tp, gbit = i["transfer_bytes"], i["tp"], i["link_gbit_per_s"]
    link = gbit * 1e9 / 8
    return (Step("one link in bytes per second", "Gb/s · 10^9 / 8", f"{_n(gbit)} · 10^9 / 8", link, "bytes/s"),
            Step("the prefill GPUs' links together", "t · BW", f"{tp} · {_n(link)}", tp * link, "bytes/s"),
            Step("the hand-over", "S / (t · BW) · 1000", f"{_n(s)} / {_n(tp * link)} · 1000",
                 formulas_serving.disagg_transfer_seconds(s, tp * link) * 1e3, "ms"))


def _chain_pd_ratio(i):
    t_p, t_o, r_p, r_d = (i["prompt_tokens"], i["output_tokens"], i["prefill_tokens_per_gpu_s"],
                          i["decode_tokens_per_gpu_s"])
    return (Step("prefill GPU-seconds per request", "T_p / r_p", f"{_n(t_p)} / {_n(r_p)}", t_p / r_p, "s"),
            Step("decode GPU-seconds per request", "T_o / r_d", f"{_n(t_o)} / {_n(r_d)}", t_o / r_d, "s"),
            Step("prefill GPUs per decode GPU", "(T_p / r_p) / (T_o / r_d)", f"{_n(t_p / r_p)} / {_n(t_o / r_d)}",
                 formulas_serving.pd_ratio(t_p, t_o, prefill_tokens_per_gpu_s=r_p, decode_tokens_per_gpu_s=r_d),
                 "ratio"))


# long_ttft: a long prompt's time to first token, the causal attention's FLOPs beside the linear layers' (one
# chunk, compute-bound; kvlib.serving.ttft_seconds)
_LONG_MODELS = ("Qwen/Qwen3-30B-A3B", "deepseek-ai/DeepSeek-V3", "meta-llama/Llama-3.3-70B-Instruct",
                "moonshotai/Kimi-K2-Instruct")


def _long_ttft(rng, seed):
    while True:
        spec, gpu, tp, _, prompt, dep = _deployment(rng, models=_LONG_MODELS, contexts=(16384, 32768, 65536, 131072),
                                                    weights=_fp8, gpus=GPUS_2026)
        mfu = _mfu(rng)
        f = gpu.fp8_flop_per_s
        d_qk, d_v = (((spec.qk_nope_head_dim or 0) + spec.qk_rope_head_dim, spec.v_head_dim) if spec.is_mla else
                     (spec.head_dim, spec.head_dim))
        inputs = {"num_params": prefill_params_per_token(spec.name), "active_params": spec.num_params_active(),
                  "total_params": spec.num_params(),
                  "layers": spec.num_layers, "num_heads": spec.num_heads, "kv_heads": spec.num_kv_heads,
                  "qk_head_dim": d_qk, "v_head_dim": d_v, "prompt_tokens": prompt, "tp": tp,
                  "peak_flop_per_s": f, "mfu": mfu}
        one_chunk = formulas_serving.ttft_seconds(spec.name, prompt, gpu=gpu.name, mfu=mfu, tp=tp, peak_flop_per_s=f)
        # compute-bound (the weight read is shorter), so kvlib's TTFT is the FLOPs' time
        if abs(one_chunk * 1e3 - diagnose("long_ttft_ms", 0, **inputs).expected) < 1e-9 * one_chunk * 1e3:
            break
    heads = (f"{spec.num_heads} query heads with query-key dims {d_qk} and value dims {d_v} (MLA)" if spec.is_mla else
             f"{spec.num_heads} query heads and {spec.num_kv_heads} KV heads of {d_qk}")
    q = (f"{spec.name} (fp8 weights and compute) prefills one {prompt:,}-token prompt on {_tp_text(gpu, tp)}, "
         f"{f / 1e12:g} TFLOP/s dense fp8 each, at {mfu:.0%} MFU, the FLOPs split evenly over the GPUs (no "
         f"communication time). It multiplies each token by {inputs['num_params']:,} parameters (the embedding "
         f"lookup excluded; {_params_text(spec)}); its {spec.num_layers} layers have {heads}. Counting 2 FLOPs per "
         f"parameter per token and the causal attention (2 FLOPs per multiply-add in QK^T and in PV, every "
         f"query against the keys up to it), what is the time to first token, in milliseconds?")
    return _problem("long_ttft", seed, q, "long_ttft_ms", inputs, "ms", deployments=(dep,), model=spec.name,
                    gpu=gpu.name)


def _chain_long_ttft(i):
    t, tp, f, mfu = i["prompt_tokens"], i["tp"], i["peak_flop_per_s"], i["mfu"]
    L, h, d_qk, d_v = i["layers"], i["num_heads"], i["qk_head_dim"], i["v_head_dim"]
    linear = prefill_linear_flops(i["num_params"], t)
    pairs = attention_pairs(t)
    attention = prefill_attention_flops(L, h, d_qk, t, d_v)
    return (Step("linear FLOPs", "2 · P · T_p", _times(2, i["num_params"], t), linear, "FLOP"),
            Step("causal (query, key) pairs per head and layer", "T_p (T_p + 1) / 2", f"{_n(t)} · {_n(t + 1)} / 2",
                 pairs, "pairs"),
            Step("attention FLOPs", "2 · L · H · (d_qk + d_v) · T_p (T_p + 1) / 2",
                 f"2 · {L} · {h} · ({d_qk} + {d_v}) · {_n(pairs)}", attention, "FLOP"),
            Step("FLOP/s reached on the GPUs", "t · eta · F", f"{tp} · {_pct(mfu)} · {_n(f)}", tp * mfu * f, "FLOP/s"),
            Step("time to first token", "(linear + attention) / (t · eta · F) · 1000",
                 f"({_n(linear)} + {_n(attention)}) / {_n(tp * mfu * f)} · 1000",
                 (linear + attention) / (tp * mfu * f) * 1e3, "ms"))


# expert_parallel: the all-to-all of expert parallelism (dispatch and combine, DeepEP's fp8 dispatch), and EP against
# TP's all-reduce (kvlib.serving.ep_all_to_all_bytes, ring_allreduce_bytes_sent); one 8-GPU node, or EP over a
# GB200 NVL72 rack's NVLink domain
_EP_MODELS = ("Qwen/Qwen3-30B-A3B", "deepseek-ai/DeepSeek-V3", "moonshotai/Kimi-K2-Instruct", "openai/gpt-oss-120b")


def _ep_draw(rng):
    """(spec, card, domain name, ep, deployment check): fp8 weights split over ep GPUs hold with room to spare."""
    while True:
        spec = _spec(rng.choice(_EP_MODELS))
        domain = rng.choice(("B200", "B300", "H200", "GB200-NVL72"))   # HGX nodes of 8, or the NVL72 rack
        card = GPUS["GB200" if domain == "GB200-NVL72" else domain]
        ep = rng.choice((16, 32, 64)) if domain == "GB200-NVL72" else 8
        w = spec.weight_bytes(1)
        # the memory rule of check_deployment with the weights split ep ways (as stages would split them)
        dep = {"pp": ep, "batch_size": 1, "seq_len": 4096, "weight_bytes": w}
        if spec.num_experts % ep == 0 and w / ep < 0.5 * card.memory_bytes and _runs(spec, card, **dep):
            return spec, card, domain, ep, dep


def _expert_parallel(rng, seed, kind=None):
    spec, card, domain, ep, dep = _ep_draw(rng)
    layers, _ = routed_expert_params(spec)
    d, k = spec.hidden_size, spec.num_experts_per_tok
    where = (f"a GB200 NVL72 rack, expert parallelism over {ep} of its GPUs on one NVLink domain" if
             domain == "GB200-NVL72" else f"one node of 8 x {domain}, expert parallelism 8")
    head = (f"{spec.name} ({spec.num_experts} routed experts in each of {layers} MoE layers, {k} per token, "
            f"hidden_size {d}) is served on {where}: each GPU holds {spec.num_experts // ep} whole experts, and the "
            f"attention runs data-parallel (each GPU its own sequences)")
    common = dict(deployments=(dep,), model=spec.name, gpu=domain)
    if _kind(kind, "bytes" if rng.random() < 0.6 else "vs_tp") == "bytes":
        tokens = rng.choice((16, 32, 64, 128, 256))
        fp8 = rng.random() < 0.5
        inputs = {"tokens": tokens, "hidden_size": d, "top_k": k, "ep": ep, "moe_layers": layers,
                  "dispatch_bytes": 1 if fp8 else 2, "combine_bytes": 2}
        how = ("DeepEP dispatches the hidden vectors in fp8 (1 byte a number) and combines in bf16 (2 bytes)" if fp8
               else "dispatch and combine carry bf16 hidden vectors (2 bytes a number)")
        q = (f"{head}. In a decode step each GPU routes its own {tokens} tokens; {how}; the experts are spread evenly "
             f"and routing is uniform. How many bytes does each GPU send in the all-to-alls of one step, all MoE "
             f"layers together?")
        return _problem("expert_parallel", seed, q, "ep_step_bytes", inputs, "bytes",
                        template="expert_parallel/bytes", **common)
    batch = ep * rng.choice((8, 16, 32, 64))
    inputs = {"batch_size": batch, "hidden_size": d, "top_k": k, "ep": ep}
    q = (f"{head}. Compare it with tensor parallelism over the same {ep} GPUs, which all-reduces the whole batch's "
         f"bf16 hidden vectors after each MoE layer with a ring all-reduce. For a decode batch of {batch} tokens "
         f"(bf16 everywhere, uniform routing), how many times the bytes a GPU sends per MoE layer under TP does it "
         f"send under EP?")
    return _problem("expert_parallel", seed, q, "ep_over_tp", inputs, "times", template="expert_parallel/vs_tp",
                    **common)


def _chain_ep_bytes(i):
    n, d, k, ep, le = i["tokens"], i["hidden_size"], i["top_k"], i["ep"], i["moe_layers"]
    b_in, b_out = i["dispatch_bytes"], i["combine_bytes"]
    routes = formulas.exact_div(n * k * (ep - 1), ep)
    one_layer = formulas.exact_div(formulas_serving.ep_all_to_all_bytes(n, d, k, ep, b_in)
                                   + formulas_serving.ep_all_to_all_bytes(n, d, k, ep, b_out), 2)
    return (Step("routes that leave the GPU (its B tokens, k_e experts each)", "B · k_e · (ep − 1) / ep",
                 f"{n} · {k} · ({ep} − 1) / {ep}", routes, "routes"),
            Step("bytes sent per MoE layer (dispatch and combine)", "B · k_e · (ep − 1) / ep · d · (b dispatch + b combine)",
                 f"{_n(routes)} · {d} · ({b_in} + {b_out})", one_layer, "bytes"),
            Step("bytes sent per step, all MoE layers", "L_e · B · k_e · (ep − 1) / ep · d · (b dispatch + b combine)",
                 f"{le} · {_n(one_layer)}", le * one_layer, "bytes"))


def _chain_ep_over_tp(i):
    b, d, k, t = i["batch_size"], i["hidden_size"], i["top_k"], i["ep"]
    tp = formulas_serving.ring_allreduce_bytes_sent(b * d * 2, t)
    ep = formulas_serving.ep_all_to_all_bytes(b // t, d, k, t)
    return (Step("TP: one ring all-reduce of the batch", "2 · (t − 1) / t · B · d · b", f"2 · ({t} − 1) / {t} · {b} · "
                 f"{d} · 2", tp, "bytes"),
            Step("EP: each GPU's own tokens to their experts and back", "2 · (B / t) · k_e · (t − 1) / t · d · b",
                 f"2 · {b // t} · {k} · ({t} − 1) / {t} · {d} · 2", ep, "bytes"),
            Step("EP over TP", "k_e / t", f"{_n(ep)} / {_n(tp)}", ep / tp, "times"))


# eagle_mtp: speculative decoding with draft heads whose acceptance falls with the position (EAGLE-3 drafts,
# DeepSeek-V3's multi-token prediction module; kvlib.serving.eagle_expected_tokens)
_EAGLE_MODELS = ("Qwen/Qwen3-30B-A3B", "deepseek-ai/DeepSeek-V3", "meta-llama/Llama-3.3-70B-Instruct",
                 "meta-llama/Llama-4-Scout-17B-16E-Instruct", "moonshotai/Kimi-K2-Instruct", "openai/gpt-oss-120b")


def _acceptances(rng, count) -> tuple:
    first = rng.choice((0.7, 0.75, 0.8, 0.85, 0.9))
    out = [first]
    for _ in range(count - 1):
        out.append(round(out[-1] * rng.choice((0.75, 0.8, 0.85, 0.9)), 2))
    return tuple(out)


def _eagle_mtp(rng, seed, kind=None):
    spec, gpu, tp, _, context, dep = _deployment(rng, models=_EAGLE_MODELS, contexts=(2048, 4096, 8192),
                                                 weights=_fp8, gpus=GPUS_2026)
    mtp = spec.name == "deepseek-ai/DeepSeek-V3"
    gamma = rng.choice((2, 3)) if mtp else rng.choice((2, 3, 4, 5))
    acc = _acceptances(rng, gamma)
    drafts = (f"its multi-token-prediction module, run {gamma} times in a chain" if mtp else
              f"an EAGLE-3 draft head proposing {gamma} tokens in a chain")
    rates = ", ".join(f"{a:g}" for a in acc)
    # the deployment is checked with fp8 weights (a bf16 Llama 3.3 70B or Kimi K2 would not fit), so the text says so
    # the rates are conditional (given the drafts before), so they are not attributed to vLLM: its log's
    # "Per-position acceptance rate" is the product up to j (vllm/v1/spec_decode/metrics.py)
    head = (f"{spec.name} (fp8 weights) on {_tp_text(gpu, tp)} decodes one sequence with speculative decoding: "
            f"{drafts}. Its "
            f"acceptance per position was measured: the j-th draft is accepted with probability {rates} (j = 1 .. "
            f"{gamma}) given the drafts before it were; the first rejection ends the chain, and the target's verify "
            f"adds a token of its own")
    common = dict(deployments=(dep,), model=spec.name, gpu=gpu.name)
    if _kind(kind, "tokens" if rng.random() < 0.5 else "speedup") == "tokens":
        inputs = {"acceptance_per_position": acc, "draft_tokens": gamma}
        q = f"{head}. How many tokens does one verification yield, on average?"
        return _problem("eagle_mtp", seed, q, "eagle_tokens", inputs, "tokens", template="eagle_mtp/tokens", **common)
    cost = rng.choice((0.02, 0.03, 0.05, 0.08))
    if spec.num_experts:
        # a mixture of experts: the verify of gamma + 1 tokens reads the experts they touch (batch 1, bandwidth-bound)
        verify = round(_moe_read(spec, gamma + 1, 1) / _moe_read(spec, 1, 1), 3)
        why = (f"as {spec.name} is a mixture of experts, its verify of {gamma + 1} tokens reads the experts they "
               f"touch: it costs {verify:g} plain steps")
    else:
        verify = 1
        why = "as the model is dense, its verify of the drafts costs one plain step (the weights read once)"
    inputs = {"acceptance_per_position": acc, "draft_tokens": gamma, "cost_ratio": cost, "verify_ratio": verify}
    q = (f"{head}. At batch 1 a step costs its weight read: a draft step costs {cost:g} of a plain target step, and, "
         f"{why}. What is the expected speed-up over plain decoding?")
    return _problem("eagle_mtp", seed, q, "eagle_speedup", inputs, "times", template="eagle_mtp/speedup", **common)


def _eagle_steps(i) -> list:
    acc = list(i["acceptance_per_position"])
    steps = []
    products = " + ".join(" · ".join(_n(a) for a in acc[:j]) for j in range(1, len(acc) + 1))
    steps.append(Step("drafts accepted on average", "sum_i prod_(j ≤ i) a_j", products,
                      formulas_serving.eagle_expected_tokens(acc) - 1, "tokens"))
    steps.append(Step("tokens per verification, the target's own included", "E = 1 + sum_i prod_(j ≤ i) a_j",
                      f"1 + {_n(steps[0].value)}", formulas_serving.eagle_expected_tokens(acc), "tokens"))
    return steps


def _chain_eagle_tokens(i):
    return tuple(_eagle_steps(i))


def _chain_eagle_speedup(i):
    steps = _eagle_steps(i)
    e, g, c, v = steps[-1].value, i["draft_tokens"], i["cost_ratio"], i["verify_ratio"]
    steps.append(Step("cost of one verification, in target steps", "gamma · c_d + c_v", f"{g} · {_n(c)} + {_n(v)}",
                      g * c + v, "steps"))
    steps.append(Step("speed-up", "E / (gamma · c_d + c_v)", f"{_n(e)} / {_n(g * c + v)}", e / (g * c + v), "times"))
    return tuple(steps)


# low_precision_compute: FP8 and FP4 dense peaks (kvlib.gpus.GPU.peak_flop_per_s) -- a prefill at that peak, and the
# decode batch that reaches the ridge with weights and compute in that dtype (kvlib.serving.ridge_batch)
_LOW_PRECISION_MODELS = ("Qwen/Qwen3-0.6B", "meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.3-70B-Instruct",
                         "Qwen/Qwen2.5-32B", "Qwen/Qwen3-30B-A3B", "openai/gpt-oss-120b")
_DTYPE_BYTES = {"bf16": 2, "fp8": 1, "fp4": 0.5}


def _low_precision_compute(rng, seed, kind=None):
    while True:
        spec, gpu, tp, _, prompt, dep = _deployment(rng, models=_LOW_PRECISION_MODELS, tps=(1,),
                                                    contexts=(4096, 8192, 16384, 32768), weights=_fp8, gpus=GPUS_2026)
        dtype = rng.choice(("fp8", "fp4"))
        if gpu.fp4_flop_per_s or dtype == "fp8":
            break
    f = gpu.peak_flop_per_s(dtype)
    other = "bf16" if dtype == "fp8" else rng.choice(("bf16", "fp8"))
    peaks = ", ".join(f"{gpu.peak_flop_per_s(d) / 1e12:g} TFLOP/s {d}" for d in ("bf16", "fp8", "fp4")
                      if d != "fp4" or gpu.fp4_flop_per_s)
    sheet = (f"The {gpu.name} data sheet lists dense peaks of {peaks} (twice each with 2:4 sparsity), and "
             f"{gpu.bandwidth_bytes_per_s / 1e12:g} TB/s of HBM")
    common = dict(deployments=(dep,), model=spec.name, gpu=gpu.name)
    if _kind(kind, "prefill" if rng.random() < 0.5 else "ridge") == "prefill":
        mfu = _mfu(rng)
        inputs = {"num_params": prefill_params_per_token(spec.name), "prompt_tokens": prompt, "peak_flop_per_s": f,
                  "mfu": mfu, "other_peak_flop_per_s": gpu.peak_flop_per_s(other), "dtype": dtype,
                  "other_dtype": other}
        moe = ""
        if spec.num_experts:
            # a mixture of experts multiplies each token by its own top-k experts only: the total is a named slip
            inputs["total_params"] = spec.num_params() - spec.num_params_active() + inputs["num_params"]
            moe = (f": a mixture of experts, each token through its top {spec.num_experts_per_tok} of "
                   f"{spec.num_experts} experts, of {inputs['total_params']:,} in all")
        q = (f"{spec.name} ({inputs['num_params']:,} parameters multiplied per token{moe}, the embedding lookup "
             f"excluded), quantized to {dtype} weights and activations, prefills a {prompt:,}-token prompt on one "
             f"{gpu.name} at {mfu:.0%} MFU. {sheet}. Counting the linear layers only (2 FLOPs per parameter per "
             f"token), how long does the prefill take, in milliseconds?")
        return _problem("low_precision_compute", seed, q, "low_precision_ttft_ms", inputs, "ms",
                        template=f"low_precision_compute/prefill/{dtype}", **common)
    inputs = {"peak_flop_per_s": f, "bandwidth_bytes_per_s": gpu.bandwidth_bytes_per_s,
              "weight_dtype_bytes": _DTYPE_BYTES[dtype], "other_peak_flop_per_s": gpu.peak_flop_per_s(other),
              "dtype": dtype, "other_dtype": other}
    moe = ""
    if spec.num_experts:
        # its experts turn compute-bound only once the batch covers them (serving.ridge_batch with E and k)
        inputs.update(num_experts=spec.num_experts, top_k=spec.num_experts_per_tok)
        moe = _moe_ridge_words("It", spec.num_experts, spec.num_experts_per_tok)
    q = (f"{spec.name} runs with {dtype} weights ({_DTYPE_BYTES[dtype]:g} byte per parameter) and {dtype} matmuls on "
         f"one {gpu.name}. {sheet}. Counting only the weight reads and the linear layers' 2 FLOPs per parameter per "
         f"sequence (short contexts), from which batch on does a decode step reach the ridge point and turn "
         f"compute-bound?{moe}")
    return _problem("low_precision_compute", seed, q, "low_precision_ridge", inputs, "sequences",
                    template=f"low_precision_compute/ridge/{dtype}", **common)


def _chain_low_precision_ttft(i):
    p, t, f, mfu = i["num_params"], i["prompt_tokens"], i["peak_flop_per_s"], i["mfu"]
    flops = prefill_linear_flops(p, t)
    return (Step("prefill FLOPs (linear layers)", "2 · P · T_p", _times(2, p, t), flops, "FLOP"),
            Step(f"dense {i['dtype']} FLOP/s reached", "eta · F", f"{_pct(mfu)} · {_n(f)}", mfu * f, "FLOP/s"),
            Step("prefill time", "2 · P · T_p / (eta · F) · 1000", f"{_n(flops)} / {_n(mfu * f)} · 1000",
                 formulas_serving.prefill_seconds(p, t, f, mfu) * 1e3, "ms"))


def _chain_low_precision_ridge(i):
    f, bw, b = i["peak_flop_per_s"], i["bandwidth_bytes_per_s"], i["weight_dtype_bytes"]
    if i.get("num_experts"):
        return _chain_ridge_batch(dict(i, dtype_bytes=b))
    return (Step(f"the ridge point at the dense {i['dtype']} peak", "I = F / BW", f"{_n(f)} / {_n(bw)}", f / bw,
                 "FLOP/B"),
            Step("FLOPs per weight byte one sequence adds", "2 / b", f"2 / {_n(b)}", 2 / b, "FLOP/B"),
            Step("first batch at the ridge", "ceil(I · b / 2)", f"ceil({_n(f / bw)} · {_n(b)} / 2)",
                 formulas_serving.ridge_batch(f, bw, b), "sequences"))


# hybrid_state: the constant state of a hybrid's Mamba2 or Gated DeltaNet layers (ModelSpec.state_tensor_shapes, as
# vLLM's MambaStateShapeCalculator), alone or beside its attention layers' KV
_HYBRID_MODELS = ("Qwen/Qwen3-Next-80B-A3B-Thinking", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
                  "nvidia/Nemotron-H-56B-Base-8K")


def _state_text(spec, kind) -> str:
    if kind == "mamba2":
        return (f"{spec.layer_kinds.count(kind)} Mamba2 layers (mamba_num_heads {spec.mamba_num_heads}, mamba_head_dim "
                f"{spec.mamba_head_dim}, ssm_state_size {spec.mamba_state_size}, n_groups {spec.mamba_n_groups}, "
                f"conv_kernel {spec.mamba_conv_kernel}, expand x hidden_size = {spec.mamba_intermediate_size}); vLLM "
                f"keeps the conv state in bf16 and the SSM state in float32")
    return (f"{spec.layer_kinds.count(kind)} Gated DeltaNet layers (linear_num_key_heads {spec.linear_num_key_heads}, "
            f"linear_num_value_heads {spec.linear_num_value_heads}, linear_key_head_dim {spec.linear_key_head_dim}, "
            f"linear_value_head_dim {spec.linear_value_head_dim}, linear_conv_kernel_dim "
            f"{spec.linear_conv_kernel_dim}); vLLM keeps both states in bf16")


def _hybrid_figures(spec, kind) -> dict:
    """The config figures a hybrid_state question states, by name (config.json's), for a worked answer."""
    if kind == "mamba2":
        figures = {"mamba_num_heads": spec.mamba_num_heads, "mamba_head_dim": spec.mamba_head_dim,
                   "ssm_state_size": spec.mamba_state_size, "n_groups": spec.mamba_n_groups,
                   "conv_kernel": spec.mamba_conv_kernel}
    else:
        figures = {"linear_num_key_heads": spec.linear_num_key_heads,
                   "linear_num_value_heads": spec.linear_num_value_heads,
                   "linear_key_head_dim": spec.linear_key_head_dim, "linear_value_head_dim": spec.linear_value_head_dim,
                   "linear_conv_kernel_dim": spec.linear_conv_kernel_dim}
    return dict(figures, num_layers=spec.num_layers, state_layers=spec.layer_kinds.count(kind),
                attention_layers=spec.layer_kinds.count("full"), kv_heads=spec.num_kv_heads, head_dim=spec.head_dim)


def _hybrid_state(rng, seed, kind=None):
    from kvlib.spec import SpecError
    while True:
        spec, gpu, tp, batch, context, dep = _deployment(rng, models=_HYBRID_MODELS, batches=(1, 8, 32),
                                                         contexts=(4096, 8192, 32768), weights=_bf16, gpus=GPUS_2026)
        kind_of_state = next(k for k in spec.layer_kinds if k in ("mamba2", "gated_deltanet"))
        try:
            spec.state_tensor_shapes(kind_of_state, tp)
        except SpecError:           # vLLM's head split refuses this TP for the state layers
            continue
        break
    attention = spec.layer_kinds.count("full")
    head = (f"{spec.name} on {_tp_text(gpu, tp)} is a hybrid of {spec.num_layers} layers: "
            f"{_state_text(spec, kind_of_state)}; "
            f"{attention} attention layers ({spec.num_kv_heads} KV heads of {spec.head_dim}, bf16 KV cache)"
            + (f"; the other {spec.layer_kinds.count('none')} layers are MLPs only" if "none" in spec.layer_kinds
               else ""))
    inputs = {"model": spec.name, "tp": tp, "seq_len": context}
    common = dict(deployments=(dep,), model=spec.name, gpu=gpu.name, **_hybrid_figures(spec, kind_of_state))
    per = "one GPU keep" if tp > 1 else "the GPU keep"
    if _kind(kind, "state" if rng.random() < 0.5 else "sequence") == "state":
        q = (f"{head}. A sequence of {context:,} tokens is running. How many bytes of state (conv and recurrent, "
             f"every state layer; the attention KV left out) does {per} for it?")
        return _problem("hybrid_state", seed, q, "hybrid_state_bytes", inputs, "bytes", template="hybrid_state/state",
                        **common)
    q = (f"{head}. A sequence of {context:,} tokens is running. How many bytes does {per} for it, the state layers' "
         f"state and the attention layers' KV cache together?")
    return _problem("hybrid_state", seed, q, "hybrid_sequence_bytes", inputs, "bytes",
                    template="hybrid_state/sequence", **common)


def _state_steps(i) -> list:
    spec, tp = _spec(i["model"]), i["tp"]
    kind = next(k for k in spec.layer_kinds if k in ("mamba2", "gated_deltanet"))
    shapes, sizes = spec.state_tensor_shapes(kind, tp), spec.state_dtype_bytes(kind)
    temporal = "ssm" if kind == "mamba2" else "recurrent"
    conv = math.prod(shapes["conv"]) * sizes["conv"]
    rec = math.prod(shapes[temporal]) * sizes[temporal]
    layers = spec.layer_kinds.count(kind)
    return [Step("conv state, one layer", "(kernel − 1) · width · b", f"{_times(*shapes['conv'])} · {sizes['conv']}",
                 conv, "bytes"),
            Step(f"{'SSM' if kind == 'mamba2' else 'recurrent'} state, one layer", "heads · head dim · state dim · b",
                 f"{_times(*shapes[temporal])} · {sizes[temporal]}", rec, "bytes"),
            Step("state, all state layers", "L_s · (conv + recurrent)", f"{layers} · ({_n(conv)} + {_n(rec)})",
                 spec.state_bytes_per_sequence(tp), "bytes")]


def _chain_hybrid_state(i):
    return tuple(_state_steps(i))


def _chain_hybrid_sequence(i):
    spec, tp, t = _spec(i["model"]), i["tp"], i["seq_len"]
    steps = _state_steps(i)
    attention = spec.layer_kinds.count("full")
    kv = spec.kv_bytes_per_sequence(t, tp=tp)
    steps.append(Step("KV cache of the attention layers", "L_full · 2 · K_g · D · b · T",
                      f"{attention} · 2 · {formulas.kv_heads_per_gpu(spec.num_kv_heads, tp)} · {spec.head_dim} · 2 · "
                      f"{_n(t)}", kv, "bytes"))
    steps.append(Step("the sequence on one GPU", "state + KV", f"{_n(steps[2].value)} + {_n(kv)}",
                      steps[2].value + kv, "bytes"))
    return tuple(steps)


# indexer_cache: DeepSeek Sparse Attention's indexer keys beside the MLA latent (DeepSeek-V3.2, GLM-5;
# ModelSpec.indexer_bytes_per_token, vLLM's DeepseekV32IndexerCache)
_INDEXER_MODELS = ("deepseek-ai/DeepSeek-V3.2", "zai-org/GLM-5")


def _indexer_cache(rng, seed, kind=None):
    spec, gpu, tp, _, context, dep = _deployment(rng, models=_INDEXER_MODELS, contexts=(8192, 32768),
                                                 weights=_fp8, gpus=GPUS_2026)
    layers = len(spec.indexer_layers)
    inputs = {"model": spec.name, "tp": tp, "index_head_dim": spec.index_head_dim, "indexer_layers": layers,
              "layers": layers}
    head = (f"{spec.name} (config.json: num_hidden_layers {spec.num_layers}, kv_lora_rank {spec.kv_lora_rank}, "
            f"qk_rope_head_dim {spec.qk_rope_head_dim}, index_head_dim {spec.index_head_dim}, index_n_heads "
            f"{spec.index_n_heads}, index_topk {spec.index_topk}) runs on {_tp_text(gpu, tp)} with a bf16 KV cache. "
            f"Its sparse attention's indexer caches, in each of the {layers} layers that build one, one key per token "
            f"of index_head_dim values stored in fp8 with one float32 scale per 128 values, beside the MLA latent "
            f"and RoPE key")
    # the MLA figures the question states (config.json), for a worked answer's arithmetic
    common = dict(deployments=(dep,), model=spec.name, gpu=gpu.name, num_layers=spec.num_layers,
                  kv_lora_rank=spec.kv_lora_rank, qk_rope_head_dim=spec.qk_rope_head_dim)
    if _kind(kind, "bytes" if rng.random() < 0.5 else "pool") == "bytes":
        q = f"{head}. How many bytes of indexer cache does one token take on each GPU, all layers together?"
        return _problem("indexer_cache", seed, q, "indexer_bytes", inputs, "bytes", template="indexer_cache/bytes",
                        **common)
    budget = _gb_value(rng, 20, 60)
    inputs["budget_bytes"] = budget
    q = (f"{head}. After weights and overhead each GPU has {_gb_text(budget)} (10^9 bytes) for the cache. How many "
         f"tokens does it hold (MLA latent, RoPE key and indexer key per token)?")
    return _problem("indexer_cache", seed, q, "indexer_pool_tokens", inputs, "tokens", template="indexer_cache/pool",
                    **common)


def _indexer_steps(i) -> list:
    d, L = i["index_head_dim"], i["indexer_layers"]
    one = d + d // 128 * 4
    return [Step("indexer key, one layer (fp8 values and float32 scales)", "D_idx + D_idx / 128 · 4",
                 f"{d} + {d} / 128 · 4", one, "bytes"),
            Step("indexer bytes per token, every layer (whole on each GPU)", "L_idx · (D_idx + D_idx / 128 · 4)",
                 f"{L} · {one}", _spec(i["model"]).indexer_bytes_per_token(i["tp"]), "bytes")]


def _chain_indexer_bytes(i):
    return tuple(_indexer_steps(i))


def _chain_indexer_pool(i):
    spec = _spec(i["model"])
    steps = _indexer_steps(i)
    mla = formulas.mla_bytes_per_token(spec.num_layers, spec.kv_lora_rank, spec.qk_rope_head_dim, 2)
    per_token = spec.kv_bytes_per_token(tp=i["tp"])
    steps.append(Step("MLA latent and RoPE key per token", "L · (d_c + d_R) · b",
                      f"{spec.num_layers} · ({spec.kv_lora_rank} + {spec.qk_rope_head_dim}) · 2", mla, "bytes"))
    steps.append(Step("bytes per token on each GPU", "MLA + indexer", f"{_n(mla)} + {_n(steps[1].value)}", per_token,
                      "bytes"))
    steps.append(Step("tokens the budget holds", "floor(M_kv / bytes per token)",
                      f"floor({_n(i['budget_bytes'])} / {_n(per_token)})",
                      formulas.max_concurrency(i["budget_bytes"], per_token), "tokens"))
    return tuple(steps)


#: The families of a 2026 inference interview ([interview 2026 §2]), after the topics above (whose seeds draw what they drew).
FAMILIES_2026 = ("moe_decode", "requests_concurrency", "disagg_transfer", "long_ttft", "expert_parallel", "eagle_mtp",
                 "low_precision_compute", "hybrid_state", "indexer_cache")
TOPICS.update({"moe_decode": _moe_decode, "requests_concurrency": _requests_concurrency,
               "disagg_transfer": _disagg_transfer, "long_ttft": _long_ttft, "expert_parallel": _expert_parallel,
               "eagle_mtp": _eagle_mtp, "low_precision_compute": _low_precision_compute,
               "hybrid_state": _hybrid_state, "indexer_cache": _indexer_cache})
_CHAINS.update({
    "moe_decode": (_chain_moe_experts, {"experts_top_k_only": 0, "experts_batch_times_k": 2, "experts_all_read": 2,
                                        "experts_unread_not_read": 2, "moe_read_all_weights": 0,
                                        "moe_dense_left_out": 4, "moe_read_top_k_only": 2,
                                        "all_read_top_k_forgotten": 0, "all_read_at_e_over_k": 1,
                                        "all_read_rounded_down": 2}),
    "requests_concurrency": (_chain_littles_law, {"itl_ms_as_seconds": 0, "one_token_not_output": 0,
                                                  "decode_time_left_out": 1, "ttft_left_out": 1,
                                                  "decodes_not_subtracted": 0, "decodes_counted_once": 0,
                                                  "chunks_rounded_down": 1}),
    "disagg_transfer": (_chain_disagg_bytes, {"transfer_window_layers_full": 1, "transfer_output_tokens_added": 1,
                                              "missing_seq_len": 1,
                                              "link_bits_as_bytes": 0, "one_link_for_all": 1, "pd_tokens_only": 0,
                                              "pd_rates_only": 0, "pd_ratio_inverted": 2}),
    "long_ttft": (_chain_long_ttft, {"moe_total_params": 0, "embedding_counted": 0, "attention_not_causal": 1,
                                     "attention_kv_heads_for_query_heads": 2, "attention_flops_left_out": 2,
                                     "attention_tp_not_split": 3, "ignored_mfu": 3}),
    "expert_parallel": (_chain_ep_bytes, {"a2a_local_routes_counted": 0, "a2a_top_k_missing": 0,
                                          "a2a_combine_missing": 1, "a2a_one_dtype": 1, "a2a_moe_layers_missing": 2,
                                          "ep_tokens_not_split": 1, "ep_tp_ratio_inverted": 2}),
    "eagle_mtp": (_chain_eagle_tokens, {"eagle_sum_not_product": 0, "eagle_first_rate_for_all": 0,
                                        "eagle_no_bonus": 1, "moe_verify_as_one_step": 2, "draft_cost_ignored": 2}),
    "low_precision_compute": (_chain_low_precision_ttft, {"peak_of_wrong_dtype": 1, "sparse_peak_used": 1,
                                                          "ignored_mfu": 1, "prefill_missing_factor_2": 0,
                                                          "moe_total_params": 0, "moe_coverage_forgotten": 1,
                                                          "ridge_no_factor_2": 1, "fp4_half_byte_missed": 1,
                                                          "batch_rounded_down": 2}),
    "hybrid_state": (_chain_hybrid_state, {"conv_state_left_out": 0, "ssm_state_in_model_dtype": 1,
                                           "state_all_layers": 2, "state_whole_on_rank": 2,
                                           "state_grows_with_context": 2, "hybrid_state_left_out": 4,
                                           "hybrid_kv_every_layer": 3}),
    "indexer_cache": (_chain_indexer_bytes, {"indexer_scale_forgotten": 0, "indexer_in_bf16": 0, "missing_layers": 1,
                                             "indexer_split_by_tp": 1, "indexer_forgotten": 3}),
})
_QUANTITY_CHAINS.update({"moe_step_bytes": _chain_moe_bytes, "all_experts_batch": _chain_all_experts,
                         "prefill_steps": _chain_prefill_steps, "disagg_transfer_ms": _chain_disagg_ms,
                         "pd_ratio": _chain_pd_ratio, "ep_over_tp": _chain_ep_over_tp,
                         "eagle_speedup": _chain_eagle_speedup, "low_precision_ridge": _chain_low_precision_ridge,
                         "hybrid_sequence_bytes": _chain_hybrid_sequence, "indexer_pool_tokens": _chain_indexer_pool})


#: The graded drills of ch09_interview_drills, in notebook order (grade ids ch09_q2_ ... ch09_q18_): the cache topics,
#: then every 2026 family. A grade id fixes one quantity, unit and tolerance: ``long_ttft`` asks one type of question,
#: the other families the type of ``GRADED_KINDS`` (their other types are practised in drill mode and
#: ``kvlib drill``).
GRADED_TOPICS = ("kv_per_token", "concurrency", "pool", "crossover", "step_time", "mla_vs_gqa", "tp_per_gpu",
                 "plan_step", "long_ttft", "moe_decode", "requests_concurrency", "disagg_transfer", "expert_parallel",
                 "eagle_mtp", "low_precision_compute", "hybrid_state", "indexer_cache")
#: The question type each graded family of several asks a learner (``student_problem``): the weight bytes a MoE
#: decode step reads, Little's law, the hand-over time, the all-to-all bytes, the EAGLE speed-up, a low-precision
#: prefill, a hybrid's sequence (state and KV), the tokens an indexer's pool holds.
GRADED_KINDS = MappingProxyType({"moe_decode": "bytes", "requests_concurrency": "littles_law",
                                 "disagg_transfer": "time", "expert_parallel": "bytes", "eagle_mtp": "speedup",
                                 "low_precision_compute": "prefill", "hybrid_state": "sequence",
                                 "indexer_cache": "pool"})


def _seed(seed) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise DrillError(f"seed must be an integer, got {seed!r}")
    return seed


def generate(topic: str, seed: int = 0, kind: str | None = None) -> Problem:
    """One problem on ``topic`` (a key of TOPICS); the same seed gives the same problem.

    ``kind``: one question type of a family that asks several (``KINDS[topic]``), so its quantity, unit and
    tolerance are fixed (a graded exercise's); None: the type the seed draws.

    >>> {generate("eagle_mtp", s, kind="speedup").template for s in range(5)}
    {'eagle_mtp/speedup'}
    """
    if topic not in TOPICS:
        raise DrillError(f"unknown topic {topic!r} (known: {', '.join(TOPICS)})")
    if kind is not None and kind not in KINDS.get(topic, ()):
        known = ", ".join(KINDS[topic]) if topic in KINDS else "none: it asks one type"
        raise DrillError(f"kind must be a question type of {topic} ({known}), got {kind!r}")
    rng = random.Random(_seed(seed))
    ask = {"kind": kind} if kind is not None else {}
    for _attempt in range(_REDRAWS):
        # a draw where a named slip lands within the tolerance cannot tell that slip from the answer: drawn
        # again from the same generator (a seed whose first draw tells them apart keeps its problem)
        p = TOPICS[topic](rng, seed, **ask)
        if not swallowed_slips(p):
            break
    return p


#: Slips that describe how a figure was rounded, not a rule applied to the inputs: within a tolerance
#: (one token of a pool of 10^5) they are below the precision asked, so they are not told apart there.
_ROUNDING_SLIPS = frozenset({"off_by_one", "ceil_not_floor"}) | slips.ROUNDING_KEYS


def swallowed_slips(p) -> tuple:
    """The slip keys of ``p``'s catalogue whose value lies within ``p``'s tolerance of the answer (but is not
    the answer itself): a learner who made one would be marked right. ``generate`` draws again where there
    is one; a rounding by one unit (``_ROUNDING_SLIPS``) is below a tolerance and not counted.

    >>> swallowed_slips(generate("step_time", 0))
    ()
    """
    if not p.tolerance:
        return ()
    expected, table = slips.variants(p.quantity, unit=p.units, **p.inputs)
    out = []
    for key, value in table:
        if value is None or base_key(key) in _ROUNDING_SLIPS or isinstance(value, (str, tuple)):
            continue
        off = abs(value - expected)
        if off > 1e-9 * abs(expected) and off <= p.tolerance * abs(expected) and base_key(key) not in out:
            out.append(base_key(key))
    return tuple(out)


def problem_set(seed: int = 0, count: int = 5, topic: str | None = None) -> list:
    """``count`` problems (of one topic, or of topics drawn at random) from one seed.

    Each problem gets its own seed drawn from ``random.Random(seed)``; a draw
    whose (template, model, GPU) the set already asked ``MAX_REPEATS`` times
    is drawn again (``variety_key``), so a long set keeps changing:

    >>> [p.topic for p in problem_set(seed=1, count=3, topic="fp8")]
    ['fp8', 'fp8', 'fp8']
    >>> problem_set(seed=1, count=3) == problem_set(seed=1, count=3)
    True
    """
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise DrillError(f"count must be a positive integer, got {count!r}")
    if topic is not None and topic not in TOPICS:
        raise DrillError(f"unknown topic {topic!r} (known: {', '.join(TOPICS)})")
    rng = random.Random(_seed(seed))
    names = list(TOPICS)
    out, seen = [], {}
    for _ in range(count):
        for _attempt in range(_REDRAWS):   # a (template, model, GPU) asked MAX_REPEATS times already: draw again
            sub_seed = rng.getrandbits(63)
            p = generate(topic or rng.choice(names), sub_seed)
            if seen.get(variety_key(p), 0) < MAX_REPEATS:
                break
        seen[variety_key(p)] = seen.get(variety_key(p), 0) + 1
        out.append(p)
    return out


#: How often one (template, model, GPU) may come back in one problem set; ``_REDRAWS`` draws at most are
#: tried for a fresh one (a single-topic set over few models keeps the last draw).
MAX_REPEATS = 3
_REDRAWS = 12


def variety_key(p) -> tuple:
    """(template, model, GPU) of a problem (None where the question names no model or GPU).

    >>> variety_key(generate("pool", 0))[0], variety_key(generate("kv_per_token", 0))[2]
    ('pool', None)
    """
    return (p.template or p.topic, p.params.get("model"), p.params.get("gpu"))


def seed_for_student(student_id: str) -> int:
    """A stable per-student seed: the first 8 bytes of SHA-256 of the id (never ``hash()``).

    >>> seed_for_student("student-001")
    17424175195447602153
    """
    if not isinstance(student_id, str) or not student_id:
        raise DrillError(f"student_id must be a non-empty string, got {student_id!r}")
    return int.from_bytes(hashlib.sha256(student_id.encode("utf-8")).digest()[:8], "big")


def student_problem(student_id: str, topic: str) -> Problem:
    """The learner's own problem on ``topic``: ``generate(topic, seed_for_student(f"{student_id}/{topic}"),
    kind=GRADED_KINDS.get(topic))`` (a family of several question types asks its graded one).

    It depends on the id alone (never on a class secret), so the learner's
    notebook, the instant check and the grader all draw the same problem;
    another id almost always draws another one. Taught in ch09_interview_drills.

    >>> student_problem("ada", "pool") == student_problem("ada", "pool")
    True
    >>> student_problem("ada", "pool").seed == seed_for_student("ada/pool")
    True
    """
    if topic not in TOPICS:
        raise DrillError(f"unknown topic {topic!r} (known: {', '.join(TOPICS)})")
    if not isinstance(student_id, str) or not student_id.strip():
        raise DrillError(f"student_id must be a non-empty string, got {student_id!r}")
    return generate(topic, seed_for_student(f"{student_id}/{topic}"), kind=GRADED_KINDS.get(topic))


# --- answers read from outside (ch09's graded drills): who may read Problem.answer is kvcoach.guard's policy ---
Problem.answer = GuardedField(lambda p: (p.topic, p.seed))
Problem.answer.__set_name__(Problem, "answer")
#: ``(topic, seed)`` of every problem whose answer code outside the course's packages read (``answer_reads``).
_ANSWER_READS = Problem.answer.reads


def answer_reads() -> frozenset:
    """``(topic, seed)`` of each problem whose answer a notebook or script read (``p.answer``, the answer in
    ``p.check``'s feedback, ``repr(p)``); the checks of ch09's graded drills refuse a value read that way.

    >>> p = generate("kv_per_token", seed=3)
    >>> _ANSWER_READS.discard((p.topic, p.seed)); (p.topic, p.seed) in answer_reads()
    False
    """
    return frozenset(_ANSWER_READS)


# --- kvlib drill ------------------------------------------------------------------------
def run_drill(problems, stdin=None, stdout=None, timings: bool = False, clock=time.perf_counter,
              reveal: bool = True) -> tuple:
    """Ask each problem, read one answer line each; return (correct, asked).

    Stops quietly at the end of input. Echoes the answer when input is not a
    terminal, so a piped transcript reads like a session. Prints times only
    with ``timings``. ``reveal=False``: wrong answers are not followed by the
    right one (``Problem.check``).
    """
    stdin = sys.stdin if stdin is None else stdin
    stdout = sys.stdout if stdout is None else stdout
    echo = not (hasattr(stdin, "isatty") and stdin.isatty())
    correct = asked = 0
    slips = {}
    start = clock()
    for n, p in enumerate(problems, 1):
        print(f"\nQuestion {n}/{len(problems)} [{p.topic}]", file=stdout)
        print(p.question, file=stdout)
        print(f"answer ({p.units})> ", end="", file=stdout, flush=True)
        asked_at = clock()
        line = stdin.readline()
        if not line:
            print("\n(end of input)", file=stdout)
            break
        text = line.strip()
        if echo:
            print(text, file=stdout)
        asked += 1
        ok, feedback = p.check(text, reveal=reveal)
        correct += ok
        key = p.slip_key(text)
        if key:
            slips[key] = slips.get(key, 0) + 1
        print(feedback, file=stdout)
        if timings:
            print(f"(answered in {clock() - asked_at:.1f} s)", file=stdout)
    print(f"\nscore {correct}/{asked}" + (f" ({len(problems) - asked} not answered)" if asked < len(problems) else ""),
          file=stdout)
    if slips:
        print("slips: " + ", ".join(f"{k} x{v}" for k, v in sorted(slips.items())), file=stdout)
    if timings:
        print(f"time {clock() - start:.1f} s", file=stdout)
    return correct, asked

