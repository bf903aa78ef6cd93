"""The slip catalogue: the mistakes learners make, recomputed.

A wrong answer is recognised by recomputing the quantity *with the slip
applied* and comparing, never by guessing from a ratio. The autograder's
checks, the chapters' instant checks and the drills all call ``diagnose``.

>>> d = diagnose("kv_bytes_per_token", 524288, layers=32, kv_heads=8, head_dim=128,
...              dtype_bytes=2, num_heads=32)
>>> d.correct, d.slip.key
(False, 'query_heads')
>>> print(d.message)
4x too large: you multiplied by the query heads (num_attention_heads = 32) instead of the KV heads (num_key_value_heads = 8).
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from dataclasses import dataclass, field

from kvlib import formulas
from kvlib.alloc_sim import allocator_waste
from kvlib.units import GB, GiB, KB, KiB


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


SLIPS = {
    "query_heads": "you multiplied by the query heads (num_attention_heads = {num_heads}) instead of the KV heads (num_key_value_heads = {kv_heads}).",
    "missing_kv_factor": "the factor 2 for K and V is missing: every token stores a key and a value.",
    "extra_factor_2": "that is twice the right figure: an MLA layer caches one latent per token and rebuilds every head's key and value from it, so nothing is stored twice.",
    "bits_not_bytes": "you used bits per element ({bits}) instead of bytes ({dtype_bytes}).",
    "fp32_bytes": "you used 4 bytes per element (fp32); the cache is stored in 16 bits ({dtype_bytes} bytes).",
    "wrong_16bit_vs_fp8": "the element size is off: fp8 is 1 byte, fp16/bf16 are 2 bytes (you used {wrong_bytes}).",
    "hidden_over_heads": "you derived head_dim as hidden_size / num_attention_heads = {derived_head_dim}; this config gives head_dim = {head_dim} explicitly.",
    "missing_layers": "the number of layers ({layers}) is missing: every layer keeps its own cache.",
    "missing_rope": "the {rope_dim}-wide decoupled RoPE key is missing: MLA caches latent ({latent_dim}) + rope ({rope_dim}) per layer.",
    "mla_as_mha": "you treated MLA as ordinary attention (2 x heads x head_dim); MLA caches one latent of {latent_dim} + {rope_dim} per layer.",
    "answer_in_kib": "the answer looks like KiB (bytes / 1024); the question asks for bytes.",
    "answer_in_kb": "the answer looks like KB (bytes / 1000); the question asks for bytes.",
    "gb_for_gib": "you mixed GB (10^9) and GiB (2^30): a 7.4% error.",
    "label_memory": "you started from the memory on the label ({label_gb} GB) instead of what CUDA reports ({cuda_gb} GB).",
    "ceil_not_floor": "a fraction of a sequence cannot be admitted: take the floor, not the ceiling (or rounding).",
    "total_not_per_gpu": "under tensor parallelism ({tp} GPUs) each GPU holds only its own KV heads: divide by the GPUs that split them.",
    "split_replicated": "with tp = {tp} > KV heads = {kv_heads}, heads are replicated, not split: each GPU keeps at least one full KV head.",
    "mla_split_by_tp": "you divided the MLA cache among the GPUs; it has no KV heads to hand out, and every head on every GPU reads the same latent, so each GPU keeps a whole copy.",
    "missing_seq_len": "the sequence length ({seq_len}) is missing: one entry per token.",
    "missing_batch": "the batch ({batch_size}) is missing: sequences share nothing.",
    "windowed_as_full": "sliding-window layers hold at most {sliding_window} tokens; you counted them at the full context.",
    # unit slips: the right quantity in the wrong unit, or an argument left out
    "answer_in_gb": "the answer looks like GB (bytes / 10^9); the question asks for bytes.",
    "answer_in_gib": "the answer looks like GiB (bytes / 2^30); the question asks for bytes.",
    "tokens_not_sequences": "that is how many tokens fit, not how many sequences: divide by the sequence length ({seq_len} tokens).",
    "ignored_dtype_bytes": "the answer does not follow the argument dtype_bytes ({dtype_bytes} bytes per element): it uses another element size (a fixed one, or one read from the config).",
}

#: Each slip in general words, for feedback that must not reveal a case's numbers (hidden cases).
GENERAL = {
    "query_heads": "you multiplied by the query heads (num_attention_heads) instead of the KV heads.",
    "missing_kv_factor": "the factor 2 for K and V is missing.",
    "bits_not_bytes": "you used bits per element instead of bytes.",
    "fp32_bytes": "you used 4 bytes per element instead of dtype_bytes.",
    "wrong_16bit_vs_fp8": "the element size is off: use dtype_bytes as given.",
    "hidden_over_heads": "you derived head_dim as hidden_size / num_attention_heads where the config "
                         "gives head_dim explicitly.",
    "missing_layers": "the number of layers is missing.",
    "answer_in_kib": "the answer looks like KiB; return bytes.",
    "answer_in_kb": "the answer looks like KB; return bytes.",
    "answer_in_gb": "the answer looks like GB; return bytes.",
    "answer_in_gib": "the answer looks like GiB; return bytes.",
    "gb_for_gib": "you mixed GB (10^9) and GiB (2^30).",
    "ceil_not_floor": "take the floor, not the ceiling (or a rounding): a fraction of a sequence "
                      "cannot be admitted.",
    "missing_seq_len": "the sequence length is missing.",
    "missing_batch": "the batch size is missing.",
    "tokens_not_sequences": "that counts tokens, not sequences: divide by the sequence length.",
    "ignored_dtype_bytes": "the argument dtype_bytes is not followed (another element size is used).",
}

COMBINED = "+"   # a key "a+b" is two slips made at once


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
        return "wrong choice"
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


def _close(a, b, rel_tol) -> bool:
    if isinstance(a, str) or isinstance(b, str):     # a choice ("fetch"): the same option, or not
        return a == b
    if _is_number_tuple(a) or _is_number_tuple(b):
        return (_is_number_tuple(a) and _is_number_tuple(b) and len(a) == len(b)
                and all(_close(x, y, rel_tol) for x, y in zip(a, b)))
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    return math.isclose(a, b, rel_tol=rel_tol, abs_tol=1e-12)


# --- quantities: (expected(**inputs), [(slip_key, wrong(**inputs)) ...]) -------
def _kv_token(layers, kv_heads, head_dim, dtype_bytes, **_):
    return formulas.kv_bytes_per_token(layers, kv_heads, head_dim, dtype_bytes)


def _token_slips(i):
    """Slipped variants of bytes per token (each returns a wrong value or None)."""
    L, K, D, b = i["layers"], i["kv_heads"], i["head_dim"], i["dtype_bytes"]
    H, hidden = i.get("num_heads"), i.get("hidden_size")
    out = []
    if H and H != K:
        out.append(("query_heads", formulas.kv_bytes_per_token(L, H, D, b)))
    out.append(("missing_kv_factor", formulas.kv_bytes_per_token(L, K, D, b) // 2))
    out.append(("bits_not_bytes", formulas.kv_bytes_per_token(L, K, D, b * 8)))
    if b == 2:
        out.append(("fp32_bytes", formulas.kv_bytes_per_token(L, K, D, 4)))
    if b in (1, 2):
        out.append(("wrong_16bit_vs_fp8", formulas.kv_bytes_per_token(L, K, D, 3 - b)))
    if H and hidden and hidden % H == 0 and hidden // H != D:
        out.append(("hidden_over_heads", formulas.kv_bytes_per_token(L, K, hidden // H, b)))
    out.append(("missing_layers", formulas.kv_bytes_per_token(1, K, D, b)))
    for other in (1, 2, 4):  # dtype_bytes not followed: another element size (fixed, or read from a config)
        if other != b:
            out.append((f"ignored_dtype_bytes@{other}", formulas.kv_bytes_per_token(L, K, D, other)))
    if H and H != K:
        out.append(("query_heads+missing_kv_factor", formulas.kv_bytes_per_token(L, H, D, b) // 2))
    return out


def _unit_slips(value):
    return [("answer_in_kib", value / KiB), ("answer_in_kb", value / KB),
            ("answer_in_gib", value / GiB), ("answer_in_gb", value / GB)]


def _scaled(slips, factor):
    return [(key, value * factor) for key, value in slips if value is not None]


def _q_kv_bytes_per_token(i):
    expected = _kv_token(**i)
    return expected, _token_slips(i) + _unit_slips(expected)


def _q_kv_bytes_per_sequence(i):
    expected = _kv_token(**i) * i["seq_len"]
    slips = _scaled(_token_slips(i), i["seq_len"])
    slips.append(("missing_seq_len", _kv_token(**i)))
    return expected, slips + _unit_slips(expected)


def _q_kv_bytes_total(i):
    per_seq = _kv_token(**i) * i["seq_len"]
    expected = per_seq * i["batch_size"]
    slips = _scaled(_token_slips(i), i["seq_len"] * i["batch_size"])
    slips += [("missing_batch", per_seq), ("missing_seq_len", _kv_token(**i) * i["batch_size"])]
    return expected, slips + _unit_slips(expected)


def _q_max_concurrency(i):
    """Sequences that fit in budget_bytes, from geometry and seq_len."""
    budget = i["budget_bytes"]
    per_seq = _kv_token(**i) * i["seq_len"]
    expected = formulas.max_concurrency(budget, per_seq)
    slips = []
    for key, wrong_token in _token_slips(i):
        slips.append((key, formulas.max_concurrency(budget, wrong_token * i["seq_len"])))
    slips.append(("ceil_not_floor", math.ceil(budget / per_seq)))
    slips.append(("ceil_not_floor@round", round(budget / per_seq)))
    slips.append(("gb_for_gib@up", formulas.max_concurrency(budget * GiB / GB, per_seq)))
    slips.append(("gb_for_gib@down", formulas.max_concurrency(budget * GB / GiB, per_seq)))
    slips.append(("gb_for_gib@up", budget / per_seq * GiB / GB))
    slips.append(("tokens_not_sequences", formulas.max_concurrency(budget, _kv_token(**i))))
    return expected, [(k, v) for k, v in slips if v != expected]


def _q_mla_bytes_per_token(i):
    L, r, rope, b = i["layers"], i["latent_dim"], i["rope_dim"], i["dtype_bytes"]
    expected = formulas.mla_bytes_per_token(L, r, rope, b)
    slips = [("extra_factor_2", 2 * expected),
             ("missing_rope", formulas.mla_bytes_per_token(L, r, 0, b)),
             ("missing_rope", 2 * formulas.mla_bytes_per_token(L, r, 0, b)),
             ("bits_not_bytes", formulas.mla_bytes_per_token(L, r, rope, 8 * b)),
             ("missing_layers", formulas.mla_bytes_per_token(1, r, rope, b))]
    if i.get("num_heads") and i.get("qk_head_dim"):
        slips.append(("mla_as_mha", formulas.kv_bytes_per_token(L, i["num_heads"], i["qk_head_dim"], b)))
        slips.append(("qk_head_dim_added", formulas.mla_bytes_per_token(L, r, i["qk_head_dim"], b)))
    if b in (1, 2):     # bf16 for an fp8 cache (named first: the question says fp8), or fp8 for a bf16 one
        fp8 = ("wrong_16bit_vs_fp8@mla", formulas.mla_bytes_per_token(L, r, rope, 3 - b))
        if b == 1:
            slips.insert(0, fp8)
        else:
            slips.append(fp8)
    return expected, slips + _unit_slips(expected)


def _q_kv_bytes_per_token_per_gpu(i):
    """Per-GPU bytes per token under TP (kv_heads split, replicated past K; MLA whole)."""
    tp, K = i["tp"], i["kv_heads"]
    if i.get("latent_dim"):
        expected = formulas.mla_bytes_per_token(i["layers"], i["latent_dim"], i["rope_dim"], i["dtype_bytes"])
        return expected, [("mla_split_by_tp", expected / tp)] + _unit_slips(expected)
    per_gpu = formulas.kv_heads_per_gpu(K, tp)
    expected = formulas.kv_bytes_per_token(i["layers"], per_gpu, i["head_dim"], i["dtype_bytes"])
    total = formulas.kv_bytes_per_token(i["layers"], K, i["head_dim"], i["dtype_bytes"])
    slips = [("total_not_per_gpu", total)] if tp > 1 else []
    if tp > K:
        slips.append(("split_replicated", total / tp))
        slips.append(("tp_floor_missing", formulas.kv_bytes_per_token(i["layers"], K // tp, i["head_dim"],
                                                                      i["dtype_bytes"])))
    if i.get("num_heads") and i["num_heads"] != K and tp <= i["num_heads"]:
        # the query heads split over the GPUs instead of the KV heads
        slips.append(("query_heads@split", formulas.kv_bytes_per_token(i["layers"], i["num_heads"] // tp, i["head_dim"],
                                                                 i["dtype_bytes"])))
    per_gpu_inputs = dict(i, kv_heads=per_gpu)
    if i.get("num_heads"):
        per_gpu_inputs["num_heads"] = i["num_heads"] // min(tp, i["num_heads"])
    slips += [(k, v) for k, v in _token_slips(per_gpu_inputs) if not k.startswith("query_heads")]
    return expected, slips + _unit_slips(expected)


def _q_bytes_to_gib(i):
    return i["n_bytes"] / GiB, [("gb_for_gib", i["n_bytes"] / GB)]


def _q_bytes_to_gb(i):
    return i["n_bytes"] / GB, [("gb_for_gib", i["n_bytes"] / GiB)]


def _q_kv_pool_tokens(i):
    """Pool tokens from CUDA-reported memory (gpu_bytes), as kv_pool_tokens."""
    args = (i["utilization"], i["weight_bytes"], i["other_bytes"])
    bpt = i["bytes_per_token"]
    expected = formulas.kv_pool_tokens(i["gpu_bytes"], *args, bpt)
    slips = []
    if i.get("label_bytes"):
        slips.append(("label_memory", formulas.kv_pool_tokens(i["label_bytes"], *args, bpt)))
    slips.append(("gb_for_gib@down", formulas.kv_pool_tokens(i["gpu_bytes"] * GB / GiB, *args, bpt)))
    slips.append(("ignored_utilization@pool", formulas.kv_pool_tokens(i["gpu_bytes"], 1, *args[1:], bpt)))
    slips.append(("ceil_not_floor", math.ceil((i["gpu_bytes"] * args[0] - args[1] - args[2]) / bpt)))
    return expected, [(k, v) for k, v in slips if v != expected]


QUANTITIES = {
    "kv_bytes_per_token": _q_kv_bytes_per_token,
    "kv_bytes_per_sequence": _q_kv_bytes_per_sequence,
    "kv_bytes_total": _q_kv_bytes_total,
    "max_concurrency": _q_max_concurrency,
    "mla_bytes_per_token": _q_mla_bytes_per_token,
    "kv_bytes_per_token_per_gpu": _q_kv_bytes_per_token_per_gpu,
    "bytes_to_gib": _q_bytes_to_gib,
    "bytes_to_gb": _q_bytes_to_gb,
    "kv_pool_tokens": _q_kv_pool_tokens,
}


def expected_value(quantity: str, **inputs):
    """The correct value of ``quantity`` for ``inputs`` (computed by kvlib)."""
    if quantity not in QUANTITIES:
        raise KeyError(f"unknown quantity {quantity!r} (known: {', '.join(QUANTITIES)})")
    return QUANTITIES[quantity](inputs)[0]


# A variant whose case figures differ from its catalogue key's: its own words (the same slip, the same key).
VARIANT_SLIPS = {
    "query_heads@split": "you split the query heads over the GPUs (num_attention_heads / TP = {num_heads} / {tp} "
                         "= {query_heads_per_gpu} per GPU) instead of the KV heads (max(1, {kv_heads} / {tp}) = "
                         "{kv_heads_per_gpu} per GPU).",
}


def _variant_message(key: str, inputs: dict):
    if key == "query_heads@split" and inputs.get("num_heads") and inputs.get("tp") and inputs.get("kv_heads"):
        values = dict(inputs, query_heads_per_gpu=inputs["num_heads"] // inputs["tp"],
                      kv_heads_per_gpu=formulas.kv_heads_per_gpu(inputs["kv_heads"], inputs["tp"]))
        return VARIANT_SLIPS[key].format(**values)
    return None


def _message(key: str, inputs: dict) -> str:
    if COMBINED not in key and _variant_message(key, inputs):
        return _variant_message(key, inputs)
    key = base_key(key)
    if COMBINED in key:
        return "two slips at once: " + " And ".join(_message(k, inputs) for k in key.split(COMBINED))
    values = dict(inputs)
    element = inputs.get("dtype_bytes", 2)      # a 16-bit cache unless the case says otherwise
    values.setdefault("bits", 8 * element)
    values.setdefault("wrong_bytes", 3 - element)
    if inputs.get("hidden_size") and inputs.get("num_heads"):
        values.setdefault("derived_head_dim", inputs["hidden_size"] // inputs["num_heads"])
    if inputs.get("label_bytes"):
        values.setdefault("label_gb", f"{inputs['label_bytes'] / GB:.2f}")
        values.setdefault("cuda_gb", f"{inputs['gpu_bytes'] / GB:.2f}")
    values.setdefault("rope_dim", 64)
    if inputs.get("num_requests"):
        values.setdefault("others", inputs["num_requests"] - 1)
    values.setdefault("gpus", _gpu_count(inputs))
    if inputs.get("gpus_per_node") and inputs.get("tp"):
        values.setdefault("replicas", inputs["gpus_per_node"] // inputs["tp"])
    if isinstance(inputs.get("wrong"), dict) and key in inputs["wrong"]:     # log_figure: the figure taken
        values.setdefault("wrong_value", inputs["wrong"][key])
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


def _matches(answer, wrong, expected, rel_tol) -> bool:
    """``answer`` is the slipped value ``wrong`` (and that differs from the right one).

    An int answer also matches a fractional slipped value it truncates or rounds
    (``int(x / 1e9)``: the GB answer wrapped in int), when that value is at least 1.
    """
    if wrong is None or _close(wrong, expected, rel_tol):
        return False
    if _close(answer, wrong, rel_tol):
        return True
    if type(answer) is int and isinstance(wrong, float) and math.isfinite(wrong) and abs(wrong) >= 1 \
            and not float(wrong).is_integer():
        return answer in (math.floor(wrong), math.ceil(wrong), round(wrong)) and \
            not _close(answer, expected, rel_tol)
    return False


VARIANT = "@"   # a key "a@x" is slip a made one particular way (x): the same words, told apart across cases


def base_key(key: str) -> str:
    """The catalogue key of a slip variant: ``ignored_dtype_bytes@1`` -> ``ignored_dtype_bytes``."""
    return COMBINED.join(part.split(VARIANT)[0] for part in key.split(COMBINED))


def _check_quantity(quantity: str) -> None:
    if quantity not in QUANTITIES:
        raise KeyError(f"unknown quantity {quantity!r} (known: {', '.join(QUANTITIES)})")


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
    if _close(answer, expected, rel_tol):       # the right value (perhaps in the wrong type): no slip
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
        if _close(wrong, expected, rel_tol) or _matches(answer, wrong, expected, rel_tol) \
                or _close(answer, wrong, rel_tol):
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
    if _close(answer, expected, rel_tol):
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


# --- quantities for the drills (kvcoach.drills): appended, the entries above are unchanged ---------
SLIPS.update({
    "block_size_not_minus_one": "a last block is short by 0 to block_size - 1 tokens (block_size = {block_size}), never by a whole block: the average is (bs - 1) / 2, not bs / 2.",
    "worst_case_waste": "that is the worst case, every last block holding one token; with lengths uniform modulo the block size the expected waste is half of it.",
    "one_sequence_waste": "that is one sequence's expected waste; multiply by the {num_seqs} sequences.",
    "crossover_not_divided": "that is the crossover in token-slots (batch x context); divide by the batch ({batch_size}) for the context.",
    "kv_only_step": "the weights are missing: every decode step reads all of them once, besides the KV cache.",
    "weights_only_step": "the KV reads are missing: every step also reads each sequence's whole cache ({batch_size} sequences x {seq_len} tokens).",
    "seconds_for_ms": "the answer looks like seconds; the question asks for milliseconds.",
    "floor_nodes": "nodes must be rounded up: a fraction of a node's load still needs a whole node.",
})


def _q_block_waste_tokens(i):
    """Expected slots wasted in last blocks: N (bs - 1) / 2 (kvlib.formulas.block_waste_tokens)."""
    n, bs = i["num_seqs"], i["block_size"]
    expected = formulas.block_waste_tokens(n, bs)
    return expected, [("block_size_not_minus_one", formulas.exact_div(n * bs, 2)),
                      ("worst_case_waste", n * (bs - 1)),
                      ("one_sequence_waste", formulas.exact_div(bs - 1, 2))]


def _q_pool_tokens(i):
    """Tokens a KV budget holds: floor(budget_bytes / bytes_per_token) from the geometry."""
    budget = i["budget_bytes"]
    bpt = _kv_token(**i)
    expected = math.floor(budget / bpt)
    slips = [(key, math.floor(budget / wrong)) for key, wrong in _token_slips(i) if wrong]
    slips += [("ceil_not_floor", math.ceil(budget / bpt)), ("ceil_not_floor@round", round(budget / bpt)),
              ("gb_for_gib@up", math.floor(budget * GiB / GB / bpt)), ("gb_for_gib@down", math.floor(budget * GB / GiB / bpt))]
    return expected, [(k, v) for k, v in slips if v != expected]


def _q_crossover_context(i):
    """Context at which batch_size sequences read as many KV bytes as weights: W / (bytes_per_token B)."""
    w, b = i["weight_bytes"], i["batch_size"]
    expected = formulas.crossover_tokens(w, _kv_token(**i)) / b
    slips = [(key, w / wrong / b) for key, wrong in _token_slips(i) if wrong]
    slips += [("crossover_not_divided", expected * b), ("gb_for_gib@up", expected * GiB / GB),
              ("gb_for_gib@down", expected * GB / GiB)]
    return expected, slips


def _q_decode_step_ms(i):
    """Bandwidth-bound decode step [ms]: (W + bytes_per_token T B) / BW x 1000."""
    w, t, b, bw = i["weight_bytes"], i["seq_len"], i["batch_size"], i["bandwidth_bytes_per_s"]
    bpt = _kv_token(**i)
    expected = formulas.decode_step_seconds(w, bpt, t, b, bw) * 1e3
    slips = [(key, formulas.decode_step_seconds(w, wrong, t, b, bw) * 1e3) for key, wrong in _token_slips(i) if wrong]
    slips += [("kv_only_step", bpt * t * b / bw * 1e3), ("weights_only_step", w / bw * 1e3),
              ("missing_batch", formulas.decode_step_seconds(w, bpt, t, 1, bw) * 1e3),
              ("missing_seq_len", formulas.decode_step_seconds(w, bpt, 1, b, bw) * 1e3),
              ("seconds_for_ms", expected / 1e3)]
    return expected, slips


def _q_nodes_for_memory(i):
    """Nodes of one TP = gpus_per_node replica each: ceil(users / floor(pool_per_gpu / kv_per_seq_per_gpu))."""
    tp, k = i["tp"], i["kv_heads"]
    per_gpu = dict(i, kv_heads=formulas.kv_heads_per_gpu(k, tp))
    if i.get("num_heads"):
        per_gpu["num_heads"] = max(1, i["num_heads"] // tp)
    pool, users, t = i["pool_bytes_per_gpu"], i["users"], i["seq_len"]

    def nodes(bytes_per_token_per_gpu, pool_bytes=pool):
        per_node = math.floor(pool_bytes / (bytes_per_token_per_gpu * t))
        return math.ceil(users / per_node) if per_node > 0 else None

    per_seq_gpu = _kv_token(**per_gpu) * t
    expected = nodes(_kv_token(**per_gpu))
    slips = [("total_not_per_gpu", nodes(_kv_token(**i)))]
    slips += [(key, nodes(wrong)) for key, wrong in _token_slips(per_gpu) if wrong and not key.startswith("query_heads")]
    slips += [("floor_nodes", users // math.floor(pool / per_seq_gpu)),
              ("ceil_not_floor", math.ceil(users * per_seq_gpu / pool)),
              ("gb_for_gib@up", nodes(_kv_token(**per_gpu), pool * GiB / GB)),
              ("gb_for_gib@down", nodes(_kv_token(**per_gpu), pool * GB / GiB))]
    return expected, [(k2, v) for k2, v in slips if v is not None and v != expected]


QUANTITIES.update({
    "block_waste_tokens": _q_block_waste_tokens,
    "pool_tokens": _q_pool_tokens,
    "crossover_context": _q_crossover_context,
    "decode_step_ms": _q_decode_step_ms,
    "nodes_for_memory": _q_nodes_for_memory,
})


# --- chapter 02 (GQA and tensor parallelism): appended, the entries above are unchanged ---------
# (its per-case wording of weights_not_split is with chapter 07's entries below)
GENERAL.update({
    "total_not_per_gpu": "under tensor parallelism each GPU holds only its own KV heads: divide by the GPUs "
                         "that split them.",
    "split_replicated": "with more GPUs than KV heads, heads are replicated, not split: each GPU keeps at "
                        "least one whole KV head.",
    "weights_not_split": "under tensor parallelism each GPU holds only its share of the weights.",
})


def _q_max_concurrency_per_gpu(i):
    """Sequences per GPU under TP: floor((M - ceil(W / tp) - R) / (per-GPU bytes per token x T)).

    Inputs: cuda_memory_bytes (M, as CUDA reports it), weight_bytes (W, the whole model),
    reserve_bytes (R, per GPU), the geometry, tp, seq_len (and num_heads for the query-head slip).
    """
    tp, k, t = i["tp"], i["kv_heads"], i["seq_len"]
    memory, weights, reserve = i["cuda_memory_bytes"], i["weight_bytes"], i["reserve_bytes"]
    geometry = (i["layers"], i["head_dim"], i["dtype_bytes"])
    budget = memory - formulas.weight_bytes_per_gpu(weights, tp) - reserve
    per_gpu = dict(i, kv_heads=formulas.kv_heads_per_gpu(k, tp))
    bpt = _kv_token(**per_gpu)
    total = _kv_token(**i)

    def seqs(budget_bytes, bytes_per_token):
        return formulas.max_concurrency(budget_bytes, bytes_per_token * t)

    expected = seqs(budget, bpt)
    # at tp 1 the TP slips give the right count, and a query-head count equal to K the right bytes: all dropped
    slips = [("weights_not_split", seqs(memory - weights - reserve, bpt)), ("total_not_per_gpu", seqs(budget, total)),
             ("weights_not_split+total_not_per_gpu", seqs(memory - weights - reserve, total)),
             # the whole weights on one GPU leave a negative budget, which max(0, ...) turns into zero
             ("weights_not_split@clamped", max(0, seqs(memory - weights - reserve, bpt)))]
    if tp > 1:
        slips.append(("reserve_times_tp", max(0, seqs(memory - formulas.weight_bytes_per_gpu(weights, tp)
                                                      - reserve * tp, bpt))))
        slips.append(("reserve_times_tp@unclamped", seqs(memory - formulas.weight_bytes_per_gpu(weights, tp)
                                                          - reserve * tp, bpt)))
    if tp > k:
        slips.append(("split_replicated", seqs(budget, total / tp)))
    h = i.get("num_heads")
    if h:
        wrong = formulas.kv_bytes_per_token(geometry[0], formulas.kv_heads_per_gpu(h, tp), *geometry[1:])
        slips.append(("query_heads", seqs(budget, wrong)))
    slips += [(key, seqs(budget, wrong)) for key, wrong in _token_slips(dict(per_gpu, num_heads=None)) if wrong]
    slips += [("ceil_not_floor", math.ceil(budget / (bpt * t))), ("ceil_not_floor@round", round(budget / (bpt * t))),
              ("tokens_not_sequences", seqs(budget, bpt / t)),
              ("gb_for_gib@up", seqs(budget * GiB / GB, bpt)), ("gb_for_gib@down", seqs(budget * GB / GiB, bpt))]
    return expected, [(key, v) for key, v in slips if v != expected]


QUANTITIES.update({"max_concurrency_per_gpu": _q_max_concurrency_per_gpu})
# --- chapter 03 (MLA): appended, the entries above are unchanged ------------------------------------
SLIPS.update({
    "nope_for_rope": "you added qk_nope_head_dim ({qk_nope_head_dim}) to the latent; the cached key beside it is the decoupled RoPE key, qk_rope_head_dim = {rope_dim}.",
    "query_latent": "you used q_lora_rank ({q_lora_rank}), the query's compression, which is never cached; the cache holds the KV latent, kv_lora_rank = {latent_dim}.",
})

GENERAL.update({
    "extra_factor_2": "that is twice the right figure: keys and values are both rebuilt from one cached latent, counted once.",
    "missing_rope": "the decoupled RoPE key (qk_rope_head_dim) is missing: the cache holds latent + rope key per layer.",
    "mla_as_mha": "you treated MLA as ordinary attention (2 x heads x head_dim); MLA caches one latent plus one RoPE key per layer.",
    "mla_split_by_tp": "you divided the MLA cache among the GPUs; with no KV heads to hand out, each GPU keeps a whole copy.",
    "nope_for_rope": "you used qk_nope_head_dim where the cached key is qk_rope_head_dim.",
    "query_latent": "you used q_lora_rank (the query's compression) instead of kv_lora_rank.",
})


def _mla_config_slips(i):
    """Slipped variants of MLA bytes per token read from a config (each a wrong value or None)."""
    L, r, rope, b = i["layers"], i["latent_dim"], i["rope_dim"], i["dtype_bytes"]
    right = formulas.mla_bytes_per_token(L, r, rope, b)
    out = [("extra_factor_2", 2 * right),
           ("missing_rope", formulas.mla_bytes_per_token(L, r, 0, b)),
           ("missing_rope+extra_factor_2", 2 * formulas.mla_bytes_per_token(L, r, 0, b)),
           ("bits_not_bytes", formulas.mla_bytes_per_token(L, r, rope, 8 * b)),
           ("missing_layers", formulas.mla_bytes_per_token(1, r, rope, b))]
    if i.get("qk_nope_head_dim") and i["qk_nope_head_dim"] != rope:
        out.append(("nope_for_rope", formulas.mla_bytes_per_token(L, r, i["qk_nope_head_dim"], b)))
    if i.get("q_lora_rank") and i["q_lora_rank"] != r:
        out.append(("query_latent", formulas.mla_bytes_per_token(L, i["q_lora_rank"], rope, b)))
    if i.get("mtp_layers"):     # num_nextn_predict_layers: the multi-token-prediction module keeps no cache here
        out.append(("mtp_layer_counted", formulas.mla_bytes_per_token(L + i["mtp_layers"], r, rope, b)))
    if i.get("qk_nope_head_dim"):
        out.append(("qk_head_dim_added", formulas.mla_bytes_per_token(L, r, i["qk_nope_head_dim"] + rope, b)))
    # Ordinary attention's formula on an MLA config: 2 L K D b with K the config's num_key_value_heads
    # (or the query heads) and D any head width the config suggests.
    heads = {h for h in (i.get("kv_heads"), i.get("num_heads")) if h}
    widths = {w for w in (i.get("head_dim_field"), i.get("v_head_dim"), rope,
                          (i.get("qk_nope_head_dim") or 0) + rope) if w}
    if i.get("hidden_size") and i.get("num_heads") and i["hidden_size"] % i["num_heads"] == 0:
        widths.add(i["hidden_size"] // i["num_heads"])
    for h in sorted(heads):
        for w in sorted(widths):
            out.append((f"mla_as_mha@{h}x{w}", formulas.kv_bytes_per_token(L, h, w, b)))
    for other in (1, 2, 4):
        if other != b:
            out.append((f"ignored_dtype_bytes@{other}", formulas.mla_bytes_per_token(L, r, rope, other)))
    return out


def _q_mla_config_bytes_per_token(i):
    """MLA bytes per token from a config's fields: L (r + d_R) b, no factor 2 (formulas.mla_bytes_per_token)."""
    expected = formulas.mla_bytes_per_token(i["layers"], i["latent_dim"], i["rope_dim"], i["dtype_bytes"])
    return expected, _mla_config_slips(i) + _unit_slips(expected)


