"""Chapter 01 (the KV formula): the four graded exercises and their instant checks.

Grade ids are a contract with the grading pipeline; keep them as they are.

=======================================  ======  ==========================================================
grade id                                 points  the learner writes
=======================================  ======  ==========================================================
ch01_q1_bytes_per_token_from_config         3    bytes_per_token_from_config(config, dtype_bytes=2)
ch01_q2_kv_bytes_per_sequence               1    kv_bytes_for_sequence(L, K, D, b, seq_len)
ch01_q3_kv_bytes_per_batch                  1    kv_bytes_for_batch(L, K, D, b, seq_len, batch_size)
ch01_q4_sequences_that_fit                  2    sequences_that_fit(budget_bytes, L, K, D, b, seq_len)
=======================================  ======  ==========================================================

(L, K, D, b stand for layers, kv_heads, head_dim, dtype_bytes.)

Expected values come from kvlib: q1 from ``kvlib.parse_config(config).kv_bytes_per_token(dtype_bytes)``
(every layer counted in full: no sliding-window cap in this chapter), q2-q4 from
``kv_bytes_per_token``, ``kv_bytes_per_sequence``, ``kv_bytes_total`` and ``max_concurrency``.
Visible cases are real bundled configs; hidden cases are drawn from a seed over the
bundled (non-MLA) configs with mutations: num_key_value_heads removed or null, head_dim
added, removed or null, other layer counts, dtype_bytes of 1, 2 or 4.
"""

from __future__ import annotations

import copy
import random

import kvlib as kv

from .core import Exercise, check

GRADE_IDS = ("ch01_q1_bytes_per_token_from_config", "ch01_q2_kv_bytes_per_sequence",
             "ch01_q3_kv_bytes_per_batch", "ch01_q4_sequences_that_fit")

GEOMETRY = ("layers", "kv_heads", "head_dim", "dtype_bytes")
H100 = "H100-SXM"
RESERVE_BYTES = 4 * kv.GB          # activations and workspace on one GPU (seed 003: 2 + 2 GB)
NODE_RESERVE_BYTES = 20 * kv.GB    # the same on a 4-GPU node (seed 001: ~20 GB)


def _short(model_id: str) -> str:
    return model_id.split("/", 1)[1]


def _non_mla_models() -> list:
    return [m for m in kv.bundled_models() if not kv.parse_config(kv.bundled_config(m)).is_mla]


# ---------------------------------------------------------------------------
# q1: bytes per token from a raw config dict
# ---------------------------------------------------------------------------
def _q1_case(model_id: str, config: dict, dtype_bytes=None, variant="as published", hint="") -> dict:
    kwargs = {"config": config}
    if dtype_bytes is not None:
        kwargs["dtype_bytes"] = dtype_bytes
    shown = "dtype_bytes left at its default" if dtype_bytes is None else f"dtype_bytes={dtype_bytes}"
    name = f"{_short(model_id)} config" + ("" if variant == "as published" else f" with {variant}")
    return {"label": f"{name}, {shown}", "kwargs": kwargs,
            "context": {"model": model_id, "variant": variant, "config_name": name, "hint": hint}}


def _q1_spec(case: dict):
    return kv.parse_config(case["kwargs"]["config"])


def _q1_expected(case: dict) -> int:
    return _q1_spec(case).kv_bytes_per_token(case["kwargs"].get("dtype_bytes", 2))


def _q1_slip_inputs(case: dict) -> dict:
    spec = _q1_spec(case)
    return dict(layers=spec.num_kv_layers, kv_heads=spec.num_kv_heads, head_dim=spec.head_dim,
                dtype_bytes=case["kwargs"].get("dtype_bytes", 2), num_heads=spec.num_heads,
                hidden_size=spec.hidden_size)


def _q1_visible() -> tuple:
    cfg = kv.bundled_config
    llama_null = dict(cfg("meta-llama/Llama-3.1-8B"), num_key_value_heads=None)
    return (
        _q1_case("meta-llama/Llama-3.1-8B", cfg("meta-llama/Llama-3.1-8B")),
        _q1_case("meta-llama/Llama-2-7b-hf", cfg("meta-llama/Llama-2-7b-hf"),
                 hint="dtype_bytes is an argument: do not read torch_dtype."),
        _q1_case("google/gemma-2-9b-it", cfg("google/gemma-2-9b-it"),
                 hint="an explicit head_dim in the config wins over hidden_size / num_attention_heads."),
        _q1_case("openai-community/gpt2-large", cfg("openai-community/gpt2-large"),
                 hint="GPT-2 configs name the fields n_layer, n_head and n_embd, and have no "
                      "num_key_value_heads (so one KV head per query head)."),
        _q1_case("Qwen/Qwen3-0.6B", cfg("Qwen/Qwen3-0.6B"), dtype_bytes=1,
                 hint="an explicit head_dim in the config wins over hidden_size / num_attention_heads."),
        _q1_case("meta-llama/Llama-3.1-8B", llama_null, dtype_bytes=4, variant="num_key_value_heads: null",
                 hint="num_key_value_heads set to null means the same as absent: one KV head per query head."),
    )


