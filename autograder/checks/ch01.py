"""Chapter 01 (the KV formula): its six graded exercises, as data.

Grade ids, function names and parameter order are a contract with the
grading pipeline; points (3/1/1/2/2/2) are on the source notebook's test cells.

=======================================  ==========================================================
grade id                                 the learner writes
=======================================  ==========================================================
ch01_q1_bytes_per_token_from_config      bytes_per_token_from_config(config, dtype_bytes=2)
ch01_q2_kv_bytes_per_sequence            kv_bytes_for_sequence(L, K, D, b, seq_len)
ch01_q3_kv_bytes_per_batch               kv_bytes_for_batch(L, K, D, b, seq_len, batch_size)
ch01_q4_sequences_that_fit               sequences_that_fit(budget_bytes, L, K, D, b, seq_len)
ch01_q5_sequences_on_gpu                 sequences_on_gpu(gpu, num_params, weight_dtype_bytes, utilization,
                                         other_bytes, bytes_per_token, seq_len)
ch01_q6_kv_head_sharing                  kv_head_sharing(config, dtype_bytes=2) -> (H // K, extra bytes/token)
=======================================  ==========================================================

(L, K, D, b stand for layers, kv_heads, head_dim, dtype_bytes.)

Expected values come from kvlib: q1 from ``kvlib.parse_config(config).kv_bytes_per_token(dtype_bytes)``
(every layer counted in full: no sliding-window cap in this chapter), q2-q4 from
``kv_bytes_per_token``, ``kv_bytes_per_sequence``, ``kv_bytes_total`` and ``max_concurrency``.
Visible cases are real bundled configs; hidden cases are drawn from a seed over the
bundled (non-MLA) configs with mutations: num_key_value_heads removed or null, head_dim
added, removed or null, other layer counts, dtype_bytes of 1, 2 or 4.

q5 starts from a GPU as a dict ``{"name", "label_gb", "cuda_total_gib"}`` (kvlib's GPU table:
the label and the total CUDA reports, in the units a datasheet and a log print them); its
expected value is ``kv.max_concurrency(kv.kv_pool_bytes(cuda_total_gib x 2^30, u,
kv.weight_bytes(num_params, weight_dtype_bytes), other_bytes), kv.kv_bytes_per_sequence(...))``,
0 when that is negative. Visible and hidden cases are bundled models' parameter counts
(kvlib's count) on kvlib's GPUs. q6's expected value is ``(H // K, 2 L (H - K) D b)`` from
``kvlib.parse_config``: the query heads each KV head serves, and what counting the query heads
would add to the bytes per token; its hidden cases are q1's kind, drawn with another seed.
"""

from __future__ import annotations

import random

import kvlib as kv

from .cases import (
    CONFIG_VARIANTS,
    GEOMETRY,
    bytes_per_token,
    config_bytes_per_token,
    config_case,
    config_hidden,
    config_slip_inputs,
    head_count_slip_inputs,
    config_spec,
    geometry_case,
    geometry_hidden,
    geometry_slip_inputs,
    node_budget_bytes,
    non_mla_models,
    random_seq_len,
    short,
)
from .answers import INT, Tuple
from .schema import Edge, Exercise, exercises

H100 = "H100-SXM"
RESERVE_BYTES = 4 * kv.GB          # activations and workspace on one GPU ([kv-math]: 2 + 2 GB)
NODE_RESERVE_BYTES = 20 * kv.GB    # the same on a 4-GPU node ([build-up]: ~20 GB)
Q1_VARIANTS = CONFIG_VARIANTS
Q2_PARAMS = GEOMETRY + ("seq_len",)

HIDDEN_NOTE_CONFIG = ("(Hidden cases use other bundled configs, num_key_value_heads or head_dim absent "
                      "or null, other layer counts, and dtype_bytes of 1, 2 or 4.)")
HIDDEN_NOTE_GEOMETRY = "(Hidden cases use other models' geometry, dtype_bytes of 1, 2 or 4, and other lengths.)"

_cfg = kv.bundled_config
_HEAD_DIM_HINT = "an explicit head_dim in the config wins over hidden_size / num_attention_heads."