def _q_config_kv_bytes_per_token_per_gpu(i):
    """Per-GPU bytes per token of an MLA or an ordinary model under TP (MLA's latent whole on every rank)."""
    if not i.get("latent_dim"):
        return _q_kv_bytes_per_token_per_gpu(i)
    tp = i["tp"]
    expected = formulas.mla_bytes_per_token(i["layers"], i["latent_dim"], i["rope_dim"], i["dtype_bytes"])
    slips = [("mla_split_by_tp", expected / tp)] if tp > 1 else []
    slips += [(k, v) for k, v in _mla_config_slips(i) if base_key(k) != "mla_as_mha"]
    # ordinary attention on the MLA config, split over the ranks as GQA would be
    for key, value in _mla_config_slips(i):
        if base_key(key) == "mla_as_mha":
            slips.append((key + "@split", value / tp))
            slips.append((key, value))
    if tp > 1:
        slips += [(k + "+mla_split_by_tp", v / tp) for k, v in _mla_config_slips(i)
                  if k in ("extra_factor_2", "missing_rope")]
    return expected, slips + _unit_slips(expected)


QUANTITIES.update({
    "mla_config_bytes_per_token": _q_mla_config_bytes_per_token,
    "config_kv_bytes_per_token_per_gpu": _q_config_kv_bytes_per_token_per_gpu,
})


