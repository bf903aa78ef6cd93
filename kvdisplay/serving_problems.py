"""Worked problems built from a drill: the question, its assumptions, and ``Problem.steps()`` folded.

Chapter 09 works one question of each serving family (``kvcoach.drills``' topics beyond the cache
size) from kvlib's own chain of steps, so what the fold shows is what ``kvlib drill`` shows after a
miss: every step's formula in the notation table's letters, this question's numbers substituted,
the step's value; the last step is the answer, in bold with its unit, then one sanity line.

* ``step_latex(formula)``: a step's plain formula (``"2 · P · T / (eta · F) · 1000"``) as LaTeX,
  letters from ``kvlib.notation`` (``\\eta``), functions and words upright.
* ``drill_worked_problem(number, problem)``: one worked problem (``kvdisplay.worked_problem``'s shape).
* ``serving_worked_problems(first_number, seeds)``: displays all ten serving families, one output each
  (``serving_worked_problem_views`` returns them), each answer in its own fold.

The problems are drawn from fixed seeds (``SERVING_SEEDS``), never from a learner's id: the graded
topics are others, so nothing here is a graded question's answer.

Used in: ch09_interview_drills.
"""

from __future__ import annotations

import re

from IPython.display import Markdown, display

import kvcoach.drills as drills
import kvlib.serving as serving
from kvlib import notation

from .problems import worked_problem

__all__ = ["SERVING_SEEDS", "SERVING_TOPICS", "drill_worked_problem", "serving_problem", "serving_worked_problem_views",
           "serving_worked_problems", "step_latex"]

#: The serving families in the order ch09 works them, with the seed of the problem it works
#: (chosen for a spread of models, GPUs and templates; any seed gives a valid problem).
SERVING_SEEDS = {"ttft": 0, "ridge_batch": 2, "decode_rate": 7, "chunked_prefill": 0, "batching": 4,
                 "prefix_hit": 4, "spec_decode": 6, "quant_speedup": 7, "allreduce": 6, "cost": 6}
SERVING_TOPICS = tuple(SERVING_SEEDS)

_FUNCTIONS = {"floor", "ceil", "max", "min", "sum"}
_TOKEN = re.compile(r"tokens/s|[A-Za-z_][A-Za-z0-9_]*\*?|\d[\d,.]*|\S")


def _identifier(word: str) -> str:
    letters = notation.letters()
    if word.endswith("*"):
        return _identifier(word[:-1]) + "^*"
    if word in _FUNCTIONS:
        return rf"\operatorname{{{word}}}"
    if word in letters:
        return notation.by_letter(word).latex
    if word in notation.GREEK:
        return "\\" + word
    head, _, tail = word.partition("_")
    if tail and head in letters:      # W_draft: the letter W, told apart by a word
        return rf"{notation.by_letter(head).latex}_{{\text{{{tail}}}}}"
    return rf"\text{{{word}}}"


def step_latex(formula: str) -> str:
    """A step's formula as LaTeX in the notation table's letters.

    >>> step_latex("2 · P · T / (eta · F) · 1000")
    '2 \\\\cdot P \\\\cdot T / (\\\\eta \\\\cdot F) \\\\cdot 1000'
    >>> step_latex("ceil(I* · b / 2)"), step_latex("(1 − alpha^(gamma + 1))")
    ('\\\\operatorname{ceil}(I^* \\\\cdot b / 2)', '(1 - \\\\alpha^{(\\\\gamma + 1)})')
    >>> step_latex("c_d = W_d / W"), step_latex("max(read, compute)")
    ('c_{d} = W_{d} / W', '\\\\operatorname{max}(\\\\text{read} , \\\\text{compute})')

    Used in: ch09_interview_drills (through drill_worked_problem).
    """
    out, parens = [], []           # parens: for each open "(", whether it opened an exponent
    tokens = _TOKEN.findall(formula)
    for k, tok in enumerate(tokens):
        if tok == "·":
            out.append(r"\cdot")
        elif tok == "−":
            out.append("-")
        elif tok == "tokens/s":
            out.append(r"\text{tokens/s}")
        elif tok == "^" and k + 1 < len(tokens) and tokens[k + 1] == "(":
            out.append("^{")                      # the "(" that follows opens the exponent
            parens.append("exponent-next")
        elif tok == "(":
            exponent = bool(parens) and parens[-1] == "exponent-next"
            if exponent:
                parens.pop()
            parens.append("exponent" if exponent else "(")
            out.append("(")
        elif tok == ")":
            out.append(")}" if parens and parens.pop() == "exponent" else ")")
        elif tok[0].isalpha() or tok[0] == "_":
            out.append(_identifier(tok))
        else:
            out.append(tok)
    text = " ".join(out)
    text = re.sub(r"\s*\^\{\s*\(\s*", "^{(", text)             # x^{(...)}
    text = re.sub(r"(\\operatorname\{\w+\})\s+\(", r"\1(", text)  # f(x)
    text = re.sub(r"\s*\^\s*(?=[\w{])", "^", text)                 # 10^6
    text = re.sub(r"\(\s+", "(", text)
    return re.sub(r"\s+\)", ")", text)


