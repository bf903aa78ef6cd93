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
from dataclasses import dataclass, field

from . import formulas
from .units import GB, GiB, KB, KiB


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
    "extra_factor_2": "there is a spurious factor 2: the MLA latent replaces both K and V, so it is stored once.",
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
    "mla_split_by_tp": "the MLA latent cannot be split by head: every rank holds all of it under tensor parallelism.",
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


def _ratio_text(answer, expected) -> str:
    try:
        ratio = answer / expected
    except (ZeroDivisionError, TypeError):
        return "wrong"
    if ratio <= 0:
        return "wrong sign or zero"
    big = ratio if ratio >= 1 else 1 / ratio
    word = "too large" if ratio > 1 else "too small"
    if abs(big - round(big)) < 0.01 and round(big) >= 2:
        return f"{round(big)}x {word}"
    if big < 1.5:
        return f"{abs(ratio - 1) * 100:.1f}% {word}"
    return f"{big:.2f}x {word}"


def ratio_text(answer, expected) -> str:
    """How far ``answer`` is from ``expected`` in words: "4x too large", "7.4% too small"."""
    return _ratio_text(answer, expected)


def _close(a, b, rel_tol) -> bool:
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
            out.append(("ignored_dtype_bytes", formulas.kv_bytes_per_token(L, K, D, other)))
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
    slips.append(("ceil_not_floor", round(budget / per_seq)))
    slips.append(("gb_for_gib", formulas.max_concurrency(budget * GiB / GB, per_seq)))
    slips.append(("gb_for_gib", formulas.max_concurrency(budget * GB / GiB, per_seq)))
    slips.append(("gb_for_gib", budget / per_seq * GiB / GB))
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
    slips.append(("gb_for_gib", formulas.kv_pool_tokens(i["gpu_bytes"] * GB / GiB, *args, bpt)))
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


def _message(key: str, inputs: dict) -> str:
    if COMBINED in key:
        return "two slips at once: " + " And ".join(_message(k, inputs) for k in key.split(COMBINED))
    values = dict(inputs)
    values.setdefault("bits", 8 * inputs.get("dtype_bytes", 2))
    values.setdefault("wrong_bytes", 3 - inputs.get("dtype_bytes", 2))
    if inputs.get("hidden_size") and inputs.get("num_heads"):
        values.setdefault("derived_head_dim", inputs["hidden_size"] // inputs["num_heads"])
    if inputs.get("label_bytes"):
        values.setdefault("label_gb", f"{inputs['label_bytes'] / GB:.2f}")
        values.setdefault("cuda_gb", f"{inputs['gpu_bytes'] / GB:.2f}")
    values.setdefault("rope_dim", 64)
    try:
        return SLIPS[key].format(**values)
    except (KeyError, IndexError):
        return SLIPS[key].split(" (")[0] + "."


def message(key: str, **inputs) -> str:
    """The catalogue's words for slip ``key`` (``a+b``: both slips), filled in from ``inputs``."""
    return _message(key, inputs)


def general(key: str) -> str:
    """Slip ``key`` in general words (no numbers of the case): for hidden cases."""
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


def matching(quantity: str, answer, *, rel_tol: float = 1e-6, **inputs) -> tuple:
    """Every slip key whose recomputed value is ``answer``, in catalogue order (no duplicates)."""
    if quantity not in QUANTITIES:
        raise KeyError(f"unknown quantity {quantity!r} (known: {', '.join(QUANTITIES)})")
    if isinstance(answer, bool) or not isinstance(answer, (int, float)):
        return ()
    expected, slips = QUANTITIES[quantity](dict(inputs))
    keys = []
    for key, wrong in slips:
        if key not in keys and _matches(answer, wrong, expected, rel_tol):
            keys.append(key)
    return tuple(keys)


def diagnose(quantity: str, answer, *, rel_tol: float = 1e-6, lead: str | None = None, **inputs) -> Diagnosis:
    """Compare ``answer`` with kvlib's value of ``quantity`` and name the slip.

    ``inputs`` are the quantity's keywords (for bytes per token: layers,
    kv_heads, head_dim, dtype_bytes, and optionally num_heads and hidden_size
    so the query-head and head_dim slips can be recognised). ``lead``: the
    slip to name first when it is among the matches (a grader that found it
    consistent with every failing case).
    """
    if quantity not in QUANTITIES:
        raise KeyError(f"unknown quantity {quantity!r} (known: {', '.join(QUANTITIES)})")
    expected, slips = QUANTITIES[quantity](inputs)
    if isinstance(answer, bool) or not isinstance(answer, (int, float)):
        return Diagnosis(quantity, False, expected, answer, None,
                         f"expected a number, got {type(answer).__name__} {answer!r}.", inputs)
    if _close(answer, expected, rel_tol):
        return Diagnosis(quantity, True, expected, answer, None, "correct.", inputs)
    matches = list(matching(quantity, answer, rel_tol=rel_tol, **inputs))
    if lead in matches:
        matches.remove(lead)
        matches.insert(0, lead)
    if matches:
        slip = Slip(matches[0], _message(matches[0], inputs))
        text = f"{_ratio_text(answer, expected)}: {slip.message}"
        if len(matches) > 1:  # two slips give the same number here: name both
            text += " Or: " + _message(matches[1], inputs)
        return Diagnosis(quantity, False, expected, answer, slip, text, inputs)
    return Diagnosis(quantity, False, expected, answer, None,
                     f"{_ratio_text(answer, expected)}, and it matches no known slip: recheck each factor.",
                     inputs)


# --- quantities for the drills (kvlib.drills): appended, the entries above are unchanged ---------
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
    slips += [("ceil_not_floor", math.ceil(budget / bpt)), ("ceil_not_floor", round(budget / bpt)),
              ("gb_for_gib", math.floor(budget * GiB / GB / bpt)), ("gb_for_gib", math.floor(budget * GB / GiB / bpt))]
    return expected, [(k, v) for k, v in slips if v != expected]


def _q_crossover_context(i):
    """Context at which batch_size sequences read as many KV bytes as weights: W / (bytes_per_token B)."""
    w, b = i["weight_bytes"], i["batch_size"]
    expected = formulas.crossover_tokens(w, _kv_token(**i)) / b
    slips = [(key, w / wrong / b) for key, wrong in _token_slips(i) if wrong]
    slips += [("crossover_not_divided", expected * b), ("gb_for_gib", expected * GiB / GB),
              ("gb_for_gib", expected * GB / GiB)]
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
              ("gb_for_gib", nodes(_kv_token(**per_gpu), pool * GiB / GB)),
              ("gb_for_gib", nodes(_kv_token(**per_gpu), pool * GB / GiB))]
    return expected, [(k2, v) for k2, v in slips if v is not None and v != expected]


