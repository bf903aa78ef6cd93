"""What one message says across an exercise's cases: the slip that fits them all, or that none does.

``fitting_slips`` finds the slips of the coach's catalogue (``kvcoach.slips``) that reproduce every failing
case's answer and that no passing case rules out; ``summary`` turns an exercise's ``CaseVerdict``s into the one
message a learner sees (a ``Summary``), naming only such a slip, and the rule of any edge the failing cases
sit on (the chapter module's ``EDGES``).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvcoach import slips

from . import registry
from .judge import _decoded, _number, _prior, _rel_tol, judge, slip_inputs_for
from .schema import Exercise


def common_slip(results) -> str | None:
    """The one slip consistent with every failing case judged on its value, or None.

    Every such failure must be explained by it: a slip that fits some failing
    cases and not others is never named as the cause.
    """
    judged = [v for v in results if not v.ok and v.kind == "value"]
    if not judged or any(not v.slips for v in judged):
        return None
    shared = [k for k in judged[0].slips if all(k in v.slips for v in judged[1:])]
    return shared[0] if shared else None


def fitting_slips(exercise: Exercise, cases, results, records, earlier=None, *, failing_only: bool = False,
                  some: bool = False) -> tuple:
    """The slips that fit every case: each reproduces every failing case's value and every passing one's.

    A slip variant (``kvlib.slips.matching_variants``) must give the learner's
    answer on every case that failed on its value, and no passing case may
    rule it out (``kvlib.slips.ruled_out``: applied there, it gives another
    number than the learner's right one). Catalogue keys, in the first failing
    case's order; () when none fits or nothing failed on its value.
    ``failing_only``: the slips that fit every failing case, whatever the passing ones say (for analysis:
    never named). ``some``: the slips that give at least one failing case's value and that no passing case
    rules out, those that explain the most failing cases first (a failure no one slip explains: the part
    that one slip explains, and no passing case contradicts it).
    """
    if not exercise.quantity or records is None:
        return ()
    judged = [v for v in results if not v.ok and v.kind == "value"]
    if not judged or (not some and any(not v.variants for v in judged)):
        return ()
    # a slip may be made one way on one case and another way on the next (the element size read from each
    # config): every failing case must show the slip, in some way
    ways: dict = {}
    for v in judged:
        for t in v.variants:
            ways.setdefault(slips.base_key(t), set()).add(t)
    if some:
        counts = {key: sum(key in v.slips for v in judged) for key in ways}
        shared = sorted(ways, key=lambda key: -counts[key])       # stable: the catalogue's order among equals
    else:
        shared = [key for key in dict.fromkeys(slips.base_key(t) for t in judged[0].variants)
                  if all(key in v.slips for v in judged[1:])]
    for k, v in enumerate([] if failing_only else results):
        if not shared:
            break
        if not v.ok or v.kind == "excused" or k >= len(records):
            continue
        number = _number(records[k], _decoded(records[k]))
        if number is None:
            continue
        out = slips.ruled_out(exercise.quantity, number, rel_tol=_rel_tol(exercise), unit=exercise.unit,
                              **slip_inputs_for(exercise, cases[k], v.built_on))
        # a passing case rules a slip out when every way it was made elsewhere gives another number here
        shared = [key for key in shared if not ways[key] <= out]
    if len(judged) > 1 and not some:
        # several cases each one off, as another rounding would give, and a slip of the formula giving every one of
        # them: the formula's slip leads (one failing case alone is a rounding first: matching_variants)
        shared.sort(key=lambda key: key in slips.COUNT_SLIPS or key in slips.ROUNDING_KEYS)
    return tuple(shared)


@dataclass(frozen=True)
class Summary:
    """An exercise's outcome as data: the message a learner sees and the slips it names.

    ``slips``: the catalogue keys the message names, the lead first (a key
    ``a+b`` is two slips made at once: ``combined``); ``fitting``: every slip
    that fits every case (``fitting_slips``); ``kind``: the first failure's
    kind ("value", "type", "error", "kvlib"), "" when every case passed.
    """

    message: str | None
    slips: tuple = ()
    combined: bool = False
    fitting: tuple = ()
    kind: str = ""


def summary(exercise: Exercise, cases, results, *, hidden: bool = False, earlier=None, records=None) -> Summary:
    """The one message for an exercise's verdicts, and the slips it names (message None when all passed).

    Visible: the first failing case, naming only slips that fit every case
    (``fitting_slips``: the lead, and an alternative only when it fits every
    case too); a slip that fits every failing case but that a passing case
    rules out is named alone; when none fits every failing case, that is said
    instead of naming one. Hidden: the same, in general words.
    """
    failures = [(k, v) for k, v in enumerate(results) if not v.ok]
    excused = [v for v in results if v.kind == "excused"]
    if excused and all(v.kind == "excused" or (v.ok and _zero(exercise, cases[k])) for k, v in enumerate(results)):
        # nothing was judged, or only cases whose right answer is 0 (a constant 0 passes them): not a pass (the
        # earlier step's slip is named in its own check)
        where = "hidden case" if hidden else "case"
        more = "" if len(excused) == len(results) else " that has something to count"
        return Summary(f"{excused[0].message} The same holds on every {where}{more}, so nothing of this step could "
                       f"be judged: fix {exercise.builds_on} first, run its check, then this one.", (), (), "excused")
    if not failures:
        return Summary(None)
    if exercise.value:
        # one case, the learner's own problem: its verdict already names the slips its number matches
        first = failures[0][1]
        return _summary(first.message, first.slips[:2] if first.kind == "value" else (), (), first.kind)
    # a slip is named only when it fits every case, failing and passing; when none does, none is named (one
    # that fits the failing cases only is a wrong lead: the passing ones show the learner does not make it)
    fitting = fitting_slips(exercise, cases, results, records, earlier)
    value_failures = [v for _, v in failures if v.kind == "value"]
    k, first = failures[0]
    if hidden:
        if fitting:
            k, first = next((j, v) for j, v in failures if v.kind == "value")
            message = judge(exercise, cases[k], records[k], hidden=True, earlier=_prior(earlier, k, cases[k]),
                            lead=fitting[0], allowed=fitting).message
            return _summary(message + _hidden_raised(results), fitting[:2], fitting, "value")
        # no slip fits them all: a slip that explains some failing cases, named alone, where no passing case
        # rules it out (never one the passing cases contradict)
        partial = fitting_slips(exercise, cases, results, records, earlier, some=True)[:1]
        if partial:
            k = next(j for j, v in failures if v.kind == "value" and partial[0] in v.slips)
            message = judge(exercise, cases[k], records[k], hidden=True, earlier=_prior(earlier, k, cases[k]),
                            allowed=partial).message
            return _summary(message + _hidden_raised(results), partial, (), "value")
        chosen = next((v for _, v in failures if v.kind != "value" or not exercise.quantity), None)
        if chosen is not None:      # an error, a wrong type, a wrong choice with no catalogue: as judged
            return _summary(chosen.message, (), (), chosen.kind)
        return _summary(f"{exercise.function_name} is wrong on hidden cases, and no one known slip explains them "
                        "together with the hidden cases it gets right: recheck each part. "
                        f"{exercise.hidden_note}".rstrip(), (), (), "value")
    # some cases raised and others returned: the diagnosis comes from those that returned (the slip a wrong
    # number shows is the lesson), and one line says which raised and why
    raised = [(j, v) for j, v in failures if v.kind == "error"]
    returned = [(j, v) for j, v in failures if v.kind != "error"]
    if raised and returned:
        k, first = returned[0]
    if first.kind == "type" and value_failures:
        # the value is checked before the type: a case whose value happens to be right in the wrong type (a
        # rounded int where the mean is whole) does not hide the slip the other cases' numbers show
        k, first = next((j, v) for j, v in failures if v.kind == "value")
    message, named = first.message, ()
    if first.kind == "value":
        prior = _prior(earlier, k, cases[k])
        if fitting:
            message = judge(exercise, cases[k], records[k], earlier=prior, lead=fitting[0], allowed=fitting).message
            named = fitting[:2]
            if len(value_failures) > 1:
                typed = any(v.kind == "type" for _, v in failures)
                wrong = "cases that returned a wrong number" if raised or typed else "failing cases"
                message += f"\n(The same slip explains all {len(value_failures)} {wrong}.)"
        elif exercise.quantity and first.slips:
            message = _unexplained(exercise, cases, results, records, k, first, first.built_on)
        else:       # the first failing case matches no slip at all: its verdict says so
            message = first.message + _edges_line(exercise, cases, results)
    if raised and returned:
        message += "\n" + _raised_line(exercise, cases, records, raised)
    told = len(value_failures) if first.kind == "value" and (named or "\nFailing cases: " in message) else 1
    more = len(returned) - told if raised and returned else len(failures) - told
    plural = more > 1
    alone = (" on the type alone" if more > 0 and told == len(value_failures) and first.kind == "value"
             and all(v.kind == "type" for _, v in failures if v.kind != "value") else "")
    tail = f"\n({more} more visible case{'s' if plural else ''} fail{'' if plural else 's'}{alone}.)" if more > 0 else ""
    return _summary(message + tail, named, fitting, first.kind)


def _hidden_raised(results) -> str:
    """' (It raised KeyError on 2 hidden cases.)': the hidden cases on which the function raised, by count
    ('' when none did)."""
    raised = [v for v in results if not v.ok and v.kind == "error"]
    if not raised:
        return ""
    error = raised[0].message.split(" raised ", 1)[-1].split(" ", 1)[0]
    return f" (It raised {error} on {len(raised)} hidden case{'s' if len(raised) > 1 else ''}.)"


def _raised_line(exercise: Exercise, cases, records, raised) -> str:
    """One line: the visible cases on which the learner's function raised, and what it raised (the first's
    message, shortened)."""
    labels = [f'"{cases[j]["label"]}"' for j, _ in raised]
    shown = " and ".join(labels) if len(labels) < 3 else f"{labels[0]}, {labels[1]} and {len(labels) - 2} more"
    record = records[raised[0][0]] if records is not None else {}
    why = shorten(str(record.get("error_message", "")).strip(), 80)
    hint = cases[raised[0][0]].get("context", {}).get("hint")
    return (f"On {shown}, {exercise.function_name} raised {record.get('error', 'an error')}"
            + (f": {why}" if why else "") + "." + (f" Hint: {hint}" if hint else ""))


def shorten(text: str, width: int = 60) -> str:
    """``text`` cut to about ``width`` characters, its middle replaced by '…' (a token list, a digest)."""
    if len(text) <= width:
        return text
    half = (width - 1) // 2
    return text[:half] + "…" + text[-half:]


def _zero(exercise: Exercise, case: dict) -> bool:
    """kvlib's answer to ``case`` is a count of 0 (an answer that is always 0 gets it right)."""
    try:
        expected = exercise.expected_for(case)
    except (ArithmeticError, ValueError, TypeError):
        return False
    return type(expected) is int and expected == 0


