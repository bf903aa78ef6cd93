"""Drills: seeded KV-cache problems, checked with the autograder's slip catalogue.

``generate(topic, seed)`` returns a frozen Problem over the bundled models
and GPUs: the question, its parameters, kvlib's exact answer, a tolerance,
and ``check(answer) -> (correct, feedback)``, which names the slip when a
wrong answer equals a known mistake recomputed (``kvlib.slips.diagnose``,
the catalogue the autograder uses). The same seed gives the same problem on
every machine: only ``random.Random(seed)`` draws, over sorted lists.

>>> p = generate("kv_per_token", seed=3)
>>> p.check(p.answer)[0]
True
>>> seed_for_student("ada") == seed_for_student("ada") != seed_for_student("alan")
True

``kvlib drill`` asks them in the terminal. Taught in ch09_interview_drills
and in every chapter's practice section.
"""

from __future__ import annotations

import functools
import hashlib
import random
import re
import sys
import time
from dataclasses import dataclass, field
from types import MappingProxyType

from .config import bundled_models, load_model
from .feasibility import check_deployment, tp_refusal
from .gpus import GPUS
from .slips import PREFIX_MIX_KEYS, diagnose
from .spec import FULL
from .units import GB, GiB, parse_bytes
from .vllm.engine import default_utilization

__all__ = ["GRADED_TOPICS", "TOPICS", "Problem", "Question", "DrillError", "answer_reads", "generate", "problem_set",
           "seed_for_student", "student_problem"]


class DrillError(ValueError):
    """Unknown topic or bad drill input; the message names it."""


@dataclass(frozen=True)
class Question:
    """A problem as a learner may hold it: what is asked, never the answer (``Problem.public()``).

    ``params`` are the figures the question states (model and GPU names,
    layers, heads, budgets ...); a worked answer computes from them.
    """

    topic: str
    question: str
    units: str
    tolerance: float            # relative; 0 means exact
    params: MappingProxyType = field(hash=False)

    def tolerance_text(self) -> str:
        """'exact' or 'within 0.5%'."""
        return "exact" if not self.tolerance else f"within {self.tolerance * 100:g}%"


@dataclass(frozen=True)
class Problem:
    """One question with its exact answer and a slip-aware checker."""

    topic: str
    seed: int
    question: str
    answer: object              # kvlib's value, in ``units``
    units: str
    tolerance: float            # relative; 0 means exact
    quantity: str               # the kvlib.slips quantity that checks it
    params: MappingProxyType = field(hash=False)   # what the question states
    inputs: MappingProxyType = field(hash=False, repr=False)  # diagnose's keywords

    def check(self, answer, reveal: bool = True) -> tuple[bool, str]:
        """``(correct, feedback)``; the feedback names the slip when it recognises one.

        ``answer`` is a number or text such as '131,072', '1.07 GB' (bytes
        questions accept byte units; a GiB figure labelled GB is named as the
        GB/GiB slip) or '9.92 ms'. ``reveal=False``: the feedback never shows
        the answer, nor how far off a wrong one is (a learner's graded question).
        """
        value, problem, swapped, typed_tol = _parse_answer(answer, self.units)
        shown = f" The answer is {_fmt(self.answer)} {self.units}." if reveal else ""
        if problem:
            return False, problem + shown
        d = self._diagnose(value, typed_tol)
        if d.correct:
            return True, f"correct: {_fmt(self.answer)} {self.units}." if reveal else "correct."
        if _unnamed(d) and swapped is not None and self._diagnose(swapped[0], typed_tol).correct:
            return False, f"not quite [gb_for_gib]: {_unit_mixup(swapped[1])}{shown}"
        slip = f" [{d.slip.key}]" if d.slip else ""
        if not reveal:
            how = d.slip.message if d.slip else "it matches no known slip: recheck each step."
            exact = "exact" if not self.tolerance else f"within {self.tolerance * 100:g}%"
            return False, f"not quite{slip} ({exact}): {how}"
        return False, f"not quite{slip}: {d.message}{shown}"

    def public(self) -> Question:
        """The question without its answer (and without the checker that knows it).

        >>> q = generate("kv_per_token", seed=3).public()
        >>> q.units, q.tolerance_text(), hasattr(q, "answer")
        ('bytes', 'exact', False)
        """
        return Question(topic=self.topic, question=self.question, units=self.units, tolerance=self.tolerance,
                        params=MappingProxyType(dict(self.params)))

    def slip_key(self, answer) -> str | None:
        """The key of the slip an answer matches, or None."""
        value, problem, swapped, typed_tol = _parse_answer(answer, self.units)
        if problem:
            return None
        d = self._diagnose(value, typed_tol)
        if d.slip and not _unnamed(d):
            return d.slip.key
        if not d.correct and swapped is not None and self._diagnose(swapped[0], typed_tol).correct:
            return "gb_for_gib"
        return None

    def _diagnose(self, value, typed_tol):
        return diagnose(self.quantity, value, rel_tol=max(self.tolerance, typed_tol) or 1e-9, **self.inputs)