QUANTITIES.update({
    "block_waste_tokens": _q_block_waste_tokens,
    "pool_tokens": _q_pool_tokens,
    "crossover_context": _q_crossover_context,
    "decode_step_ms": _q_decode_step_ms,
    "nodes_for_memory": _q_nodes_for_memory,
})


# --- chapter 02 (GQA and tensor parallelism): appended, the entries above are unchanged ---------
SLIPS.update({
    "weights_not_split": "under tensor parallelism each of the {tp} GPUs holds 1/{tp} of the weights; you "
                         "subtracted all of them from one GPU.",
})
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
    slips = [("weights_not_split", seqs(memory - weights - reserve, bpt))] if tp > 1 else []
    if tp > 1:
        slips.append(("total_not_per_gpu", seqs(budget, total)))
        slips.append(("weights_not_split+total_not_per_gpu", seqs(memory - weights - reserve, total)))
    if tp > k:
        slips.append(("split_replicated", seqs(budget, total / tp)))
    h = i.get("num_heads")
    if h and h != k:
        wrong = formulas.kv_bytes_per_token(geometry[0], formulas.kv_heads_per_gpu(h, tp), *geometry[1:])
        slips.append(("query_heads", seqs(budget, wrong)))
    slips += [(key, seqs(budget, wrong)) for key, wrong in _token_slips(dict(per_gpu, num_heads=None)) if wrong]
    slips += [("ceil_not_floor", math.ceil(budget / (bpt * t))), ("ceil_not_floor", round(budget / (bpt * t))),
              ("tokens_not_sequences", seqs(budget, bpt / t)),
              ("gb_for_gib", seqs(budget * GiB / GB, bpt)), ("gb_for_gib", seqs(budget * GB / GiB, bpt))]
    return expected, [(key, v) for key, v in slips if v != expected]


QUANTITIES.update({"max_concurrency_per_gpu": _q_max_concurrency_per_gpu})
# --- chapter 03 (MLA): appended, the entries above are unchanged ------------------------------------
SLIPS.update({
    "nope_for_rope": "you added qk_nope_head_dim ({qk_nope_head_dim}) to the latent; the cached key beside it is the decoupled RoPE key, qk_rope_head_dim = {rope_dim}.",
    "query_latent": "you used q_lora_rank ({q_lora_rank}), the query's compression, which is never cached; the cache holds the KV latent, kv_lora_rank = {latent_dim}.",
})