def edge_rules(exercise: Exercise, failing_cases) -> list:
    """``[(rule, labels)]``: each edge of the chapter's ``EDGES`` that names failing visible cases, with their
    labels (a checks module without EDGES: [])."""
    try:
        listed = getattr(registry.chapter_module(exercise.grade_id), "EDGES", {}).get(exercise.grade_id, ())
    except LookupError:
        return []
    out = []
    for edge in listed:
        on = [case["label"] for case in failing_cases if case["label"] in edge.get("visible", ())]
        if on:
            out.append((edge["rule"], on))
    return out


def _unexplained(exercise: Exercise, cases, results, records, k, first, prior) -> str:
    """A visible failure that no one slip explains together with every passing case: the first failing
    case's line and how far off it is, the failing cases by label, the rule of any edge they sit on; no slip."""
    number = _number(records[k], _decoded(records[k])) if records is not None else None
    try:
        expected = exercise.expected_for(cases[k], prior)
        ratio = slips.ratio_text(number, expected, exercise.unit) if number is not None else "wrong"
    except (ArithmeticError, TypeError, ValueError):
        ratio = "wrong"
    text = (first.head + f"{ratio}, and no one known slip explains every case (those that fail and those that "
            "pass): recheck each factor." + _edges_line(exercise, cases, results))
    hint = cases[k].get("context", {}).get("hint")
    return text + first.tail + (f"\nHint: {hint}" if hint and "Hint:" not in first.tail else "")