def _unnamed(d) -> bool:
    """No slip named, or only a generic unit mix-up: the typed unit's own mix-up says it better."""
    return d.slip is None or d.slip.key in PREFIX_MIX_KEYS


def _fmt(x) -> str:
    if isinstance(x, int):
        return f"{x:,}"
    if abs(x) >= 100:
        return f"{x:,.1f}"
    return f"{x:.4g}"


_NUMBER = re.compile(r"^\s*([-+]?(?:\d[\d_,]*)?\.?\d+(?:[eE][-+]?\d+)?)\s*([A-Za-z/]*)\s*$")
_UNIT_WORDS = {"bytes": {"b", "byte", "bytes"}, "tokens": {"token", "tokens", "t"}, "ms": {"ms"},
               "sequences": {"seq", "seqs", "sequence", "sequences"}, "nodes": {"node", "nodes"},
               "token slots": {"token", "tokens", "slots", "slot"}}


_SWAP = {"kb": "kib", "mb": "mib", "gb": "gib", "tb": "tib"}
_SWAP.update({v: k for k, v in _SWAP.items()})


def _unit_mixup(unit: str) -> str:
    """The decimal/binary mix-up of the unit typed, with its own size: 2.4% for KB, 7.4% for GB.

    >>> _unit_mixup("mib")
    'you mixed MB (10^6) and MiB (2^20): a 4.9% error.'
    """
    decimal = unit[0].upper() + "B"
    power = "kmgt".index(unit[0]) + 1
    error = 1024 ** power / 1000 ** power - 1
    return f"you mixed {decimal} (10^{3 * power}) and {decimal[0]}iB (2^{10 * power}): a {error:.1%} error."


def _parse_answer(answer, units):
    """(value, problem, (value with GB and GiB swapped, unit typed) or None, tolerance of the digits typed).

    A figure typed in a byte unit ('1.83 GiB') is read as exactly as it was
    typed: half a unit in its last digit, as a relative tolerance, but never
    looser than 0.5% (so '1 GiB' is not an answer for 1.07 GiB).
    """
    if isinstance(answer, bool):
        return None, f"expected a number, got {answer!r}.", None, 0.0
    if isinstance(answer, (int, float)):
        return answer, None, None, 0.0
    text = str(answer).strip()
    if not text:
        return None, "no answer.", None, 0.0
    match = _NUMBER.match(text)
    if not match:
        return None, f"expected a number, got {text!r}.", None, 0.0
    number, unit = match.group(1).replace(",", "").replace("_", ""), match.group(2).lower()
    if unit and units == "bytes" and unit not in _UNIT_WORDS["bytes"]:
        try:
            value = parse_bytes(number + unit)
        except ValueError:
            return None, f"unknown unit {match.group(2)!r}.", None, 0.0
        mantissa = number.lower().split("e")[0]
        decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
        typed_tol = min(0.005, 0.5 * 10**-decimals / float(mantissa)) if float(mantissa) else 0.0
        swapped = (float(parse_bytes(number + _SWAP[unit])), unit) if unit in _SWAP else None
        return float(value), None, swapped, typed_tol  # floats: diagnose compares ints exactly
    if unit and unit not in _UNIT_WORDS.get(units, {units}):
        return None, f"the answer is asked in {units}, not {match.group(2)!r}.", None, 0.0
    value = float(number)
    return (int(value) if value.is_integer() and re.fullmatch(r"[-+]?\d+", number) else value), None, None, 0.0