def _layer_key(config: dict) -> str:
    return "n_layer" if "n_layer" in config else "num_hidden_layers"


def _mutate(rng: random.Random, variant: str, config: dict) -> dict:
    config = copy.deepcopy(config)
    if variant == "num_key_value_heads removed":
        del config["num_key_value_heads"]
    elif variant == "num_key_value_heads: null":
        config["num_key_value_heads"] = None
    elif variant == "explicit head_dim":
        derived = config["hidden_size"] // config["num_attention_heads"]
        config["head_dim"] = rng.choice([d for d in (64, 80, 96, 128, 192, 256) if d != derived])
    elif variant in ("head_dim removed", "head_dim: null"):
        if variant == "head_dim removed":
            del config["head_dim"]
        else:
            config["head_dim"] = None
    elif variant == "other GPT-2 sizes":
        heads = rng.choice([12, 16, 20, 25])
        config.update(n_layer=rng.randint(2, 64), n_head=heads, n_embd=heads * rng.choice([64, 80, 128]))
    elif variant == "other layer count":
        key = _layer_key(config)
        layers = rng.choice([n for n in range(2, 129) if n != config[key]])
        config[key] = layers
        if isinstance(config.get("layer_types"), list):
            pattern = config["layer_types"]
            config["layer_types"] = [pattern[i % len(pattern)] for i in range(layers)]
    return config


def _applies(variant: str, config: dict) -> bool:
    if variant == "other GPT-2 sizes":
        return "n_layer" in config
    if variant.startswith("num_key_value_heads"):
        return config.get("num_key_value_heads") is not None
    if variant == "explicit head_dim":
        return config.get("head_dim") is None and "num_attention_heads" in config
    if variant.startswith("head_dim"):
        return config.get("head_dim") is not None
    return True


Q1_VARIANTS = ("as published", "num_key_value_heads removed", "num_key_value_heads: null",
               "explicit head_dim", "head_dim removed", "head_dim: null", "other layer count",
               "other GPT-2 sizes")


def _q1_hidden(seed: int) -> tuple:
    rng = random.Random(seed)
    models = _non_mla_models()
    configs = {m: kv.bundled_config(m) for m in models}
    cases = []
    variants = list(Q1_VARIANTS) * 2
    rng.shuffle(variants)
    for variant in variants:
        model = rng.choice([m for m in models if _applies(variant, configs[m])])
        config = _mutate(rng, variant, configs[model])
        if rng.random() < 0.3:  # a second mutation on top
            config = _mutate(rng, "other layer count", config)
        dtype = rng.choice([None, 1, 2, 4])
        case = _q1_case(model, config, dtype, variant)
        _q1_expected(case)  # every hidden config must be one kvlib reads
        cases.append(case)
    return tuple(cases)


# ---------------------------------------------------------------------------
# q2-q4: from the geometry
# ---------------------------------------------------------------------------
def _geometry(model: str, dtype_bytes: int) -> tuple:
    """(kwargs, context) for a bundled model: its L, K, D and the slip context H, d."""
    spec = kv.load_model(model)
    kwargs = dict(layers=spec.num_kv_layers, kv_heads=spec.num_kv_heads, head_dim=spec.head_dim,
                  dtype_bytes=dtype_bytes)
    context = dict(model=spec.name, num_heads=spec.num_heads, hidden_size=spec.hidden_size)
    return kwargs, context


def _geo_case(model: str, dtype_bytes: int, label: str, **extra) -> dict:
    kwargs, context = _geometry(model, dtype_bytes)
    kwargs.update(extra)
    return {"label": label, "kwargs": kwargs, "context": context}


def _bytes_per_token(case: dict) -> int:
    return kv.kv_bytes_per_token(*(case["kwargs"][name] for name in GEOMETRY))


def _geo_slip_inputs(case: dict) -> dict:
    inputs = dict(case["kwargs"])
    inputs.update({k: case["context"][k] for k in ("num_heads", "hidden_size") if k in case["context"]})
    return inputs


def _q2_expected(case: dict) -> int:
    return kv.kv_bytes_per_sequence(_bytes_per_token(case), case["kwargs"]["seq_len"])


