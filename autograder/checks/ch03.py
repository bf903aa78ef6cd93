"""Chapter 03 (multi-head latent attention): its three graded exercises, as data.

Grade ids, function names and parameter order are a contract with the grading
pipeline; points are on the source notebook's test cells.

=======================================  ==========================================================
grade id                                 the learner writes
=======================================  ==========================================================
ch03_q1_mla_bytes_per_token_from_config  mla_bytes_per_token_from_config(config, dtype_bytes=2)
ch03_q2_kv_bytes_per_token_per_gpu       kv_bytes_per_token_per_gpu(config, tp, dtype_bytes=2)
ch03_q3_name_the_slip                    name_the_slip(answer_bytes, layers, latent_dim, rope_dim,
                                         dtype_bytes) -> "correct" | "extra_factor_2" |
                                         "missing_rope" | "other"
=======================================  ==========================================================

Expected values come from kvlib: q1 and q2 from
``kvlib.parse_config(config).kv_bytes_per_token(dtype_bytes, tp=tp)`` (every layer counted;
MLA's latent whole on every rank), q3 by comparing with ``kvlib.mla_bytes_per_token``.
Only one real MLA config is bundled (DeepSeek-V3), so the cases are it and labelled variants
of it: other layer counts, other latent and RoPE widths, the fields as other real MLA configs
spell them (``q_lora_rank: null`` as in DeepSeek-V2-Lite; ``head_dim`` and ``qk_head_dim``
written out, as transformers 5 saves DeepSeek configs; the language model nested under
``text_config``, as multimodal wrappers such as Kimi-VL do; ``num_key_value_heads`` absent).
q2 adds bundled GQA/MHA configs at TP sizes that divide or are multiples of their KV heads.
"""

from __future__ import annotations

import copy
import random

import kvlib as kv

from .answers import Choice
from .cases import config_case, config_spec, dtype_name, mutate_config, non_mla_models
from .schema import Edge, Exercise, exercises, with_sides

V3 = "deepseek-ai/DeepSeek-V3"
SLIP_CHOICES = ("correct", "extra_factor_2", "missing_rope", "other")

HIDDEN_NOTE_MLA = ("(Hidden cases use DeepSeek-V3's config and labelled variants of it: other layer counts, "
                   "latent and RoPE widths, fields spelled as other MLA configs spell them, and dtype_bytes "
                   "of 1, 2 or 4.)")
HIDDEN_NOTE_TP = ("(Hidden cases use bundled GQA and MHA configs and variants of DeepSeek-V3's, tp from 1 to 16, "
                  "and dtype_bytes of 1, 2 or 4.)")
HIDDEN_NOTE_SLIP = "(Hidden cases use other MLA geometries and other answers of each kind.)"

_HEAD_DIM_HINT = ("an MLA config's head_dim (and hidden_size / num_attention_heads) is not what the cache "
                  "stores: read kv_lora_rank and qk_rope_head_dim.")
_NESTED_HINT = "a multimodal wrapper keeps the language model's fields under text_config."
_MHA_HINT = "no num_key_value_heads (absent or null) means one KV head per query head: K = H."


# ---------------------------------------------------------------------------
# Variants of the one bundled MLA config
# ---------------------------------------------------------------------------
MLA_VARIANTS = ("as published", "other layer count", "other latent and rope widths",
                "DeepSeek-V2-Lite attention fields", "head_dim and qk_head_dim written out",
                "nested under text_config", "num_key_value_heads removed")


def mla_config(variant: str, rng: random.Random | None = None, **fields) -> dict:
    """DeepSeek-V3's config.json with ``variant`` applied (``fields`` override the values drawn)."""
    rng = rng or random.Random(0)
    config = copy.deepcopy(kv.bundled_config(V3))
    if variant == "other layer count":
        config["num_hidden_layers"] = fields.get("layers", rng.choice([n for n in range(2, 96) if n != 61]))
    elif variant == "other latent and rope widths":
        config["kv_lora_rank"] = fields.get("latent_dim", rng.choice([128, 256, 384, 768, 1024]))
        config["qk_rope_head_dim"] = fields.get("rope_dim", rng.choice([16, 32, 96, 128]))
        config["num_hidden_layers"] = fields.get("layers", config["num_hidden_layers"])
    elif variant == "DeepSeek-V2-Lite attention fields":
        # deepseek-ai/DeepSeek-V2-Lite: 27 layers, 16 heads (and 16 in num_key_value_heads), hidden 2048,
        # no query compression (q_lora_rank null), the same 512 + 64 latent and rope key.
        config.update(num_hidden_layers=27, num_attention_heads=16, num_key_value_heads=16, hidden_size=2048,
                      q_lora_rank=None, model_type="deepseek_v2")
    elif variant == "head_dim and qk_head_dim written out":
        config.update(head_dim=config["qk_rope_head_dim"],
                      qk_head_dim=config["qk_nope_head_dim"] + config["qk_rope_head_dim"])
    elif variant == "nested under text_config":
        config = {"model_type": "kimi_vl", "architectures": ["KimiVLForConditionalGeneration"],
                  "text_config": config, "vision_config": {"hidden_size": 1152, "num_hidden_layers": 27}}
    elif variant == "num_key_value_heads removed":
        del config["num_key_value_heads"]
    elif variant != "as published":
        raise ValueError(f"unknown MLA variant {variant!r}")
    return config


