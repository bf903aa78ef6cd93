"""Answer types: what an exercise's function must return, exactly, and how a result travels as JSON.

An exercise states its answer type; the check accepts a result only if its
*exact* type is the declared one (``bool`` is not ``int``, a numpy scalar is
not a ``float``, an ``int`` subclass is not an ``int``):

==========================  =========================================================
``INT``                     ``int``, equal to the expected value
``Float(rel_tol, abs_tol)`` a finite ``float`` within the stated tolerance
``Choice(options)``         a ``str``, one of the declared options
``BYTES``                   ``bytes``, equal
``Tuple(items)``            a ``tuple`` of exactly these types, element by element
``Number(rel_tol)``         an ``int`` or a finite ``float`` (a typed figure: value exercises),
                            exact (``rel_tol=0``) or within the stated tolerance
==========================  =========================================================

A result crosses a process boundary (the verdict's sandbox, ``autograder.verdict``)
as a *record*, plain JSON made by ``encode`` and read back by ``decode``::

    {"type": "builtins.int",   "value": 131072}
    {"type": "builtins.float", "value": 2.5}          non-finite: "value": "nan" | "inf" | "-inf"
    {"type": "builtins.str",   "value": "query_heads"}          at most MAX_STR characters
    {"type": "builtins.bytes", "value": "AAEC"}                 base64, at most MAX_BYTES bytes
    {"type": "builtins.tuple", "value": [record, record, ...]}  at most MAX_ITEMS, nested MAX_DEPTH deep
    {"type": "numpy.float64",  "number": 2.5}                   any other type: no value (a number only
                                                                for messages such as "the value is right")

``type`` is always the exact type's ``module.qualname``; ``decode`` refuses a
record whose value does not fit its type (an int that is not a JSON integer, a
bool in an int's place), so nothing printed inside the sandbox can pass for an
answer it is not. This module uses the standard library only: the verdict's
runner imports it inside the sandbox.
"""

from __future__ import annotations

import base64
import binascii
import math
from dataclasses import dataclass

MAX_STR = 1000
MAX_BYTES = 4096
MAX_ITEMS = 32
MAX_DEPTH = 4
NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def type_name(t: type) -> str:
    return f"{t.__module__}.{t.__qualname__}"


# ---------------------------------------------------------------------------
# Records: encode (inside the learner's process) and decode (anywhere)
# ---------------------------------------------------------------------------
def encode(value, depth: int = 0) -> dict:
    """The JSON-safe record of a returned value (see the module doc)."""
    t = type(value)
    record = {"type": type_name(t)}
    if t is int:
        record["value"] = value
    elif t is float:
        record["value"] = value if math.isfinite(value) else repr(value)
    elif t is str:
        record["value"] = value[:MAX_STR]
        if len(value) > MAX_STR:
            record["truncated"] = True
    elif t is bytes:
        record["value"] = base64.b64encode(value[:MAX_BYTES]).decode("ascii")
        if len(value) > MAX_BYTES:
            record["truncated"] = True
    elif t is tuple and depth < MAX_DEPTH:
        record["value"] = [encode(item, depth + 1) for item in value[:MAX_ITEMS]]
        if len(value) > MAX_ITEMS:
            record["truncated"] = True
    elif t is bool:
        record["repr"] = repr(value)
    elif t.__module__ == "numpy" and hasattr(value, "item"):
        try:
            number = value.item()
        except Exception:  # noqa: BLE001 -- anything odd is simply not reported
            number = None
        if type(number) in (int, float) and math.isfinite(number):
            record["number"] = number
    return record


class RecordError(ValueError):
    """A record whose value does not fit its type."""


def decode(record: dict, depth: int = 0):
    """The value a record stands for; ``RecordError`` when it is malformed or has no value."""
    if not isinstance(record, dict) or not isinstance(record.get("type"), str) or "value" not in record:
        raise RecordError("no value")
    if record.get("truncated"):
        raise RecordError("truncated")
    kind, value = record["type"], record["value"]
    if kind == "builtins.int" and type(value) is int:
        return value
    if kind == "builtins.float":
        if type(value) is float or type(value) is int:
            return float(value)
        if isinstance(value, str) and value in NON_FINITE:
            return NON_FINITE[value]
    if kind == "builtins.str" and type(value) is str and len(value) <= MAX_STR:
        return value
    if kind == "builtins.bytes" and type(value) is str:
        try:
            return base64.b64decode(value.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError):
            raise RecordError("bytes not in base64") from None
    if kind == "builtins.tuple" and type(value) is list and depth < MAX_DEPTH and len(value) <= MAX_ITEMS:
        return tuple(decode(item, depth + 1) for item in value)
    raise RecordError(f"a {kind} record with a value of the wrong kind")


