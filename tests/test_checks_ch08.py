"""Chapter 08's instant checks: right answers pass, each catalogued slip gets its named message.

Reference answers are written by hand here (regexes and integer arithmetic, never kvlib).
Expected figures come from the bundled real logs and their sidecars
(kvlib/data/vllm_logs/NN.json "reported" and "check"): 12.log 56.18 GiB and 7,191 blocks,
Llama 2 7B at 8 MiB per block (56.18 x 128 = 7191.04); 07.log 3.81 GiB, 1,952 blocks;
20.log 69.66 GiB, 652,144 tokens; the CPU start kvlib/data/vllm_cpu/llama_gqa 1.0 GiB,
1,365,250 tokens (its kv1g_len1000.json). Exercise 3's pool forwards is checked against hand arithmetic
(test_pool_blocks_by_hand) and 12.log's printed 7,191 blocks.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

import pytest

from autograder.checks import ch08
from kvlib.vllm.mismatch import MISMATCH_CAUSES, block_range as kvlib_block_range, classify_block_mismatch
from chapter_checks import fails, passes_visible_and_hidden

SEEDS = (0, 1, 7, 2026)
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


# --- reference answers, by hand ---------------------------------------------------------
def available_kv_gib(log_text):
    text = ANSI.sub("", log_text)
    patterns = (r"kv_cache_size=([\d.]+) ?GiB", r"reserved for KV Cache is ([\d.]+) ?GiB",
                r"Available KV cache memory: ([\d.]+) ?GiB", r"Explicitly set \(([\d.]+)/[\d.]+\) ?GiB")
    return min(float(m) for p in patterns for m in re.findall(p, text))


def kv_count(log_text):
    text = ANSI.sub("", log_text)
    for pattern in (r"(?:GPU|cuda|CUDA) blocks: ([\d,]+)", r"[GC]PU KV cache size: ([\d,]+) tokens",
                    r"stored in KV cache \(([\d,]+)\)"):
        found = re.findall(pattern, text)
        if found:
            return min(int(n.replace(",", "")) for n in found)
    raise ValueError("no count")


def block_range(available_gib, layers, kv_heads, head_dim, dtype_bytes, block_size, tp):
    x = Fraction(available_gib)
    per_block = 2 * layers * max(1, kv_heads // tp) * head_dim * dtype_bytes * block_size
    lo = math.ceil((x - Fraction(1, 200)) * 2**30)
    hi = math.ceil((x + Fraction(1, 200)) * 2**30) - 1
    return (lo // per_block, hi // per_block)


def mismatch_cause(available_gib, logged_blocks, layers, kv_heads, head_dim, dtype_bytes, block_size, gpus):
    def inside(span, slack=0):
        return span[0] - slack <= logged_blocks <= span[1] + slack

    g = (available_gib, layers, kv_heads, head_dim)
    base = block_range(*g, dtype_bytes, block_size, 1)
    if inside(base):
        return "agrees"
    if inside(base, 2):
        return "rounding"
    if gpus > 1 and inside(block_range(*g, dtype_bytes, block_size, gpus)):
        return "tensor_parallel"
    if dtype_bytes == 2 and inside(block_range(*g, 1, block_size, 1)):
        return "kv_cache_dtype"
    if any(s > block_size and inside(block_range(*g, dtype_bytes, s, 1)) for s in (32, 64, 128, 256)):
        return "block_size"
    return "wrong_model"


def pool_blocks(total_bytes, utilization, weights_bytes, activation_bytes, non_torch_bytes, cudagraph_bytes,
                layers, kv_heads, head_dim, dtype_bytes, block_size, tp):
    pool = math.floor(total_bytes * utilization - weights_bytes - activation_bytes - non_torch_bytes - cudagraph_bytes)
    return pool // (2 * layers * max(1, kv_heads // tp) * head_dim * dtype_bytes * block_size)


REFERENCE = {
    "ch08_q1_available_gib": available_kv_gib,
    "ch08_q2_kv_count": kv_count,
    "ch08_q5_pool_blocks": pool_blocks,
    "ch08_q3_block_range": block_range,
    "ch08_q4_mismatch_cause": mismatch_cause,
}


@pytest.mark.parametrize("grade_id", list(REFERENCE))
def test_reference_passes_visible_and_hidden(grade_id, capsys):
    passes_visible_and_hidden(grade_id, REFERENCE[grade_id], SEEDS, capsys)


def test_exercises_in_notebook_order():
    assert list(ch08.EXERCISES) == list(REFERENCE)


def test_visible_figures_are_the_logs():
    # sidecars: 07 3.81, 12 56.18, 14 1.57 (one rank perturbed to 1.62), 20 69.66, 25 1.71, CPU 1.0
    q1 = ch08.EXERCISES["ch08_q1_available_gib"]
    assert [q1.expected_for(c) for c in q1.cases()] == [3.81, 56.18, 1.57, 69.66, 69.66, 1.71, 1.0]
    # 02 76240, 04 13078, 05 79392 (error line), 07 1952, 12 7191, 16 158656, 17 198784, CPU 1365250
    q2 = ch08.EXERCISES["ch08_q2_kv_count"]
    assert [q2.expected_for(c) for c in q2.cases()] == [76240, 13078, 79392, 1952, 7191, 158656, 198784, 1365250]
    # 12.log by hand: 56.175 x 2^30 / 2^23 = 7190.4, 56.185 x 128 = 7191.68 -> (7190, 7191), the log's 7191 inside
    q3 = ch08.EXERCISES["ch08_q3_block_range"]
    assert q3.expected_for(q3.cases()[0]) == (7190, 7191)
    q4 = ch08.EXERCISES["ch08_q4_mismatch_cause"]
    # (7,194 is 3 past 7,191: beyond the 2-block rounding slack; 7,188 is 2 below 7,190: within it)
    # and two that agree: 3.81 GiB in fp8 blocks of 1 MiB is 3,897 to 3,906 (3,904 inside); GPT-2 large's
    # 2 x 36 x 20 x 64 x 2 x 16 = 2,949,120 B blocks in 12.34 GiB: 4,491.1 to 4,494.7 -> 4,491 to 4,494 (4,492 inside)
    assert [q4.expected_for(c) for c in q4.cases()] == ["agrees", "rounding", "wrong_model", "rounding",
                                                        "tensor_parallel", "kv_cache_dtype", "block_size",
                                                        "wrong_model", "agrees", "agrees"]


def test_pool_blocks_by_hand():
    q5 = ch08.EXERCISES["ch08_q5_pool_blocks"]
    # 12.log: the engine printed 7,191 blocks (its sidecar), and the forwards recipe from its printed figures agrees.
    # 07.log: 23.58 GiB x 0.9 = 22,786,948,989.0 B; less 14.9888, 17.06 - 14.9888 and 0.35 GiB (16,094,101,452 +
    # 2,223,934,066 + 375,809,638 B) = 4,093,103,833 B / 2 MiB = 1,951.7 -> 1,951 (the log printed 1,952: its
    # inputs are rounded to 0.01 GiB). Llama 3.3 70B, TP 4: 85,018,877,624 x 0.92 = 78,217,367,414.08; less
    # 141,107,412,992 / 4 + 1.5 + 0.6 + 0.75 GiB = 38,337,017,446 -> 39,880,349,968 B / (2 x 80 x 2 x 128 x 2 x 16 =
    # 1,310,720) = 30,426.2. Mistral 7B, fp8, 32-token blocks: 78,217,367,414.08 - (14,483,464,192 + 2 + 0.5 +
    # 0.4 GiB = 17,597,315,482) = 60,620,051,932 / (2 x 32 x 8 x 128 x 32 = 2 MiB) = 28,905.9. Qwen2.5 32B, TP 8
    # (one KV head per rank): 76,516,989,861.6 - (8,190,969,088 + 0.8 + 0.3 GiB = 9,372,085,094) = 67,144,904,767
    # / (2 x 64 x 128 x 2 x 16 = 524,288) = 128,068.6. GPT-2 large on an L40S: 47,674,136,986 x 0.9 =
    # 42,906,723,287.4 - (1,548,060,160 + 0.5 + 0.2 GiB = 2,299,679,437) = 40,607,043,850 / (2 x 36 x 20 x 64 x 2 x
    # 16 = 2,949,120) = 13,769.2.
    assert [q5.expected_for(c) for c in q5.cases()] == [7191, 1951, 30426, 28905, 128068, 13769]


def test_every_log_format_is_in_the_visible_cases():
    texts = "\n".join(c["kwargs"]["log_text"] for ex in ("ch08_q1_available_gib", "ch08_q2_kv_count")
                      for c in ch08.EXERCISES[ex].cases())
    for form in ("kv_cache_size=", "reserved for KV Cache is", "Available KV cache memory", "Explicitly set (",
                 "# GPU blocks", "# cuda blocks", "\nGPU blocks", "GPU KV cache size", "CPU KV cache size",
                 "stored in KV cache (", "\x1b[", "qwen3-1  | ", ">> ", "(VllmWorkerProcess pid="):
        assert form in texts, form


def test_hidden_cases_are_perturbed_and_reveal_nothing():
    for grade_id in ("ch08_q1_available_gib", "ch08_q2_kv_count"):
        ex = ch08.EXERCISES[grade_id]
        hidden = ex.cases(hidden=True, seed=3)
        assert all(c["label"] == "hidden" for c in hidden)
        assert ex.cases(hidden=True, seed=3) == hidden and ex.cases(hidden=True, seed=4) != hidden
        message = fails(grade_id, lambda log_text: 0.5 if "q1" in grade_id else 1, hidden=True, seed=3)
        assert "hidden case" in message and "log_text=" not in message


def test_mismatch_cause_by_hand():
    # log 12: 7191 agrees; 7193 is 2 past (7190, 7191); two GPUs halve the heads: (14380, 14383)
    assert classify_block_mismatch("56.18", 7191, 32, 32, 128, 2, 16) == "agrees"
    assert classify_block_mismatch("56.18", 7193, 32, 32, 128, 2, 16) == "rounding"
    assert classify_block_mismatch("56.18", 14382, 32, 32, 128, 2, 16, gpus=2) == "tensor_parallel"
    assert kvlib_block_range("56.18", 32, 32, 128, 2, 16, 2) == (14380, 14383)
    assert set(MISMATCH_CAUSES) == set(ch08.EXERCISES["ch08_q4_mismatch_cause"].answer.options)


# --- slips ---------------------------------------------------------------------------------
def q1_largest(log_text):
    text = ANSI.sub("", log_text)
    figures = [float(m) for p in (r"kv_cache_size=([\d.]+)", r"KV Cache is ([\d.]+)", r"memory: ([\d.]+)",
                                  r"Explicitly set \(([\d.]+)/") for m in re.findall(p, text)]
    return max(figures)


def q1_weights(log_text):
    text = ANSI.sub("", log_text)
    return float(re.findall(r"(?:weights took|model weights take|Model loading took) ([\d.]+) ?Gi?B", text)[0])


def q1_cpu_total(log_text):
    m = re.search(r"Explicitly set \([\d.]+/([\d.]+)\)", log_text)
    return float(m.group(1)) if m else available_kv_gib(log_text)


def q2_cpu_blocks(log_text):
    m = re.search(r"CPU blocks: (\d+)", log_text)
    return int(m.group(1)) if m else kv_count(log_text)


def q2_per_request(log_text):
    m = re.search(r"Maximum concurrency for ([\d,]+) tokens", ANSI.sub("", log_text))
    return int(m.group(1).replace(",", "")) if m else kv_count(log_text)


def q2_blocks_as_tokens(log_text):
    n = kv_count(log_text)
    return n * 16 if re.search(r"blocks: ", log_text) else n


def q2_max_seq_len(log_text):
    m = re.search(r"max seq len \((\d+)\)", log_text)
    return int(m.group(1)) if m else kv_count(log_text)


def q3_point(available_gib, layers, kv_heads, head_dim, dtype_bytes, block_size, tp):
    n = round(float(available_gib) * 2**30) // (2 * layers * max(1, kv_heads // tp) * head_dim * dtype_bytes
                                                 * block_size)
    return (n, n)


def q3_gb(available_gib, layers, kv_heads, head_dim, dtype_bytes, block_size, tp):
    b = 2 * layers * max(1, kv_heads // tp) * head_dim * dtype_bytes * block_size
    x = float(available_gib)
    return (int((x - 0.005) * 1e9) // b, int((x + 0.005) * 1e9) // b)


def q3_no_tp(available_gib, layers, kv_heads, head_dim, dtype_bytes, block_size, tp):
    return block_range(available_gib, layers, kv_heads, head_dim, dtype_bytes, block_size, 1)


def q3_tokens(available_gib, layers, kv_heads, head_dim, dtype_bytes, block_size, tp):
    lo, hi = block_range(available_gib, layers, kv_heads, head_dim, dtype_bytes, block_size, tp)
    return (lo * block_size, hi * block_size)


def q3_wide(available_gib, layers, kv_heads, head_dim, dtype_bytes, block_size, tp):
    b = 2 * layers * max(1, kv_heads // tp) * head_dim * dtype_bytes * block_size
    x = float(available_gib)
    return (int((x - 0.01) * 2**30) // b, int((x + 0.01) * 2**30) // b)


def _pool(name, **change):
    """pool_blocks with some inputs replaced: a value, or a function of all the inputs."""
    def answer(*args):
        given = dict(zip(ch08.POOL_PARAMS, args))
        given.update({k: (v(given) if callable(v) else v) for k, v in change.items()})
        return pool_blocks(**given)
    answer.__name__ = name
    return answer


def q5_util_after(total_bytes, utilization, weights_bytes, activation_bytes, non_torch_bytes, cudagraph_bytes,
                  layers, kv_heads, head_dim, dtype_bytes, block_size, tp):
    left = total_bytes - weights_bytes - activation_bytes - non_torch_bytes - cudagraph_bytes
    return math.floor(left * utilization) // (2 * layers * max(1, kv_heads // tp) * head_dim * dtype_bytes * block_size)


def q5_tokens(*args):
    return pool_blocks(*args) * args[10]


def q5_round(total_bytes, utilization, weights_bytes, activation_bytes, non_torch_bytes, cudagraph_bytes,
             layers, kv_heads, head_dim, dtype_bytes, block_size, tp):
    pool = total_bytes * utilization - weights_bytes - activation_bytes - non_torch_bytes - cudagraph_bytes
    return round(pool / (2 * layers * max(1, kv_heads // tp) * head_dim * dtype_bytes * block_size))


q5_no_activation = _pool("q5_no_activation", activation_bytes=0)
q5_no_non_torch = _pool("q5_no_non_torch", non_torch_bytes=0)
q5_no_cudagraph = _pool("q5_no_cudagraph", cudagraph_bytes=0)
q5_no_tp = _pool("q5_no_tp", tp=1)
q5_no_kv_factor = _pool("q5_no_kv_factor", dtype_bytes=lambda a: a["dtype_bytes"] / 2)


SLIPS = [
    ("ch08_q1_available_gib", q1_largest, "vLLM sizes the pool from the smallest rank"),
    ("ch08_q1_available_gib", q1_weights, "model-weights figure"),
    ("ch08_q1_available_gib", q1_cpu_total, "the KV space is the first number"),
    ("ch08_q2_kv_count", q2_cpu_blocks, "'# CPU blocks'"),
    ("ch08_q2_kv_count", q2_per_request, "max_model_len"),
    ("ch08_q2_kv_count", q2_blocks_as_tokens, "converted them to tokens"),
    ("ch08_q2_kv_count", q2_max_seq_len, "the KV capacity is the second number"),
    ("ch08_q5_pool_blocks", q5_no_activation, "activation peak"),
    ("ch08_q5_pool_blocks", q5_no_non_torch, "non-torch memory"),
    ("ch08_q5_pool_blocks", q5_no_cudagraph, "CUDA-graph estimate"),
    ("ch08_q5_pool_blocks", q5_no_tp, "each GPU holds only its own KV heads"),
    ("ch08_q5_pool_blocks", q5_util_after, "not (M - W - O) x u"),
    ("ch08_q5_pool_blocks", q5_tokens, "those are tokens"),
    ("ch08_q5_pool_blocks", q5_round, "rounded down (floor)"),
    ("ch08_q5_pool_blocks", q5_no_kv_factor, "factor 2 for K and V"),
    ("ch08_q3_block_range", q3_point, "allows a range of blocks"),
    ("ch08_q3_block_range", q3_gb, "GB (10^9) and GiB"),
    ("ch08_q3_block_range", q3_no_tp, "each GPU holds only its own KV heads"),
    ("ch08_q3_block_range", q3_tokens, "those are tokens"),
    ("ch08_q3_block_range", q3_wide, "+/-0.005 GiB"),
]


@pytest.mark.parametrize("grade_id, fn, phrase", SLIPS, ids=[f"{g[5:7]}-{f.__name__}" for g, f, _ in SLIPS])
def test_visible_slip_is_named(grade_id, fn, phrase):
    assert phrase in fails(grade_id, fn)


def test_hidden_range_slip_in_general_words():
    message = fails("ch08_q3_block_range", q3_point, hidden=True, seed=0)
    assert "range of blocks" in message and "available_gib=" not in message


def test_wrong_types_rejected():
    assert "float" in fails("ch08_q1_available_gib", lambda t: "56.18")
    assert "int" in fails("ch08_q2_kv_count", lambda t: float(kv_count(t)))
    assert "int" in fails("ch08_q5_pool_blocks", lambda *a: float(pool_blocks(*a)))
    assert "tuple" in fails("ch08_q3_block_range", lambda *a: list(block_range(*a)))
    message = fails("ch08_q3_block_range", lambda *a: tuple(float(v) for v in block_range(*a)))
    assert "element 0" in message
    assert "agrees" in fails("ch08_q4_mismatch_cause", lambda *a: "Agrees")


def test_a_wrong_cause_names_the_case():
    message = fails("ch08_q4_mismatch_cause", lambda *a: "agrees")
    assert "12.log with the count changed to 7,193" in message and "'rounding'" in message


# --- slips through the shared mechanism ([diagnosis]) ------------------------------------------------
def test_no_offered_slip_contradicts_a_case():
    """Every catalogued slip, made by a learner: each alternative offered fits every visible case."""
    from chapter_checks import offered_slips_contradicting_a_case
    assert offered_slips_contradicting_a_case(ch08.EXERCISES) == []


def test_generic_slips_are_named():
    """Off by one, s/ms, per GPU/node, the next unit, KB/GB/TB mix-ups: named in every numeric exercise."""
    from chapter_checks import generic_slips_unnamed
    assert generic_slips_unnamed(ch08.EXERCISES) == []


# --- topic slips ([diagnosis §3]) ------------------------------------------------------------------------
def test_gib_figure_converted_to_gb_is_named():
    from kvcoach import slips
    # 30.42 GiB printed, returned as GB: 30.42 x 2^30 / 10^9 = 32.663 (by hand)
    d = slips.diagnose("log_figure", 30.42 * 2**30 / 10**9, unit="GiB", printed=30.42, wrong={})
    assert d.slip.key == "gb_for_gib", d.message


def test_tokens_converted_to_blocks_is_named():
    ex = ch08.EXERCISES["ch08_q2_kv_count"]
    token_cases = [c for c in ex.cases() if "tokens_as_blocks" in ex.slip_inputs(c)["wrong"]]
    assert token_cases, "a visible log that prints tokens"
    from kvcoach import slips
    case = token_cases[0]
    blocks = ex.slip_inputs(case)["wrong"]["tokens_as_blocks"]
    assert blocks * 16 <= ex.expected_for(case) < (blocks + 1) * 16       # tokens // 16 (vLLM's default block)
    d = slips.diagnose("log_figure", blocks, unit=ex.unit, **ex.slip_inputs(case))
    assert d.slip.key == "tokens_as_blocks" and "converted them to blocks" in d.message


# --- unit conversions a learner adds to a printed figure ([diagnosis §3]), named through the check --------
def q1_converted_to_gb(log_text):
    return available_kv_gib(log_text) * 2**30 / 10**9          # 3.81 GiB -> 4.091 GB (by hand: 3.81 x 1.0737)


def q1_converted_to_gb_rounded(log_text):
    return round(available_kv_gib(log_text) * 2**30 / 10**9, 2)   # 3.81 GiB -> 4.09, as a log would print it


def _prints_tokens(log_text) -> bool:
    text = ANSI.sub("", log_text)
    return not re.search(r"(?:GPU|cuda|CUDA) blocks: ", text)


def q2_tokens_to_blocks(log_text):
    n = kv_count(log_text)
    return n // 16 if _prints_tokens(log_text) else n          # 16.log: 158,656 tokens -> 9,916 blocks


def q2_blocks_to_tokens(log_text):
    n = kv_count(log_text)
    return n if _prints_tokens(log_text) else n * 16          # 12.log: 7,191 blocks -> 115,056 tokens


CONVERSIONS = [
    ("ch08_q1_available_gib", q1_converted_to_gb, "gib_as_gb", "converted the figure to GB"),
    ("ch08_q1_available_gib", q1_converted_to_gb_rounded, "gib_as_gb", "converted the figure to GB"),
    ("ch08_q2_kv_count", q2_tokens_to_blocks, "tokens_as_blocks", "converted them to blocks"),
    ("ch08_q2_kv_count", q2_blocks_to_tokens, "blocks_as_tokens", "converted them to tokens"),
]


@pytest.mark.parametrize("grade_id, fn, key, phrase", CONVERSIONS, ids=[c[1].__name__ for c in CONVERSIONS])
def test_a_converted_figure_is_named_visible_and_hidden(grade_id, fn, key, phrase):
    from kvcoach import slips
    message = fails(grade_id, fn)
    assert phrase in message and "The same slip explains all" in message, message
    assert "Or" not in message.split("\n")[2]          # no second slip offered beside it
    for seed in SEEDS:
        assert slips.general(key) in fails(grade_id, fn, hidden=True, seed=seed)


def test_the_gb_figure_in_the_message_is_the_converted_one():
    # 07.log prints 3.81 GiB; the learner's 4.09096 GB is named by its own figure: 3.81 x 2^30 / 10^9 = 4.091
    message = fails("ch08_q1_available_gib", q1_converted_to_gb)
    assert "07.log" in message and "(4.091, x 2^30 / 10^9)" in message