def _edges_line(exercise: Exercise, cases, results) -> str:
    """The failing visible cases by label (two or more), and the rule of any edge they sit on ('' if none; not an
    edge the first failing case sits on when that case has a hint of its own, which the message shows)."""
    failing = [cases[j] for j, v in enumerate(results) if not v.ok and v.kind == "value"]
    text = ""
    if len(failing) > 1:
        labels = [f'"{c["label"]}"' for c in failing[:4]] + ([f"{len(failing) - 4} more"] if len(failing) > 4
                                                            else [])
        text += f"\nFailing cases: {', '.join(labels)}."
    # the first failing case's hint is its lesson: an edge it sits on is not named as the cause beside it
    hinted = failing[0]["label"] if failing and failing[0].get("context", {}).get("hint") else None
    for rule, labels in edge_rules(exercise, failing):
        if hinted in labels:
            continue
        text += f"\nThe text's rule for {', '.join(chr(34) + label + chr(34) for label in labels)}: {rule}."
    return text


def _summary(message, named, fitting, kind) -> Summary:
    named = tuple(named)
    return Summary(message, named, bool(named) and slips.COMBINED in named[0], tuple(fitting), kind)


def summarise(exercise: Exercise, cases, results, *, hidden: bool = False, earlier=None,
              records=None) -> str | None:
    """The message of ``summary`` (None when every case passed)."""
    return summary(exercise, cases, results, hidden=hidden, earlier=earlier, records=records).message
