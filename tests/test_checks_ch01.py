"""Chapter 01's instant checks: right answers pass, each known slip gets its named message.

Reference functions are written by hand here (never through kvlib); expected values
come from kvlib inside the checks. Figures in messages: Llama 3.1 8B 131,072 B/token
([build-up] and [kv-math] section 3), gemma-2-9b head_dim 256 vs 3584/16 = 224 (its config.json).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

import kvcoach.slips
import kvlib
from autograder.checks import ch01, judge, runner
from autograder.checks import check as cell_check
from chapter_checks import passes_visible_and_hidden

SEEDS = (0, 1, 7, 2026, 123456)


# --- reference solutions, by hand -------------------------------------------
def bytes_per_token_from_config(config, dtype_bytes=2):
    def field(*names):
        for name in names:
            if config.get(name) is not None:
                return config[name]
        return None

    layers = field("num_hidden_layers", "n_layer")
    heads = field("num_attention_heads", "n_head")
    kv_heads = field("num_key_value_heads") or heads
    head_dim = field("head_dim") or field("hidden_size", "n_embd") // heads
    return 2 * layers * kv_heads * head_dim * dtype_bytes


def kv_bytes_for_sequence(layers, kv_heads, head_dim, dtype_bytes, seq_len):
    return 2 * layers * kv_heads * head_dim * dtype_bytes * seq_len


def kv_bytes_for_batch(layers, kv_heads, head_dim, dtype_bytes, seq_len, batch_size):
    return kv_bytes_for_sequence(layers, kv_heads, head_dim, dtype_bytes, seq_len) * batch_size


def sequences_that_fit(budget_bytes, layers, kv_heads, head_dim, dtype_bytes, seq_len):
    return budget_bytes // kv_bytes_for_sequence(layers, kv_heads, head_dim, dtype_bytes, seq_len)


def sequences_on_gpu(gpu, num_params, weight_dtype_bytes, utilization, other_bytes, bytes_per_token, seq_len,
                     *, memory=None, u=None, weights=None, other=None, floor=math.floor, at_least_zero=True):
    """M u - W - O over bytes per sequence, M = cuda_total_gib x 2^30; the keywords make the slips below."""
    memory = gpu["cuda_total_gib"] * 2**30 if memory is None else memory
    u = utilization if u is None else u
    weights = num_params * weight_dtype_bytes if weights is None else weights
    other = other_bytes if other is None else other
    count = floor((memory * u - weights - other) / (bytes_per_token * seq_len))
    return max(0, count) if at_least_zero else count


def kv_head_sharing(config, dtype_bytes=2):
    heads = config.get("num_attention_heads") or config["n_head"]
    kv_heads = config.get("num_key_value_heads") or heads
    true_bytes = bytes_per_token_from_config(config, dtype_bytes)
    return heads // kv_heads, true_bytes // kv_heads * (heads - kv_heads)


def _check_of(grade_id: str):
    """The test cell's ``check(grade_id, fn)``, for one exercise."""
    def check_one(fn, hidden: bool = False, seed: int | None = None) -> None:
        __tracebackhide__ = True
        cell_check(grade_id, fn, hidden=hidden, seed=seed)
    return check_one


#: ``q1`` -> the check of ch01's q1, and so on.
CHECK = {grade_id.split("_")[1]: _check_of(grade_id) for grade_id in ch01.EXERCISES}

REFERENCE = {
    "ch01_q1_bytes_per_token_from_config": (CHECK["q1"], bytes_per_token_from_config),
    "ch01_q2_kv_bytes_per_sequence": (CHECK["q2"], kv_bytes_for_sequence),
    "ch01_q3_kv_bytes_per_batch": (CHECK["q3"], kv_bytes_for_batch),
    "ch01_q4_sequences_that_fit": (CHECK["q4"], sequences_that_fit),
    "ch01_q5_sequences_on_gpu": (CHECK["q5"], sequences_on_gpu),
    "ch01_q6_kv_head_sharing": (CHECK["q6"], kv_head_sharing),
}


def fails(check, fn, **kwargs) -> str:
    with pytest.raises(AssertionError) as info:
        check(fn, **kwargs)
    return str(info.value)


# --- the contract with the pipeline ------------------------------------------
def _source_points() -> dict:
    """Points of the test cells: stated once, in the source notebook."""
    path = Path(__file__).resolve().parents[1] / "course/source/ch01_kv_formula/ch01_kv_formula.ipynb"
    cells = json.loads(path.read_text())["cells"]
    return {c["metadata"]["nbgrader"]["grade_id"]: c["metadata"]["nbgrader"]["points"] for c in cells
            if c["metadata"].get("nbgrader", {}).get("grade")}