def clean(record, depth: int = 0) -> dict | None:
    """The well-formed part of a record read from an untrusted process; None when unusable."""
    if not isinstance(record, dict) or not isinstance(record.get("type"), str):
        return None
    out = {"type": record["type"][:200]}
    if "value" in record:
        try:
            decode(record, depth)
        except (RecordError, RecursionError):
            return None
        if out["type"] == "builtins.tuple":
            out["value"] = [clean(item, depth + 1) for item in record["value"]]
        else:
            out["value"] = record["value"]
    number = record.get("number")
    if type(number) in (int, float) and math.isfinite(number):
        out["number"] = number
    if isinstance(record.get("repr"), str):
        out["repr"] = record["repr"][:60]
    return out


# ---------------------------------------------------------------------------
# Answer types
# ---------------------------------------------------------------------------
def _short(name: str) -> str:
    return name.removeprefix("builtins.")


@dataclass(frozen=True)
class Int:
    """A plain ``int`` (bytes, counts), compared exactly."""

    name = "int"

    def fits(self, value) -> bool:
        return type(value) is int

    def equal(self, answer, expected) -> bool:
        return answer == expected

    def describe(self) -> str:
        return "a plain int"

    def wrong_type(self, fn: str, type_name_: str) -> str:
        if type_name_ == "builtins.float":
            return (f"{fn} returned a float; return a plain int "
                    f"(bytes and counts are whole numbers: use // or int(...)).")
        if type_name_.startswith("numpy."):
            return f"{fn} returned {type_name_}; convert it with int(...) and return a plain int."
        if type_name_ == "builtins.bool":
            return f"{fn} returned a bool; return a plain int."
        return (f"{fn} returned an object of type {_short(type_name_)}, not int; "
                f"return a plain int (type(result) is int), not a subclass or a look-alike.")

    def show(self, value) -> str:
        return f"{value:,}"


def show_float(value) -> str:
    """A float as a learner reads it: six significant digits, and grouped whole digits where those would
    turn into an exponent (22,548,578,304, not 2.25486e+10)."""
    shown = f"{value:,.6g}"
    if "e+" in shown and math.isfinite(value):
        return f"{value:,.0f}"
    return shown


@dataclass(frozen=True)
class Float:
    """A finite ``float`` within ``rel_tol`` (relative) or ``abs_tol`` (absolute) of the expected value."""

    rel_tol: float = 1e-6
    abs_tol: float = 0.0
    name = "float"

    def fits(self, value) -> bool:
        return type(value) is float and math.isfinite(value)

    def equal(self, answer, expected) -> bool:
        return math.isclose(answer, expected, rel_tol=self.rel_tol, abs_tol=self.abs_tol)

    def describe(self) -> str:
        tol = f"within {self.rel_tol:g} relative" + (f" or {self.abs_tol:g} absolute" if self.abs_tol else "")
        return f"a finite float ({tol})"

    def wrong_type(self, fn: str, type_name_: str) -> str:
        if type_name_ == "builtins.float":
            return f"{fn} returned nan or infinity; return a finite float."
        if type_name_ == "builtins.int":
            return f"{fn} returned an int; this answer is a float (use /, or float(...))."
        if type_name_.startswith("numpy."):
            return f"{fn} returned {type_name_}; convert it with float(...) and return a plain float."
        return f"{fn} returned an object of type {_short(type_name_)}; return a plain float."

    def show(self, value) -> str:
        return show_float(value)


@dataclass(frozen=True)
class Choice:
    """A ``str`` from ``options`` (a slip name, an optimisation, a cause)."""

    options: tuple
    name = "choice"

    def fits(self, value) -> bool:
        return type(value) is str and value in self.options

    def equal(self, answer, expected) -> bool:
        return answer == expected

    def describe(self) -> str:
        return "one of " + ", ".join(repr(o) for o in self.options)

    def wrong_type(self, fn: str, type_name_: str) -> str:
        if type_name_ == "builtins.str":
            return f"{fn} returned a string that is not one of the choices: return {self.describe()}."
        return f"{fn} returned an object of type {_short(type_name_)}; return {self.describe()}."

    def show(self, value) -> str:
        return repr(value)