# --- what the problems draw from ---------------------------------------------------
@functools.lru_cache(maxsize=None)
def _spec(model_id):
    return load_model(model_id)


@functools.lru_cache(maxsize=None)
def _bf16_weights(model_id) -> int:
    return _spec(model_id).weight_bytes(2)


@functools.lru_cache(maxsize=None)
def _gqa_models() -> tuple:
    """Bundled full-attention, non-MLA models (sorted ids): one formula holds for every layer.

    Models bundled after the drills' seeds were fixed are left out (``_NOT_DRAWN``), so a student's
    seed keeps drawing the same problems."""
    return tuple(m for m in bundled_models()
                 if m not in _NOT_DRAWN and not _spec(m).is_mla and all(kind == FULL for kind in _spec(m).layer_kinds))


_NOT_DRAWN = frozenset({"Qwen/Qwen2.5-3B"})   # bundled for ch07's TP lesson


@functools.lru_cache(maxsize=None)
def _mla_models() -> tuple:
    return tuple(m for m in bundled_models() if _spec(m).is_mla)


def _geometry(spec, dtype_bytes=2) -> dict:
    return {"layers": spec.num_layers, "kv_heads": spec.num_kv_heads, "head_dim": spec.head_dim,
            "dtype_bytes": dtype_bytes, "num_heads": spec.num_heads, "hidden_size": spec.hidden_size}


def _config_text(spec, dtype_bytes=2) -> str:
    dtype = {2: "bf16 (2 bytes per element)", 1: "fp8 (1 byte per element)"}[dtype_bytes]
    return (f"{spec.name} (config.json: num_hidden_layers {spec.num_layers}, num_attention_heads "
            f"{spec.num_heads}, num_key_value_heads {spec.num_kv_heads}, head_dim {spec.head_dim}, "
            f"hidden_size {spec.hidden_size}), KV cache in {dtype}")


def _gb_value(rng, low, high) -> int:
    """A byte count stated to 0.01 GB, so the question gives it exactly."""
    return rng.randint(round(low * 100), round(high * 100)) * 10**7


def _round_gb(n_bytes) -> int:
    return round(n_bytes / 10**7) * 10**7


def _gb_text(n_bytes) -> str:
    return f"{n_bytes / GB:,.2f} GB"


_CONTEXTS = (1024, 2048, 4096, 8192, 16384, 32768)


# --- only deployments that could run (kvlib.feasibility) ---------------------------------
# A draw that breaks one of vLLM's rules is drawn again from the same generator, so a seed whose
# first draw could run keeps its problem.
def _within_context(spec, context) -> bool:
    return spec.max_position_embeddings is None or context <= spec.max_position_embeddings


def _runs(spec, gpu, **kwargs) -> bool:
    """``check_deployment(spec, gpu, **kwargs).fits`` (kvlib's serving assumptions where the question names none)."""
    return check_deployment(spec, gpu, **kwargs).fits


def _problem(topic, seed, question, quantity, inputs, units, tolerance=0.0, **params):
    expected = diagnose(quantity, 0, **inputs).expected
    return Problem(topic=topic, seed=seed, question=question, answer=expected, units=units, tolerance=tolerance,
                   quantity=quantity, params=MappingProxyType(dict(params, **inputs)),
                   inputs=MappingProxyType(dict(inputs)))


# --- one generator per topic ---------------------------------------------------------
def _kv_per_token(rng, seed):
    spec = _spec(rng.choice(_gqa_models()))
    inputs = _geometry(spec)
    q = f"{_config_text(spec)}. How many bytes of KV cache does one token take, across all layers?"
    return _problem("kv_per_token", seed, q, "kv_bytes_per_token", inputs, "bytes", model=spec.name)


def _per_sequence(rng, seed):
    while True:
        spec = _spec(rng.choice(_gqa_models()))
        context = rng.choice(_CONTEXTS)
        if _within_context(spec, context):
            break
    inputs = dict(_geometry(spec), seq_len=context)
    q = f"{_config_text(spec)}. How many bytes of KV cache does one sequence of {context:,} tokens hold?"
    return _problem("per_sequence", seed, q, "kv_bytes_per_sequence", inputs, "bytes", model=spec.name)


