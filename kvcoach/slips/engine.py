"""The slip engine: a wrong answer matched to a slip recomputed, and the slip put into words.

The catalogue itself is declared by the topic modules (``kvcoach/slips/<topic>.py``) and joins
the tables below through ``register``, in the order ``kvcoach/slips/__init__.py`` lists them:

* ``SLIPS`` and ``GENERAL`` -- each slip's words, with the case's figures (``{field}``) and in
  general words (hidden cases);
* ``QUANTITIES`` -- quantity -> ``f(inputs)`` giving ``(expected, [(variant key, slipped value),
  ...])``, and optionally a third element, the figure before the answer's final rounding;
* ``UNROUNDED`` -- quantity -> (its final rounding, f(inputs): the figure before it);
* ``TIE_RULES`` -- a choice made by a comparison: what the text says at a tie;
* ``VARIANT_SLIPS`` -- a variant key whose case figures differ from its catalogue key's: its own words;
* ``COUNT_SLIPS`` -- slips a check names by the count the answer is off ("1 node too small");
* ``FIGURES`` -- the figures the words derive from a case's inputs (the bits of an element, a GPU count).

A slip key ``a@x`` is slip ``a`` made one particular way (``VARIANT``); ``a+b`` is two slips at once
(``COMBINED``). The lists a quantity returns are in catalogue order: the first slip that gives the
learner's number is the one named, so a topic module keeps each list's order as it is.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from fractions import Fraction

from kvlib.units import GB, GiB, KB, KiB

__all__ = ["Slip", "Diagnosis", "SLIPS", "GENERAL", "QUANTITIES", "UNROUNDED", "TIE_RULES", "VARIANT_SLIPS",
           "COUNT_SLIPS", "FIGURES", "COMBINED", "VARIANT", "DESCRIPTIVE", "PREFIX_MIX_KEYS", "ROUNDING_KEYS",
           "register", "close", "unit_slips", "exact_ratio", "gpu_count", "ratio_text", "expected_value", "message",
           "general", "base_key", "variants", "matching_variants", "matching", "ruled_out", "diagnose",
           "generic_slips", "rounding_slips", "unrounded"]


@dataclass(frozen=True)
class Slip:
    key: str
    message: str


@dataclass(frozen=True)
class Diagnosis:
    quantity: str
    correct: bool
    expected: object
    answer: object
    slip: Slip | None = None
    message: str = ""
    inputs: dict = field(default_factory=dict, compare=False)


COMBINED = "+"   # a key "a+b" is two slips made at once
VARIANT = "@"    # a key "a@x" is slip a made one particular way (x): the same words, told apart across cases

#: Generic slips that describe the answer rather than a rule applied to every case: a right answer on
#: another case does not rule them out (an off-by-one shows at one edge and not elsewhere).
DESCRIPTIVE = frozenset({"off_by_one"})

#: The generic rounding slips, by the rounding the answer needs: (slip key, the rounding the learner took).
_ROUNDINGS = {"ceil": (("floor_for_ceil", math.floor), ("round_for_ceil", round)),
              "floor": (("ceil_for_floor", math.ceil), ("round_for_floor", round)),
              "round": (("floor_for_round", math.floor), ("ceil_for_round", math.ceil))}
ROUNDING_KEYS = frozenset(key for ways in _ROUNDINGS.values() for key, _ in ways)

#: The binary-prefix mix-ups, as (slip key, decimal unit, binary unit).
_PREFIX_MIXES = (("kb_for_kib", 10**3, 2**10), ("gb_for_gib", GB, GiB), ("tb_for_tib", 10**12, 2**40))
PREFIX_MIX_KEYS = frozenset(key for key, _, _ in _PREFIX_MIXES)
_BYTE_UNITS = (("answer_in_kib", KiB), ("answer_in_kb", KB), ("answer_in_mib", 2**20), ("answer_in_mb", 10**6),
               ("answer_in_gib", GiB), ("answer_in_gb", GB), ("answer_in_tib", 2**40), ("answer_in_tb", 10**12))


# --- the catalogue's tables, filled by register() ---------------------------------------------------------
SLIPS: dict = {}
GENERAL: dict = {}
QUANTITIES: dict = {}
UNROUNDED: dict = {}
TIE_RULES: dict = {}
VARIANT_SLIPS: dict = {}
#: Slips a check names by the count the answer is off: the generic ones, and the topics' own rounding slips.
COUNT_SLIPS: set = set(DESCRIPTIVE | ROUNDING_KEYS)
FIGURES: list = []


def register(topic) -> None:
    """Add a topic module's declarations to the catalogue's tables.

    A topic declares any of: ``SLIP_WORDS`` ({key: (words with the case's figures, general words)}),
    ``QUANTITIES``, ``UNROUNDED``, ``TIE_RULES``, ``VARIANT_SLIPS``, ``COUNT_SLIPS`` and ``figures(key,
    inputs)`` (the figures its words derive). A key another topic already declared is refused: each
    slip, quantity and rule has one home.
    """
    name = topic.__name__
    tables = ((getattr(topic, "QUANTITIES", {}), QUANTITIES), (getattr(topic, "UNROUNDED", {}), UNROUNDED),
              (getattr(topic, "TIE_RULES", {}), TIE_RULES), (getattr(topic, "VARIANT_SLIPS", {}), VARIANT_SLIPS),
              (getattr(topic, "SLIP_WORDS", {}), SLIPS))
    for declared, table in tables:
        for key in declared:
            if key in table:
                raise ValueError(f"{name}: {key!r} is declared twice in the slip catalogue")
    for key, (words, general_words) in getattr(topic, "SLIP_WORDS", {}).items():
        SLIPS[key] = words
        GENERAL[key] = general_words
    for declared, table in tables[:-1]:
        table.update(declared)
    COUNT_SLIPS.update(getattr(topic, "COUNT_SLIPS", ()))
    if hasattr(topic, "figures"):
        FIGURES.append(topic.figures)
    _VARIANTS.clear()


# --- numbers compared, and told apart in words ------------------------------------------------------------
def _count_text(n: int, unit: str) -> str:
    """``1 token``, ``3 tokens``, ``2``: a count in the exercise's unit (a plain word only)."""
    word = unit.strip() if unit and re.fullmatch(r"[A-Za-z][A-Za-z /]*", unit.strip()) else ""
    if word and n == 1 and word.endswith("s") and "/" not in word:
        word = word[:-1]
    return f"{n:,} {word}".rstrip()


def _ratio_text(answer, expected, unit: str = "") -> str:
    if _is_number_tuple(answer) and _is_number_tuple(expected):   # a range: judged by its upper end
        differ = [k for k, (a, e) in enumerate(zip(answer, expected)) if a != e]
        last = differ[-1] if differ and len(answer) == len(expected) else -1   # or the last element that differs
        answer, expected = answer[last], expected[last]
    if isinstance(answer, str) and isinstance(expected, str):
        digests = all(len(t) >= 32 and not t.strip("0123456789abcdef") for t in (answer, expected))
        return "another key" if digests else "wrong choice"       # a key is compared by its hex (ch05)
    try:
        ratio = answer / expected
    except (ZeroDivisionError, TypeError):
        return "wrong"
    if type(answer) is int and type(expected) is int and answer != expected and answer >= 0 < expected \
            and (abs(ratio - 1) < 0.0005 or (abs(answer - expected) < 10 and abs(ratio - 1) < 0.1)):
        # a small count off: say by how much ("1 token too small"), never "0.0% too small"
        return f"{_count_text(abs(answer - expected), unit)} too {'large' if answer > expected else 'small'}"
    if ratio <= 0:
        return "wrong sign or zero"
    big = ratio if ratio >= 1 else 1 / ratio
    word = "too large" if ratio > 1 else "too small"
    if abs(big - round(big)) < 0.01 and round(big) >= 2:
        return f"{round(big)}x {word}"
    if big < 1.5:
        return f"{abs(ratio - 1) * 100:.1f}% {word}"
    return f"{big:.2f}x {word}"


def ratio_text(answer, expected, unit: str = "") -> str:
    """How far ``answer`` is from ``expected`` in words: "4x too large", "7.4% too small", "1 token too small"."""
    return _ratio_text(answer, expected, unit)


def _is_number_tuple(x) -> bool:
    """A tuple of plain numbers: an answer such as a (fewest, most) range, compared element by element."""
    return type(x) is tuple and len(x) > 0 and all(type(v) in (int, float) for v in x)


def close(a, b, rel_tol) -> bool:
    """``a`` and ``b`` are the same answer: equal ints or choices, floats within ``rel_tol``, ranges element-wise."""
    a, b = (x.hex() if isinstance(x, bytes) else x for x in (a, b))     # a key (ch05) is compared by its hex
    if isinstance(a, str) or isinstance(b, str):     # a choice ("fetch"): the same option, or not
        return a == b
    if _is_number_tuple(a) or _is_number_tuple(b):
        return (_is_number_tuple(a) and _is_number_tuple(b) and len(a) == len(b)
                and all(close(x, y, rel_tol) for x, y in zip(a, b)))
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    return math.isclose(a, b, rel_tol=rel_tol, abs_tol=1e-12)


def unit_slips(value):
    """The right bytes given in KiB, KB, GiB or GB: the unit slips of an answer asked in bytes."""
    return [("answer_in_kib", value / KiB), ("answer_in_kb", value / KB),
            ("answer_in_gib", value / GiB), ("answer_in_gb", value / GB)]


def exact_ratio(a, b):
    """a / b, exactly when both are ints (a float division could put an exact count a hair off a whole one)."""
    if b == 0:
        return None
    return Fraction(a, b) if type(a) is int and type(b) is int else a / b


def gpu_count(inputs: dict) -> int:
    """The GPUs an exercise spreads over: its TP degree, else a node's GPUs (1 when it has neither)."""
    tp = inputs.get("tp")
    if isinstance(tp, int) and tp > 1:
        return tp
    g = inputs.get("gpus_per_node")
    return g if isinstance(g, int) and g > 1 else 1


def _check_quantity(quantity: str) -> None:
    if quantity not in QUANTITIES:
        raise KeyError(f"unknown quantity {quantity!r} (known: {', '.join(QUANTITIES)})")


def expected_value(quantity: str, **inputs):
    """The correct value of ``quantity`` for ``inputs`` (computed by kvlib)."""
    _check_quantity(quantity)
    return QUANTITIES[quantity](inputs)[0]


# --- a slip in words ---------------------------------------------------------------------------------------
def _variant_message(key: str, inputs: dict):
    words = VARIANT_SLIPS.get(key)
    return words(inputs) if words else None


def _message(key: str, inputs: dict) -> str:
    if COMBINED not in key and _variant_message(key, inputs):
        return _variant_message(key, inputs)
    key = base_key(key)
    if COMBINED in key:
        return "two slips at once: " + " And ".join(_message(k, inputs) for k in key.split(COMBINED))
    values = dict(inputs)
    for figures in FIGURES:
        for name, value in figures(key, inputs).items():
            values.setdefault(name, value)
    try:
        return SLIPS[key].format(**values)
    except (KeyError, IndexError):
        words = SLIPS[key].split(" (")[0]
        # a figure the case lacks sits outside any parenthesis: the general words, never a raw "{field}"
        return GENERAL[key] if "{" in words else words + "."


def message(key: str, **inputs) -> str:
    """The catalogue's words for slip ``key`` (``a+b``: both slips), filled in from ``inputs``."""
    return _message(key, inputs)


def general(key: str) -> str:
    """Slip ``key`` in general words (no numbers of the case): for hidden cases."""
    key = base_key(key)
    if COMBINED in key:
        return "two slips at once: " + " And ".join(general(k) for k in key.split(COMBINED))
    return GENERAL.get(key, "a known slip.")


def base_key(key: str) -> str:
    """The catalogue key of a slip variant: ``ignored_dtype_bytes@1`` -> ``ignored_dtype_bytes``."""
    return COMBINED.join(part.split(VARIANT)[0] for part in key.split(COMBINED))


# --- which slips give the learner's number -----------------------------------------------------------------
def _matches(answer, wrong, expected, rel_tol) -> bool:
    """``answer`` is the slipped value ``wrong`` (and that differs from the right one).

    An int answer also matches a fractional slipped value it truncates or rounds
    (``int(x / 1e9)``: the GB answer wrapped in int), when that value is at least 1.
    """
    if wrong is None or close(wrong, expected, rel_tol):
        return False
    if close(answer, wrong, rel_tol):
        return True
    if type(answer) is int and isinstance(wrong, float) and math.isfinite(wrong) and abs(wrong) >= 1 \
            and not float(wrong).is_integer():
        return answer in (math.floor(wrong), math.ceil(wrong), round(wrong)) and \
            not close(answer, expected, rel_tol)
    return False


def variants(quantity: str, *, unit: str = "", **inputs) -> tuple:
    """(expected, [(variant key, slipped value), ...]): the quantity's own slips, then the generic ones.

    A variant key is a catalogue key, or ``key@how`` where one slip can be made
    in several ways (``ignored_dtype_bytes@1``: the element size 1 used); the
    generic slips (``generic_slips``) come from the expected value and ``unit``
    alone, after the quantity's, and only where no slip of its own gives the
    same number.
    """
    _check_quantity(quantity)
    memo = (quantity, unit, repr(sorted(inputs.items())))
    if memo in _VARIANTS:        # a grader asks again for each way it looks at a case (the agent loop simulates)
        return _VARIANTS[memo]
    result = QUANTITIES[quantity](dict(inputs))
    expected, own = result[0], [(k, v) for k, v in result[1] if v is not None]
    # the figure before the final rounding: a third element the quantity returns, or its UNROUNDED entry
    exact, rule = (result[2], None) if len(result) > 2 else unrounded(quantity, **inputs)
    found = (expected, own + generic_slips(expected, unit, inputs, taken=[v for _, v in own], exact=exact, rule=rule))
    if len(_VARIANTS) >= 512:
        _VARIANTS.clear()
    _VARIANTS[memo] = found
    return found


_VARIANTS: dict = {}


def matching_variants(quantity: str, answer, *, rel_tol: float = 1e-6, unit: str = "", **inputs) -> tuple:
    """Every variant key whose recomputed value is ``answer``, in catalogue order (no duplicates)."""
    _check_quantity(quantity)
    if (isinstance(answer, bool) or not isinstance(answer, (int, float, str))) and not _is_number_tuple(answer):
        return ()
    expected, slips = variants(quantity, unit=unit, **inputs)
    if close(answer, expected, rel_tol):       # the right value (perhaps in the wrong type): no slip
        return ()
    keys = []
    for key, wrong in slips:
        if key.startswith("off_by_one") and answer != wrong:   # one off is exact, never within a tolerance
            continue
        if key not in keys and _matches(answer, wrong, expected, rel_tol):
            keys.append(key)
    if type(answer) is int and type(expected) is int and abs(answer - expected) == 1:
        # one unit off: a rounding taken the other way explains it first (a missing factor that gives the same
        # small count is named after it: 2 nodes for 3 can be the floor or half the bytes)
        keys.sort(key=lambda k: base_key(k) not in COUNT_SLIPS)
    return tuple(keys)


def _bases(keys) -> tuple:
    out = []
    for key in keys:
        if base_key(key) not in out:
            out.append(base_key(key))
    return tuple(out)


def matching(quantity: str, answer, *, rel_tol: float = 1e-6, unit: str = "", **inputs) -> tuple:
    """Every slip key whose recomputed value is ``answer``, in catalogue order (no duplicates)."""
    return _bases(matching_variants(quantity, answer, rel_tol=rel_tol, unit=unit, **inputs))


def ruled_out(quantity: str, answer, *, rel_tol: float = 1e-6, unit: str = "", **inputs) -> set:
    """The variant keys a right ``answer`` rules out: applied to this case they give another number.

    A variant the case does not produce (dropped because it gives the right
    number here, or not applicable) is not ruled out; nor is a descriptive
    generic slip (``DESCRIPTIVE``: off by one describes the answer, it is not a
    rule the learner applied everywhere).
    """
    expected, slips = variants(quantity, unit=unit, **inputs)
    seen, kept = set(), set()     # a key given twice (two ways, untold apart) is kept if either way fits
    for key, wrong in slips:
        if base_key(key) in DESCRIPTIVE:
            continue
        seen.add(key)
        if close(wrong, expected, rel_tol) or _matches(answer, wrong, expected, rel_tol) \
                or close(answer, wrong, rel_tol):
            kept.add(key)
    return seen - kept


def diagnose(quantity: str, answer, *, rel_tol: float = 1e-6, lead: str | None = None, only=None,
             unit: str = "", **inputs) -> Diagnosis:
    """Compare ``answer`` with kvlib's value of ``quantity`` and name the slip.

    ``inputs`` are the quantity's keywords (for bytes per token: layers,
    kv_heads, head_dim, dtype_bytes, and optionally num_heads and hidden_size
    so the query-head and head_dim slips can be recognised). ``lead``: the
    slip to name first when it is among the matches (a grader that found it
    consistent with every failing case). ``only``: the slip keys that may be
    named at all (a grader that ruled out the others on other cases); the
    matches are named in its order. ``unit``: the answer's unit, for the
    generic slips and for a count that is off by a little ("1 token too small").
    """
    _check_quantity(quantity)
    expected = QUANTITIES[quantity](dict(inputs))[0]
    if (isinstance(answer, bool) or not isinstance(answer, (int, float, str)) or isinstance(answer, str)
            and not isinstance(expected, str)) and not _is_number_tuple(answer):
        return Diagnosis(quantity, False, expected, answer, None,
                         f"expected a number, got {type(answer).__name__} {answer!r}.", inputs)
    if close(answer, expected, rel_tol):
        return Diagnosis(quantity, True, expected, answer, None, "correct.", inputs)
    matches = list(matching(quantity, answer, rel_tol=rel_tol, unit=unit, **inputs))
    if only is not None:
        matches = [k for k in only if k in matches]
    if lead in matches:
        matches.remove(lead)
        matches.insert(0, lead)
    ratio = _ratio_text(answer, expected, unit)
    if matches and base_key(matches[0]) in COUNT_SLIPS and type(answer) is int and type(expected) is int:
        # a rounding or a count off by one: say by how many ("1 node too small"), never "2x too small"
        ratio = f"{_count_text(abs(answer - expected), unit)} too {'large' if answer > expected else 'small'}"
    if matches:
        words = dict(inputs)
        if quantity in TIE_RULES:       # a choice's rule at a tie, for tie_other_way
            words.setdefault("tie_rule", TIE_RULES[quantity])
        slip = Slip(matches[0], _message(matches[0], words))
        text = f"{ratio}: {slip.message}"
        if len(matches) > 1:  # two slips give the same number here: name both
            text += " Or: " + _message(matches[1], words)
        return Diagnosis(quantity, False, expected, answer, slip, text, inputs)
    return Diagnosis(quantity, False, expected, answer, None,
                     f"{ratio}, and it matches no known slip: recheck each factor.", inputs)


# --- generic slips: every numeric exercise gets them, from its expected value and unit alone --------------
# (``variants`` appends them after a quantity's own slips; a new exercise needs no code for them; their words
# are in kvcoach/slips/generic.py)
def generic_slips(expected, unit: str, inputs: dict, taken=(), exact=None, rule=None) -> list:
    """The slips learners make in any exercise, recomputed from the expected value (and the unit's context).

    Off by one (ints), seconds and milliseconds, per node and per GPU (x or / the GPU count, where the
    inputs have one), the next unit (blocks, tokens, bytes, sequences, where the inputs give the factor),
    the answer in another byte unit (``unit`` "bytes"), and the KB/KiB, GB/GiB, TB/TiB mix-ups (values of
    1,000 or more). A value some slip in ``taken`` already gives is left to that slip. ``exact``: the figure
    before the answer's final rounding (``rule``: which one; ``rounding_slips``): the other roundings come first,
    and an off by one that a rounding explains is left to it.
    """
    if isinstance(expected, bool) or not isinstance(expected, (int, float)) or not math.isfinite(expected):
        return []
    unit = (unit or "").strip()
    out = rounding_slips(expected, exact, rule) if exact is not None else []
    if type(expected) is int:
        out += [(k, v) for k, v in (("off_by_one@more", expected + 1), ("off_by_one@less", expected - 1))
                if all(v != r for _, r in out)]
    if unit == "ms":
        out.append(("seconds_for_ms", expected / 1e3))
    if unit in ("s", "seconds"):
        out.append(("ms_for_seconds", expected * 1e3))
    g = gpu_count(inputs)
    if g > 1:
        out += [("per_node_not_per_gpu", expected * g), ("per_gpu_not_per_node", expected / g)]
    bs, bpt = inputs.get("block_size"), inputs.get("bytes_per_token")
    if unit.startswith("token") and isinstance(bs, int) and bs > 1:
        out.append(("blocks_for_tokens", expected / bs))
    if unit.startswith("block") and isinstance(bs, int) and bs > 1:
        out.append(("tokens_for_blocks", expected * bs))
    if unit.startswith("token") and isinstance(bpt, (int, float)) and bpt > 1:
        out.append(("bytes_for_tokens", expected * bpt))
    if unit == "nodes" and isinstance(inputs.get("users"), int):
        out.append(("sequences_for_nodes", inputs["users"]))
    if unit == "bytes":
        out += [(key, expected / size) for key, size in _BYTE_UNITS]
    for key, decimal, binary in _PREFIX_MIXES:
        # a figure printed in GiB (or GB, ...) read in the other unit, or a mix-up inside a large count
        printed = unit in (f"{key[0].upper()}B", f"{key[0].upper()}iB")
        if abs(expected) >= 1000 or printed:
            out += [(f"{key}@up", expected * binary / decimal), (f"{key}@down", expected * decimal / binary)]
    taken = list(taken)
    return [(k, v) for k, v in out
            if not close(v, expected, 1e-9) and not any(_same(v, t) for t in taken)]


def _same(a, b) -> bool:
    try:
        return close(a, b, 1e-9)
    except TypeError:
        return False


# --- rounding slips: floor for ceil, ceil for floor, round for either, from one place -----------------------
# A quantity whose answer is a rounded count gives its figure before the final rounding: a third element of
# its (expected, slips) pair, or an entry of UNROUNDED (so its function stays as it is). The generic slips
# then recompute the other roundings from that figure and the expected value alone, and a check names them
# by how many units the answer is off ("1 sequence too large"), never as a percentage.
def rounding_slips(expected, exact, rule: str | None = None) -> list:
    """The other roundings of ``exact`` (the figure before the final rounding), as generic slip variants.

    ``rule`` ("floor", "ceil" or "round") is the rounding the answer takes; without it, the one of floor and
    ceil that gives ``expected``. An ``exact`` that is a whole number, or an ``expected`` that the rule does
    not give, yields none. Two ways may give one number (floor and round of 3.4): both are listed.

    >>> rounding_slips(4, Fraction(10, 3))
    [('floor_for_ceil', 3), ('round_for_ceil', 3)]
    >>> rounding_slips(3, 3.6)
    [('ceil_for_floor', 4), ('round_for_floor', 4)]
    >>> rounding_slips(4, 3.6, "round")
    [('floor_for_round', 3)]
    """
    if type(expected) is not int or exact is None or isinstance(exact, bool) or not math.isfinite(exact) \
            or exact == math.floor(exact):
        return []
    rounded = {"floor": math.floor(exact), "ceil": math.ceil(exact), "round": round(exact)}
    if rule is None:
        rule = "ceil" if expected == rounded["ceil"] else "floor"
    if rounded.get(rule) != expected:
        return []
    return [(key, int(how(exact))) for key, how in _ROUNDINGS[rule] if int(how(exact)) != expected]


def unrounded(quantity: str, **inputs) -> tuple:
    """(the figure ``quantity`` rounds to give its answer, its rule), from ``UNROUNDED``; (None, None) if unknown."""
    rule, fn = UNROUNDED.get(quantity, (None, None))
    if fn is None:
        return None, None
    try:
        return fn(inputs), rule
    except (KeyError, TypeError, ZeroDivisionError, ValueError):
        return None, None