# --- quantities of ch04_pool_paging: appended, the entries above are unchanged ---------------------
SLIPS.update({
    "ignored_utilization": "the utilization ({utilization}) is not applied: vLLM budgets only that share of the memory CUDA reports.",
    "ignored_other_bytes": "the other allocations ({other_bytes:,} B: activation peak, non-torch memory, CUDA graphs) are not subtracted.",
    "sliding_layers_dropped": "the sliding-window layers are left out; they still hold up to {sliding_window} tokens each.",
    "all_layers_windowed": "every layer is capped at the window ({sliding_window} tokens); only the sliding-window layers are, the full-attention layers hold the whole sequence.",
    "tokens_not_blocks": "vLLM counts the pool in whole blocks of {block_size} tokens: take the floor in blocks, then multiply by the block size.",
    "answer_in_blocks": "that is the number of blocks; the question asks for tokens (blocks x {block_size}).",
    "paged_whole_last_block": "a sequence whose length is a multiple of the block size wastes nothing: the last block's empty slots are (-length) mod block_size, not block_size - length mod block_size.",
    "tokens_not_waste": "that is the slots holding tokens; the question asks for the slots allocated that hold none.",
    "allocated_not_waste": "that is every slot allocated; subtract the slots that hold a token.",
    "prompt_without_first_token": "at the step of admission each sequence holds its prompt and its first generated token (prompt + 1 tokens), not the prompt alone.",
    "reservation_ignored": "slots reserved for tokens a sequence has yet to generate also hold no token now: count them as waste.",
})

GENERAL.update({
    "label_memory": "you started from the memory on the label instead of what CUDA reports.",
    "ignored_utilization": "the utilization is not applied.",
    "ignored_other_bytes": "the other allocations are not subtracted.",
    "block_size_not_minus_one": "a last block is short by 0 to block_size - 1 tokens: the average is (bs - 1) / 2.",
    "worst_case_waste": "that is the worst case, not the expected waste.",
    "one_sequence_waste": "that is one sequence's waste; multiply by the number of sequences.",
    "windowed_as_full": "the sliding-window layers are counted at the full length instead of the window.",
    "sliding_layers_dropped": "the sliding-window layers are left out.",
    "all_layers_windowed": "every layer is capped at the window, the full-attention layers too.",
    "tokens_not_blocks": "the pool is counted in whole blocks: floor in blocks, then multiply by the block size.",
    "answer_in_blocks": "that is a block count; return tokens.",
    "paged_whole_last_block": "a length that is a multiple of the block size wastes nothing in its last block.",
    "tokens_not_waste": "that counts slots holding tokens, not waste.",
    "allocated_not_waste": "that counts every allocated slot, not waste.",
    "prompt_without_first_token": "at admission a sequence holds prompt + 1 tokens.",
    "reservation_ignored": "slots reserved for tokens still to come are waste now.",
})


def _q_pool_tokens_reported(i):
    """Pool tokens from memory as CUDA reports it (kv_pool_tokens), with the label and unit slips of ch04."""
    m, u, w, o, bpt = i["gpu_bytes"], i["utilization"], i["weight_bytes"], i["other_bytes"], i["bytes_per_token"]
    expected = formulas.kv_pool_tokens(m, u, w, o, bpt)
    slips = []
    if i.get("label_bytes"):
        slips.append(("label_memory", formulas.kv_pool_tokens(i["label_bytes"], u, w, o, bpt)))
    slips += [("gb_for_gib@down", formulas.kv_pool_tokens(m * GB / GiB, u, w, o, bpt)),
              ("gb_for_gib@up", formulas.kv_pool_tokens(m * GiB / GB, u, w, o, bpt)),
              ("ignored_utilization", formulas.kv_pool_tokens(m, 1, w, o, bpt)),
              ("ignored_other_bytes", formulas.kv_pool_tokens(m, u, w, 0, bpt)),
              ("ceil_not_floor", math.ceil((m * u - w - o) / bpt))]
    return expected, [(k, v) for k, v in slips if v != expected]


def _hybrid_bytes(full_layers, sliding_layers, kv_heads, head_dim, dtype_bytes, seq_len, window):
    per_layer_token = formulas.kv_bytes_per_token(1, kv_heads, head_dim, dtype_bytes)
    return per_layer_token * (full_layers * seq_len + sliding_layers * min(seq_len, window))