def _concurrency(rng, seed):
    spec = _spec(rng.choice(_gqa_models()))
    while True:
        context = rng.choice(_CONTEXTS)
        budget = _gb_value(rng, 10, 70)
        if budget >= spec.kv_bytes_per_sequence(context) and _within_context(spec, context):
            break
    inputs = dict(_geometry(spec), seq_len=context, budget_bytes=budget)
    q = (f"{_config_text(spec)}. After weights and overhead, {_gb_text(budget)} (10^9 bytes) is left for the KV "
         f"cache. How many sequences of {context:,} tokens fit at once?")
    return _problem("concurrency", seed, q, "max_concurrency", inputs, "sequences", model=spec.name)


def _pool(rng, seed):
    gpus = [g for g in GPUS.values() if g.memory_bytes >= 40 * GB]
    while True:
        gpu = rng.choice(gpus)
        models = [m for m in _gqa_models() if _bf16_weights(m) < 0.6 * gpu.cuda_memory_bytes]
        spec = _spec(rng.choice(models))
        utilization = rng.choice((default_utilization("0.19.1"), default_utilization()))  # vLLM before 0.20, from 0.20
        weights = _round_gb(spec.weight_bytes(2))
        other = rng.choice((2, 3)) * GB
        cuda_gib = round(gpu.cuda_memory_bytes / GiB, 2)
        cuda_bytes = round(cuda_gib * GiB)
        if _runs(spec, gpu, seq_len=1, weight_bytes=weights, utilization=utilization, other_bytes=other,
                 gpu_memory_bytes=cuda_bytes):
            break
    bpt = spec.kv_bytes_per_token()
    inputs = {"gpu_bytes": cuda_bytes, "label_bytes": gpu.memory_bytes, "utilization": utilization,
              "weight_bytes": weights, "other_bytes": other, "bytes_per_token": bpt}
    q = (f"{spec.name} on one {gpu.name} (label {gpu.memory_bytes / GB:.0f} GB; CUDA reports {cuda_gib:.2f} GiB). "
         f"The engine takes {utilization:.2f} of what CUDA reports; the bf16 weights are {_gb_text(weights)}, "
         f"activations and other allocations {_gb_text(other)}, and one token's KV is {bpt:,} bytes. "
         f"How many tokens does the KV pool hold?")
    return _problem("pool", seed, q, "kv_pool_tokens", inputs, "tokens", model=spec.name, gpu=gpu.name)


def _block_waste(rng, seed):
    n = rng.randrange(50, 501, 10)
    bs = rng.choice((8, 16, 32, 64, 128, 256))
    inputs = {"num_seqs": n, "block_size": bs}
    q = (f"{n} sequences run with KV blocks of {bs} tokens; their lengths are uniform modulo the block size. "
         f"How many token slots do their partially filled last blocks waste, on average, in all?")
    return _problem("block_waste", seed, q, "block_waste_tokens", inputs, "token slots")


def _mla_vs_gqa(rng, seed):
    spec = _spec(rng.choice(_mla_models()))
    dtype = rng.choice((2, 1))
    layers = rng.choice((spec.num_layers, spec.num_layers, 27, 60))
    who = spec.name if layers == spec.num_layers else f"A model shaped like {spec.name} but with {layers} layers"
    qk = (spec.qk_nope_head_dim or 0) + spec.qk_rope_head_dim
    inputs = {"layers": layers, "latent_dim": spec.kv_lora_rank, "rope_dim": spec.qk_rope_head_dim,
              "dtype_bytes": dtype, "num_heads": spec.num_heads, "qk_head_dim": qk}
    gqa = _spec("meta-llama/Llama-3.1-8B").kv_bytes_per_token(dtype)
    q = (f"{who} uses multi-head latent attention: kv_lora_rank {spec.kv_lora_rank}, qk_rope_head_dim "
         f"{spec.qk_rope_head_dim}, {spec.num_heads} heads with a query/key head dim of {qk}, num_hidden_layers "
         f"{layers}, KV cache in {'bf16' if dtype == 2 else 'fp8'} ({dtype} byte(s) per element). How many bytes "
         f"of KV cache does one token take? (Llama 3.1 8B, a GQA model, takes {gqa:,}.)")
    return _problem("mla_vs_gqa", seed, q, "mla_bytes_per_token", inputs, "bytes", model=spec.name)