def _head_dim_cases():
    """The head_dim variants of the hidden cases, each once: written out where the config had none (Llama 3.1 8B,
    96 against 4096 // 32 = 128), removed and null where it had one (Qwen3 0.6B: then 1024 // 16 = 64, not 128),
    and GPT-2 with other sizes (12 layers, 16 heads of 80: n_embd 1280)."""
    yield config_case("meta-llama/Llama-3.1-8B", dict(_cfg("meta-llama/Llama-3.1-8B"), head_dim=96),
                      variant="explicit head_dim", hint=_HEAD_DIM_HINT)
    qwen3 = _cfg("Qwen/Qwen3-0.6B")
    yield config_case("Qwen/Qwen3-0.6B", {k: v for k, v in qwen3.items() if k != "head_dim"}, dtype_bytes=4,
                      variant="head_dim removed", hint="no head_dim: hidden_size // num_attention_heads.")
    yield config_case("Qwen/Qwen3-0.6B", dict(qwen3, head_dim=None), variant="head_dim: null",
                      hint="head_dim set to null means the same as absent: hidden_size // num_attention_heads.")
    yield config_case("openai-community/gpt2-large", dict(_cfg("openai-community/gpt2-large"), n_layer=12, n_head=16,
                                                          n_embd=1280), variant="other GPT-2 sizes",
                      hint="read n_layer, n_head and n_embd from the config you are given.")


def _without_kv_heads(model: str) -> dict:
    config = _cfg(model)
    del config["num_key_value_heads"]
    return config

NO_KV_HEADS_EDGE = Edge("num_key_value_heads null or absent means K = H (one KV head per query head)")
DEFAULT_DTYPE_EDGE = Edge("dtype_bytes left out means 2")
Q1_VISIBLE = (
    DEFAULT_DTYPE_EDGE.on(config_case("meta-llama/Llama-3.1-8B", _cfg("meta-llama/Llama-3.1-8B"))),
    config_case("meta-llama/Llama-2-7b-hf", _cfg("meta-llama/Llama-2-7b-hf"),
                hint="dtype_bytes is an argument: do not read torch_dtype."),
    config_case("google/gemma-2-9b-it", _cfg("google/gemma-2-9b-it"), hint=_HEAD_DIM_HINT),
    NO_KV_HEADS_EDGE.on(config_case("openai-community/gpt2-large", _cfg("openai-community/gpt2-large"),
                                    hint="GPT-2 configs name the fields n_layer, n_head and n_embd, and have no "
                                         "num_key_value_heads (so one KV head per query head).")),
    config_case("Qwen/Qwen3-0.6B", _cfg("Qwen/Qwen3-0.6B"), dtype_bytes=1, hint=_HEAD_DIM_HINT),
    NO_KV_HEADS_EDGE.on(config_case(
        "meta-llama/Llama-3.1-8B", dict(_cfg("meta-llama/Llama-3.1-8B"), num_key_value_heads=None),
        dtype_bytes=4, variant="num_key_value_heads: null",
        hint="num_key_value_heads set to null means the same as absent: one KV head per query head.")),
    # the hidden variants, each visible once: the field removed, another layer count, an explicit dtype_bytes=2
    config_case("mistralai/Mistral-7B-v0.1", _without_kv_heads("mistralai/Mistral-7B-v0.1"), dtype_bytes=2,
                variant="num_key_value_heads removed",
                hint="no num_key_value_heads means one KV head per query head."),
    config_case("Qwen/Qwen2.5-7B", dict(_cfg("Qwen/Qwen2.5-7B"), num_hidden_layers=40), variant="other layer count",
                hint="read num_hidden_layers from the config you are given."),
) + tuple(_head_dim_cases())

Q2_VISIBLE = (
    geometry_case("llama-3.1-8b", 2, "Llama 3.1 8B, bf16, 8,192 tokens", seq_len=8192),
    geometry_case("llama-3.3-70b", 2, "Llama 3.3 70B, bf16, 8,192 tokens", seq_len=8192),
    geometry_case("qwen2.5-7b", 1, "Qwen2.5 7B, fp8, 32,768 tokens", seq_len=32768),
    geometry_case("llama-2-7b", 2, "Llama 2 7B (MHA), bf16, 4,000 tokens", seq_len=4000),
    geometry_case("gpt2-large", 4, "GPT-2 large (MHA, head_dim 64), fp32, 1,024 tokens", seq_len=1024),
)