def _q_hybrid_kv_bytes_per_sequence(i):
    """One sequence's KV bytes when some layers attend over a sliding window (windowed layers capped)."""
    f, s, K, D, b, t, win = (i["full_layers"], i["sliding_layers"], i["kv_heads"], i["head_dim"], i["dtype_bytes"],
                             i["seq_len"], i["sliding_window"])
    expected = _hybrid_bytes(f, s, K, D, b, t, win)
    per_layer_token = formulas.kv_bytes_per_token(1, K, D, b)
    slips = [("windowed_as_full", _hybrid_bytes(f + s, 0, K, D, b, t, win)),
             ("window_not_capped", per_layer_token * (f * t + s * win)),
             ("sliding_layers_dropped", _hybrid_bytes(f, 0, K, D, b, t, win)),
             ("all_layers_windowed", _hybrid_bytes(0, f + s, K, D, b, t, win)),
             ("missing_kv_factor", expected // 2)]
    H = i.get("num_heads")
    if H:       # H = K gives the right figure, dropped below
        slips.append(("query_heads", _hybrid_bytes(f, s, H, D, b, t, win)))
    for other in (1, 2, 4):
        if other != b:
            slips.append((f"ignored_dtype_bytes@{other}", _hybrid_bytes(f, s, K, D, other, t, win)))
    return expected, [(k, v) for k, v in slips if v != expected] + _unit_slips(expected)


def _q_fp8_pool_tokens(i):
    """Tokens an fp8 pool holds as vLLM counts them: (A // (bs * L * 2 * K * D * 1)) * bs."""
    a, bs = i["available_bytes"], i["block_size"]
    L, K, D = i["layers"], i["kv_heads"], i["head_dim"]

    def tokens(per_token, avail=a):     # whole bytes (a GB/GiB slip gives a float), whole blocks, then tokens
        return int(avail) // (bs * per_token) * bs

    fp8 = formulas.kv_bytes_per_token(L, K, D, 1)
    expected = tokens(fp8)
    slips = [("wrong_16bit_vs_fp8", tokens(formulas.kv_bytes_per_token(L, K, D, 2))),
             ("tokens_not_blocks", a // fp8),
             ("answer_in_blocks", a // (bs * fp8)),
             ("missing_kv_factor", tokens(fp8 // 2)),
             ("missing_layers", tokens(formulas.kv_bytes_per_token(1, K, D, 1))),
             ("gb_for_gib@down", tokens(fp8, a * GB / GiB)), ("gb_for_gib@up", tokens(fp8, a * GiB / GB))]
    H = i.get("num_heads")
    if H:       # H = K gives the right figure, dropped below
        slips.append(("query_heads", tokens(formulas.kv_bytes_per_token(L, H, D, 1))))
    return expected, [(k, v) for k, v in slips if v != expected]


def _q_allocator_waste(i):
    reqs, pol, bs, msl = i["requests"], i["policy"], i["block_size"], i["max_seq_len"]
    expected = allocator_waste(reqs, pol, bs, msl)
    held = sum(p + 1 for p, _ in reqs)
    slips = [("tokens_not_waste", held), ("allocated_not_waste", expected + held),
             ("prompt_without_first_token", allocator_waste(reqs, pol, bs, msl, held_extra=0)),
             # the same slip made on the prompt itself (prompt - 1 everywhere): the oracle's waste is then right
             ("prompt_without_first_token@prompt", allocator_waste([[p - 1, o] for p, o in reqs], pol, bs, msl))]
    if pol == "paged":
        slips.append(("paged_whole_last_block", allocator_waste(reqs, pol, bs, msl, last_block="whole")))
        floor_blocks = sum((p + 1) // bs * bs - (p + 1) for p, _ in reqs)
        slips += [("paged_floor_not_ceil", floor_blocks), ("paged_floor_not_ceil@clamped", max(0, floor_blocks))]
    else:
        slips.append(("reservation_ignored", allocator_waste(reqs, pol, bs, msl, count_reservation=False)))
    if pol == "oracle":
        slips.append(("oracle_extra_slot", expected + len(reqs)))
    return expected, [(k, v) for k, v in slips if v != expected]


QUANTITIES.update({
    "pool_tokens_reported": _q_pool_tokens_reported,
    "hybrid_kv_bytes_per_sequence": _q_hybrid_kv_bytes_per_sequence,
    "fp8_pool_tokens": _q_fp8_pool_tokens,
    "allocator_waste": _q_allocator_waste,
})


# --- quantities of ch05_prefix_reuse (prefix caching): appended, the entries above are unchanged ----
SLIPS.update({
    "partial_block_shared": "only full blocks are shared (block_size = {block_size} tokens): the tokens of a "
                            "partial last block are recomputed and held by every request, never matched.",
    "every_copy_saved": "one copy of the shared blocks is still computed and held: the saving is over "
                        "num_requests - 1 = {others} requests, not all {num_requests}.",
    "tokens_not_bytes": "that is a count of tokens: multiply by bytes_per_token ({bytes_per_token:,} B) for bytes.",
    "blocks_not_tokens": "that counts blocks: multiply by block_size ({block_size} tokens) for tokens.",
    "no_cache": "that is the prefill with no prefix cache at all: every step recomputes its whole history.",
    "output_not_cached": "the action a step generates is cached too (its full blocks), so the next step hits "
                         "it as well: only its partial last block and the new observation are recomputed.",
})
GENERAL.update({
    "partial_block_shared": "only full blocks are shared: a partial last block is recomputed.",
    "every_copy_saved": "one copy is still computed and held: the saving is over num_requests - 1 requests.",
    "tokens_not_bytes": "that is a count of tokens: multiply by bytes_per_token.",
    "blocks_not_tokens": "that counts blocks: multiply by block_size.",
    "no_cache": "that is the prefill with no prefix cache at all.",
    "output_not_cached": "the generated action is cached too, so the next step hits it.",
})


def _sharing(i, bytes_per_token=1):
    """prefix_sharing_savings of the case (its token counts do not depend on bytes_per_token)."""
    from kvlib.prefix_cache import prefix_sharing_savings
    return prefix_sharing_savings(i["prompt_tokens"], i["num_requests"], bytes_per_token, i["block_size"])


def _q_prefill_tokens_saved(i):
    """Prefill tokens a shared prompt saves: N P - (P + (N - 1) tail) = (N - 1) floor(P / bs) bs."""
    s = _sharing(i)
    expected = s.prefill_tokens_unshared - s.prefill_tokens_shared
    n, p, shared = s.num_requests, s.prompt_tokens, s.hit_tokens_per_request
    slips = [("partial_block_shared", (n - 1) * p), ("every_copy_saved", n * shared),
             ("partial_block_shared+every_copy_saved", n * p), ("blocks_not_tokens", (n - 1) * s.shared_blocks),
             # a partial last block counted as a whole shared block
             ("partial_block_rounded_up", (n - 1) * -(-p // i["block_size"]) * i["block_size"])]
    return expected, [(k, v) for k, v in slips if v != expected]


def _q_prefix_bytes_saved(i):
    """Bytes a shared prompt saves: unshared - shared = (N - 1) floor(P / bs) bs x bytes_per_token."""
    s = _sharing(i, i["bytes_per_token"])
    expected = s.saved_bytes
    tokens, bpt = _q_prefill_tokens_saved(i)
    slips = [(k, v * s.bytes_per_token) for k, v in bpt]
    slips.append(("tokens_not_bytes", tokens))
    return expected, [(k, v) for k, v in slips if v != expected] + _unit_slips(expected)


def _q_agent_prefill_with_cache(i):
    """Prefill tokens of the agent loop through a prefix cache (kvlib.prefix_cache.run_cache)."""
    from kvlib.prefix_cache import Request, agent_requests, run_cache
    requests = agent_requests(i["system_tokens"], i["observation_tokens"], i["action_tokens"], i["steps"])
    bs = i["block_size"]
    expected = run_cache(requests, block_size=bs).prefill_tokens_with_cache
    prompts_only = [Request(r.prompt) for r in requests]
    system, observation, action, steps = (i["system_tokens"], i["observation_tokens"], i["action_tokens"],
                                          i["steps"])
    # Shared at token level (block size 1, nothing evicted), every step after the first recomputes only what
    # is new to the cache: its observation, plus the previous action when outputs are not cached. Closed
    # forms, since simulating block size 1 hashes one block per token (~0.5 s per hidden case).
    slips = [("no_cache", sum(len(r.prompt) for r in requests)),
             ("output_not_cached", run_cache(prompts_only, block_size=bs).prefill_tokens_with_cache),
             ("partial_block_shared", system + steps * observation),
             ("output_not_cached+partial_block_shared",
              system + observation + (steps - 1) * (observation + action))]
    return expected, [(k, v) for k, v in slips if v != expected]


# --- quantities of ch06_crossover: appended, the entries above are unchanged ----------------------
SLIPS.update({
    "crossover_rounded_down": "the crossover context is the first whole context at which the cache reads reach the "
                              "weights: round up (ceil), not down or to the nearest token.",
    "batch_multiplied": "you multiplied by the batch ({batch_size}); the token-slots W / bytes per token are shared "
                        "by the batch, so divide by it.",
    "ignored_efficiency": "the efficiency is not applied: at a share e = {efficiency:g} of the peak bandwidth the "
                          "step takes (bandwidth-limit step) / e, so fewer tokens per second.",
    "efficiency_inverted": "the efficiency works the wrong way round: reaching only a share e = {efficiency:g} of "
                           "the bandwidth makes the step longer (divide the step time by e, do not multiply).",
    "per_sequence_rate": "that is one sequence's rate (one token per step); the batch of {batch_size} sequences "
                         "each get a token every step, so multiply by the batch.",
})
GENERAL.update({
    "crossover_not_divided": "that is the crossover in token-slots (batch x context); divide by the batch.",
    "kv_only_step": "the weights are missing: every decode step reads all of them once.",
    "weights_only_step": "the KV reads are missing: every step also reads each sequence's whole cache.",
    "seconds_for_ms": "the answer looks like seconds; return milliseconds.",
    "crossover_rounded_down": "round the crossover context up (ceil), not down or to the nearest token.",
    "batch_multiplied": "the batch multiplies where it should divide.",
    "ignored_efficiency": "the efficiency is not applied.",
    "efficiency_inverted": "the efficiency is applied the wrong way round (divide the step time by it).",
    "per_sequence_rate": "that is one sequence's rate: multiply by the batch.",
})


def _q_crossover_context_tokens(i):
    """First whole context at which batch_size sequences read as many KV bytes as weights: ceil(W / (bpt B))."""
    w, b = i["weight_bytes"], i["batch_size"]
    bpt = _kv_token(**i)
    expected = -(-w // (bpt * b))
    exact = w / (bpt * b)
    slips = [(key, math.ceil(w / (wrong * b))) for key, wrong in _token_slips(i) if wrong]
    # two ways, told apart: a case where one of them gives the right context rules out only the other
    slips += [("crossover_rounded_down@floor", math.floor(exact)), ("crossover_rounded_down@round", round(exact)),
              ("crossover_not_divided", w / bpt), ("batch_multiplied", w / bpt * b)]
    return expected, [(k, v) for k, v in slips if v != expected]


def _q_decode_tokens_per_s(i):
    """Decode throughput at a share e of peak bandwidth: B e / ((W + bpt T B) / BW) [tokens/s]."""
    w, t, b, bw, e = i["weight_bytes"], i["seq_len"], i["batch_size"], i["bandwidth_bytes_per_s"], i["efficiency"]
    bpt = _kv_token(**i)
    step = formulas.decode_step_seconds(w, bpt, t, b, bw)
    expected = b * e / step
    slips = [(key, b * e / formulas.decode_step_seconds(w, wrong, t, b, bw)) for key, wrong in _token_slips(i) if wrong]
    slips += [("ignored_efficiency", b / step), ("efficiency_inverted", b / (step * e)),
              ("per_sequence_rate", e / step), ("kv_only_step", b * e / (bpt * t * b / bw)),
              ("weights_only_step", b * e / (w / bw)),
              ("missing_seq_len", b * e / formulas.decode_step_seconds(w, bpt, 1, b, bw))]
    return expected, slips


QUANTITIES.update({
    "crossover_context_tokens": _q_crossover_context_tokens,
    "decode_tokens_per_s": _q_decode_tokens_per_s,
})


# --- quantities for ch07_capacity_plan (a plan's steps): appended, the entries above are unchanged -------------
SLIPS.update({
    "weights_not_split": "under tensor parallelism each GPU holds 1/{tp} of the weights: use W / tp per GPU, not the whole W.",
    "no_utilization": "the engine's utilization cap ({utilization}) is missing: the budget is the reported memory times it.",
    "missing_overhead": "the overhead for activations and other allocations is not subtracted.",
    "efficiency_multiplied": "divide by the efficiency ({efficiency}): kernels that reach only part of the peak bandwidth make a step longer, not shorter.",
    "no_efficiency": "the efficiency ({efficiency}) is missing: real kernels reach only part of the peak bandwidth.",
    "no_tp_overhead": "the all-reduce overhead ({tp_overhead} of the step) is missing: with tp > 1 every step pays it.",
    "tp_overhead_at_tp1": "with tp = 1 no all-reduce runs: there is no overhead to add.",
    "bound_only": "that is the bandwidth bound alone: multiply it by (1 + all-reduce overhead) / efficiency.",
    "non_binding_constraint": "a replica may hold the smaller of the two limits (memory: {sequences_by_memory}, ITL: {sequences_by_itl} sequences); you used the larger.",
    "missing_replicas": "a node of {gpus_per_node} GPUs runs {replicas} replicas of tp = {tp}: multiply the sequences per replica by them.",
    "no_headroom": "that is the node count before headroom: scale by the spike ({spike_factor}), round up, then add the spare nodes ({redundancy_nodes}).",
    "spike_not_rounded_up": "round the spike up to whole nodes (a part of a node is a whole node) before adding the spares.",
    "spares_scaled": "add the spare nodes after scaling for the spike: ceil(nodes x spike) + spares, not (nodes + spares) x spike.",
    "gpus_not_nodes": "that counts GPUs; the question asks for nodes of {gpus_per_node} GPUs.",
})
GENERAL.update({
    "no_utilization": "the engine's utilization cap is missing.",
    "missing_overhead": "the overhead is not subtracted.",
    "efficiency_multiplied": "divide by the efficiency, do not multiply.",
    "no_efficiency": "the efficiency is missing.",
    "no_tp_overhead": "the all-reduce overhead is missing.",
    "tp_overhead_at_tp1": "with tp = 1 there is no all-reduce overhead.",
    "bound_only": "that is the bandwidth bound alone, without overhead and efficiency.",
    "non_binding_constraint": "use the smaller of the memory and ITL limits.",
    "missing_replicas": "a node may run several replicas: multiply by them.",
    "floor_nodes": "round the nodes up, not down.",
    "no_headroom": "the headroom (spike and spare nodes) is missing.",
    "spike_not_rounded_up": "round the spike up to whole nodes.",
    "spares_scaled": "add the spare nodes after scaling for the spike.",
    "gpus_not_nodes": "that counts GPUs, not nodes.",
})


def _q_kv_bytes_per_sequence_per_gpu(i):
    """One sequence's KV bytes on one GPU under TP: bytes per token per GPU x seq_len."""
    per_token, slips = _q_kv_bytes_per_token_per_gpu(i)
    t = i["seq_len"]
    scaled = [(k, v * t) for k, v in slips if not k.startswith("answer_in")]
    expected = per_token * t
    scaled.append(("missing_seq_len", per_token))
    return expected, scaled + _unit_slips(expected)


def _q_sequences_per_gpu_by_memory(i):
    """floor((ceil(M u) - ceil(W / tp) - O) / S_g): sequences one GPU's pool holds (M as CUDA reports it)."""
    m, u, w, o, tp, s = (i["gpu_bytes"], i["utilization"], i["weight_bytes"], i["other_bytes"], i["tp"],
                         i["kv_bytes_per_sequence_per_gpu"])

    def fit(memory=m, util=u, weights=formulas.weight_bytes_per_gpu(w, tp), other=o, per_seq=s):
        return math.floor(formulas.kv_pool_bytes(memory, util, weights, other, round_budget_up=True) / per_seq)

    expected = fit()
    pool = formulas.kv_pool_bytes(m, u, formulas.weight_bytes_per_gpu(w, tp), o, round_budget_up=True)
    slips = [("weights_not_split", fit(weights=w)), ("no_utilization", fit(util=1)),
             ("missing_overhead", fit(other=0)), ("ceil_not_floor", math.ceil(pool / s)),
             ("ceil_not_floor@round", round(pool / s)),
             ("budget_rounded_down", math.floor(formulas.kv_pool_bytes(m, u, formulas.weight_bytes_per_gpu(w, tp), o)
                                                / s)),
             ("gb_for_gib@down", fit(memory=m * GB / GiB)),
             ("gb_for_gib@up", fit(memory=m * GiB / GB))]
    if i.get("label_bytes"):
        slips.append(("label_memory", fit(memory=i["label_bytes"])))
    slips.append(("total_not_per_gpu", fit(per_seq=s * _split(i))))    # the right count (dropped) at tp 1
    return expected, [(k, v) for k, v in slips if v != expected]


def _split(i):
    """How many times one GPU's KV heads go into the model's: tp, or K once tp exceeds K (replicated heads)."""
    k = i.get("kv_heads", i["tp"])
    return k / formulas.kv_heads_per_gpu(k, i["tp"])


def _slowdown(tp, tp_overhead, efficiency):
    return (1 + (tp_overhead if tp > 1 else 0)) / efficiency


def _itl_variants(i, measure):
    """(expected, slips) of ``measure(w_gpu, s_gpu, slowdown)`` with each ITL slip applied."""
    w, tp, o, e, s = i["weight_bytes"], i["tp"], i["tp_overhead"], i["efficiency"], i["kv_bytes_per_sequence_per_gpu"]
    w_gpu, slow = formulas.weight_bytes_per_gpu(w, tp), _slowdown(tp, o, e)
    expected = measure(w_gpu, s, slow)
    slips = [("weights_not_split", measure(w, s, slow)), ("bound_only", measure(w_gpu, s, 1)),
             ("no_efficiency", measure(w_gpu, s, slow * e)),
             ("efficiency_multiplied", measure(w_gpu, s, slow * e * e))]
    if tp > 1:
        slips += [("total_not_per_gpu", measure(w_gpu, s * _split(i), slow)),
                  ("no_tp_overhead", measure(w_gpu, s, 1 / e))]
    else:
        slips.append(("tp_overhead_at_tp1", measure(w_gpu, s, (1 + o) / e)))
    return expected, slips


def _q_itl_ms(i):
    """ITL [ms] of a replica holding ``sequences``: (W/tp + n S_g) / BW x (1 + o [tp > 1]) / e x 1000."""
    n, bw = i["sequences"], i["bandwidth_bytes_per_s"]

    def ms(w_gpu, s_gpu, slow):
        return (w_gpu + n * s_gpu) / bw * slow * 1e3

    expected, slips = _itl_variants(i, ms)
    w_gpu = formulas.weight_bytes_per_gpu(i["weight_bytes"], i["tp"])
    slow = _slowdown(i["tp"], i["tp_overhead"], i["efficiency"])
    slips += [("kv_only_step", n * i["kv_bytes_per_sequence_per_gpu"] / bw * slow * 1e3),
              ("weights_only_step", w_gpu / bw * slow * 1e3), ("seconds_for_ms", expected / 1e3)]
    return expected, slips


def _q_sequences_by_itl(i):
    """Most sequences per replica under the ITL target: floor((tau BW / s - W/tp) / S_g)."""
    tau, bw = i["itl_target_ms"] / 1e3, i["bandwidth_bytes_per_s"]

    def fit(w_gpu, s_gpu, slow):
        return math.floor((tau / slow * bw - w_gpu) / s_gpu)

    expected, slips = _itl_variants(i, fit)
    exact = (tau / _slowdown(i["tp"], i["tp_overhead"], i["efficiency"]) * bw
             - formulas.weight_bytes_per_gpu(i["weight_bytes"], i["tp"])) / i["kv_bytes_per_sequence_per_gpu"]
    slips += [("ceil_not_floor", math.ceil(exact)), ("ceil_not_floor@round", round(exact))]
    w_gpu, s_gpu = formulas.weight_bytes_per_gpu(i["weight_bytes"], i["tp"]), i["kv_bytes_per_sequence_per_gpu"]
    slow = _slowdown(i["tp"], i["tp_overhead"], i["efficiency"])
    slips += [("target_ms_as_seconds", math.floor((tau * 1e3 / slow * bw - w_gpu) / s_gpu)),
              ("weights_not_subtracted", math.floor(tau / slow * bw / s_gpu))]
    if expected < 0:        # nothing meets the target: 0 sequences (ch07 Exercise 4), not the negative formula
        slips.append(("negative_count", expected))
        expected = 0
    return expected, [(k, v) for k, v in slips if v != expected]


def _q_nodes_with_headroom(i):
    """ceil(ceil(users / ((g // tp) x min(mem, itl))) x f) + r: the nodes to deploy."""
    users, g, tp = i["users"], i["gpus_per_node"], i["tp"]
    mem, lat, f, r = i["sequences_by_memory"], i["sequences_by_itl"], i["spike_factor"], i["redundancy_nodes"]
    replicas = g // tp

    def spike(nodes):
        return math.ceil(round(nodes * f, 9))

    def deploy(per_replica=min(mem, lat), reps=replicas):
        return spike(-(-users // (reps * per_replica))) + r

    nodes = -(-users // (replicas * min(mem, lat)))
    expected = deploy()
    slips = [("non_binding_constraint", deploy(per_replica=max(mem, lat))), ("no_headroom", nodes),
             ("floor_nodes", spike(users // (replicas * min(mem, lat))) + r),
             ("spike_not_rounded_up", round(nodes * f) + r),
             ("spike_not_rounded_up", math.floor(nodes * f) + r),
             ("spike_float_noise", math.ceil(nodes * f) + r),
             ("ceil_as_floor_plus_one", spike(users // (replicas * min(mem, lat)) + 1) + r),
             ("spares_scaled", spike(nodes + r)), ("gpus_not_nodes", expected * g),
             ("missing_replicas", deploy(reps=1))]      # the right count (dropped) when a node is one replica
    return expected, [(k, v) for k, v in slips if v != expected]


# --- quantities of the vLLM lab (ch08_vllm_lab): appended, the entries above are unchanged -------------
SLIPS.update({
    # reading a log (the figure as printed; the wrong figures a learner picks instead come with the case)
    "largest_rank": "several ranks printed their own figure and you took a larger one ({wrong_value}); vLLM sizes the pool from the smallest rank.",
    "weights_figure": "that is the model-weights figure ({wrong_value}), not the memory left for the KV cache.",
    "budget_figure": "that is total memory x utilization ({wrong_value}), the budget before weights and activations come out of it.",
    "total_figure": "that is the GPU's total memory ({wrong_value}), not what is left for the KV cache.",
    "cpu_total_figure": "that is the machine's total memory ({wrong_value}) in 'Explicitly set (space/total) GiB': the KV space is the first number.",
    "cpu_blocks": "that is '# CPU blocks' ({wrong_value}), the swap space on the host, not the GPU's blocks.",
    "tokens_per_request": "that is max_model_len ({wrong_value}) from the concurrency line, the tokens per request, not the cache's capacity.",
    "max_seq_len_not_capacity": "that is the max seq len the error names ({wrong_value}); the KV capacity is the second number in it.",
    "blocks_as_tokens": "this log prints blocks; you converted them to tokens ({wrong_value}). Return the count as printed.",
    # a block range from a printed GiB figure
    "point_not_range": "a printed GiB figure is rounded to 0.01 GiB, so it allows a range of blocks: from (X - 0.005) GiB to (X + 0.005) GiB, each divided by the bytes per block.",
    "window_full_unit": "the rounding window is half a unit of the last printed decimal either side (+/-0.005 GiB), not +/-0.01 GiB.",
    "tokens_for_blocks": "those are tokens (blocks x block_size = {block_size}); the question asks for blocks.",
})
GENERAL.update({
    "largest_rank": "several ranks printed a figure: vLLM sizes the pool from the smallest.",
    "weights_figure": "that is the model-weights figure, not the KV cache's.",
    "budget_figure": "that is total x utilization, before weights and activations are taken out.",
    "total_figure": "that is the GPU's total memory, not the KV cache's.",
    "cpu_total_figure": "in 'Explicitly set (space/total) GiB' the KV space is the first number.",
    "cpu_blocks": "that is the CPU (swap) block count, not the GPU's.",
    "tokens_per_request": "that is max_model_len from the concurrency line, not the cache's capacity.",
    "max_seq_len_not_capacity": "that is the max seq len from the error; the KV capacity is its second number.",
    "blocks_as_tokens": "the log prints blocks: return the count as printed.",
    "point_not_range": "a printed GiB figure allows a range of blocks (+/-0.005 GiB), not one count.",
    "window_full_unit": "the window is +/-0.005 GiB (half the last decimal), not +/-0.01 GiB.",
    "tokens_for_blocks": "those are tokens, not blocks.",
})


def _q_log_figure(i):
    """A figure read from a log, as printed; ``wrong`` maps slip keys to the figures mistaken for it."""
    expected = i["printed"]
    return expected, [(key, value) for key, value in i.get("wrong", {}).items() if value != expected]


def _q_block_range(i):
    """(fewest, most) blocks a printed GiB figure allows: (lo // B, hi // B), B = L 2 max(1, K // tp) D b bs."""
    from kvlib.vllm.log import gib_window
    from kvlib.vllm.mismatch import block_bytes, block_range

    text, bs, tp = i["available_gib"], i["block_size"], i.get("tp", 1)
    geometry = (i["layers"], i["kv_heads"], i["head_dim"], i["dtype_bytes"])
    b = block_bytes(*geometry, bs, tp)
    expected = block_range(text, *geometry, bs, tp)
    lo, hi = gib_window(text)
    x = float(text)
    slips = [("point_not_range", (round(x * GiB) // b, round(x * GiB) // b)),
             ("point_not_range", (int(x * GiB / b), int(x * GiB / b))),
             ("window_full_unit", (int((x - 0.01) * GiB) // b, int((x + 0.01) * GiB) // b)),
             ("gb_for_gib", (int((x - 0.005) * GB) // b, int((x + 0.005) * GB) // b)),
             ("tokens_for_blocks", (expected[0] * bs, expected[1] * bs))]
    whole = block_bytes(*geometry, bs)           # one GPU holding every head: b itself at tp 1 (dropped below)
    slips.append(("total_not_per_gpu", (lo // whole, hi // whole)))
    slips.append(("missing_kv_factor", (lo // (b // 2), hi // (b // 2))))
    return expected, [(k, v) for k, v in slips if v != expected]


QUANTITIES.update({
    "kv_bytes_per_sequence_per_gpu": _q_kv_bytes_per_sequence_per_gpu,
    "sequences_per_gpu_by_memory": _q_sequences_per_gpu_by_memory,
    "itl_ms": _q_itl_ms,
    "sequences_by_itl": _q_sequences_by_itl,
    "nodes_with_headroom": _q_nodes_with_headroom,
    "prefill_tokens_saved": _q_prefill_tokens_saved,
    "prefix_bytes_saved": _q_prefix_bytes_saved,
    "agent_prefill_with_cache": _q_agent_prefill_with_cache,
    "log_figure": _q_log_figure,
    "block_range": _q_block_range,
})


# --- ch01_kv_formula's exercises 5 and 6: appended, the entries above are unchanged ---------------
SLIPS.update({
    "utilization_after_weights": "the utilization caps the engine's share of the whole memory: budget M x u, "
                                 "then subtract the weights and the other allocations (M u - W - O), not "
                                 "(M - W - O) x u.",
    "weights_missing": "the weights are missing: {num_params:,} parameters x {weight_dtype_bytes} B sit on the "
                       "GPU before any cache does.",
    "weight_dtype_ignored": "the weights are not num_params x weight_dtype_bytes ({weight_dtype_bytes} B per "
                            "parameter): you used another size per parameter (a fixed one, or the cache's).",
    "negative_count": "the weights and other allocations leave no room for a cache: no sequence fits, so the "
                      "answer is 0, not a negative count.",
    "inverted_ratio": "the ratio is upside down: each KV head serves num_attention_heads / num_key_value_heads "
                      "= {num_heads} / {kv_heads} query heads, not K / H.",
    "absent_as_mqa": "num_key_value_heads absent (or null) means one KV head per query head (K = H = "
                     "{num_heads}, MHA), not a single KV head (MQA).",
    "inflated_not_extra": "that second figure is the bytes per token counted with the query heads; the cost of "
                          "that slip is what it adds: subtract the bytes per token counted with the KV heads.",
    "real_not_extra": "that second figure is the real bytes per token (counted with the KV heads); the question "
                      "asks what counting the query heads instead would add to it.",
})

GENERAL.update({
    "utilization_after_weights": "the utilization applies to the whole memory (M u - W - O), not to what is "
                                 "left after the weights.",
    "weights_missing": "the weights are not subtracted.",
    "weight_dtype_ignored": "the weights are not num_params x weight_dtype_bytes.",
    "negative_count": "when nothing fits, the answer is zero, not a negative count.",
    "inverted_ratio": "the ratio is upside down: query heads per KV head is H / K.",
    "absent_as_mqa": "num_key_value_heads absent or null means one KV head per query head (MHA), not one in all.",
    "inflated_not_extra": "the second figure is the inflated bytes per token, not what the slip adds to it.",
    "real_not_extra": "the second figure is the real bytes per token, not what counting the query heads adds.",
})


def _sequences_on_gpu(m, u, w, o, per_seq):
    """floor((M u - W - O) / per_seq), with M u - W - O floored to whole bytes first (kv_pool_bytes)."""
    return formulas.max_concurrency(formulas.kv_pool_bytes(m, u, w, o), per_seq)


def _q_sequences_on_gpu(i):
    """Sequences that fit on one GPU: max(0, floor((M u - W - O) / (bytes_per_token T))), W = P x weight bytes.

    ``gpu_bytes`` is M as CUDA reports it (``cuda_total_gib`` x 2^30), ``label_bytes`` the label read as GB.
    """
    m, u, o, bpt, t = i["gpu_bytes"], i["utilization"], i["other_bytes"], i["bytes_per_token"], i["seq_len"]
    p, wb = i["num_params"], i["weight_dtype_bytes"]
    w = formulas.weight_bytes(p, wb)
    per_seq = formulas.kv_bytes_per_sequence(bpt, t)
    raw = _sequences_on_gpu(m, u, w, o, per_seq)
    expected = max(0, raw)

    def fit(**changed):     # the count with one input changed, negative counts kept (they are slips too)
        args = dict(m=m, u=u, w=w, o=o, per_seq=per_seq)
        args.update(changed)
        return max(0, _sequences_on_gpu(**args))

    slips = []
    if i.get("label_bytes"):
        slips.append(("label_memory", fit(m=i["label_bytes"])))
        slips.append(("label_memory+gb_for_gib", fit(m=i["label_bytes"] * GiB / GB)))
    slips += [("gb_for_gib@down", fit(m=m * GB / GiB)),
              ("ignored_utilization", fit(u=1)),
              ("utilization_after_weights", max(0, formulas.max_concurrency(math.floor((m - w - o) * u), per_seq))),
              ("ignored_other_bytes", fit(o=0)),
              ("weights_missing", fit(w=0))]
    for other in (1, 2, 4):
        if other != wb:
            slips.append((f"weight_dtype_ignored@{other}", fit(w=formulas.weight_bytes(p, other))))
    pool = formulas.kv_pool_bytes(m, u, w, o)
    slips += [("tokens_not_sequences", max(0, formulas.max_concurrency(pool, bpt))),
              ("ceil_not_floor", max(0, math.ceil(pool / per_seq))),
              ("ceil_not_floor@round", max(0, round(pool / per_seq)))]
    slips.append(("negative_count", raw))     # the right count itself (dropped below) unless it is negative
    return expected, [(k, v) for k, v in slips if v != expected]


def _q_kv_head_sharing(i):
    """(H / K, extra bytes per token from counting H instead of K): (H // K, 2 L (H - K) D b).

    ``kv_heads`` is K as the config resolves it (absent or null: K = H); ``kv_field_absent`` says the
    config had no value for it, where reading the absence as one KV head (MQA) is the slip.
    """
    L, H, K, D, b = i["layers"], i["num_heads"], i["kv_heads"], i["head_dim"], i["dtype_bytes"]
    group = H // K
    with_h, with_k = (formulas.kv_bytes_per_token(L, h, D, b) for h in (H, K))
    expected = (group, with_h - with_k)
    slips = [("inverted_ratio", (K / H, with_h - with_k)), ("inverted_ratio", (K // H, with_h - with_k))]
    if i.get("kv_field_absent"):
        slips.append(("absent_as_mqa", (H, with_h - formulas.kv_bytes_per_token(L, 1, D, b))))
    slips += [("inflated_not_extra", (group, with_h)), ("real_not_extra", (group, with_k))]
    # the slips of bytes per token, made in both counts alike
    on_h = _token_slips(dict(i, kv_heads=H))     # H heads both ways: no query-head slip in it
    on_k = [(k, v) for k, v in _token_slips(i) if not k.startswith("query_heads")]
    for (key, wrong_h), (_, wrong_k) in zip(on_h, on_k):
        slips.append((key, (group, wrong_h - wrong_k)))
    return expected, [(k, v) for k, v in slips if v != expected]


QUANTITIES.update({
    "sequences_on_gpu": _q_sequences_on_gpu,
    "kv_head_sharing": _q_kv_head_sharing,
})


# --- generic slips: every numeric exercise gets them, from its expected value and unit alone -----
# (``variants`` appends them after a quantity's own slips; a new exercise needs no code for them)
SLIPS.update({
    "off_by_one": "it is off by exactly one: check which way the rule rounds (floor or ceil, or round) and "
                  "whether the count includes its first or last item.",
    "ms_for_seconds": "the answer looks like milliseconds; the question asks for seconds.",
    "per_node_not_per_gpu": "that is {gpus} GPUs' worth (x {gpus}); the question asks for one GPU's share.",
    "per_gpu_not_per_node": "that is one GPU's share (/ {gpus}); the question asks for all {gpus} GPUs together.",
    "blocks_for_tokens": "that looks like a block count (tokens / block_size = {block_size}); the question asks for "
                         "tokens.",
    "bytes_for_tokens": "that looks like bytes (tokens x {bytes_per_token:,} B per token); the question asks for "
                        "tokens.",
    "sequences_for_nodes": "that counts sequences (the {users:,} users), not nodes.",
    "tb_for_tib": "you mixed TB (10^12) and TiB (2^40): a 10.0% error.",
    "kb_for_kib": "you mixed KB (10^3) and KiB (2^10): a 2.4% error.",
    "answer_in_mib": "the answer looks like MiB (bytes / 2^20); the question asks for bytes.",
    "answer_in_mb": "the answer looks like MB (bytes / 10^6); the question asks for bytes.",
    "answer_in_tib": "the answer looks like TiB (bytes / 2^40); the question asks for bytes.",
    "answer_in_tb": "the answer looks like TB (bytes / 10^12); the question asks for bytes.",
})
GENERAL.update({
    "off_by_one": "it is off by exactly one: check the rounding direction and the first and last item.",
    "ms_for_seconds": "the answer looks like milliseconds; return seconds.",
    "per_node_not_per_gpu": "that is several GPUs' worth; the question asks for one GPU's share.",
    "per_gpu_not_per_node": "that is one GPU's share; the question asks for all the GPUs together.",
    "blocks_for_tokens": "that looks like a block count; return tokens.",
    "bytes_for_tokens": "that looks like bytes; return tokens.",
    "sequences_for_nodes": "that counts sequences, not nodes.",
    "tb_for_tib": "you mixed TB (10^12) and TiB (2^40).",
    "kb_for_kib": "you mixed KB (10^3) and KiB (2^10).",
    "answer_in_mib": "the answer looks like MiB; return bytes.",
    "answer_in_mb": "the answer looks like MB; return bytes.",
    "answer_in_tib": "the answer looks like TiB; return bytes.",
    "answer_in_tb": "the answer looks like TB; return bytes.",
})

#: Generic slips that describe the answer rather than a rule applied to every case: a right answer on
#: another case does not rule them out (an off-by-one shows at one edge and not elsewhere).
DESCRIPTIVE = frozenset({"off_by_one"})

#: The binary-prefix mix-ups, as (slip key, decimal unit, binary unit).
_PREFIX_MIXES = (("kb_for_kib", 10**3, 2**10), ("gb_for_gib", GB, GiB), ("tb_for_tib", 10**12, 2**40))
PREFIX_MIX_KEYS = frozenset(key for key, _, _ in _PREFIX_MIXES)
_BYTE_UNITS = (("answer_in_kib", KiB), ("answer_in_kb", KB), ("answer_in_mib", 2**20), ("answer_in_mb", 10**6),
               ("answer_in_gib", GiB), ("answer_in_gb", GB), ("answer_in_tib", 2**40), ("answer_in_tb", 10**12))


def _gpu_count(inputs: dict) -> int:
    """The GPUs an exercise spreads over: its TP degree, else a node's GPUs (1 when it has neither)."""
    tp = inputs.get("tp")
    if isinstance(tp, int) and tp > 1:
        return tp
    g = inputs.get("gpus_per_node")
    return g if isinstance(g, int) and g > 1 else 1


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
    g = _gpu_count(inputs)
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
            if not _close(v, expected, 1e-9) and not any(_same(v, t) for t in taken)]


def _same(a, b) -> bool:
    try:
        return _close(a, b, 1e-9)
    except TypeError:
        return False


# --- topic slips learners make (issue 38): appended, the entries above are unchanged -------------------
SLIPS.update({
    "tp_floor_missing": "with tp = {tp} > KV heads = {kv_heads}, kv_heads // tp is 0: each GPU keeps at least one "
                        "whole KV head, max(1, kv_heads // tp).",
    "reserve_times_tp": "the reserve ({reserve_bytes:,} B) is for each GPU already: subtract it once per GPU, do not "
                        "multiply it by tp.",
    "mtp_layer_counted": "you counted the multi-token-prediction layer (num_nextn_predict_layers = {mtp_layers}); the "
                         "cache is sized over num_hidden_layers = {layers}.",
    "qk_head_dim_added": "you added the query/key head width (qk_nope_head_dim + qk_rope_head_dim) to the latent; the "
                         "cache holds the latent ({latent_dim}) and the RoPE key alone ({rope_dim}).",
    "window_not_capped": "a sequence shorter than the window ({sliding_window} tokens) holds only its own tokens in a "
                         "sliding-window layer: min(seq_len, window), not the whole window.",
    "paged_floor_not_ceil": "the paged policy allocates ceil(held / block_size) blocks, never fewer: a partial last "
                            "block is a whole block allocated (you took the floor).",
    "oracle_extra_slot": "the oracle reserves exactly prompt + output slots; the first generated token is one of the "
                         "output's, so there is no extra slot for it.",
    "target_ms_as_seconds": "the ITL target is in milliseconds ({itl_target_ms} ms = {itl_target_ms} / 1000 s): you "
                            "used it as seconds.",
    "weights_not_subtracted": "the weights are missing: every step reads them (W / tp per GPU) before any cache, so "
                              "take their read time out of the target first.",
    "partial_block_rounded_up": "a partial last block is never shared: round the prompt down to whole blocks of "
                                "{block_size} tokens (floor), not up.",
    "tokens_as_blocks": "this log prints tokens; you converted them to blocks ({wrong_value}). Return the count as "
                        "printed.",
    "hex_not_bytes": "the key came back as hex text (.hex()); return the bytes, not .hex(): the chapter prints keys in "
                     "hex only to show them.",
    "budget_rounded_down": "the budget gpu_memory_bytes x utilization is rounded up to a whole byte (ceil, as vLLM "
                           "does), not down: here the byte it loses costs a whole sequence.",
    "ceil_as_floor_plus_one": "users that fill a whole number of nodes need exactly that many: users // per_node + 1 "
                              "adds a node; take the ceiling, -(-users // per_node).",
    "spike_float_noise": "the spiked node count is a whole number here, but floating point stores the product a hair "
                         "above it, so math.ceil adds a node: round the product (say to 9 decimals) before rounding up.",
    "gib_as_gb": "the log prints GiB (2^30 bytes); you converted the figure to GB ({wrong_value:.4g}, x 2^30 / 10^9). "
                 "Return it as printed, in GiB.",
})
GENERAL.update({
    "tp_floor_missing": "with more GPUs than KV heads, kv_heads // tp is 0: each GPU keeps at least one KV head.",
    "reserve_times_tp": "the reserve is per GPU already: do not multiply it by tp.",
    "mtp_layer_counted": "the multi-token-prediction layer is counted; size the cache over num_hidden_layers.",
    "qk_head_dim_added": "the query/key head width is added to the latent; the cache holds latent + RoPE key.",
    "window_not_capped": "a sequence shorter than the window holds only its own tokens in a windowed layer.",
    "paged_floor_not_ceil": "the paged policy allocates ceil(held / block_size) blocks, not the floor.",
    "oracle_extra_slot": "the oracle reserves exactly prompt + output slots, no extra one.",
    "target_ms_as_seconds": "the ITL target is in milliseconds, used as seconds.",
    "weights_not_subtracted": "the weights' read time is not taken out of the target.",
    "hex_not_bytes": "return the key's bytes, not .hex() text.",
    "tokens_as_blocks": "the log prints tokens: return the count as printed.",
    "gib_as_gb": "the log prints GiB: return the figure as printed, not converted to GB.",
    "budget_rounded_down": "the budget M x u is rounded up to a whole byte, not down.",
    "ceil_as_floor_plus_one": "users that fill whole nodes need exactly that many: take the ceiling, not floor + 1.",
    "spike_float_noise": "a whole spiked node count gained a node from floating-point noise: round the product "
                         "before the ceiling.",
    "partial_block_rounded_up": "a partial last block is not shared: round down to whole blocks, not up.",
})


SLIPS.update({
    "speedup_inverted": "the speedup is upside down: divide the bf16 step time by the fp8 one (a number above 1).",
    "contexts_swapped": "the two speedups are swapped: the first is at the short context, the second at the long one.",
})
GENERAL.update({
    "speedup_inverted": "the speedup is upside down: bf16 step time / fp8 step time.",
    "contexts_swapped": "the two speedups are swapped (short context first).",
})


def _q_fp8_speedups(i):
    """(speedup at the short context, at the long one) of an fp8 cache over bf16: step(2 B) / step(1 B),
    step = W + bytes_per_token x T x B (the weights stay bf16, read in full every step)."""
    w, b = i["weight_bytes"], i["batch_size"]

    def speedup(context, weights=w, batch=b):
        step = [weights + formulas.kv_bytes_per_token(i["layers"], i["kv_heads"], i["head_dim"], d) * context * batch
                for d in (2, 1)]
        return step[0] / step[1]

    contexts = (i["short_context"], i["long_context"])
    expected = tuple(speedup(t) for t in contexts)
    slips = [("kv_only_step", tuple(speedup(t, weights=0) for t in contexts)),
             ("speedup_inverted", tuple(1 / x for x in expected)),
             ("contexts_swapped", expected[::-1]),
             ("missing_batch", tuple(speedup(t, batch=1) for t in contexts))]
    return expected, [(k, v) for k, v in slips if not _close(v, expected, 1e-9)]


QUANTITIES.update({"fp8_speedups": _q_fp8_speedups})


# --- serving drills beyond the cache size (issue 35 §1, kvlib.serving): appended, the entries above are unchanged --
SLIPS.update({
    "prefill_missing_factor_2": "a multiply-add is 2 FLOPs: a prefill does 2 x P x prompt tokens FLOPs in its "
                                "linear layers, not P x tokens.",
    "ignored_mfu": "the MFU ({mfu:g}) is not applied: a prefill reaches only that share of the peak FLOP/s, so it "
                   "takes longer than FLOPs / peak.",
    "mfu_multiplied": "the MFU works the wrong way round: reaching only {mfu:g} of the peak makes the prefill "
                      "longer (divide by the MFU, do not multiply).",
    "moe_total_params": "a mixture of experts runs only its active parameters on each token ({num_params:,}), not "
                        "all {total_params:,}.",
    "ridge_no_factor_2": "each weight byte read does 2 FLOPs per sequence per {dtype_bytes:g} bytes of weight: the "
                         "intensity is 2 B / b, so the batch is ridge x b / 2.",
    "ridge_as_batch": "the ridge point is FLOPs per byte, not a batch: with {dtype_bytes:g}-byte weights a "
                      "sequence adds 2 / b FLOP per weight byte, so the batch is ridge x b / 2.",
    "batch_rounded_down": "the first batch that reaches the ridge is the ceiling: one sequence fewer stays below it.",
    "per_replica_not_per_gpu": "that is the whole replica's rate; it runs on {tp} GPUs, so per GPU divide by {tp}.",
    "batch_rate_for_user": "that is the batch's rate; one user gets one token per step: 1 / step time.",
    "chunk_ignored": "the prefill chunk ({chunk_tokens:,} tokens) is left out: its FLOPs share the step with the "
                     "decodes, and every decode waits for the step.",
    "decodes_not_in_flops": "the {batch_size} decode tokens are left out of the step's FLOPs: a step computes "
                            "every token it carries, chunk and decodes.",
    "sum_not_max": "reads and compute overlap in one step: the step takes the longer of the two (the roofline), "
                   "not their sum.",
    "batching_inverted": "the ratio is upside down: continuous batching delivers more tokens per step than a "
                         "static batch (a number above 1).",
    "static_rate_not_speedup": "that is the static batch's tokens per step; divide the slots kept full by "
                               "continuous batching by it for the speed-up.",
    "mean_for_max": "a static batch runs as long as its longest output, not its average one.",
    "hit_not_miss": "that is the time of the cached tokens, which the cache skips; the prefill computes the rest "
                    "of the prompt.",
    "draft_kv_missing": "the draft model keeps its own KV cache for every sequence ({batch_size} x {seq_len:,} "
                        "tokens): add it to its weights.",
    "draft_weights_missing": "the draft model's weights are missing: they sit on the GPU beside its cache.",
    "draft_cost_ignored": "that is the tokens per verification; each step also runs {draft_tokens} draft steps, so "
                          "divide by gamma x c + 1.",
    "no_bonus_token": "the target's own token comes with every verification: expected tokens are "
                      "(1 - alpha^(gamma + 1)) / (1 - alpha), counting it.",
    "acceptance_linear": "acceptance stops at the first rejected token: the expected count is the geometric sum "
                         "(1 - alpha^(gamma + 1)) / (1 - alpha), not 1 + gamma x alpha.",
    "kv_left_out": "at batch 1 the step also reads the sequence's cache, which quantizing the weights does not "
                   "shrink: (W + KV) / (W_q + KV), not W / W_q.",
    "quant_ratio_inverted": "the ratio is upside down: the quantized step is the faster one (a number above 1).",
    "ring_factor_missing": "a ring all-reduce sends 2 (t - 1) / t of the message from each GPU (reduce-scatter, then "
                           "all-gather), not the message once.",
    "one_allreduce_per_layer": "each layer all-reduces twice under tensor parallelism: after attention and after "
                               "the MLP.",
    "all_gpus_not_one": "that is what all {tp} GPUs send together; the question asks for one GPU.",
    "allreduce_layers_missing": "every one of the {layers} layers all-reduces: multiply by them.",
    "hours_not_seconds": "the price is per hour and the rate per second: an hour has 3,600 seconds.",
    "price_of_one_gpu": "the replica runs on {gpus} GPUs: pay for all of them.",
    "per_token_not_million": "that is the cost of one token; the question asks for a million.",
    "per_thousand_not_million": "that is the cost of a thousand tokens; the question asks for a million.",
})
GENERAL.update({
    "prefill_missing_factor_2": "a multiply-add is 2 FLOPs: 2 x P x tokens.",
    "ignored_mfu": "the MFU is not applied.",
    "mfu_multiplied": "divide by the MFU, do not multiply.",
    "moe_total_params": "a mixture of experts computes with its active parameters only.",
    "ridge_no_factor_2": "the intensity is 2 B / b FLOP per byte: the batch is ridge x b / 2.",
    "ridge_as_batch": "the ridge point is FLOP per byte, not a batch.",
    "batch_rounded_down": "round the batch up: the first batch that reaches the ridge.",
    "per_replica_not_per_gpu": "that is the replica's rate: divide by its GPUs.",
    "batch_rate_for_user": "that is the batch's rate, not one user's.",
    "chunk_ignored": "the prefill chunk is left out of the step.",
    "decodes_not_in_flops": "the decode tokens are left out of the step's FLOPs.",
    "sum_not_max": "the step takes the longer of reads and compute, not their sum.",
    "batching_inverted": "the ratio is upside down.",
    "static_rate_not_speedup": "that is the static batch's tokens per step, not the speed-up.",
    "mean_for_max": "a static batch runs as long as its longest output.",
    "hit_not_miss": "that is the cached part's time, not the rest's.",
    "draft_kv_missing": "the draft's own KV cache is missing.",
    "draft_weights_missing": "the draft's weights are missing.",
    "draft_cost_ignored": "the draft steps' cost is missing.",
    "no_bonus_token": "the target's own token per verification is missing.",
    "acceptance_linear": "the expected count is a geometric sum.",
    "kv_left_out": "the cache read is left out of the ratio.",
    "quant_ratio_inverted": "the ratio is upside down.",
    "ring_factor_missing": "a ring all-reduce sends 2 (t - 1) / t of the message.",
    "one_allreduce_per_layer": "two all-reduces per layer, not one.",
    "all_gpus_not_one": "that is all GPUs together, not one.",
    "allreduce_layers_missing": "multiply by the layers.",
    "hours_not_seconds": "an hour has 3,600 seconds.",
    "price_of_one_gpu": "pay for every GPU of the replica.",
    "per_token_not_million": "that is one token's cost, not a million's.",
    "per_thousand_not_million": "that is a thousand tokens' cost, not a million's.",
})


def _serving():
    from kvlib import serving
    return serving


def _q_ttft_ms(i):
    """Compute-bound time to first token [ms]: 2 P T_p / (eta F) x 1000 (serving.prefill_seconds)."""
    sv = _serving()
    p, t, f, mfu = i["num_params"], i["prompt_tokens"], i["peak_flop_per_s"], i["mfu"]

    def ms(params=p, tokens=t, util=mfu):
        return sv.prefill_seconds(params, tokens, f, util) * 1e3

    expected = ms()
    slips = [("prefill_missing_factor_2", expected / 2), ("ignored_mfu", ms(util=1)),
             ("mfu_multiplied", expected * mfu * mfu), ("seconds_for_ms", expected / 1e3)]
    if i.get("total_params") and i["total_params"] != p:
        slips.append(("moe_total_params", ms(params=i["total_params"])))
    return expected, slips


def _q_ridge_batch(i):
    """First batch whose decode step reaches the ridge: ceil(F / BW x b / 2) (serving.ridge_batch)."""
    from fractions import Fraction
    sv = _serving()
    f, bw, b = i["peak_flop_per_s"], i["bandwidth_bytes_per_s"], i["dtype_bytes"]
    expected = sv.ridge_batch(f, bw, b)
    exact = Fraction(f) * Fraction(b) / (2 * Fraction(bw))
    slips = [("ridge_no_factor_2", sv.ridge_batch(f, bw, 2 * b))]
    if b != 2:      # with 2-byte weights the ridge is the batch itself: no slip
        slips += [("ridge_as_batch", math.ceil(Fraction(f, bw))), ("ridge_as_batch", math.floor(Fraction(f, bw)))]
    slips += [("batch_rounded_down", math.floor(exact)), ("batch_rounded_down", round(exact))]
    return expected, [(k, v) for k, v in slips if v != expected]


def _q_decode_rate(i):
    """Decode tokens/s, one user's (``per`` 'user') or per GPU ('gpu'): 1 / step, or B / (t x step)."""
    sv = _serving()
    w, s, b, bw, tp = (i["weight_bytes"], i["kv_bytes_per_sequence_per_gpu"], i["batch_size"],
                       i["bandwidth_bytes_per_s"], i["tp"])
    per_gpu = i["per"] == "gpu"

    def rate(step):
        return sv.decode_tokens_per_s(step, b, tp) if per_gpu else sv.decode_tokens_per_s(step)

    step = sv.tp_decode_step_seconds(w, s, b, bw, tp)
    expected = rate(step)
    slips = [("weights_not_split", rate(sv.tp_decode_step_seconds(w * tp, s, b, bw, tp))),
             ("kv_only_step", rate(b * s / bw)), ("weights_only_step", rate(sv.tp_decode_step_seconds(w, 0, b, bw, tp)))]
    if i.get("kv_bytes_per_sequence"):
        slips.append(("total_not_per_gpu", rate(sv.tp_decode_step_seconds(w, i["kv_bytes_per_sequence"], b, bw, tp))))
    if per_gpu:
        slips += [("per_replica_not_per_gpu", sv.decode_tokens_per_s(step, b)),
                  ("per_sequence_rate", sv.decode_tokens_per_s(step)),
                  ("missing_batch", sv.decode_tokens_per_s(sv.tp_decode_step_seconds(w, s, 1, bw, tp), b, tp))]
    else:
        slips += [("batch_rate_for_user", sv.decode_tokens_per_s(step, b)),
                  ("batch_rate_for_user", sv.decode_tokens_per_s(step, b, tp)),
                  ("missing_batch", sv.decode_tokens_per_s(sv.tp_decode_step_seconds(w, s, 1, bw, tp)))]
    return expected, [(k, v) for k, v in slips if not _close(v, expected, 1e-9)]


def _q_chunked_itl_ms(i):
    """ITL of a step carrying B decodes and a C-token chunk [ms]: max((W + KV) / BW, 2 P (B + C) / (eta F))."""
    sv = _serving()
    w, kv, p, b, c = i["weight_bytes"], i["kv_bytes"], i["num_params"], i["batch_size"], i["chunk_tokens"]
    bw, f, mfu = i["bandwidth_bytes_per_s"], i["peak_flop_per_s"], i["mfu"]

    def ms(tokens=b + c, util=mfu):
        return sv.mixed_step_seconds(w, kv, p, tokens, bw, f, util) * 1e3

    expected = ms()
    slips = [("chunk_ignored", ms(tokens=b)), ("decodes_not_in_flops", ms(tokens=c)),
             ("sum_not_max", ((w + kv) / bw + sv.prefill_seconds(p, b + c, f, mfu)) * 1e3),
             ("ignored_mfu", ms(util=1)), ("mfu_multiplied", ms(util=1 / mfu)),
             ("seconds_for_ms", expected / 1e3)]
    return expected, [(k, v) for k, v in slips if v is not None and not _close(v, expected, 1e-9)]


def _q_batching_speedup(i):
    """Continuous over static batching, tokens per step: B max(o) / sum(o) (serving.continuous_batching_speedup)."""
    sv = _serving()
    outputs = tuple(i["output_tokens"])
    expected = sv.continuous_batching_speedup(outputs)
    slips = [("batching_inverted", 1 / expected), ("static_rate_not_speedup", sv.static_batch_tokens_per_step(outputs)),
             ("mean_for_max", 1.0)]
    return expected, [(k, v) for k, v in slips if not _close(v, expected, 1e-9)]


def _q_idle_slot_steps(i):
    """Slot-steps a static batch leaves idle: B max(o) - sum(o) (finished sequences wait for the longest)."""
    outputs = tuple(i["output_tokens"])
    expected = len(outputs) * max(outputs) - sum(outputs)
    slips = [("tokens_not_waste", sum(outputs)), ("allocated_not_waste", len(outputs) * max(outputs)),
             ("mean_for_max", 0)]
    return expected, [(k, v) for k, v in slips if v != expected]


def _q_cached_ttft_ms(i):
    """TTFT with a prefix cache [ms]: 2 P (T_p - floor(S / bs) bs) / (eta F) x 1000."""
    sv = _serving()
    p, t, s, bs, f, mfu = (i["num_params"], i["prompt_tokens"], i["shared_tokens"], i["block_size"],
                           i["peak_flop_per_s"], i["mfu"])
    hit = sv.prefix_hit_tokens(s, bs)

    def ms(tokens, util=mfu):
        return sv.prefill_seconds(p, tokens, f, util) * 1e3

    expected = ms(t - hit)
    slips = [("partial_block_shared", ms(t - s)), ("no_cache", ms(t)), ("hit_not_miss", ms(hit)),
             ("ignored_mfu", ms(t - hit, util=1)), ("prefill_missing_factor_2", expected / 2),
             ("mfu_multiplied", expected * mfu * mfu), ("seconds_for_ms", expected / 1e3)]
    return expected, [(k, v) for k, v in slips if not _close(v, expected, 1e-9)]


def _q_spec_extra_bytes(i):
    """Bytes a draft model adds: W_draft + 2 L K D b (the draft's) x T x B (serving.speculative_extra_bytes)."""
    sv = _serving()
    w, t, b = i["draft_weight_bytes"], i["seq_len"], i["batch_size"]
    bpt = _kv_token(**i)
    expected = sv.speculative_extra_bytes(w, bpt, t, b)
    slips = [("draft_kv_missing", w), ("draft_weights_missing", expected - w),
             ("missing_batch", sv.speculative_extra_bytes(w, bpt, t, 1))]
    slips += [(key, sv.speculative_extra_bytes(w, wrong, t, b)) for key, wrong in _token_slips(i) if wrong]
    return expected, [(k, v) for k, v in slips if v != expected] + _unit_slips(expected)


def _q_spec_speedup(i):
    """Speculative decoding's speed-up: E / (gamma c + 1), c = W_draft / W_target (serving.speculative_speedup)."""
    sv = _serving()
    a, g = i["acceptance"], i["draft_tokens"]
    c = i["draft_weight_bytes"] / i["weight_bytes"]
    e = sv.speculative_expected_tokens(a, g)
    expected = sv.speculative_speedup(a, g, c)
    slips = [("draft_cost_ignored", e), ("no_bonus_token", (e - 1) / (g * c + 1)),
             ("acceptance_linear", (1 + g * a) / (g * c + 1)), ("acceptance_linear", 1 + g * a)]
    return expected, [(k, v) for k, v in slips if not _close(v, expected, 1e-9)]


def _q_quant_speedup(i):
    """Batch-1 speed-up of weight-only quantization: (W + KV) / (W_q + KV) (serving.weight_only_speedup)."""
    sv = _serving()
    w, wq, kv = i["weight_bytes"], i["quant_weight_bytes"], i["kv_bytes"]
    expected = sv.weight_only_speedup(w, wq, kv)
    slips = [("kv_left_out", sv.weight_only_speedup(w, wq, 0)), ("quant_ratio_inverted", 1 / expected),
             ("kv_left_out", 16 / i["bits_per_weight"])]
    return expected, [(k, v) for k, v in slips if not _close(v, expected, 1e-9)]


def _q_allreduce_bytes(i):
    """Bytes each GPU sends per step: L x 2 x 2 (t - 1) / t x tokens x d x b (serving.tp_allreduce_bytes_per_step)."""
    sv = _serving()
    L, n, d, b, tp = i["layers"], i["tokens"], i["hidden_size"], i["dtype_bytes"], i["tp"]
    expected = sv.tp_allreduce_bytes_per_step(L, n, d, b, tp)
    message = n * d * b
    slips = [("ring_factor_missing", L * 2 * message), ("one_allreduce_per_layer", formulas.exact_div(expected, 2)),
             ("all_gpus_not_one", expected * tp), ("allreduce_layers_missing", formulas.exact_div(expected, L)),
             ("bits_not_bytes", expected * 8), ("ignored_dtype_bytes@4", expected * 2)]
    return expected, [(k, v) for k, v in slips if v != expected] + _unit_slips(expected)


def _q_cost_per_million(i):
    """Dollars per million tokens: C_h x gpus / (3600 x tokens/s) x 10^6 (serving.cost_per_million_tokens)."""
    sv = _serving()
    price, gpus = i["price_per_gpu_hour"], i["gpus"]
    if "tokens_per_s" in i:
        rate = i["tokens_per_s"]
        rates = []
    else:    # from a stated step: B tokens every step_ms
        rate = i["batch_size"] / (i["step_ms"] / 1e3)
        rates = [("per_sequence_rate", sv.cost_per_million_tokens(price, gpus, 1 / (i["step_ms"] / 1e3)))]
    expected = sv.cost_per_million_tokens(price, gpus, rate)
    slips = [("hours_not_seconds", expected * 3600), ("price_of_one_gpu", sv.cost_per_million_tokens(price, 1, rate)),
             ("per_token_not_million", expected / 1e6), ("per_thousand_not_million", expected / 1e3)] + rates
    return expected, [(k, v) for k, v in slips if not _close(v, expected, 1e-9)]


QUANTITIES.update({
    "ttft_ms": _q_ttft_ms,
    "ridge_batch": _q_ridge_batch,
    "decode_rate": _q_decode_rate,
    "chunked_itl_ms": _q_chunked_itl_ms,
    "batching_speedup": _q_batching_speedup,
    "idle_slot_steps": _q_idle_slot_steps,
    "cached_ttft_ms": _q_cached_ttft_ms,
    "spec_extra_bytes": _q_spec_extra_bytes,
    "spec_speedup": _q_spec_speedup,
    "quant_speedup": _q_quant_speedup,
    "allreduce_bytes": _q_allreduce_bytes,
    "cost_per_million": _q_cost_per_million,
})


# --- rounding slips (issue 38 §2): floor for ceil, ceil for floor, round for either, from one place ---------
# A quantity whose answer is a rounded count gives its figure before the final rounding: a third element of
# its (expected, slips) pair, or an entry of UNROUNDED below (so its function stays as it is). The generic
# slips then recompute the other roundings from that figure and the expected value alone, and a check names
# them by how many units the answer is off ("1 sequence too large"), never as a percentage.
SLIPS.update({
    "floor_for_ceil": "the count is rounded up (ceil): a part of one still needs a whole one; you rounded down "
                      "(floor).",
    "ceil_for_floor": "the count is rounded down (floor): only whole ones fit; you rounded up (ceil).",
    "round_for_ceil": "the count is rounded up (ceil), not to the nearest whole number: a part of one still needs "
                      "a whole one.",
    "round_for_floor": "the count is rounded down (floor), not to the nearest whole number: only whole ones fit.",
    "floor_for_round": "the figure is rounded to the nearest whole number; you rounded down (floor).",
    "ceil_for_round": "the figure is rounded to the nearest whole number; you rounded up (ceil).",
})
GENERAL.update({
    "floor_for_ceil": "round up (ceil), not down (floor).",
    "ceil_for_floor": "round down (floor), not up (ceil).",
    "round_for_ceil": "round up (ceil), not to the nearest whole number.",
    "round_for_floor": "round down (floor), not to the nearest whole number.",
    "floor_for_round": "round to the nearest whole number, not down (floor).",
    "ceil_for_round": "round to the nearest whole number, not up (ceil).",
})

#: The generic rounding slips, by the rounding the answer needs: (slip key, the rounding the learner took).
_ROUNDINGS = {"ceil": (("floor_for_ceil", math.floor), ("round_for_ceil", round)),
              "floor": (("ceil_for_floor", math.ceil), ("round_for_floor", round)),
              "round": (("floor_for_round", math.floor), ("ceil_for_round", math.ceil))}
ROUNDING_KEYS = frozenset(key for ways in _ROUNDINGS.values() for key, _ in ways)
#: Slips a check names by the count the answer is off (generic ones, and the chapters' own rounding slips).
COUNT_SLIPS = DESCRIPTIVE | ROUNDING_KEYS | {"ceil_not_floor", "floor_nodes", "crossover_rounded_down",
                                             "paged_floor_not_ceil", "partial_block_rounded_up",
                                             "spike_not_rounded_up", "spike_float_noise", "ceil_as_floor_plus_one",
                                             "budget_rounded_down"}


def _exact(a, b):
    """a / b, exactly when both are ints (a float division could put an exact count a hair off a whole one)."""
    if b == 0:
        return None
    return Fraction(a, b) if type(a) is int and type(b) is int else a / b


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


def _per_gpu_token(i):
    return _kv_token(**dict(i, kv_heads=formulas.kv_heads_per_gpu(i["kv_heads"], i["tp"])))


#: quantity -> (its final rounding, f(inputs): the figure before it), for the generic rounding slips.
UNROUNDED = {
    "max_concurrency": ("floor", lambda i: _exact(i["budget_bytes"], _kv_token(**i) * i["seq_len"])),
    "pool_tokens": ("floor", lambda i: _exact(i["budget_bytes"], _kv_token(**i))),
    "kv_pool_tokens": ("floor", lambda i: _exact(formulas.kv_pool_bytes(i["gpu_bytes"], i["utilization"],
                                                                        i["weight_bytes"], i["other_bytes"]),
                                                 i["bytes_per_token"])),
    "max_concurrency_per_gpu": ("floor", lambda i: _exact(
        i["cuda_memory_bytes"] - formulas.weight_bytes_per_gpu(i["weight_bytes"], i["tp"]) - i["reserve_bytes"],
        _per_gpu_token(i) * i["seq_len"])),
    "crossover_context_tokens": ("ceil", lambda i: _exact(i["weight_bytes"], _kv_token(**i) * i["batch_size"])),
    "sequences_per_gpu_by_memory": ("floor", lambda i: _exact(formulas.kv_pool_bytes(
        i["gpu_bytes"], i["utilization"], formulas.weight_bytes_per_gpu(i["weight_bytes"], i["tp"]),
        i["other_bytes"], round_budget_up=True), i["kv_bytes_per_sequence_per_gpu"])),
    "nodes_for_memory": ("ceil", lambda i: _exact(i["users"], math.floor(i["pool_bytes_per_gpu"]
                                                                         / (_per_gpu_token(i) * i["seq_len"])))),
}
UNROUNDED["pool_tokens_reported"] = UNROUNDED["kv_pool_tokens"]


# --- choices recomputed with a slip (issue 38 §3): ch05 Q5 and ch06 Q5 ---------------------------------------
# A choice exercise's slips are the same as a number's: the choice recomputed with the slip applied. One case
# cannot tell them apart (a wrong choice is the other option), so a check names a slip only where it gives the
# learner's choice on every failing case and the right one on every passing case.
SLIPS.update({
    "smaller_read_chosen": "the larger of the two reads is the one to shrink: the weights (W), or the cache "
                           "(batch x context x bytes per token); you picked the smaller one.",
    "attention_term_missing": "recomputing also pays the attention term, 2 L H (2 D) T (T + 1) / 2 FLOPs, which "
                              "grows with T squared; you counted only the linear 2 P T.",
    "mfu_ignored": "the GPU achieves mfu x peak FLOP/s ({mfu} x peak), not its peak: recomputing is slower than "
                   "you took it.",
    "fetch_overhead_ignored": "a fetch pays its fixed cost ({fetch_overhead_s} s: lookup, scheduling of the load) on "
                              "top of the copy.",
    "link_as_bits": "link_bytes_per_s is in bytes per second; you took it as bits (divided the bytes by it x 8 "
                    "or multiplied them by 8).",
    "choice_inverted": "the choice is the other way round: fetch when fetch_s <= recompute_s, else recompute.",
    "always_quantise_weights": "you answered 'quantise_weights' whatever the workload: compare the two reads of "
                               "each (the weights, and batch x context x bytes per token of cache); the larger one "
                               "is what to shrink.",
    "always_shrink_kv_cache": "you answered 'shrink_kv_cache' whatever the workload: compare the two reads of each "
                              "(the weights, and batch x context x bytes per token of cache); the larger one is what "
                              "to shrink.",
    # generic to choices made by a comparison: only the cases exactly on the tie fail (> written for >=)
    "tie_other_way": "the tie goes the other way: at equality the text says {tie_rule}.",
})
GENERAL.update({
    "smaller_read_chosen": "the larger read (weights, or batch x context x bytes per token) is the one to shrink.",
    "attention_term_missing": "recomputing also pays the attention term, which grows with T squared.",
    "mfu_ignored": "the GPU achieves mfu x peak FLOP/s, not its peak.",
    "fetch_overhead_ignored": "a fetch pays its fixed cost on top of the copy.",
    "link_as_bits": "link_bytes_per_s is in bytes per second, not bits.",
    "choice_inverted": "the choice is the other way round: fetch when fetch_s <= recompute_s.",
    "always_quantise_weights": "the same choice whatever the workload: compare the two reads; shrink the larger.",
    "always_shrink_kv_cache": "the same choice whatever the workload: compare the two reads; shrink the larger.",
    "tie_other_way": "the tie goes the other way: at exact equality the text's rule picks the other option (read "
                     "its >= or <=).",
})

#: A choice made by a comparison: what the text says at a tie (``tie_other_way``'s words), by quantity.
TIE_RULES = {
    "optimisation_choice": "the weights are at least the cache read (W >= batch x context x bytes per token), "
                           "so weights exactly equal to it call for 'quantise_weights'",
    "fetch_choice": "fetch when fetch_s <= recompute_s: a tie fetches",
}


def _q_optimisation_choice(i):
    """'quantise_weights' while the weights are at least the cache's read (W >= bpt T B), else 'shrink_kv_cache'
    (kvlib.roofline.regime): each slip recomputes the cache's read the slipped way."""
    w, t, b = i["weight_bytes"], i["seq_len"], i["batch_size"]
    options = ("quantise_weights", "shrink_kv_cache")

    def choose(kv_read, weights=w, tie=True):
        return options[0] if weights > kv_read or (tie and weights == kv_read) else options[1]

    bpt = _kv_token(**i)
    expected = choose(bpt * t * b)
    slips = [("missing_batch", choose(bpt * t)), ("missing_seq_len", choose(bpt * b))]   # the question's own first
    slips.append(("tie_other_way", choose(bpt * t * b, tie=False)))      # > for >=: only a tie differs
    slips += [(f"always_{option}", option) for option in options]
    slips += [(key, choose(wrong * t * b)) for key, wrong in _token_slips(i) if wrong]
    slips.append(("smaller_read_chosen", options[1] if expected == options[0] else options[0]))
    return expected, slips


def _q_fetch_choice(i):
    """'fetch' when fetch_s <= recompute_s (a tie fetches), else 'recompute' (kvlib.offload.fetch_or_recompute):
    fetch_s = overhead + T bpt / link, recompute_s = (2 P T + 2 L H (2 D) T (T + 1) / 2) / (mfu peak)."""
    t, bpt, link = i["tokens"], i["kv_bytes_per_token"], i["link_bytes_per_s"]
    linear = 2 * i["num_params"] * t
    attention = 2 * i["layers"] * i["num_heads"] * 2 * i["head_dim"] * t * (t + 1) // 2

    def choose(flops=linear + attention, achieved=i["mfu"] * i["peak_flop_per_s"],
               overhead=i["fetch_overhead_s"], byte_time=bpt / link, tie=True):
        fetch_s, recompute_s = overhead + t * byte_time, flops / achieved
        return "fetch" if fetch_s < recompute_s or (tie and fetch_s == recompute_s) else "recompute"

    expected = choose()
    slips = [("tie_other_way", choose(tie=False)),      # < for <=: only an exact tie differs
             ("attention_term_missing", choose(flops=linear)), ("mfu_ignored", choose(achieved=i["peak_flop_per_s"])),
             ("fetch_overhead_ignored", choose(overhead=0)), ("link_as_bits", choose(byte_time=8 * bpt / link)),
             ("choice_inverted", "recompute" if expected == "fetch" else "fetch")]
    return expected, [(k, v) for k, v in slips if i["fetch_overhead_s"] or k != "fetch_overhead_ignored"]


QUANTITIES.update({"optimisation_choice": _q_optimisation_choice, "fetch_choice": _q_fetch_choice})


# --- ch05 Q4: the agent loop's partial block rounded up (issue 38 §3) ------------------------------------------
SLIPS.update({
    "history_block_rounded_up": "a hit covers whole blocks only: the partial last block of the cached history "
                                "({block_size}-token blocks) is recomputed at the next step; you rounded the hit up "
                                "to a whole block.",
})
GENERAL.update({
    "history_block_rounded_up": "a hit covers whole blocks only: round the cached history down, not up.",
})
_agent_prefill_without_rounding_slip = QUANTITIES["agent_prefill_with_cache"]


def _q_agent_prefill_with_cache_rounded(i):
    """The agent loop's prefill tokens (above), plus the hit rounded up: step k > 1 recomputes its prompt P_k less
    ceil(H / bs) bs of the history H = S + (k - 1)(O + A) instead of floor(H / bs) bs (at most P_k)."""
    expected, slips = _agent_prefill_without_rounding_slip(i)
    s, o, a, bs = i["system_tokens"], i["observation_tokens"], i["action_tokens"], i["block_size"]
    up = s + o
    for k in range(2, i["steps"] + 1):
        prompt = s + k * o + (k - 1) * a
        up += prompt - min(-(-(s + (k - 1) * (o + a)) // bs) * bs, prompt)
    return expected, slips + ([("history_block_rounded_up", up)] if up != expected else [])


QUANTITIES["agent_prefill_with_cache"] = _q_agent_prefill_with_cache_rounded