def _tp_per_gpu(rng, seed):
    while True:
        spec = _spec(rng.choice(_gqa_models()))
        tps = [t for t in (2, 4, 8, 16) if tp_refusal(spec, t) is None]   # vLLM's query- and KV-head rules
        if tps:
            break
    tp = rng.choice(tps)
    inputs = dict(_geometry(spec), tp=tp)
    q = (f"{_config_text(spec)}, served with tensor parallelism over {tp} GPUs. How many bytes of KV cache does "
         f"one token take on each GPU?")
    p = _problem("tp_per_gpu", seed, q, "kv_bytes_per_token_per_gpu", inputs, "bytes", model=spec.name)
    assert p.answer == spec.kv_bytes_per_token(tp=tp)  # the catalogue and the spec agree
    return p


def _not_the_layers(choices: tuple, batch: int, spec) -> int:
    # a batch equal to the layer count (32 and 32) makes "batch forgotten" and "layers forgotten" the same
    # wrong number, so no diagnosis can tell them apart: take the next choice instead (no other draw changes)
    if batch != spec.num_kv_layers:
        return batch
    i = choices.index(batch)
    return choices[i + 1] if i + 1 < len(choices) else choices[i - 1]


def _crossover(rng, seed):
    batches = (8, 16, 32, 64, 128)
    while True:   # the crossover must lie within the model's context
        spec = _spec(rng.choice(_gqa_models()))
        weights = _round_gb(spec.weight_bytes(2))
        batch = _not_the_layers(batches, rng.choice(batches), spec)
        if _within_context(spec, weights / (spec.kv_bytes_per_token() * batch)):
            break
    inputs = dict(_geometry(spec), weight_bytes=weights, batch_size=batch)
    q = (f"{_config_text(spec)}; its bf16 weights are {_gb_text(weights)} (10^9 bytes). At a batch of {batch} "
         f"sequences, at what context does one decode step read as many KV bytes as weight bytes? "
         f"(to 0.5%)")
    return _problem("crossover", seed, q, "crossover_context", inputs, "tokens", tolerance=0.005, model=spec.name)


def _step_time(rng, seed):
    batches = (1, 8, 16, 32, 64)
    while True:   # weights and the batch's cache must fit the GPU's pool
        spec = _spec(rng.choice(_gqa_models()))
        gpu = rng.choice([g for g in GPUS.values() if g.memory_bytes >= 40 * GB])
        weights = _round_gb(spec.weight_bytes(2))
        batch, context = _not_the_layers(batches, rng.choice(batches), spec), rng.choice(_CONTEXTS)
        if _runs(spec, gpu, batch_size=batch, seq_len=context, weight_bytes=weights):
            break
    bw = gpu.bandwidth_bytes_per_s
    inputs = dict(_geometry(spec), weight_bytes=weights, seq_len=context, batch_size=batch,
                  bandwidth_bytes_per_s=bw)
    q = (f"{_config_text(spec)}; bf16 weights {_gb_text(weights)}. On one {gpu.name} ({bw / 1e12:g} TB/s, "
         f"10^12 bytes/s), a batch of {batch} sequence(s) of {context:,} tokens decodes. How long is one step at the "
         f"bandwidth limit, in milliseconds? (to 0.5%)")
    return _problem("step_time", seed, q, "decode_step_ms", inputs, "ms", tolerance=0.005, model=spec.name,
                    gpu=gpu.name)


def _fp8(rng, seed):
    spec = _spec(rng.choice(_gqa_models()))
    budget = _gb_value(rng, 10, 70)
    inputs = dict(_geometry(spec, dtype_bytes=1), budget_bytes=budget)
    q = (f"{_config_text(spec, dtype_bytes=1)}. {_gb_text(budget)} (10^9 bytes) is left for the KV cache. "
         f"How many tokens does it hold?")
    return _problem("fp8", seed, q, "pool_tokens", inputs, "tokens", model=spec.name)