Q3_VISIBLE = (
    geometry_case("llama-3.3-70b", 2, "Llama 3.3 70B, bf16, batch of 32 x 8,192 tokens", seq_len=8192, batch_size=32),
    geometry_case("llama-3.1-8b", 2, "Llama 3.1 8B, bf16, batch of 32 x 4,096 tokens", seq_len=4096, batch_size=32),
    geometry_case("mistral-7b", 1, "Mistral 7B, fp8, batch of 8 x 16,384 tokens", seq_len=16384, batch_size=8),
    geometry_case("phi-3-mini", 2, "Phi-3 mini (MHA), bf16, batch of 5 x 3,000 tokens", seq_len=3000, batch_size=5),
    geometry_case("gpt2-large", 4, "GPT-2 large (MHA, head_dim 64), fp32, batch of 7 x 1,024 tokens", seq_len=1024,
                  batch_size=7),
)

_B70 = node_budget_bytes("llama-3.3-70b", H100, 4, NODE_RESERVE_BYTES)
_B8 = node_budget_bytes("llama-3.1-8b", H100, 1, RESERVE_BYTES)
_B32 = node_budget_bytes("qwen2.5-32b", "A100-80GB", 1, RESERVE_BYTES)
WHOLE_SEQUENCES_EDGE = Edge("whole sequences only: the count is floored (exactly k sequences, one byte less, "
                            "one byte more)")
BELOW_ONE_SEQUENCE_EDGE = Edge("a budget below one sequence holds 0")
Q4_VISIBLE = (
    geometry_case("llama-3.3-70b", 2, "Llama 3.3 70B on 4 x H100 (CUDA memory less weights and 20 GB), "
                  "8,192 tokens", budget_bytes=_B70, seq_len=8192),
    geometry_case("llama-3.1-8b", 2, "Llama 3.1 8B on one H100 (CUDA memory less weights and 4 GB), "
                  "8,192 tokens", budget_bytes=_B8, seq_len=8192),
    geometry_case("llama-3.1-8b", 2, "Llama 3.1 8B on one H100, 131,072 tokens", budget_bytes=_B8, seq_len=131072),
    geometry_case("qwen2.5-32b", 1, "Qwen2.5 32B on one A100-80GB, fp8 KV, 32,768 tokens",
                  budget_bytes=_B32, seq_len=32768),
    BELOW_ONE_SEQUENCE_EDGE.on(geometry_case(
        "llama-3.1-8b", 2, "Llama 3.1 8B, a 1 GB budget, 8,192 tokens (less than one sequence)",
        budget_bytes=kv.GB, seq_len=8192)),
    geometry_case("gpt2-large", 4, "GPT-2 large (MHA, head_dim 64) on one H100 (CUDA memory less weights and 4 GB), "
                  "fp32, 1,024 tokens", budget_bytes=node_budget_bytes("gpt2-large", H100, 1, RESERVE_BYTES),
                  seq_len=1024),
    # the floor's edge: Llama 3.1 8B's 8,192-token sequence is exactly 1 GiB (131,072 B x 8,192)
    *WHOLE_SEQUENCES_EDGE.on_each((
        geometry_case("llama-3.1-8b", 2, "Llama 3.1 8B, a budget of exactly 3 GiB: three 8,192-token sequences",
                      budget_bytes=3 * kv.GiB, seq_len=8192),
        geometry_case("llama-3.1-8b", 2, "Llama 3.1 8B, a budget one byte short of 3 GiB, 8,192 tokens",
                      budget_bytes=3 * kv.GiB - 1, seq_len=8192),
        geometry_case("llama-3.1-8b", 2, "Llama 3.1 8B, a budget one byte over 3 GiB, 8,192 tokens",
                      budget_bytes=3 * kv.GiB + 1, seq_len=8192),
    )),
)