def _value(step) -> str:
    value = step.value
    if isinstance(value, float) and value.is_integer() and abs(value) >= 1:
        value = int(value)       # 1,234 tokens, not 1,234.0
    return drills._amount(value, step.units)


def _markdown_text(text: str) -> str:
    """A drill's plain text in Markdown: a price's dollar sign escaped, so it never opens LaTeX."""
    return text.replace("$", r"\$")


#: Headings of the serving families as ch09 shows them (one question each)
HEADINGS = {"ttft": "Prefill and the time to the first token", "ridge_batch": "The batch where decode turns compute-bound",
            "decode_rate": "Decode tokens per second", "chunked_prefill": "A chunked prefill sharing a step with decodes",
            "batching": "Continuous against static batching", "prefix_hit": "What a prefix-cache hit saves",
            "spec_decode": "Speculative decoding", "quant_speedup": "Weight-only quantization at batch 1",
            "allreduce": "Tensor-parallel all-reduce bytes per step", "cost": "The cost of a million tokens"}


# --- what each family assumes, and one sanity line from kvlib ------------------------------------------
# The drills' weight figure is the checkpoint as loaded, read whole each step: the round figure interviews use.
# Chapter 06's finer count reads only B rows of the input embedding; say which one the answer uses.
_WHOLE = (" The stated weight bytes are read whole, the input embedding's table included (chapter 06's finer "
          "count reads only the batch's rows of it).")
_ASSUMPTIONS = {
    "ttft": "the prefill is compute-bound and counts the linear layers only (attention's term, quadratic in the "
            "prompt, is left out), with the parameters a token is multiplied by: the input embedding is a lookup, "
            "not a matmul, and a mixture of experts counts its active parameters.",
    "ridge_batch": "short contexts, so the KV reads and attention FLOPs are left out; the weights are read once per "
                   "step and every sequence adds 2 FLOPs per parameter." + _WHOLE,
    "decode_rate": "bandwidth-bound decode: each GPU reads its share of the weights and its KV heads of every "
                   "sequence once per step, all GPUs at once; nothing else costs time." + _WHOLE,
    "chunked_prefill": "a roofline step: the longer of its reads and its linear-layer FLOPs (the parameters a token "
                       "is multiplied by, the embedding lookup excluded) at the stated MFU; every decode in the step "
                       "waits for the whole step." + _WHOLE,
    "batching": "one token per running request per step; requests keep waiting, so continuous batching refills a "
                "freed slot at once.",
    "prefix_hit": "only whole blocks of the shared prompt are cached and reused; the rest is prefilled at the "
                  "stated MFU, linear layers only, with the parameters a token is multiplied by (the embedding "
                  "lookup excluded).",
    "spec_decode": "batch 1 and bandwidth-bound, so a step's cost is its weight read; each drafted token is "
                   "accepted independently with the stated probability." + _WHOLE,
    "quant_speedup": "batch 1, bandwidth-bound; only the weights shrink, the cache keeps bf16." + _WHOLE,
    "allreduce": "Megatron-style tensor parallelism: two ring all-reduces per layer of every token's hidden "
                 "vector in bf16; a decode step's tokens are its batch.",
    "cost": "the GPUs are paid for by the hour whether busy or not; only generated tokens are counted.",
}