def _plan_step(rng, seed):
    while True:
        spec = _spec(rng.choice(_gqa_models()))
        tp = 8
        if tp_refusal(spec, tp) is not None:
            continue
        users = rng.choice((200, 500, 1000, 2000, 5000))
        context = rng.choice((2048, 4096, 6000, 8192, 16384))
        pool = _gb_value(rng, 40, 70)
        if pool >= spec.kv_bytes_per_sequence(context, tp=tp) and _within_context(spec, context):
            break
    inputs = dict(_geometry(spec), users=users, seq_len=context, pool_bytes_per_gpu=pool, tp=tp)
    q = (f"{_config_text(spec)}. Nodes of 8 GPUs each serve one replica with tensor parallelism 8; every GPU has "
         f"{_gb_text(pool)} (10^9 bytes) left for KV. How many nodes hold {users:,} concurrent sequences of "
         f"{context:,} tokens? (memory only, no headroom)")
    return _problem("plan_step", seed, q, "nodes_for_memory", inputs, "nodes", model=spec.name)


TOPICS = {
    "kv_per_token": _kv_per_token,
    "per_sequence": _per_sequence,
    "concurrency": _concurrency,
    "pool": _pool,
    "block_waste": _block_waste,
    "mla_vs_gqa": _mla_vs_gqa,
    "tp_per_gpu": _tp_per_gpu,
    "crossover": _crossover,
    "step_time": _step_time,
    "fp8": _fp8,
    "plan_step": _plan_step,
}


#: The graded drills of ch09_interview_drills, in notebook order (grade ids ch09_q2_ ... ch09_q9_).
GRADED_TOPICS = ("kv_per_token", "concurrency", "pool", "crossover", "step_time", "mla_vs_gqa", "tp_per_gpu",
                 "plan_step")


def _seed(seed) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise DrillError(f"seed must be an integer, got {seed!r}")
    return seed


def generate(topic: str, seed: int = 0) -> Problem:
    """One problem on ``topic`` (a key of TOPICS); the same seed gives the same problem."""
    if topic not in TOPICS:
        raise DrillError(f"unknown topic {topic!r} (known: {', '.join(TOPICS)})")
    return TOPICS[topic](random.Random(_seed(seed)), seed)


def problem_set(seed: int = 0, count: int = 5, topic: str | None = None) -> list:
    """``count`` problems (of one topic, or of topics drawn at random) from one seed.

    Each problem gets its own seed drawn from ``random.Random(seed)``:

    >>> [p.topic for p in problem_set(seed=1, count=3, topic="fp8")]
    ['fp8', 'fp8', 'fp8']
    >>> problem_set(seed=1, count=3) == problem_set(seed=1, count=3)
    True
    """
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise DrillError(f"count must be a positive integer, got {count!r}")
    if topic is not None and topic not in TOPICS:
        raise DrillError(f"unknown topic {topic!r} (known: {', '.join(TOPICS)})")
    rng = random.Random(_seed(seed))
    names = list(TOPICS)
    out = []
    for _ in range(count):
        sub_seed = rng.getrandbits(63)
        out.append(generate(topic or rng.choice(names), sub_seed))
    return out


def seed_for_student(student_id: str) -> int:
    """A stable per-student seed: the first 8 bytes of SHA-256 of the id (never ``hash()``).

    >>> seed_for_student("student-001")
    17424175195447602153
    """
    if not isinstance(student_id, str) or not student_id:
        raise DrillError(f"student_id must be a non-empty string, got {student_id!r}")
    return int.from_bytes(hashlib.sha256(student_id.encode("utf-8")).digest()[:8], "big")


def student_problem(student_id: str, topic: str) -> Problem:
    """The learner's own problem on ``topic``: ``generate(topic, seed_for_student(f"{student_id}/{topic}"))``.

    It depends on the id alone (never on a class secret), so the learner's
    notebook, the instant check and the grader all draw the same problem;
    another id almost always draws another one. Taught in ch09_interview_drills.

    >>> student_problem("ada", "pool") == student_problem("ada", "pool")
    True
    >>> student_problem("ada", "pool").seed == seed_for_student("ada/pool")
    True
    """
    if topic not in TOPICS:
        raise DrillError(f"unknown topic {topic!r} (known: {', '.join(TOPICS)})")
    if not isinstance(student_id, str) or not student_id.strip():
        raise DrillError(f"student_id must be a non-empty string, got {student_id!r}")
    return generate(topic, seed_for_student(f"{student_id}/{topic}"))