def test_grade_ids_and_points():
    assert list(ch01.EXERCISES) == list(_source_points())
    assert _source_points() == {
        "ch01_q1_bytes_per_token_from_config": 3,
        "ch01_q2_kv_bytes_per_sequence": 1,
        "ch01_q3_kv_bytes_per_batch": 1,
        "ch01_q4_sequences_that_fit": 2,
        "ch01_q5_sequences_on_gpu": 2,
        "ch01_q6_kv_head_sharing": 2,
    }
    for gid, ex in ch01.EXERCISES.items():
        assert ex.grade_id == gid and ex.quantity in kvcoach.slips.QUANTITIES


def test_visible_q1_covers_the_config_traps():
    labels = " | ".join(c["label"] for c in ch01.EXERCISES["ch01_q1_bytes_per_token_from_config"].visible_cases)
    for name in ("Llama-3.1-8B", "Llama-2-7b", "gemma-2-9b", "gpt2-large"):
        assert name in labels


def test_cases_are_json_and_expected_needs_no_student():
    for ex in ch01.EXERCISES.values():
        for hidden in (False, True):
            cases = ex.cases(hidden, seed=3)
            restored = json.loads(json.dumps(cases))
            assert [ex.expected(c) for c in restored] == [ex.expected(c) for c in cases]
            assert all(type(ex.expected(c)) is int or (type(ex.expected(c)) is tuple and
                       all(type(x) is int for x in ex.expected(c))) for c in cases)


def test_hidden_cases_are_seeded():
    ex = ch01.EXERCISES["ch01_q1_bytes_per_token_from_config"]
    assert ex.hidden_cases(5) == ex.hidden_cases(5)
    assert ex.hidden_cases(5) != ex.hidden_cases(6)
    variants = {c["context"]["variant"] for c in ex.hidden_cases(5)}
    assert set(ch01.Q1_VARIANTS) <= variants
    models = {c["context"]["model"] for c in ex.hidden_cases(5)}
    assert "deepseek-ai/DeepSeek-V3" not in models and len(models) >= 4


# --- right answers pass -------------------------------------------------------
@pytest.mark.parametrize("grade_id", list(REFERENCE))
def test_reference_passes_visible_and_hidden(grade_id, capsys):
    passes_visible_and_hidden(grade_id, REFERENCE[grade_id][1], SEEDS, capsys, default_seed=True)


def test_the_visible_figures_are_the_chapters():
    ex = ch01.EXERCISES["ch01_q1_bytes_per_token_from_config"]
    assert ex.expected(ex.visible_cases[0]) == 131_072            # Llama 3.1 8B
    ex = ch01.EXERCISES["ch01_q3_kv_bytes_per_batch"]
    assert ex.expected(ex.visible_cases[0]) == 80 * 2**30          # [build-up]: 32 x 8K of 70B


def test_q5_visible_figures_by_hand():
    ex = ch01.EXERCISES["ch01_q5_sequences_on_gpu"]
    expected = [ex.expected(c) for c in ex.visible_cases]
    # Llama 3.1 8B on an H100 (79.18 GiB as CUDA reports it, [chains]), u 0.9, 8,030,261,248 parameters
    # (its model card's 8.03B, counted) x 2 B, 4 GB other, 131,072 B/token x 8,192 tokens:
    # 85,018,877,624.32 x 0.9 = 76,516,989,861.9; - 16,060,522,496 - 4e9 = 56,456,467,365.9;
    # / 1,073,741,824 = 52.58 -> 52
    assert expected[0] == 52
    # Qwen2.5 32B on an A100-80GB (79.15 GiB), u 0.92, 32,763,876,352 parameters x 1 B (fp8), 3 GB other,
    # fp8 cache 2 x 64 x 8 x 128 x 1 = 131,072 B/token x 32,768: 84,986,665,369.6 x 0.92 = 78,187,732,140.0;
    # - 32,763,876,352 - 3e9 = 42,423,855,788.0; / 4,294,967,296 = 9.88 -> 9
    assert expected[1] == 9
    # Llama 3.3 70B's bf16 weights (2 x 70.55e9 = 141.1 GB) exceed one H100's 85.0 GB: none fit
    assert expected[5] == 0