def _with_seq_len(rng, case):
    case["kwargs"]["seq_len"] = random_seq_len(rng, case)


def _with_batch(rng, case):
    case["kwargs"]["seq_len"] = random_seq_len(rng, case)
    case["kwargs"]["batch_size"] = rng.randint(1, 512)


def _with_budget(rng, case):
    seq_len = random_seq_len(rng, case)
    per_seq = bytes_per_token(case) * seq_len
    whole = rng.choice([0, rng.randint(1, 20), rng.randint(20, 2000)])
    case["kwargs"]["budget_bytes"] = whole * per_seq + rng.randint(1, per_seq - 1) if per_seq > 1 else whole
    case["kwargs"]["seq_len"] = seq_len


def _budget_edge(offset: int):
    """``extra`` for a hidden case on the floor's edge: a budget of whole sequences, plus ``offset`` bytes."""
    def extra(rng, case):
        seq_len = random_seq_len(rng, case)
        per_seq = bytes_per_token(case) * seq_len
        case["kwargs"]["budget_bytes"] = rng.randint(2, 50) * per_seq + offset
        case["kwargs"]["seq_len"] = seq_len
    return extra


def budget_hidden(seed: int) -> tuple:
    """Exercise 4's hidden cases: eight drawn budgets, then the floor's edge (exactly whole sequences, one byte
    short, one byte over) and a budget below one sequence, on other drawn geometries."""
    edges = [geometry_hidden(_budget_edge(offset), count=1)(seed + 1 + k) for k, offset in enumerate((0, -1, 1))]
    below = geometry_hidden(_budget_edge(0), count=1)(seed + 4)[0]
    below = dict(below, kwargs=dict(below["kwargs"], budget_bytes=rng_fraction(seed, below)))
    return geometry_hidden(_with_budget)(seed) + tuple(c for e in edges for c in e) + (below,)


def rng_fraction(seed: int, case: dict) -> int:
    """A budget below one sequence of ``case``."""
    per_seq = bytes_per_token(case) * case["kwargs"]["seq_len"]
    return random.Random(seed).randint(1, per_seq - 1)


def budget_side(case) -> str | None:
    """Which side of Exercise 4's floor a case sits on (None: off the edge)."""
    per_seq = bytes_per_token(case) * case["kwargs"]["seq_len"]
    budget = case["kwargs"]["budget_bytes"]
    if budget < per_seq:
        return "below one sequence"
    return {0: "exactly whole", per_seq - 1: "one byte short", 1: "one byte over"}.get(budget % per_seq)


# --- Exercise 5: sequences on one GPU, from the memory CUDA reports and a parameter count -----------
HIDDEN_NOTE_GPU = ("(Hidden cases use other bundled models on other GPUs of kvlib's table, weights of 1, 2 "
                   "or 4 bytes per parameter, other utilizations, other allocations and lengths, and a "
                   "model whose weights do not fit.)")
Q5_PARAMS = ("gpu", "num_params", "weight_dtype_bytes", "utilization", "other_bytes", "bytes_per_token", "seq_len")


def gpu_card(name: str) -> dict:
    """A GPU as a dict: its name, the label in GB and the total CUDA reports in GiB (two decimals, as logged)."""
    gpu = kv.get_gpu(name)
    label = gpu.memory_bytes / kv.GB
    return {"name": gpu.name, "label_gb": int(label) if label.is_integer() else label,
            "cuda_total_gib": round(gpu.cuda_memory_bytes / kv.GiB, 2)}


def gpu_case(model: str, gpu: str, label: str, *, weight_dtype_bytes: int, utilization: float, other_bytes: int,
             kv_dtype_bytes: int, seq_len: int) -> dict:
    """A case of q5: a bundled model's parameter count and bytes per token on one of kvlib's GPUs."""
    spec = kv.load_model(model)
    card = gpu_card(gpu)
    kwargs = dict(gpu=card, num_params=spec.num_params(), weight_dtype_bytes=weight_dtype_bytes,
                  utilization=utilization, other_bytes=other_bytes,
                  bytes_per_token=kv.kv_bytes_per_token(spec.num_kv_layers, spec.num_kv_heads, spec.head_dim,
                                                        kv_dtype_bytes),
                  seq_len=seq_len)
    return {"label": label, "kwargs": kwargs, "context": {"model": spec.name, "config_name": card["name"]}}