def _sanity(p, steps) -> str:
    i, v = p.inputs, [s.value for s in steps]
    t = p.template
    if p.topic == "ttft":
        full = serving.prefill_seconds(i["num_params"], i["prompt_tokens"], i["peak_flop_per_s"], 1.0) * 1e3
        return (f"{v[-1] / i['prompt_tokens'] * 1e3:.1f} µs per prompt token; at the full peak (MFU 100%) the "
                f"same prompt would take {full:.1f} ms, and twice the prompt takes twice as long.")
    if p.topic == "ridge_batch":
        b, ridge, batch = i["dtype_bytes"], v[0], v[-1]
        return (f"a batch of {batch - 1} does {(batch - 1) * 2 / b:g} FLOP per byte read, under the ridge's "
                f"{ridge:.1f}; {batch} does {batch * 2 / b:g}, over it. Smaller weights (fewer bytes b) reach it "
                "at a smaller batch.")
    if p.topic == "decode_rate":
        step = v[2] / 1e3
        if i["per"] == "user":
            return (f"all {i['batch_size']} sequences get their token from the same {v[2]:.2f} ms step, so the "
                    f"batch makes {serving.decode_tokens_per_s(step, i['batch_size']):,.0f} tokens/s in all while "
                    "each user sees one step's rate.")
        return (f"times the {i['tp']} GPUs it is {serving.decode_tokens_per_s(step, i['batch_size']):,.0f} tokens/s "
                f"for the replica: one token per sequence per {v[2]:.2f} ms step.")
    if p.topic == "chunked_prefill":
        alone = serving.mixed_step_seconds(i["weight_bytes"], i["kv_bytes"], i["num_params"], i["batch_size"],
                                           i["bandwidth_bytes_per_s"], i["peak_flop_per_s"], i["mfu"]) * 1e3
        bound = "compute" if v[3] > v[0] else "the reads"
        return (f"without the chunk the decodes' step takes {alone:.2f} ms; with it {bound} sets the step, "
                f"{v[-1] / alone:.1f}× as long: the price of chunked prefill is paid by every decode in that step.")
    if t == "batching/speedup":
        return (f"the static batch keeps {v[2]:.2f} of its {len(i['output_tokens'])} slots busy per step on "
                "average; continuous batching keeps all of them busy, hence the ratio.")
    if t == "batching/idle":
        return f"{v[-1] / v[2]:.0%} of the batch's slot-steps generate nothing."
    if p.topic == "prefix_hit":
        full = serving.prefill_seconds(i["num_params"], i["prompt_tokens"], i["peak_flop_per_s"], i["mfu"]) * 1e3
        return (f"without the cache the whole {i['prompt_tokens']:,}-token prompt takes {full:.2f} ms; the cache "
                f"saves {1 - v[-1] / full:.0%}, and the shared prompt's partial last block "
                f"({i['shared_tokens'] - v[0]} tokens) is prefilled by every request.")
    if t == "spec_decode/speedup" and "verify_weight_bytes" in i:
        return (f"each verification yields {v[1]:.2f} tokens for the time of {v[3]:.3f} target steps, {v[2]:.2f} of "
                f"them the verify alone (its {i['draft_tokens'] + 1} tokens touch more experts than one token); even "
                f"a free draft (c_d = 0) would give only {v[1] / v[2]:.2f}×.")
    if t == "spec_decode/speedup":
        return (f"each verification yields {v[1]:.2f} tokens for the time of {v[2]:.3f} target steps; a free draft "
                f"(c_d = 0) would give {v[1]:.2f}×, and a rejection-prone one less than 1×.")
    if t == "spec_decode/memory":
        kv = v[-2]
        return f"the draft's own cache is {kv / v[-1]:.0%} of what it adds, and grows with every token."
    if p.topic == "quant_speedup":
        return (f"the weights alone shrink {i['weight_bytes'] / i['quant_weight_bytes']:.2f}×; the "
                f"{i['kv_bytes']:,}-byte cache, read whole every step and left in bf16, holds the step to "
                f"{v[-1]:.2f}×.")
    if p.topic == "allreduce":
        tp = i["tp"]
        return (f"the ring's factor 2 (t − 1) / t is {2 * (tp - 1) / tp:g} at t = {tp} (it nears 2 as t grows, "
                f"and is 0 at t = 1); a step makes {2 * i['layers']} all-reduces.")
    if p.topic == "cost":
        rate = v[0] if t == "cost/step" else i["tokens_per_s"]
        return (f"one GPU-hour buys {rate * 3600 / i['gpus']:,.0f} tokens; a million tokens keep the "
                f"{i['gpus']} GPU(s) busy for {1e6 / rate:,.0f} s.")
    raise drills.DrillError(f"no sanity line for the drill template {t!r}")


