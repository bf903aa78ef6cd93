"""Shared case builders: cases from real bundled configs and model geometries.

A case is ``{"label": str, "kwargs": {...}, "context": {...}}`` (JSON-safe; see
``autograder.checks.schema``). Chapters build their visible cases from these
and pass the hidden builders (``config_hidden``, ``geometry_hidden``) as an
exercise's ``hidden_cases``.
"""

from __future__ import annotations

import copy
import functools
import random

import kvlib as kv

GEOMETRY = ("layers", "kv_heads", "head_dim", "dtype_bytes")


def short(model_id: str) -> str:
    return model_id.split("/", 1)[1]


def non_mla_models() -> list:
    return list(_non_mla_models())


@functools.cache
def _non_mla_models() -> tuple:
    # Hidden-case builders ask for this list on every case; reading every bundled config each
    # time made a 200-seed sweep of the chapters cost minutes (the configs never change in a run).
    return tuple(m for m in kv.course_models() if not kv.parse_config(kv.bundled_config(m)).is_mla)


@functools.cache
def model_spec(model: str):
    """``kv.load_model(model)`` of a bundled model, read once (a frozen ModelSpec)."""
    return kv.load_model(model)


def dtype_name(b: int) -> str:
    return {1: "fp8", 2: "bf16", 4: "fp32"}.get(b, f"{b}-byte")


def random_seq_len(rng: random.Random, case: dict | None = None) -> int:
    """A length for a hidden case: a power of two or any count, within the case's model's context.

    A sequence past ``max_position_embeddings`` is one no engine would start (kvlib.check_deployment),
    so a case built from a bundled model draws again, and at last any length up to that limit.
    """
    model = (case or {}).get("context", {}).get("model")
    limit = model_spec(model).max_position_embeddings if model else None
    for _ in range(20):
        length = rng.choice([2 ** rng.randint(7, 18), rng.randint(1, 300_000)])
        if limit is None or length <= limit:
            return length
    return rng.randint(1, limit)


# ---------------------------------------------------------------------------
# A raw Hugging Face config dict as the argument
# ---------------------------------------------------------------------------
def config_case(model_id: str, config: dict, dtype_bytes=None, variant="as published", hint="") -> dict:
    """A case whose ``config`` is a raw config dict (``dtype_bytes`` omitted: the learner's default)."""
    kwargs = {"config": config}
    if dtype_bytes is not None:
        kwargs["dtype_bytes"] = dtype_bytes
    shown = "dtype_bytes left at its default" if dtype_bytes is None else f"dtype_bytes={dtype_bytes}"
    name = f"{short(model_id)} config" + ("" if variant == "as published" else f" with {variant}")
    return {"label": f"{name}, {shown}", "kwargs": kwargs,
            "context": {"model": model_id, "variant": variant, "config_name": name, "hint": hint}}


def config_spec(case: dict):
    return kv.parse_config(case["kwargs"]["config"])


def config_bytes_per_token(case: dict) -> int:
    """kvlib's bytes per token of a config case (every layer counted, dtype_bytes default 2)."""
    return config_spec(case).kv_bytes_per_token(case["kwargs"].get("dtype_bytes", 2))


def config_slip_inputs(case: dict) -> dict:
    spec = config_spec(case)
    return dict(layers=spec.num_kv_layers, kv_heads=spec.num_kv_heads, head_dim=spec.head_dim,
                dtype_bytes=case["kwargs"].get("dtype_bytes", 2), num_heads=spec.num_heads,
                hidden_size=spec.hidden_size)


def head_count_slip_inputs(case: dict) -> dict:
    """``config_slip_inputs`` and ``kv_field_absent``: the config has no value for num_key_value_heads (absent or
    null), where reading the absence as one KV head in all (MQA) is the slip (ch01 Exercise 6, ch02 Exercise 1)."""
    return dict(config_slip_inputs(case), kv_field_absent=case["kwargs"]["config"].get("num_key_value_heads") is None)


CONFIG_VARIANTS = ("as published", "num_key_value_heads removed", "num_key_value_heads: null",
                   "explicit head_dim", "head_dim removed", "head_dim: null", "other layer count",
                   "other GPT-2 sizes")


def _layer_key(config: dict) -> str:
    return "n_layer" if "n_layer" in config else "num_hidden_layers"


def mutate_config(rng: random.Random, variant: str, config: dict) -> dict:
    """A copy of ``config`` with one of ``CONFIG_VARIANTS`` applied."""
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