def gpu_slip_inputs(case: dict) -> dict:
    k = case["kwargs"]
    return dict(gpu_bytes=k["gpu"]["cuda_total_gib"] * kv.GiB, label_bytes=k["gpu"]["label_gb"] * kv.GB,
                num_params=k["num_params"], weight_dtype_bytes=k["weight_dtype_bytes"],
                utilization=k["utilization"], other_bytes=k["other_bytes"],
                bytes_per_token=k["bytes_per_token"], seq_len=k["seq_len"])


def _pool_bytes(case: dict) -> int:
    k = case["kwargs"]
    return kv.kv_pool_bytes(gpu_bytes=k["gpu"]["cuda_total_gib"] * kv.GiB, utilization=k["utilization"],
                            weight_bytes=kv.weight_bytes(k["num_params"], k["weight_dtype_bytes"]),
                            other_bytes=k["other_bytes"])


def sequences_on_gpu_expected(case: dict) -> int:
    """Whole sequences in the pool M u - W - O (kvlib's one pool rule), 0 when the weights leave no room."""
    k = case["kwargs"]
    per_seq = kv.kv_bytes_per_sequence(k["bytes_per_token"], k["seq_len"])
    return max(0, kv.max_concurrency(_pool_bytes(case), per_seq))


def _on_a_boundary(case: dict) -> bool:
    """The pool within a millionth of a sequence of a whole number: float rounding could tip the floor."""
    k = case["kwargs"]
    sequences = (k["gpu"]["cuda_total_gib"] * kv.GiB * k["utilization"] - k["num_params"] * k["weight_dtype_bytes"]
                 - k["other_bytes"]) / (k["bytes_per_token"] * k["seq_len"])
    return abs(sequences - round(sequences)) < 1e-6


WEIGHTS_DO_NOT_FIT_EDGE = Edge("weights that do not fit leave 0 sequences, never a negative count")
Q5_VISIBLE = (
    gpu_case("llama-3.1-8b", H100, "Llama 3.1 8B on one H100, bf16 weights and cache, u = 0.9, 4 GB other, "
             "8,192 tokens", weight_dtype_bytes=2, utilization=0.9, other_bytes=4 * kv.GB, kv_dtype_bytes=2,
             seq_len=8192),
    gpu_case("qwen2.5-32b", "A100-80GB", "Qwen2.5 32B on one A100-80GB, fp8 weights and cache, u = 0.92, "
             "3 GB other, 32,768 tokens", weight_dtype_bytes=1, utilization=0.92, other_bytes=3 * kv.GB,
             kv_dtype_bytes=1, seq_len=32768),
    gpu_case("llama-3.3-70b", "H200", "Llama 3.3 70B on one H200, fp8 weights, bf16 cache, u = 0.95, "
             "6 GB other, 16,384 tokens", weight_dtype_bytes=1, utilization=0.95, other_bytes=6 * kv.GB,
             kv_dtype_bytes=2, seq_len=16384),
    gpu_case("qwen3-0.6b", "L4", "Qwen3 0.6B on one L4, fp32 weights, bf16 cache, u = 1 (all of it), "
             "2 GB other, 40,960 tokens", weight_dtype_bytes=4, utilization=1.0, other_bytes=2 * kv.GB,
             kv_dtype_bytes=2, seq_len=40960),
    gpu_case("mistral-7b", "RTX-4090", "Mistral 7B on one RTX 4090, bf16 weights and cache, u = 0.9, "
             "1.5 GB other, 4,096 tokens", weight_dtype_bytes=2, utilization=0.9, other_bytes=1_500_000_000,
             kv_dtype_bytes=2, seq_len=4096),
    WEIGHTS_DO_NOT_FIT_EDGE.on(gpu_case(
        "llama-3.3-70b", H100, "Llama 3.3 70B on one H100, bf16 weights (they do not fit), u = 0.9, 4 GB other, "
        "8,192 tokens", weight_dtype_bytes=2, utilization=0.9, other_bytes=4 * kv.GB, kv_dtype_bytes=2,
        seq_len=8192)),
)