def _mla_case(config: dict, variant: str, dtype_bytes=None, hint: str = "", **extra) -> dict:
    case = config_case(V3, config, dtype_bytes, variant, hint)
    case["kwargs"].update(extra)
    if "tp" in extra:
        case["label"] += f", tp={extra['tp']}"
    kv.parse_config(config)   # every case must be a config kvlib reads
    return case


def _text_fields(config: dict) -> dict:
    return config["text_config"] if isinstance(config.get("text_config"), dict) else config


def config_slip_inputs(case: dict) -> dict:
    """What kvcoach.slips needs to recompute a config case's slips (MLA or ordinary attention)."""
    config = case["kwargs"]["config"]
    spec = kv.parse_config(config)
    inputs = dict(layers=spec.num_kv_layers, kv_heads=spec.num_kv_heads, head_dim=spec.head_dim,
                  dtype_bytes=case["kwargs"].get("dtype_bytes", 2), num_heads=spec.num_heads,
                  hidden_size=spec.hidden_size)
    if "tp" in case["kwargs"]:
        inputs["tp"] = case["kwargs"]["tp"]
    if spec.is_mla:
        raw = _text_fields(config)
        inputs.update(latent_dim=spec.kv_lora_rank, rope_dim=spec.qk_rope_head_dim,
                      qk_nope_head_dim=spec.qk_nope_head_dim, v_head_dim=spec.v_head_dim,
                      q_lora_rank=spec.q_lora_rank, head_dim_field=raw.get("head_dim"),
                      mtp_layers=getattr(spec, "mtp_layers", 0))
    return inputs


def config_expected(case: dict) -> int:
    """kvlib's bytes per token (per GPU under ``tp``), every layer counted, dtype_bytes default 2."""
    kwargs = case["kwargs"]
    return kv.parse_config(kwargs["config"]).kv_bytes_per_token(kwargs.get("dtype_bytes", 2),
                                                                tp=kwargs.get("tp", 1))


# ---------------------------------------------------------------------------
# Exercise 1: MLA bytes per token from a raw config
# ---------------------------------------------------------------------------
Q1_VISIBLE = (
    _mla_case(mla_config("as published"), "as published"),
    _mla_case(mla_config("as published"), "as published", 1,
              hint="dtype_bytes is an argument (here an fp8 cache): do not read torch_dtype."),
    _mla_case(mla_config("DeepSeek-V2-Lite attention fields"), "DeepSeek-V2-Lite attention fields",
              hint="q_lora_rank compresses the query, which is never cached; it may be null."),
    _mla_case(mla_config("other latent and rope widths", latent_dim=256, rope_dim=32, layers=62),
              "other latent and rope widths (256 + 32, 62 layers)", 2,
              hint="read both widths from the config: kv_lora_rank and qk_rope_head_dim."),
    _mla_case(mla_config("head_dim and qk_head_dim written out"), "head_dim and qk_head_dim written out",
              hint=_HEAD_DIM_HINT),
    _mla_case(mla_config("nested under text_config"), "nested under text_config", 4, hint=_NESTED_HINT),
    _mla_case(mla_config("other layer count", layers=40), "other layer count", 1,
              hint="read num_hidden_layers from the config you are given."),
    _mla_case(mla_config("num_key_value_heads removed"), "num_key_value_heads removed",
              hint="an MLA config needs no num_key_value_heads: the latent is one per token."),
)


def mla_config_hidden(seed: int) -> tuple:
    rng = random.Random(seed)
    variants = list(MLA_VARIANTS) * 2
    rng.shuffle(variants)
    cases = []
    for variant in variants:
        config = mla_config(variant, rng)
        if variant != "other layer count" and rng.random() < 0.3:   # a second change on top
            inner = _text_fields(config)
            inner["num_hidden_layers"] = rng.randint(2, 95)
        cases.append(_mla_case(config, variant, rng.choice([None, 1, 2, 4])))
    return tuple(cases)