def config_hidden(seed: int) -> tuple:
    """Sixteen config cases: every variant twice, over the bundled non-MLA configs, dtype_bytes 1/2/4/default."""
    rng = random.Random(seed)
    models = non_mla_models()
    configs = {m: kv.bundled_config(m) for m in models}
    cases = []
    variants = list(CONFIG_VARIANTS) * 2
    rng.shuffle(variants)
    for variant in variants:
        model = rng.choice([m for m in models if _applies(variant, configs[m])])
        config = mutate_config(rng, variant, configs[model])
        if rng.random() < 0.3:  # a second mutation on top
            config = mutate_config(rng, "other layer count", config)
        dtype = rng.choice([None, 1, 2, 4])
        case = config_case(model, config, dtype, variant)
        config_bytes_per_token(case)  # every hidden config must be one kvlib reads
        cases.append(case)
    return tuple(cases)


# ---------------------------------------------------------------------------
# A model's geometry (L, K, D, b) as the arguments
# ---------------------------------------------------------------------------
def geometry_case(model: str, dtype_bytes: int, label: str, **extra) -> dict:
    """A case with a bundled model's layers, kv_heads, head_dim, the given dtype_bytes and ``extra``."""
    spec = model_spec(model)
    kwargs = dict(layers=spec.num_kv_layers, kv_heads=spec.num_kv_heads, head_dim=spec.head_dim,
                  dtype_bytes=dtype_bytes)
    kwargs.update(extra)
    context = dict(model=spec.name, num_heads=spec.num_heads, hidden_size=spec.hidden_size)
    return {"label": label, "kwargs": kwargs, "context": context}


def bytes_per_token(case: dict) -> int:
    """kvlib's bytes per token of a geometry case."""
    return kv.kv_bytes_per_token(*(case["kwargs"][name] for name in GEOMETRY))


def geometry_slip_inputs(case: dict) -> dict:
    inputs = dict(case["kwargs"])
    inputs.update({k: case["context"][k] for k in ("num_heads", "hidden_size") if k in case["context"]})
    return inputs


def geometry_hidden(extra, count: int = 8):
    """A hidden-case builder: ``count`` geometries of bundled non-MLA models, dtype_bytes 1, 2 or 4;
    ``extra(rng, case)`` adds the exercise's other arguments."""
    def build(seed: int) -> tuple:
        rng = random.Random(seed)
        models = non_mla_models()
        cases = []
        for _ in range(count):
            model, dtype = rng.choice(models), rng.choice([1, 2, 4])
            case = geometry_case(model, dtype, f"{short(model)}, {dtype_name(dtype)}")
            extra(rng, case)
            cases.append(case)
        return tuple(cases)
    return build


def node_budget_bytes(model: str, gpu: str, num_gpus: int, reserve_bytes: int) -> int:
    """KV budget: num_gpus x CUDA-reported memory, less bf16 weights and a reserve (``kv.kv_pool_bytes``, u = 1)."""
    return kv.kv_pool_bytes(gpu_bytes=num_gpus * kv.get_gpu(gpu).cuda_memory_bytes, utilization=1,
                            weight_bytes=model_spec(model).weight_bytes(2), other_bytes=reserve_bytes)


# ---------------------------------------------------------------------------
# The learner's own drill problem (value exercises, ch09)
# ---------------------------------------------------------------------------
def drill_label(topic: str) -> str:
    """The label of every learner's one case on ``topic`` (``your <topic> question``)."""
    return f"your {topic} question"


def drill_cases(topic: str):
    """A visible-case builder ``f(student=None)``: one case, the learner's own problem on ``topic``
    (``kvcoach.drills.student_problem``); its context holds the id (None: no id known). The label is the same
    for every learner (``drill_label``: a checks module's ``EDGES`` names it); the feedback names the id."""
    def build(student=None) -> tuple:
        return ({"label": drill_label(topic), "kwargs": {}, "context": {"student": student, "topic": topic}},)
    return build


def drill_problem(case: dict):
    """The ``kvcoach.drills.Problem`` of a drill case (its student's problem on its topic)."""
    from kvcoach.drills import student_problem
    return student_problem(case["context"]["student"], case["context"]["topic"])


def drill_answer(case: dict):
    """kvlib's answer to a drill case's problem."""
    return drill_problem(case).answer


def drill_slip_inputs(case: dict) -> dict:
    """The keywords ``kvcoach.slips`` needs to name a slip in a drill case's problem."""
    return dict(drill_problem(case).inputs)


def no_hidden_cases(seed: int) -> tuple:
    """Value exercises have no hidden cases: the learner's own problem is the case."""
    return ()