def _assumptions(problem) -> str:
    """The family's assumptions; a mixture of experts' step reads only the experts its tokens touch."""
    text = _ASSUMPTIONS[problem.topic]
    if "verify_weight_bytes" in problem.inputs or "total_weight_bytes" in problem.inputs:
        text = text.replace(_WHOLE, "") + (" A mixture of experts reads, besides its dense parts, only the experts "
                                           "its tokens are routed to (uniform routing, kvlib.roofline."
                                           "weight_bytes_read).")
    return text


def serving_problem(topic: str, seeds: dict | None = None):
    """The drill problem ch09 works for serving family ``topic`` (its seed in ``SERVING_SEEDS``).

    >>> serving_problem("spec_decode").params["model"]
    'mistralai/Mixtral-8x7B-v0.1'

    Used in: ch09_interview_drills (the erratum to its speculative-decoding question).
    """
    seeds = SERVING_SEEDS if seeds is None else seeds
    if topic not in seeds:
        raise drills.DrillError(f"topic {topic!r} is not a serving family (known: {', '.join(seeds)})")
    return drills.generate(topic, seeds[topic])


def drill_worked_problem(number: int, problem, assumptions: str | None = None, after=()) -> Markdown:
    """A worked problem from a drill problem: its question, assumptions, and its steps folded.

    ``problem`` is a ``kvcoach.drills.Problem`` of a serving family (``SERVING_TOPICS``); each step of
    ``problem.steps()`` is one labelled substitution, the last step's value the bold result, and a
    sanity line computed with ``kvlib.serving``. ``assumptions`` replaces the family's; ``after`` goes
    inside the fold after the sanity line (``kvdisplay.problems.worked_problem``: errata, footnotes).

    >>> text = drill_worked_problem(8, drills.generate("ttft", 0)).data
    >>> "<details>" in text and "2 \\\\cdot P \\\\cdot T" in text and "Sanity check" in text
    True

    Used in: ch09_interview_drills.
    """
    steps = problem.steps()
    if problem.topic not in _ASSUMPTIONS:
        raise drills.DrillError(f"{problem.topic!r} is not a serving family (known: {', '.join(_ASSUMPTIONS)})")
    subs = [(step_latex(s.formula), f"{s.substitution} = {_value(s)}", s.label) for s in steps]
    last = steps[-1]
    return worked_problem(number, _markdown_text(problem.question), assumptions or _assumptions(problem),
                          f"${step_latex(last.formula)}$, step by step:", subs, _value(last),
                          _sanity(problem, steps), after=after)


def serving_worked_problem_views(first_number: int = 8, seeds: dict | None = None, after: dict | None = None) -> list:
    """One ``Markdown`` per serving family (``SERVING_SEEDS``), numbered from ``first_number``: its heading,
    then its worked problem, the answer in its own fold; ``after[topic]`` (errata, footnotes) goes inside
    that topic's fold.

    Used in: ch09_interview_drills (through serving_worked_problems).
    """
    seeds = SERVING_SEEDS if seeds is None else seeds
    after = after or {}
    unknown = set(after) - set(seeds)
    if unknown:
        raise drills.DrillError(f"after: {sorted(unknown)[0]!r} is not one of the worked families")
    return [Markdown(f"#### {HEADINGS[topic]}\n\n"
                     + drill_worked_problem(n, drills.generate(topic, seed), after=after.get(topic, ())).data)
            for n, (topic, seed) in enumerate(seeds.items(), first_number)]


def serving_worked_problems(first_number: int = 8, seeds: dict | None = None, after: dict | None = None) -> None:
    """Display the ten serving worked problems, each as its own output under its own heading (so each
    question, its fold and its sanity line are one section: what one question states never counts as
    another's answer).

    Used in: ch09_interview_drills.
    """
    for view in serving_worked_problem_views(first_number, seeds, after):
        display(view)