# ---------------------------------------------------------------------------
# Exercise 2: per-GPU bytes per token under tensor parallelism, MLA or GQA
# ---------------------------------------------------------------------------
def _gqa_case(model: str, tp: int, dtype_bytes=None, hint: str = "", variant: str = "as published") -> dict:
    config = mutate_config(random.Random(0), variant, kv.bundled_config(model))
    case = config_case(model, config, dtype_bytes, variant, hint)
    case["kwargs"]["tp"] = tp
    case["label"] += f", tp={tp}"
    return case


ONE_WHOLE_HEAD_EDGE = Edge("past tp = K each GPU keeps one whole head")
HEAD_DIM_EDGE = Edge("head_dim, when given, wins over hidden_size // num_attention_heads")
NO_KV_HEADS_EDGE = Edge("num_key_value_heads absent means K = H")
Q2_VISIBLE = (
    _mla_case(mla_config("as published"), "as published", tp=8,
              hint="tensor parallelism does not divide the MLA cache: count it whole on this GPU."),
    ONE_WHOLE_HEAD_EDGE.on(_gqa_case("meta-llama/Llama-3.3-70B-Instruct", 8)),
    ONE_WHOLE_HEAD_EDGE.on(_gqa_case("meta-llama/Llama-3.1-8B", 2)),
    # Qwen2.5-3B, not 7B: vLLM refuses Qwen2.5-7B at TP 8 (28 query heads are not divisible by 8)
    ONE_WHOLE_HEAD_EDGE.on(_gqa_case("Qwen/Qwen2.5-3B", 8, hint="2 KV heads over 8 GPUs: each GPU keeps one whole "
                                                               "KV head (heads are replicated, never split).")),
    _mla_case(mla_config("as published"), "as published", 1, tp=1),
    _mla_case(mla_config("DeepSeek-V2-Lite attention fields"), "DeepSeek-V2-Lite attention fields", tp=4,
              hint="num_key_value_heads in an MLA config does not split the cache across ranks."),
    # the variants the text names: an explicit head_dim (Qwen3-0.6B: 128, not 1024 // 16 = 64), an MHA
    # config without num_key_value_heads (Llama 2 7B: K = H = 32), a dtype_bytes of 4 on ordinary attention
    HEAD_DIM_EDGE.on(_gqa_case("Qwen/Qwen3-0.6B", 2, 4, hint="head_dim, when the config gives it, wins over "
                                                             "hidden_size // num_attention_heads.")),
    NO_KV_HEADS_EDGE.on(_gqa_case("meta-llama/Llama-2-7b-hf", 4, variant="num_key_value_heads removed",
                                  hint=_MHA_HINT)),
    # the MLA variants the hidden cases draw, each once here
    _mla_case(mla_config("nested under text_config"), "nested under text_config", 2, tp=2, hint=_NESTED_HINT),
    _mla_case(mla_config("other latent and rope widths", latent_dim=256, rope_dim=32, layers=27),
              "other latent and rope widths", tp=16),
    _mla_case(mla_config("head_dim and qk_head_dim written out"), "head_dim and qk_head_dim written out", tp=8,
              hint=_HEAD_DIM_HINT),
    _mla_case(mla_config("other layer count", layers=40), "other layer count", tp=4),
)


def _valid_tps(config: dict) -> list:
    spec = kv.parse_config(config)
    return [tp for tp in (1, 2, 4, 8, 16) if kv.feasibility.tp_refusal(spec, tp) is None]   # vLLM's TP rules


def gqa_config_hidden(seed: int) -> tuple:
    rng = random.Random(seed)
    cases = []
    for _ in range(6):
        variant = rng.choice(MLA_VARIANTS)
        config = mla_config(variant, rng)
        cases.append(_mla_case(config, variant, rng.choice([None, 1, 2, 4]), tp=rng.choice(_valid_tps(config))))
    # configs with the field names the exercise states (GPT-2's n_layer / n_head are ch01's business)
    models = [m for m in non_mla_models()
              if "num_hidden_layers" in (kv.bundled_config(m).get("text_config") or kv.bundled_config(m))]
    for _ in range(6):
        model = rng.choice(models)
        tp = rng.choice(_valid_tps(kv.bundled_config(model)))
        variant = rng.choice(["as published", "as published", "num_key_value_heads removed"])
        if kv.bundled_config(model).get("num_key_value_heads") != kv.bundled_config(model)["num_attention_heads"]:
            variant = "as published"     # removing K from a GQA config would change the model, not its spelling
        cases.append(_gqa_case(model, tp, rng.choice([None, 1, 2, 4]), variant=variant))
    rng.shuffle(cases)
    return tuple(cases)