# --- answers read from outside (ch09's graded drills: issue 35 §5) ---------------------------------------
#: ``(topic, seed)`` of every problem whose answer code outside kvlib read (``answer_reads``).
_ANSWER_READS: set = set()
#: Packages whose reads are the course's own (drill mode, ``kvlib drill``, the checks' expected values).
_OWN_PACKAGES = ("kvlib", "kvdisplay", "autograder")
_HELPER_MODULES = ("dataclasses", "copy", "pprint", "reprlib", "functools", "operator")


def _read_from_outside() -> bool:
    """Whether the code reading ``Problem.answer`` is the learner's (neither this module nor the course's).

    Problem's own methods (``check``, the dataclass's ``__repr__`` and ``__eq__``) and the standard library's
    helpers (``dataclasses.asdict``, ``copy``, ``pprint``) are skipped: what counts is who called them, so
    ``p.check(x)`` from a notebook (its feedback shows the answer) and ``repr(p)`` count too.
    """
    frame = sys._getframe(2)
    while frame is not None:
        module = str(frame.f_globals.get("__name__", ""))
        if module == __name__ and isinstance(frame.f_locals.get("self"), Problem):
            frame = frame.f_back
        elif module in _HELPER_MODULES:
            frame = frame.f_back
        else:
            return module.split(".")[0] not in _OWN_PACKAGES
    return False


class _Answer:
    """``Problem.answer``: the value, noting each read made from outside the course's packages.

    >>> p = generate("kv_per_token", seed=3)
    >>> _ANSWER_READS.discard((p.topic, p.seed)); (p.topic, p.seed) in answer_reads()
    False
    """

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        value = obj.__dict__["answer"]
        if _read_from_outside():
            _ANSWER_READS.add((obj.topic, obj.seed))
        return value

    def __set__(self, obj, value):   # the frozen dataclass's __init__ sets it once, through object.__setattr__
        obj.__dict__["answer"] = value


Problem.answer = _Answer()
Problem.answer.__set_name__(Problem, "answer")


def answer_reads() -> frozenset:
    """``(topic, seed)`` of each problem whose answer a notebook or script read (``p.answer``, the answer in
    ``p.check``'s feedback, ``repr(p)``); the checks of ch09's graded drills refuse a value read that way."""
    return frozenset(_ANSWER_READS)


# --- kvlib drill ------------------------------------------------------------------------
def run_drill(problems, stdin=None, stdout=None, timings: bool = False, clock=time.perf_counter,
              reveal: bool = True) -> tuple:
    """Ask each problem, read one answer line each; return (correct, asked).

    Stops quietly at the end of input. Echoes the answer when input is not a
    terminal, so a piped transcript reads like a session. Prints times only
    with ``timings``. ``reveal=False``: wrong answers are not followed by the
    right one (``Problem.check``).
    """
    stdin = sys.stdin if stdin is None else stdin
    stdout = sys.stdout if stdout is None else stdout
    echo = not (hasattr(stdin, "isatty") and stdin.isatty())
    correct = asked = 0
    slips = {}
    start = clock()
    for n, p in enumerate(problems, 1):
        print(f"\nQuestion {n}/{len(problems)} [{p.topic}]", file=stdout)
        print(p.question, file=stdout)
        print(f"answer ({p.units})> ", end="", file=stdout, flush=True)
        asked_at = clock()
        line = stdin.readline()
        if not line:
            print("\n(end of input)", file=stdout)
            break
        text = line.strip()
        if echo:
            print(text, file=stdout)
        asked += 1
        ok, feedback = p.check(text, reveal=reveal)
        correct += ok
        key = p.slip_key(text)
        if key:
            slips[key] = slips.get(key, 0) + 1
        print(feedback, file=stdout)
        if timings:
            print(f"(answered in {clock() - asked_at:.1f} s)", file=stdout)
    print(f"\nscore {correct}/{asked}" + (f" ({len(problems) - asked} not answered)" if asked < len(problems) else ""),
          file=stdout)
    if slips:
        print("slips: " + ", ".join(f"{k} x{v}" for k, v in sorted(slips.items())), file=stdout)
    if timings:
        print(f"time {clock() - start:.1f} s", file=stdout)
    return correct, asked