def test_q6_visible_figures_by_hand():
    ex = ch01.EXERCISES["ch01_q6_kv_head_sharing"]
    expected = {c["label"].split(" config")[0] + (" null" if "null" in c["label"] else ""): ex.expected(c)
                for c in ex.visible_cases if c["context"]["variant"] in ("as published", "num_key_value_heads: null")}
    # (H / K, 2 L (H - K) D b), fields from each config.json
    assert expected["Llama-3.1-8B"] == (32 // 8, 2 * 32 * (32 - 8) * 128 * 2) == (4, 393_216)
    assert expected["Llama-3.3-70B-Instruct"] == (64 // 8, 2 * 80 * (64 - 8) * 128 * 1) == (8, 1_146_880)
    assert expected["gemma-2-9b-it"] == (16 // 8, 2 * 42 * (16 - 8) * 256 * 2) == (2, 344_064)
    assert expected["gpt-oss-20b"] == (64 // 8, 2 * 24 * (64 - 8) * 64 * 4) == (8, 688_128)
    assert expected["Llama-2-7b-hf"] == expected["gpt2-large"] == expected["Llama-3.1-8B null"] == (1, 0)


def test_visible_q5_and_q6_cover_every_variant_the_text_names():
    q5 = [c["kwargs"] for c in ch01.EXERCISES["ch01_q5_sequences_on_gpu"].visible_cases]
    assert {k["weight_dtype_bytes"] for k in q5} == {1, 2, 4}                  # fp8, bf16, fp32 weights
    assert 1.0 in {k["utilization"] for k in q5} and min(k["utilization"] for k in q5) < 1
    assert len({k["gpu"]["name"] for k in q5}) >= 4
    assert any(ch01.sequences_on_gpu_expected({"kwargs": k}) == 0 for k in q5)   # the weights do not fit
    q6 = ch01.EXERCISES["ch01_q6_kv_head_sharing"].visible_cases
    configs = [c["kwargs"]["config"] for c in q6]
    assert any("num_key_value_heads" not in c for c in configs)                 # absent (GPT-2)
    assert any("num_key_value_heads" in c and c["num_key_value_heads"] is None for c in configs)
    assert any(c.get("head_dim") is not None and c["head_dim"] != c["hidden_size"] // c["num_attention_heads"]
               for c in configs)
    assert {c["kwargs"].get("dtype_bytes") for c in q6} == {None, 1, 2, 4} - {2}


# --- each known slip is named -------------------------------------------------
def q1_query_heads(config, dtype_bytes=2):
    heads = config.get("num_attention_heads") or config["n_head"]
    return bytes_per_token_from_config(config, dtype_bytes) // (config.get("num_key_value_heads") or heads) * heads


def q1_hidden_over_heads(config, dtype_bytes=2):
    config = dict(config, head_dim=None)
    return bytes_per_token_from_config(config, dtype_bytes)


def q2_missing_two(layers, kv_heads, head_dim, dtype_bytes, seq_len):
    return layers * kv_heads * head_dim * dtype_bytes * seq_len


def q2_bits(layers, kv_heads, head_dim, dtype_bytes, seq_len):
    return kv_bytes_for_sequence(layers, kv_heads, head_dim, 8 * dtype_bytes, seq_len)


def q2_kib(layers, kv_heads, head_dim, dtype_bytes, seq_len):
    return kv_bytes_for_sequence(layers, kv_heads, head_dim, dtype_bytes, seq_len) // 1024


def q3_missing_batch(layers, kv_heads, head_dim, dtype_bytes, seq_len, batch_size):
    return kv_bytes_for_sequence(layers, kv_heads, head_dim, dtype_bytes, seq_len)


def q4_ceil(budget_bytes, layers, kv_heads, head_dim, dtype_bytes, seq_len):
    return math.ceil(budget_bytes / kv_bytes_for_sequence(layers, kv_heads, head_dim, dtype_bytes, seq_len))


def q4_gb_gib(budget_bytes, layers, kv_heads, head_dim, dtype_bytes, seq_len):
    budget_gib = budget_bytes / 2**30                       # budget read in GiB ...
    per_seq_gb = kv_bytes_for_sequence(layers, kv_heads, head_dim, dtype_bytes, seq_len) / 1e9  # ... sequence in GB
    return math.floor(budget_gib / per_seq_gb)


def q5_label(gpu, *args):
    return sequences_on_gpu(gpu, *args, memory=gpu["label_gb"] * 10**9)


def q5_cuda_gib_as_gb(gpu, *args):
    return sequences_on_gpu(gpu, *args, memory=gpu["cuda_total_gib"] * 10**9)


def q5_no_utilization(gpu, *args):
    return sequences_on_gpu(gpu, *args, u=1)


def q5_utilization_last(gpu, num_params, weight_dtype_bytes, utilization, other_bytes, bytes_per_token, seq_len):
    left = gpu["cuda_total_gib"] * 2**30 - num_params * weight_dtype_bytes - other_bytes
    return max(0, math.floor(left * utilization / (bytes_per_token * seq_len)))


def q5_no_other(gpu, *args):
    return sequences_on_gpu(gpu, *args, other=0)


def q5_no_weights(gpu, *args):
    return sequences_on_gpu(gpu, *args, weights=0)


def q5_weights_always_bf16(gpu, num_params, weight_dtype_bytes, *args):
    return sequences_on_gpu(gpu, num_params, weight_dtype_bytes, *args, weights=num_params * 2)


def q5_tokens(gpu, num_params, weight_dtype_bytes, utilization, other_bytes, bytes_per_token, seq_len):
    return sequences_on_gpu(gpu, num_params, weight_dtype_bytes, utilization, other_bytes, bytes_per_token, 1)


def q5_negative(gpu, *args):
    return sequences_on_gpu(gpu, *args, at_least_zero=False)


def q5_ceil(gpu, *args):
    return sequences_on_gpu(gpu, *args, floor=math.ceil)


def q6_inverted(config, dtype_bytes=2):
    heads = config.get("num_attention_heads") or config["n_head"]
    kv_heads = config.get("num_key_value_heads") or heads
    return kv_heads // heads, kv_head_sharing(config, dtype_bytes)[1]


def q6_absent_as_mqa(config, dtype_bytes=2):
    heads = config.get("num_attention_heads") or config["n_head"]
    kv_heads = config.get("num_key_value_heads") or 1                  # absent read as one KV head in all
    per_head = bytes_per_token_from_config(dict(config, num_key_value_heads=heads), dtype_bytes) // heads
    return heads // kv_heads, per_head * (heads - kv_heads)


def q6_inflated(config, dtype_bytes=2):
    group, extra = kv_head_sharing(config, dtype_bytes)
    return group, extra + bytes_per_token_from_config(config, dtype_bytes)     # the figure counted with H


def q6_true_bytes(config, dtype_bytes=2):
    return kv_head_sharing(config, dtype_bytes)[0], bytes_per_token_from_config(config, dtype_bytes)


def q6_missing_two(config, dtype_bytes=2):
    group, extra = kv_head_sharing(config, dtype_bytes)
    return group, extra // 2


SLIPS = [
    (CHECK["q1"], q1_query_heads, "query_heads", ["4x too large", "query heads", "= 32", "= 8"]),
    (CHECK["q1"], q1_hidden_over_heads, "hidden_over_heads", ["gemma-2-9b", "224", "head_dim = 256"]),
    (CHECK["q2"], q2_missing_two, "missing_kv_factor", ["2x too small", "factor 2 for K and V"]),
    (CHECK["q2"], q2_bits, "bits_not_bytes", ["8x too large", "bits per element (16)"]),
    (CHECK["q2"], q2_kib, "answer_in_kib", ["1024x too small", "KiB"]),
    (CHECK["q3"], q3_missing_batch, "missing_batch", ["32x too small", "batch"]),
    (CHECK["q4"], q4_ceil, "ceil_not_floor", ["floor, not the ceiling", "expected 66 sequences"]),
    (CHECK["q4"], q4_gb_gib, "gb_for_gib", ["GB (10^9) and GiB (2^30)"]),
    # q5, first visible case: Llama 3.1 8B on an H100, expected 52 (test_q5_visible_figures_by_hand)
    (CHECK["q5"], q5_label, "label_memory", ["label (80.00 GB)", "CUDA reports (85.02 GB)", "expected 52"]),
    (CHECK["q5"], q5_cuda_gib_as_gb, "gb_for_gib", ["GB (10^9) and GiB (2^30)"]),
    (CHECK["q5"], q5_no_utilization, "ignored_utilization", ["utilization (0.9) is not applied"]),
    (CHECK["q5"], q5_utilization_last, "utilization_after_weights", ["not (M - W - O) x u"]),
    (CHECK["q5"], q5_no_other, "ignored_other_bytes", ["4,000,000,000 B", "not subtracted"]),
    (CHECK["q5"], q5_no_weights, "weights_missing", ["weights are missing", "8,030,261,248 parameters"]),
    (CHECK["q5"], q5_weights_always_bf16, "weight_dtype_ignored", ["weight_dtype_bytes (1 B per parameter)"]),
    (CHECK["q5"], q5_tokens, "tokens_not_sequences", ["how many tokens fit", "8192 tokens"]),
    (CHECK["q5"], q5_negative, "negative_count", ["Llama 3.3 70B on one H100", "0, not a negative count"]),
    (CHECK["q5"], q5_ceil, "ceil_not_floor", ["floor, not the ceiling"]),
    # q6, first visible case: Llama 3.1 8B, expected (4, 393,216) (test_q6_visible_figures_by_hand)
    (CHECK["q6"], q6_inverted, "inverted_ratio", ["upside down", "32 / 8"]),
    (CHECK["q6"], q6_absent_as_mqa, "absent_as_mqa", ["gpt2-large", "K = H = 20", "not a single KV head"]),
    (CHECK["q6"], q6_inflated, "inflated_not_extra", ["counted with the query heads", "(4, 393,216)"]),
    (CHECK["q6"], q6_true_bytes, "real_not_extra", ["real bytes per token"]),
    (CHECK["q6"], q6_missing_two, "missing_kv_factor", ["factor 2 for K and V"]),
]


@pytest.mark.parametrize("check,fn,key,phrases", SLIPS, ids=[s[2] for s in SLIPS])
def test_visible_slip_is_named(check, fn, key, phrases):
    message = fails(check, fn)
    assert message.startswith("✗ ch01_q")
    assert "on case" in message and "expected" in message
    for phrase in phrases:
        assert phrase in message, (phrase, message)


@pytest.mark.parametrize("check,fn,key,phrases", SLIPS, ids=[s[2] for s in SLIPS])
def test_hidden_slip_is_named_in_general_words(check, fn, key, phrases):
    message = fails(check, fn, hidden=True)
    assert judge.GENERIC_SLIPS[key] in message


def test_reading_torch_dtype_is_named():
    def reads_torch_dtype(config, dtype_bytes=2):
        size = {"float32": 4, "bfloat16": 2}.get(config.get("torch_dtype"), dtype_bytes)
        return bytes_per_token_from_config(config, size)
    message = fails(CHECK["q1"], reads_torch_dtype)
    # the slip that fits every failing case leads; fp32 fits the float32 config only, so it is not offered
    assert "Llama-2-7b" in message and "does not follow the argument dtype_bytes" in message
    assert "4 bytes per element (fp32)" not in message and "Or:" not in message


def test_gpt2_names_missing_gives_the_hint():
    def llama_names_only(config, dtype_bytes=2):
        kv_heads = config.get("num_key_value_heads") or config["num_attention_heads"]
        head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
        return 2 * config["num_hidden_layers"] * kv_heads * head_dim * dtype_bytes
    message = fails(CHECK["q1"], llama_names_only)
    assert "gpt2-large" in message and "KeyError" in message and "n_layer" in message
    hidden = fails(CHECK["q1"], llama_names_only, hidden=True)
    assert "raised KeyError on a hidden case" in hidden and "num_attention_heads" not in hidden.split(".")[0]


# --- look-alikes are rejected -------------------------------------------------
class AlwaysEqual:
    def __eq__(self, other):
        return True

    __hash__ = object.__hash__


class SneakyInt(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


@pytest.mark.parametrize("make,phrase", [
    (lambda value: AlwaysEqual(), "AlwaysEqual, not int"),
    (lambda value: SneakyInt(value), "SneakyInt, not int"),
    (lambda value: float(value), "returned a float"),
    (lambda value: np.int64(value), "returned numpy.int64"),
    (lambda value: True, "returned a bool"),
    (lambda value: None, "returned None"),
])
def test_lookalikes_are_rejected(make, phrase):
    def answer(layers, kv_heads, head_dim, dtype_bytes, seq_len):
        return make(kv_bytes_for_sequence(layers, kv_heads, head_dim, dtype_bytes, seq_len))
    message = fails(CHECK["q2"], answer)
    assert phrase in message
    fails(CHECK["q2"], answer, hidden=True)


def test_right_value_wrong_type_says_so():
    message = fails(CHECK["q2"], lambda *args: float(kv_bytes_for_sequence(*args)))
    assert "value itself is right" in message


def test_not_a_function():
    assert "must be a function" in fails(CHECK["q2"], 1_073_741_824)


# --- kvlib tripwires ----------------------------------------------------------
ORIGINALS = (kvlib.kv_bytes_per_token, kvlib.parse_config, kvlib.load_model, kvlib.ModelSpec.kv_bytes_per_token)


def assert_kvlib_restored():
    assert kvlib.kv_bytes_per_token(32, 8, 128, 2) == 131_072
    assert kvlib.load_model("llama-3.1-8b").kv_bytes_per_token() == 131_072
    assert kvlib.formulas.kv_bytes_per_token is ORIGINALS[0]
    assert kvlib.max_concurrency(10, 3) == 3
    assert all(fn.__code__.co_filename != "<kvlib tripwire>" for fn in ORIGINALS)


def test_calling_kvlib_trips_and_is_restored():
    def via_kvlib(layers, kv_heads, head_dim, dtype_bytes, seq_len):
        return kvlib.kv_bytes_per_sequence(kvlib.kv_bytes_per_token(layers, kv_heads, head_dim, dtype_bytes),
                                           seq_len)
    message = fails(CHECK["q2"], via_kvlib)
    assert "build this by hand: exercise ch01_q2_kv_bytes_per_sequence must not call kvlib.kv_bytes_per_token" \
        in message
    assert_kvlib_restored()


def test_name_imported_before_the_check_still_trips():
    from kvlib import max_concurrency as bound_early

    def via_bound_name(budget_bytes, layers, kv_heads, head_dim, dtype_bytes, seq_len):
        return bound_early(budget_bytes, kv_bytes_for_sequence(layers, kv_heads, head_dim, dtype_bytes, seq_len))
    assert "must not call kvlib.max_concurrency" in fails(CHECK["q4"], via_bound_name)
    assert_kvlib_restored()


def test_spec_methods_and_parse_config_trip_even_when_caught():
    def caught(config, dtype_bytes=2):
        try:
            return kvlib.parse_config(config).kv_bytes_per_token(dtype_bytes)
        except Exception:
            return bytes_per_token_from_config(config, dtype_bytes)
    assert "must not call kvlib.parse_config" in fails(CHECK["q1"], caught)
    spec = kvlib.load_model("llama-3.1-8b")

    def via_spec(config, dtype_bytes=2):
        return spec.kv_bytes_per_token(dtype_bytes)
    assert "must not call kvlib.ModelSpec.kv_bytes_per_token" in fails(CHECK["q1"], via_spec)
    assert "must not call" in fails(CHECK["q1"], via_spec, hidden=True)
    assert_kvlib_restored()


def test_tripwires_restore_after_an_interrupt():
    def interrupted(layers, kv_heads, head_dim, dtype_bytes, seq_len):
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        CHECK["q2"](interrupted)
    assert_kvlib_restored()


def test_reading_a_bundled_config_is_allowed():
    def reads_bundled(config, dtype_bytes=2):
        kvlib.bundled_config("llama-3.1-8b")
        return bytes_per_token_from_config(config, dtype_bytes) + 0 * kvlib.GiB
    CHECK["q1"](reads_bundled)


# --- kvlib under another name (tripwires' watch) -------------------------------
def _formulas_loaded_as(name: str):
    """kvlib/formulas.py loaded from its file as the module ``name`` (kvlib's own functions, not tripped)."""
    import importlib.util
    import os

    spec = importlib.util.spec_from_file_location(name, os.path.join(os.path.dirname(kvlib.__file__), "formulas.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return vars(module)


def _formulas_rebuilt() -> dict:
    """Every function of kvlib.formulas rebuilt from its code object, in a copy of its globals."""
    import types

    space = dict(vars(kvlib.formulas))
    for name, fn in list(space.items()):
        if isinstance(fn, types.FunctionType):
            space[name] = types.FunctionType(fn.__code__, space, name, fn.__defaults__)
    return space


def _formulas_exec() -> dict:
    space: dict = {}
    exec(Path(kvlib.formulas.__file__).read_text(), space)     # kvlib's source under the file name "<string>"
    return space


@pytest.mark.parametrize("build", [lambda: _formulas_loaded_as("k"), _formulas_rebuilt, _formulas_exec],
                         ids=["spec_from_file_location", "FunctionType", "exec"])
def test_kvlib_under_another_name_or_rebuilt_still_trips(build):
    space = build()

    def via_copy(layers, kv_heads, head_dim, dtype_bytes, seq_len):
        return space["kv_bytes_per_sequence"](space["kv_bytes_per_token"](layers, kv_heads, head_dim, dtype_bytes),
                                              seq_len)
    # the copy is right: without the watch it would pass every case (Llama 3.1 8B: 131,072 B/token)
    assert via_copy(32, 8, 128, 2, 1) == 131_072
    message = fails(CHECK["q2"], via_copy)
    assert "must not call kvlib.kv_bytes_per_sequence, kvlib.kv_bytes_per_token" in message
    assert "must not call kvlib" in fails(CHECK["q2"], via_copy, hidden=True)
    assert_kvlib_restored()


def test_the_watch_cannot_be_switched_off_from_the_answer():
    import sys

    space = _formulas_rebuilt()

    def switched_off(layers, kv_heads, head_dim, dtype_bytes, seq_len):
        try:
            sys.settrace(None)
        except RuntimeError:
            pass
        return space["kv_bytes_per_token"](layers, kv_heads, head_dim, dtype_bytes) * seq_len
    message = fails(CHECK["q2"], switched_off)
    assert "must not call kvlib.kv_bytes_per_token, sys.settrace (the check's watch on kvlib)" in message
    assert sys.gettrace() is None or "kvlib" not in repr(sys.gettrace())


def test_a_function_of_ones_own_with_kvlibs_name_is_not_kvlib():
    """The watch knows kvlib's code by its file, or by name, bytecode and constants with the docstring: a learner's
    own function that shares a kvlib function's name (and even its arithmetic) is their own."""
    def kv_bytes_per_token(layers, kv_heads, head_dim, dtype_bytes):
        return 2 * layers * kv_heads * head_dim * dtype_bytes

    def kv_bytes_for_sequence_(layers, kv_heads, head_dim, dtype_bytes, seq_len):
        return kv_bytes_per_token(layers, kv_heads, head_dim, dtype_bytes) * seq_len
    CHECK["q2"](kv_bytes_for_sequence_)
    CHECK["q2"](kv_bytes_for_sequence_, hidden=True)


# --- hidden failures keep the hidden cases hidden -----------------------------
def _numbers_in(case: dict, expected: int, answer) -> set:
    found = set()

    def walk(value):
        if isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)
        elif type(value) is int and abs(value) >= 10:
            found.update({str(value), f"{value:,}"})
    walk(case["kwargs"])
    walk({k: v for k, v in case["context"].items() if k != "hint"})
    walk([expected, answer])
    return found


@pytest.mark.parametrize("check,fn,key,phrases", SLIPS, ids=[s[2] for s in SLIPS])
def test_hidden_messages_reveal_no_inputs(check, fn, key, phrases, capsys):
    grade_id = next(gid for gid, (c, _) in REFERENCE.items() if c is check)
    ex = ch01.EXERCISES[grade_id]
    for seed in (None, 4):
        try:
            check(fn, hidden=True, seed=seed)
        except AssertionError as exc:
            message = str(exc).replace(grade_id, "")
        else:
            continue
        digits = set(re.findall(r"\d+", message))
        assert digits <= {"10", "9", "2", "30", "1", "4"}, message  # 10^9, 2^30, "1, 2 or 4"
        for case in ex.cases(True, seed):
            answer = runner.run_cases(ex, fn, [case], quiet=True)[0].get("value")
            for number in _numbers_in(case, ex.expected(case), answer):
                assert number not in message.replace("10^9", "").replace("2^30", "")   # units, not inputs
        # no case's label (the slip of q5 may say "the label": the GPU's, in general words)
        assert 'on case "' not in message and "config=<" not in message
        assert not any(case["label"] in message for case in ex.cases(True, seed)), message


def test_hidden_runs_swallow_the_learners_prints(capsys):
    def chatty(layers, kv_heads, head_dim, dtype_bytes, seq_len):
        print("inputs:", layers, kv_heads, head_dim, seq_len)
        return kv_bytes_for_sequence(layers, kv_heads, head_dim, dtype_bytes, seq_len)
    CHECK["q2"](chatty, hidden=True)
    out = capsys.readouterr().out
    assert "inputs:" not in out and out.startswith("✓")


# --- the out-of-process path: records and verdicts as JSON -------------------
def test_judge_works_from_json_records():
    ex = ch01.EXERCISES["ch01_q2_kv_bytes_per_sequence"]
    cases = ex.cases(True, seed=11)
    good = json.loads(json.dumps(runner.run_cases(ex, kv_bytes_for_sequence, cases)))
    assert all(v.ok for v in judge.verdicts(ex, json.loads(json.dumps(cases)), good, hidden=True))
    bad = json.loads(json.dumps(runner.run_cases(ex, q2_missing_two, cases)))
    results = judge.verdicts(ex, cases, bad, hidden=True)
    assert not any(v.ok for v in results) and results[0].slip == "missing_kv_factor"
    lookalike = runner.describe_result(np.int64(5))
    assert lookalike["type"] == "numpy.int64" and not judge.judge(ex, cases[0], lookalike).ok


def test_the_release_stub_says_not_written_yet():
    def stub(config, dtype_bytes=2):
        # YOUR CODE HERE
        raise NotImplementedError()
    assert "not written yet" in fails(CHECK["q1"], stub)
    assert "not written yet" in fails(CHECK["q1"], stub, hidden=True)


# --- slips through the shared mechanism ([diagnosis]) ------------------------------------------------
def test_no_offered_slip_contradicts_a_case():
    """Every catalogued slip, made by a learner: each alternative offered fits every visible case."""
    from chapter_checks import offered_slips_contradicting_a_case
    assert offered_slips_contradicting_a_case(ch01.EXERCISES) == []


def test_generic_slips_are_named():
    """Off by one, s/ms, per GPU/node, the next unit, KB/GB/TB mix-ups: named in every numeric exercise."""
    from chapter_checks import generic_slips_unnamed
    assert generic_slips_unnamed(ch01.EXERCISES) == []


# --- some cases raise: the slip is named from the cases that returned ([learner screen §2 b]) -----------------------
def q1_query_heads_llama_names(config, dtype_bytes=2):
    """The query heads for the KV heads, and only Llama's field names: GPT-2's configs raise KeyError."""
    heads = config["num_attention_heads"]
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    return 2 * config["num_hidden_layers"] * heads * head_dim * dtype_bytes


def test_query_heads_named_when_gpt2_cases_raise():
    message = fails(CHECK["q1"], q1_query_heads_llama_names)
    # Llama 3.1 8B leads: 2 x 32 x 32 x 128 x 2 = 524,288 B, 4x its 131,072
    assert "returned 524,288; expected 131,072" in message and "4x too large" in message, message
    assert "query heads (num_attention_heads = 32) instead of the KV heads" in message
    # one line says which cases raised and why; the two GPT-2 configs are ch01 Q1's only ones without its names
    raised = [line for line in message.splitlines() if "raised" in line]
    assert len(raised) == 1 and "gpt2-large" in raised[0] and "KeyError: 'num_attention_heads'" in raised[0]
    assert "n_layer" in raised[0]
    # nothing in grader words, nothing about dtype_bytes (which was right)
    assert "edge" not in message and "dtype_bytes left out" not in message and "more visible" not in message
    failing = sum(not v.ok for v in _verdicts("ch01_q1_bytes_per_token_from_config", q1_query_heads_llama_names))
    wrong = re.search(r"explains all (\d+) cases that returned a wrong number", message)
    assert wrong and int(wrong.group(1)) + 2 == failing, message     # the counts add up: 2 raised
    hidden = fails(CHECK["q1"], q1_query_heads_llama_names, hidden=True)
    assert judge.GENERIC_SLIPS["query_heads"] in hidden and "raised KeyError on" in hidden


def _verdicts(grade_id, fn):
    exercise = ch01.EXERCISES[grade_id]
    cases = exercise.cases()
    return judge.verdicts(exercise, cases, runner.run_cases(exercise, fn, cases))


# --- the slips the chapter's text warns about are the slips named ([learner screen §2]) ---------------------------
def q5_other_after_share(gpu, num_params, weight_dtype_bytes, utilization, other_bytes, bytes_per_token, seq_len):
    """(M - W) u - O: the share taken after the weights, the other allocations after the share (§9 warns)."""
    memory = gpu["cuda_total_gib"] * 2**30
    left = (memory - num_params * weight_dtype_bytes) * utilization - other_bytes
    return max(0, math.floor(left / (bytes_per_token * seq_len)))


def q5_label_as_gib(gpu, *args):
    """The label's GB read as GiB (label_gb x 2^30, §5 warns), floored as it should be."""
    return sequences_on_gpu(gpu, *args, memory=gpu["label_gb"] * 2**30)


def test_other_allocations_after_the_share_is_named():
    # Llama 3.1 8B on an H100: (85,018,877,624 - 16,060,522,496) x 0.9 - 4e9 = 58,062,519,615.2 B over
    # 8,192 x 131,072 = 1,073,741,824 B a sequence: 54.07 -> 54 (expected 52)
    message = fails(CHECK["q5"], q5_other_after_share)
    assert "returned 54; expected 52" in message and "(M - W) x u - O" in message, message
    assert "no one known slip" not in message
    assert judge.GENERIC_SLIPS["utilization_after_weights"] in fails(CHECK["q5"], q5_other_after_share, hidden=True)


def test_label_read_as_gib_leads_over_the_ceiling():
    # 80 x 2^30 = 85,899,345,920 B; x 0.9 - 16,060,522,496 - 4e9 = 57,248,888,832 B: 53.3 -> 53 (expected 52);
    # the ceiling gives 53 there too, but code that floors is told the label first
    message = fails(CHECK["q5"], q5_label_as_gib)
    assert "returned 53; expected 52" in message, message
    diagnosis = message.splitlines()[2]
    assert diagnosis.index("label (80.00 GB)") < diagnosis.index("GiB (2^30)") < diagnosis.index("the ceiling")