GENERAL.update({
    "extra_factor_2": "there is a spurious factor 2: the MLA latent stands for both K and V and is stored once.",
    "missing_rope": "the decoupled RoPE key (qk_rope_head_dim) is missing: the cache holds latent + rope key per layer.",
    "mla_as_mha": "you treated MLA as ordinary attention (2 x heads x head_dim); MLA caches one latent plus one RoPE key per layer.",
    "mla_split_by_tp": "the MLA latent cannot be split by head: every rank holds all of it under tensor parallelism.",
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
    # Ordinary attention's formula on an MLA config: 2 L K D b with K the config's num_key_value_heads
    # (or the query heads) and D any head width the config suggests.
    heads = {h for h in (i.get("kv_heads"), i.get("num_heads")) if h}
    widths = {w for w in (i.get("head_dim_field"), i.get("v_head_dim"), rope,
                          (i.get("qk_nope_head_dim") or 0) + rope) if w}
    if i.get("hidden_size") and i.get("num_heads") and i["hidden_size"] % i["num_heads"] == 0:
        widths.add(i["hidden_size"] // i["num_heads"])
    for h in sorted(heads):
        for w in sorted(widths):
            out.append(("mla_as_mha", formulas.kv_bytes_per_token(L, h, w, b)))
    for other in (1, 2, 4):
        if other != b:
            out.append(("ignored_dtype_bytes", formulas.mla_bytes_per_token(L, r, rope, other)))
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
    slips += [(k, v) for k, v in _mla_config_slips(i) if k != "mla_as_mha"]
    # ordinary attention on the MLA config, split over the ranks as GQA would be
    for key, value in _mla_config_slips(i):
        if key == "mla_as_mha":
            slips.append(("mla_as_mha", value / tp))
            slips.append(("mla_as_mha", value))
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
    slips += [("gb_for_gib", formulas.kv_pool_tokens(m * GB / GiB, u, w, o, bpt)),
              ("gb_for_gib", formulas.kv_pool_tokens(m * GiB / GB, u, w, o, bpt)),
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
    slips = [("windowed_as_full", _hybrid_bytes(f + s, 0, K, D, b, t, win)),
             ("sliding_layers_dropped", _hybrid_bytes(f, 0, K, D, b, t, win)),
             ("all_layers_windowed", _hybrid_bytes(0, f + s, K, D, b, t, win)),
             ("missing_kv_factor", expected // 2)]
    H = i.get("num_heads")
    if H and H != K:
        slips.append(("query_heads", _hybrid_bytes(f, s, H, D, b, t, win)))
    for other in (1, 2, 4):
        if other != b:
            slips.append(("ignored_dtype_bytes", _hybrid_bytes(f, s, K, D, other, t, win)))
    return expected, [(k, v) for k, v in slips if v != expected] + _unit_slips(expected)


def _q_fp8_pool_tokens(i):
    """Tokens an fp8 pool holds as vLLM counts them: (A // (bs * L * 2 * K * D * 1)) * bs."""
    a, bs = i["available_bytes"], i["block_size"]
    L, K, D = i["layers"], i["kv_heads"], i["head_dim"]

    def tokens(per_token, avail=a):
        return int(avail // (bs * per_token)) * bs

    fp8 = formulas.kv_bytes_per_token(L, K, D, 1)
    expected = tokens(fp8)
    slips = [("wrong_16bit_vs_fp8", tokens(formulas.kv_bytes_per_token(L, K, D, 2))),
             ("tokens_not_blocks", a // fp8),
             ("answer_in_blocks", a // (bs * fp8)),
             ("missing_kv_factor", tokens(fp8 // 2)),
             ("missing_layers", tokens(formulas.kv_bytes_per_token(1, K, D, 1))),
             ("gb_for_gib", tokens(fp8, a * GB / GiB)), ("gb_for_gib", tokens(fp8, a * GiB / GB))]
    H = i.get("num_heads")
    if H and H != K:
        slips.append(("query_heads", tokens(formulas.kv_bytes_per_token(L, H, D, 1))))
    return expected, [(k, v) for k, v in slips if v != expected]


def allocator_waste(requests, policy, block_size, max_seq_len, *, held_extra=1, last_block=None,
                    count_reservation=True):
    """Slots allocated that hold no token at the step every request is admitted (ch04's exercise 5).

    Each request is (prompt, output); at admission it holds ``prompt + 1`` tokens. Policies as
    ``kvlib.alloc_sim``: 'max_reservation' reserves max_seq_len, 'oracle' prompt + output,
    'paged' ceil(held / block_size) blocks. The keywords recompute the chapter's slips.

    >>> allocator_waste([(10, 6), (10, 6)], "max_reservation", 4, 20), allocator_waste([(10, 6)], "paged", 4, 20)
    (18, 1)
    """
    total = 0
    for prompt, output in requests:
        held = prompt + held_extra
        if policy == "paged":
            total += (block_size - held % block_size) if last_block == "whole" else -held % block_size
        else:
            size = max_seq_len if policy == "max_reservation" else prompt + output
            total += size - held if count_reservation else size - (prompt + output)
    return total


def _q_allocator_waste(i):
    reqs, pol, bs, msl = i["requests"], i["policy"], i["block_size"], i["max_seq_len"]
    expected = allocator_waste(reqs, pol, bs, msl)
    held = sum(p + 1 for p, _ in reqs)
    slips = [("tokens_not_waste", held), ("allocated_not_waste", expected + held),
             ("prompt_without_first_token", allocator_waste(reqs, pol, bs, msl, held_extra=0))]
    if pol == "paged":
        slips.append(("paged_whole_last_block", allocator_waste(reqs, pol, bs, msl, last_block="whole")))
    else:
        slips.append(("reservation_ignored", allocator_waste(reqs, pol, bs, msl, count_reservation=False)))
    return expected, [(k, v) for k, v in slips if v != expected]


QUANTITIES.update({
    "pool_tokens_reported": _q_pool_tokens_reported,
    "hybrid_kv_bytes_per_sequence": _q_hybrid_kv_bytes_per_sequence,
    "fp8_pool_tokens": _q_fp8_pool_tokens,
    "allocator_waste": _q_allocator_waste,
})