# ---------------------------------------------------------------------------
# Exercise 3: name the slip in a published answer
# ---------------------------------------------------------------------------
def classify_answer(answer_bytes: int, layers: int, latent_dim: int, rope_dim: int, dtype_bytes: int) -> str:
    """What an MLA bytes-per-token answer is, judged against kvlib's value."""
    right = kv.mla_bytes_per_token(layers, latent_dim, rope_dim, dtype_bytes)
    if answer_bytes == right:
        return "correct"
    if answer_bytes == 2 * right:
        return "extra_factor_2"
    if answer_bytes == kv.mla_bytes_per_token(layers, latent_dim, 0, dtype_bytes):
        return "missing_rope"
    return "other"


def _slip_case(label: str, kind: str, layers: int, latent_dim: int, rope_dim: int, dtype_bytes: int,
               hint: str = "") -> dict:
    right = kv.mla_bytes_per_token(layers, latent_dim, rope_dim, dtype_bytes)
    answer = {"correct": right, "extra_factor_2": 2 * right,
              "missing_rope": kv.mla_bytes_per_token(layers, latent_dim, 0, dtype_bytes),
              # ordinary attention's formula with 128 heads of 56 (hidden_size / heads)
              "other_mha": kv.kv_bytes_per_token(layers, 128, 56, dtype_bytes),
              "other_nope": kv.mla_bytes_per_token(layers, latent_dim, 2 * rope_dim, dtype_bytes)}[kind]
    kwargs = dict(answer_bytes=answer, layers=layers, latent_dim=latent_dim, rope_dim=rope_dim,
                  dtype_bytes=dtype_bytes)
    return {"label": label, "kwargs": kwargs, "context": {"hint": hint}}


OTHER_EDGE = Edge("an answer that is none of the three named kinds is 'other'")
Q3_VISIBLE = (
    _slip_case("DeepSeek-V3, bf16: the right figure", "correct", 61, 512, 64, 2),
    _slip_case("DeepSeek-V3, bf16: a figure twice too large", "extra_factor_2", 61, 512, 64, 2,
               hint="keys and values come from one latent: does this answer count it twice?"),
    _slip_case("DeepSeek-V3, bf16: the latent alone", "missing_rope", 61, 512, 64, 2,
               hint="compare with layers x latent_dim x dtype_bytes."),
    OTHER_EDGE.on(_slip_case("DeepSeek-V3, fp8: ordinary attention's formula", "other_mha", 61, 512, 64, 1,
                             hint="an answer that is none of the three named kinds is 'other'.")),
    _slip_case("27 layers, 512 + 64, bf16: twice too large", "extra_factor_2", 27, 512, 64, 2),
    _slip_case("62 layers, 256 + 32, fp32: the latent alone", "missing_rope", 62, 256, 32, 4),
)


def slip_answer_hidden(seed: int) -> tuple:
    rng = random.Random(seed)
    kinds = ["correct", "extra_factor_2", "missing_rope", "other_mha", "other_nope"] * 2
    rng.shuffle(kinds)
    cases = []
    for kind in kinds:
        layers = rng.randint(2, 95)
        latent, rope = rng.choice([(512, 64), (256, 32), (1024, 64), (384, 128)])
        dtype = rng.choice([1, 2, 4])
        cases.append(_slip_case(f"{layers} layers, {latent} + {rope}, {dtype_name(dtype)}", kind,
                                layers, latent, rope, dtype))
    return tuple(cases)


def _gqa_spec(case):
    """The parsed config of an ordinary-attention case (None for MLA: the edges below are GQA's)."""
    spec = config_spec(case)
    return None if spec.is_mla else spec


def tp_side(case) -> str | None:
    """Which side of tp = K an ordinary-attention case sits on (None: MLA, whose cache is never split)."""
    spec = _gqa_spec(case)
    if spec is None:
        return None
    tp, k = case["kwargs"]["tp"], spec.num_kv_heads
    return "tp < K" if tp < k else "tp = K" if tp == k else "tp > K"


def head_dim_side(case) -> str | None:
    """An explicit head_dim that differs from hidden_size // num_attention_heads (None: otherwise, or MLA)."""
    spec, config = _gqa_spec(case), case["kwargs"]["config"]
    fields = config.get("text_config") or config
    if spec is None or fields.get("head_dim") is None:
        return None
    return "explicit head_dim, not hidden // heads" if spec.head_dim != spec.hidden_size // spec.num_heads else None