@dataclass(frozen=True)
class Bytes:
    """``bytes``, compared exactly."""

    name = "bytes"

    def fits(self, value) -> bool:
        return type(value) is bytes

    def equal(self, answer, expected) -> bool:
        return answer == expected

    def describe(self) -> str:
        return "bytes"

    def wrong_type(self, fn: str, type_name_: str) -> str:
        extra = " (encode it: .encode())" if type_name_ == "builtins.str" else ""
        return f"{fn} returned an object of type {_short(type_name_)}; return bytes{extra}."

    def show(self, value) -> str:
        # a digest is told apart by its ends: 32 raw bytes printed whole are a line of escapes
        return repr(value) if len(value) <= 16 else f"{len(value)} bytes {value[:4].hex()}…{value[-4:].hex()}"


@dataclass(frozen=True)
class Tuple:
    """A ``tuple`` of exactly ``len(items)`` elements, element i of type ``items[i]``.

    ``labels``: what each element is, in the exercise's words ("factor", "slip"); with them a wrong answer that no
    slip of the catalogue explains is told which of its elements are right (``parts_text``).
    """

    items: tuple
    labels: tuple = ()
    name = "tuple"

    def fits(self, value) -> bool:
        return (type(value) is tuple and len(value) == len(self.items)
                and all(t.fits(v) for t, v in zip(self.items, value)))

    def equal(self, answer, expected) -> bool:
        return all(t.equal(a, e) for t, a, e in zip(self.items, answer, expected))

    def describe(self) -> str:
        return "a tuple (" + ", ".join(t.name for t in self.items) + ")"

    def wrong_type(self, fn: str, type_name_: str) -> str:
        if type_name_ == "builtins.tuple":
            return f"{fn} returned a tuple of the wrong length or element types; return {self.describe()}."
        return f"{fn} returned an object of type {_short(type_name_)}; return {self.describe()}."

    def element_problem(self, value) -> str | None:
        """Which element has the wrong type (value is a tuple of the right length), or None."""
        for k, (t, v) in enumerate(zip(self.items, value)):
            if not t.fits(v):
                return f"element {k} is {type_name(type(v)).removeprefix('builtins.')}, expected {t.describe()}"
        return None

    def show(self, value) -> str:
        return "(" + ", ".join(t.show(v) for t, v in zip(self.items, value)) + ")"

    def parts_text(self, value, expected) -> str | None:
        """Which labelled elements of ``value`` are right and which wrong, as a sentence (None without labels,
        or when every element is wrong or right).

        >>> Tuple((INT, Choice(("a", "b"))), ("factor", "slip")).parts_text((8, "a"), (8, "b"))
        'the factor is right and the slip wrong: recheck how you found the slip.'
        """
        if len(self.labels) != len(self.items):
            return None
        right = [label for t, label, a, e in zip(self.items, self.labels, value, expected) if t.equal(a, e)]
        wrong = [label for label in self.labels if label not in right]
        if not right or not wrong:
            return None
        return (f"the {' and the '.join(right)} {'is' if len(right) == 1 else 'are'} right and the "
                f"{' and the '.join(wrong)} wrong: recheck how you found the {' and the '.join(wrong)}.")


@dataclass(frozen=True)
class Number:
    """A number typed or computed by the learner (a value exercise): ``int`` or finite ``float``.

    ``rel_tol=0``: equal to the expected value (``1.0e9`` is ``1_000_000_000``);
    otherwise within ``rel_tol`` of it. ``bool`` and look-alikes are refused.
    """

    rel_tol: float = 0.0
    name = "number"

    def fits(self, value) -> bool:
        return type(value) is int or (type(value) is float and math.isfinite(value))

    def equal(self, answer, expected) -> bool:
        if not self.rel_tol:
            return answer == expected
        return math.isclose(answer, expected, rel_tol=self.rel_tol)

    def describe(self) -> str:
        return "a number" + (f" (within {self.rel_tol * 100:g}%)" if self.rel_tol else " (exact)")

    def wrong_type(self, fn: str, type_name_: str) -> str:
        if type_name_ == "builtins.float":
            return f"{fn} is nan or infinity; it must be a finite number."
        if type_name_ == "builtins.NoneType":
            return f"{fn} is None: replace it with your answer, a number."
        if type_name_ == "builtins.str":
            return f"{fn} is text; write the number itself (no quotes, no units), e.g. 1234 or 5.6."
        if type_name_.startswith("numpy."):
            return f"{fn} is {type_name_}; convert it with int(...) or float(...) to a plain number."
        return f"{fn} is an object of type {_short(type_name_)}; it must be a plain number (int or float)."

    def show(self, value) -> str:
        return f"{value:,}" if type(value) is int else show_float(value)


INT = Int()
BYTES = Bytes()
