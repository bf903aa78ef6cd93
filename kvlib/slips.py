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
    "missing_rope": "the 64-wide decoupled RoPE key is missing: MLA caches latent ({latent_dim}) + rope ({rope_dim}) per layer.",
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
    if _is_number_tuple(answer) and _is_number_tuple(expected):   # a range: judged by its upper end
        answer, expected = answer[-1], expected[-1]
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


def _is_number_tuple(x) -> bool:
    """A tuple of plain numbers: an answer such as a (fewest, most) range, compared element by element."""
    return type(x) is tuple and len(x) > 0 and all(type(v) in (int, float) for v in x)


def _close(a, b, rel_tol) -> bool:
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
    if isinstance(inputs.get("wrong"), dict) and key in inputs["wrong"]:     # log_figure: the figure taken
        values.setdefault("wrong_value", inputs["wrong"][key])
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
    if (isinstance(answer, bool) or not isinstance(answer, (int, float))) and not _is_number_tuple(answer):
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
    if (isinstance(answer, bool) or not isinstance(answer, (int, float))) and not _is_number_tuple(answer):
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
    "tokens_not_blocks": "those are tokens (blocks x block_size = {block_size}); the question asks for blocks.",
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
    "tokens_not_blocks": "those are tokens, not blocks.",
    "total_not_per_gpu": "under tensor parallelism each rank holds only its share of the KV heads.",
})


def _q_log_figure(i):
    """A figure read from a log, as printed; ``wrong`` maps slip keys to the figures mistaken for it."""
    expected = i["printed"]
    return expected, [(key, value) for key, value in i.get("wrong", {}).items() if value != expected]


def _q_block_range(i):
    """(fewest, most) blocks a printed GiB figure allows: (lo // B, hi // B), B = L 2 max(1, K // tp) D b bs."""
    from .vllm.log import gib_window
    from .vllm.mismatch import block_bytes, block_range

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
             ("tokens_not_blocks", (expected[0] * bs, expected[1] * bs))]
    if tp > 1:
        whole = block_bytes(*geometry, bs, 1)
        slips.append(("total_not_per_gpu", (lo // whole, hi // whole)))
    slips.append(("missing_kv_factor", (lo // (b // 2), hi // (b // 2))))
    return expected, [(k, v) for k, v in slips if v != expected]


QUANTITIES.update({
    "log_figure": _q_log_figure,
    "block_range": _q_block_range,
})