def kv_heads_side(case) -> str | None:
    """num_key_value_heads absent (K = H) on an ordinary-attention config, else None."""
    fields = case["kwargs"]["config"].get("text_config") or case["kwargs"]["config"]
    return "K absent" if _gqa_spec(case) is not None and fields.get("num_key_value_heads") is None else None


def _gqa_models() -> list:
    """The bundled ordinary-attention configs with the field names the exercise states (as ``gqa_config_hidden``)."""
    return [m for m in non_mla_models()
            if "num_hidden_layers" in (kv.bundled_config(m).get("text_config") or kv.bundled_config(m))]


def gqa_config_on_side(rng, side):
    """An ordinary-attention case on ``side`` of one of Exercise 2's edges, from a bundled config."""
    for _ in range(200):
        model = rng.choice(_gqa_models())
        config = kv.bundled_config(model)
        variant = "as published"
        if side == "K absent":
            if config.get("num_key_value_heads") != config.get("num_attention_heads"):
                continue            # only an MHA config may drop K (else the model would change)
            variant = "num_key_value_heads removed"
        case = _gqa_case(model, 1, rng.choice([None, 1, 2, 4]), variant=variant)
        tps = [t for t in _valid_tps(case["kwargs"]["config"])
               if side not in TP_SIDES or tp_side(dict(case, kwargs=dict(case["kwargs"], tp=t))) == side]
        if not tps:
            continue
        case = _gqa_case(model, rng.choice(tps), case["kwargs"].get("dtype_bytes"), variant=variant)
        if side in (tp_side(case), head_dim_side(case), kv_heads_side(case)):
            return case
    return None


TP_SIDES = ("tp < K", "tp = K", "tp > K")


def gqa_config_hidden_sided(seed: int) -> tuple:
    build = with_sides(gqa_config_hidden, tp_side, TP_SIDES, gqa_config_on_side)
    build = with_sides(build, head_dim_side, ("explicit head_dim, not hidden // heads",), gqa_config_on_side)
    return with_sides(build, kv_heads_side, ("K absent",), gqa_config_on_side)(seed)


def other_side(case) -> str | None:
    """Exercise 3's 'other': an answer none of the named kinds (None: a named kind)."""
    return "other" if classify_answer(**case["kwargs"]) == "other" else None


#: The edges the exercise text decides (a tie, a rounding direction, a tolerance, an "other"), each with the
#: visible cases that sit on it and, where given, ``side(case)``: every seed's hidden cases show each side the
#: visible ones show (tests/test_case_variants.py).
EDGES = {
    "ch03_q2_kv_bytes_per_token_per_gpu": (ONE_WHOLE_HEAD_EDGE.listing(tp_side), HEAD_DIM_EDGE.listing(head_dim_side),
                                           NO_KV_HEADS_EDGE.listing(kv_heads_side)),
    "ch03_q3_name_the_slip": (OTHER_EDGE.listing(other_side),),
}


EXERCISES = exercises(
    Exercise(
        grade_id="ch03_q1_mla_bytes_per_token_from_config",
        function_name="mla_bytes_per_token_from_config",
        params=("config", "dtype_bytes"),
        visible_cases=Q1_VISIBLE,
        hidden_cases=mla_config_hidden,
        expected=config_expected,
        quantity="mla_config_bytes_per_token",
        slip_inputs=config_slip_inputs,
        hidden_note=HIDDEN_NOTE_MLA,
    ),
    Exercise(
        grade_id="ch03_q2_kv_bytes_per_token_per_gpu",
        function_name="kv_bytes_per_token_per_gpu",
        params=("config", "tp", "dtype_bytes"),
        visible_cases=Q2_VISIBLE,
        hidden_cases=gqa_config_hidden_sided,
        expected=config_expected,
        quantity="config_kv_bytes_per_token_per_gpu",
        slip_inputs=config_slip_inputs,
        hidden_note=HIDDEN_NOTE_TP,
    ),
    Exercise(
        grade_id="ch03_q3_name_the_slip",
        function_name="name_the_slip",
        params=("answer_bytes", "layers", "latent_dim", "rope_dim", "dtype_bytes"),
        visible_cases=Q3_VISIBLE,
        hidden_cases=slip_answer_hidden,
        expected=lambda c: classify_answer(**c["kwargs"]),
        answer=Choice(SLIP_CHOICES),
        quantity="mla_slip_name",
        slip_inputs=lambda case: dict(case["kwargs"]),
        unit="",
        hidden_note=HIDDEN_NOTE_SLIP,
    ),
)