def _q3_expected(case: dict) -> int:
    k = case["kwargs"]
    return kv.kv_bytes_total(_bytes_per_token(case), k["seq_len"], k["batch_size"])


def _q4_expected(case: dict) -> int:
    k = case["kwargs"]
    return kv.max_concurrency(k["budget_bytes"], kv.kv_bytes_per_sequence(_bytes_per_token(case), k["seq_len"]))


def _dtype_name(b: int) -> str:
    return {1: "fp8", 2: "bf16", 4: "fp32"}.get(b, f"{b}-byte")


def _q2_visible() -> tuple:
    return (
        _geo_case("llama-3.1-8b", 2, "Llama 3.1 8B, bf16, 8,192 tokens", seq_len=8192),
        _geo_case("llama-3.3-70b", 2, "Llama 3.3 70B, bf16, 8,192 tokens", seq_len=8192),
        _geo_case("qwen2.5-7b", 1, "Qwen2.5 7B, fp8, 32,768 tokens", seq_len=32768),
        _geo_case("llama-2-7b", 2, "Llama 2 7B (MHA), bf16, 4,000 tokens", seq_len=4000),
    )


def _q3_visible() -> tuple:
    return (
        _geo_case("llama-3.3-70b", 2, "Llama 3.3 70B, bf16, batch of 32 x 8,192 tokens",
                  seq_len=8192, batch_size=32),
        _geo_case("llama-3.1-8b", 2, "Llama 3.1 8B, bf16, batch of 32 x 4,096 tokens",
                  seq_len=4096, batch_size=32),
        _geo_case("mistral-7b", 1, "Mistral 7B, fp8, batch of 8 x 16,384 tokens",
                  seq_len=16384, batch_size=8),
        _geo_case("phi-3-mini", 2, "Phi-3 mini (MHA), bf16, batch of 5 x 3,000 tokens",
                  seq_len=3000, batch_size=5),
    )


def node_budget_bytes(model: str, gpu: str, num_gpus: int, reserve_bytes: int) -> int:
    """KV budget: num_gpus x CUDA-reported memory, less bf16 weights and a reserve (``kv.kv_pool_bytes``, u = 1)."""
    return kv.kv_pool_bytes(gpu_bytes=num_gpus * kv.get_gpu(gpu).cuda_memory_bytes, utilization=1,
                            weight_bytes=kv.load_model(model).weight_bytes(2), other_bytes=reserve_bytes)


def _q4_visible() -> tuple:
    b70 = node_budget_bytes("llama-3.3-70b", H100, 4, NODE_RESERVE_BYTES)
    b8 = node_budget_bytes("llama-3.1-8b", H100, 1, RESERVE_BYTES)
    b32 = node_budget_bytes("qwen2.5-32b", "A100-80GB", 1, RESERVE_BYTES)
    return (
        _geo_case("llama-3.3-70b", 2, "Llama 3.3 70B on 4 x H100 (CUDA memory less weights and 20 GB), "
                  "8,192 tokens", budget_bytes=b70, seq_len=8192),
        _geo_case("llama-3.1-8b", 2, "Llama 3.1 8B on one H100 (CUDA memory less weights and 4 GB), "
                  "8,192 tokens", budget_bytes=b8, seq_len=8192),
        _geo_case("llama-3.1-8b", 2, "Llama 3.1 8B on one H100, 131,072 tokens", budget_bytes=b8,
                  seq_len=131072),
        _geo_case("qwen2.5-32b", 1, "Qwen2.5 32B on one A100-80GB, fp8 KV, 32,768 tokens",
                  budget_bytes=b32, seq_len=32768),
        _geo_case("llama-3.1-8b", 2, "Llama 3.1 8B, a 1 GB budget, 8,192 tokens (less than one sequence)",
                  budget_bytes=kv.GB, seq_len=8192),
    )


def _random_seq_len(rng: random.Random) -> int:
    return rng.choice([2 ** rng.randint(7, 18), rng.randint(1, 300_000)])


def _geo_hidden(seed: int, extra) -> tuple:
    """Eight cases over the bundled non-MLA geometries; ``extra(rng, case)`` adds the rest."""
    rng = random.Random(seed)
    models = _non_mla_models()
    cases = []
    for _ in range(8):
        model, dtype = rng.choice(models), rng.choice([1, 2, 4])
        case = _geo_case(model, dtype, f"{_short(model)}, {_dtype_name(dtype)}")
        extra(rng, case)
        cases.append(case)
    return tuple(cases)


def _q2_extra(rng, case):
    case["kwargs"]["seq_len"] = _random_seq_len(rng)


def _q3_extra(rng, case):
    case["kwargs"]["seq_len"] = _random_seq_len(rng)
    case["kwargs"]["batch_size"] = rng.randint(1, 512)