def gpu_hidden(seed: int, count: int = 8) -> tuple:
    """``count`` q5 cases: bundled models on kvlib's GPUs; one whose weights leave no room, the rest fit one or more."""
    rng = random.Random(seed)
    models, gpus = non_mla_models(), list(kv.gpus.single_gpus())
    cases = []
    while len(cases) < count:
        model, gpu = rng.choice(models), rng.choice(gpus)
        wb, kb = rng.choice([1, 2, 2, 4]), rng.choice([1, 2])
        case = gpu_case(model, gpu, f"{short(model)} on one {gpu}", weight_dtype_bytes=wb,
                        utilization=rng.choice([0.8, 0.85, 0.9, 0.92, 0.95, 1.0]),
                        other_bytes=rng.randint(kv.GB // 2, 8 * kv.GB), kv_dtype_bytes=kb,
                        seq_len=rng.choice([2 ** rng.randint(9, 17), rng.randint(256, 131_072)]))
        want_room = len(cases) < count - 1
        limit = kv.load_model(model).max_position_embeddings     # vLLM serves nothing longer
        if _on_a_boundary(case) or (_pool_bytes(case) > 0) != want_room \
                or (limit is not None and case["kwargs"]["seq_len"] > limit) \
                or (want_room and sequences_on_gpu_expected(case) < 1):
            continue
        cases.append(case)
    rng.shuffle(cases)
    return tuple(cases)


# --- Exercise 6: query heads per KV head, and the cost of counting the query heads ----------------
Q6_VISIBLE = (
    config_case("meta-llama/Llama-3.1-8B", _cfg("meta-llama/Llama-3.1-8B")),
    config_case("meta-llama/Llama-3.3-70B-Instruct", _cfg("meta-llama/Llama-3.3-70B-Instruct"), dtype_bytes=1),
    config_case("google/gemma-2-9b-it", _cfg("google/gemma-2-9b-it"), hint=_HEAD_DIM_HINT),
    config_case("openai/gpt-oss-20b", _cfg("openai/gpt-oss-20b"), dtype_bytes=4, hint=_HEAD_DIM_HINT),
    config_case("meta-llama/Llama-2-7b-hf", _cfg("meta-llama/Llama-2-7b-hf"),
                hint="num_key_value_heads equals num_attention_heads here: MHA, one KV head per query head."),
    config_case("openai-community/gpt2-large", _cfg("openai-community/gpt2-large"),
                hint="GPT-2 configs name the heads n_head and have no num_key_value_heads (so one KV head per "
                     "query head)."),
    config_case("meta-llama/Llama-3.1-8B", dict(_cfg("meta-llama/Llama-3.1-8B"), num_key_value_heads=None),
                dtype_bytes=1, variant="num_key_value_heads: null",
                hint="num_key_value_heads set to null means the same as absent: one KV head per query head."),
    config_case("mistralai/Mistral-7B-v0.1", _without_kv_heads("mistralai/Mistral-7B-v0.1"),
                variant="num_key_value_heads removed", hint="no num_key_value_heads means one KV head per query head."),
    config_case("Qwen/Qwen2.5-7B", dict(_cfg("Qwen/Qwen2.5-7B"), num_hidden_layers=40), variant="other layer count",
                hint="read num_hidden_layers from the config you are given."),
) + tuple(_head_dim_cases())


def kv_head_sharing_expected(case: dict) -> tuple:
    """(H // K, bytes per token counted with H less the real one), every layer counted, from kvlib."""
    spec = config_spec(case)
    dtype = case["kwargs"].get("dtype_bytes", 2)
    with_query_heads = kv.kv_bytes_per_token(spec.num_kv_layers, spec.num_heads, spec.head_dim, dtype)
    return (kv.formulas.exact_div(spec.num_heads, spec.num_kv_heads), with_query_heads - config_bytes_per_token(case))


Q6_SEED_OFFSET = 6      # q6's hidden configs are drawn apart from q1's


#: The edges the exercise text decides (a tie, a rounding direction, a tolerance, an "other"), each
#: with the visible cases that sit on it (tests/test_case_variants.py checks that they exist).
EDGES = {
    "ch01_q1_bytes_per_token_from_config": (NO_KV_HEADS_EDGE.listing(), DEFAULT_DTYPE_EDGE.listing()),
    "ch01_q4_sequences_that_fit": (WHOLE_SEQUENCES_EDGE.listing(budget_side), BELOW_ONE_SEQUENCE_EDGE.listing(budget_side)),
    "ch01_q5_sequences_on_gpu": (WEIGHTS_DO_NOT_FIT_EDGE.listing(),),
}


EXERCISES = exercises(
    Exercise(
        grade_id="ch01_q1_bytes_per_token_from_config",
        function_name="bytes_per_token_from_config",
        params=("config", "dtype_bytes"),
        visible_cases=Q1_VISIBLE,
        hidden_cases=config_hidden,
        expected=config_bytes_per_token,
        quantity="kv_bytes_per_token",
        slip_inputs=config_slip_inputs,
        hidden_note=HIDDEN_NOTE_CONFIG,
    ),
    Exercise(
        grade_id="ch01_q2_kv_bytes_per_sequence",
        function_name="kv_bytes_for_sequence",
        params=Q2_PARAMS,
        visible_cases=Q2_VISIBLE,
        hidden_cases=geometry_hidden(_with_seq_len),
        expected=lambda c: kv.kv_bytes_per_sequence(bytes_per_token(c), c["kwargs"]["seq_len"]),
        quantity="kv_bytes_per_sequence",
        slip_inputs=geometry_slip_inputs,
        hidden_note=HIDDEN_NOTE_GEOMETRY,
    ),
    Exercise(
        grade_id="ch01_q3_kv_bytes_per_batch",
        function_name="kv_bytes_for_batch",
        params=Q2_PARAMS + ("batch_size",),
        visible_cases=Q3_VISIBLE,
        hidden_cases=geometry_hidden(_with_batch),
        expected=lambda c: kv.kv_bytes_total(bytes_per_token(c), c["kwargs"]["seq_len"], c["kwargs"]["batch_size"]),
        quantity="kv_bytes_total",
        slip_inputs=geometry_slip_inputs,
        hidden_note=HIDDEN_NOTE_GEOMETRY,
    ),
    Exercise(
        grade_id="ch01_q4_sequences_that_fit",
        function_name="sequences_that_fit",
        params=("budget_bytes",) + Q2_PARAMS,
        visible_cases=Q4_VISIBLE,
        hidden_cases=budget_hidden,
        expected=lambda c: kv.max_concurrency(c["kwargs"]["budget_bytes"],
                                              kv.kv_bytes_per_sequence(bytes_per_token(c), c["kwargs"]["seq_len"])),
        quantity="max_concurrency",
        slip_inputs=geometry_slip_inputs,
        unit="sequences",
        hidden_note=HIDDEN_NOTE_GEOMETRY,
    ),
    Exercise(
        grade_id="ch01_q5_sequences_on_gpu",
        function_name="sequences_on_gpu",
        params=Q5_PARAMS,
        visible_cases=Q5_VISIBLE,
        hidden_cases=gpu_hidden,
        expected=sequences_on_gpu_expected,
        quantity="sequences_on_gpu",
        slip_inputs=gpu_slip_inputs,
        unit="sequences",
        hidden_note=HIDDEN_NOTE_GPU,
    ),
    Exercise(
        grade_id="ch01_q6_kv_head_sharing",
        function_name="kv_head_sharing",
        params=("config", "dtype_bytes"),
        visible_cases=Q6_VISIBLE,
        hidden_cases=lambda seed: config_hidden(seed + Q6_SEED_OFFSET),
        expected=kv_head_sharing_expected,
        answer=Tuple((INT, INT)),
        quantity="kv_head_sharing",
        slip_inputs=head_count_slip_inputs,
        unit="(query heads per KV head, extra bytes per token)",
        hidden_note=HIDDEN_NOTE_CONFIG,
    ),
)