def _q4_extra(rng, case):
    seq_len = _random_seq_len(rng)
    per_seq = _bytes_per_token(case) * seq_len
    whole = rng.choice([0, rng.randint(1, 20), rng.randint(20, 2000)])
    case["kwargs"]["budget_bytes"] = whole * per_seq + rng.randint(1, per_seq - 1) if per_seq > 1 else whole
    case["kwargs"]["seq_len"] = seq_len


HIDDEN_NOTE_CONFIG = ("(Hidden cases use other bundled configs, num_key_value_heads or head_dim absent "
                      "or null, other layer counts, and dtype_bytes of 1, 2 or 4.)")
HIDDEN_NOTE_GEOMETRY = "(Hidden cases use other models' geometry, dtype_bytes of 1, 2 or 4, and other lengths.)"

Q2_PARAMS = GEOMETRY + ("seq_len",)

EXERCISES = {
    "ch01_q1_bytes_per_token_from_config": Exercise(
        grade_id="ch01_q1_bytes_per_token_from_config",
        function_name="bytes_per_token_from_config",
        quantity="kv_bytes_per_token",
        points=3,
        params=("config", "dtype_bytes"),
        visible_cases=_q1_visible(),
        hidden_cases=_q1_hidden,
        expected=_q1_expected,
        slip_inputs=_q1_slip_inputs,
        hidden_note=HIDDEN_NOTE_CONFIG,
    ),
    "ch01_q2_kv_bytes_per_sequence": Exercise(
        grade_id="ch01_q2_kv_bytes_per_sequence",
        function_name="kv_bytes_for_sequence",
        quantity="kv_bytes_per_sequence",
        points=1,
        params=Q2_PARAMS,
        visible_cases=_q2_visible(),
        hidden_cases=lambda seed: _geo_hidden(seed, _q2_extra),
        expected=_q2_expected,
        slip_inputs=_geo_slip_inputs,
        hidden_note=HIDDEN_NOTE_GEOMETRY,
    ),
    "ch01_q3_kv_bytes_per_batch": Exercise(
        grade_id="ch01_q3_kv_bytes_per_batch",
        function_name="kv_bytes_for_batch",
        quantity="kv_bytes_total",
        points=1,
        params=Q2_PARAMS + ("batch_size",),
        visible_cases=_q3_visible(),
        hidden_cases=lambda seed: _geo_hidden(seed, _q3_extra),
        expected=_q3_expected,
        slip_inputs=_geo_slip_inputs,
        hidden_note=HIDDEN_NOTE_GEOMETRY,
    ),
    "ch01_q4_sequences_that_fit": Exercise(
        grade_id="ch01_q4_sequences_that_fit",
        function_name="sequences_that_fit",
        quantity="max_concurrency",
        points=2,
        params=("budget_bytes",) + Q2_PARAMS,
        visible_cases=_q4_visible(),
        hidden_cases=lambda seed: _geo_hidden(seed, _q4_extra),
        expected=_q4_expected,
        slip_inputs=_geo_slip_inputs,
        unit="sequences",
        hidden_note=HIDDEN_NOTE_GEOMETRY,
    ),
}


def check_q1(fn, hidden: bool = False, seed: int | None = None) -> None:
    """Check ``bytes_per_token_from_config(config, dtype_bytes=2) -> int``."""
    __tracebackhide__ = True
    check(EXERCISES["ch01_q1_bytes_per_token_from_config"], fn, hidden=hidden, seed=seed)


def check_q2(fn, hidden: bool = False, seed: int | None = None) -> None:
    """Check ``kv_bytes_for_sequence(layers, kv_heads, head_dim, dtype_bytes, seq_len) -> int``."""
    __tracebackhide__ = True
    check(EXERCISES["ch01_q2_kv_bytes_per_sequence"], fn, hidden=hidden, seed=seed)


def check_q3(fn, hidden: bool = False, seed: int | None = None) -> None:
    """Check ``kv_bytes_for_batch(layers, kv_heads, head_dim, dtype_bytes, seq_len, batch_size) -> int``."""
    __tracebackhide__ = True
    check(EXERCISES["ch01_q3_kv_bytes_per_batch"], fn, hidden=hidden, seed=seed)


def check_q4(fn, hidden: bool = False, seed: int | None = None) -> None:
    """Check ``sequences_that_fit(budget_bytes, layers, kv_heads, head_dim, dtype_bytes, seq_len) -> int``."""
    __tracebackhide__ = True
    check(EXERCISES["ch01_q4_sequences_that_fit"], fn, hidden=hidden, seed=seed)
