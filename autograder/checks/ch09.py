"""Chapter 09 (interview drills): its eighteen graded exercises, as data.

Grade ids, names and parameter order are a contract with the grading pipeline;
points (2 for q1, 1 for each drill) are on the source notebook's test cells.

=====================================  ==============================================================
grade id                               the learner writes
=====================================  ==============================================================
ch09_q1_kv_formula                     kv_cache_bytes(layers, kv_heads, head_dim, seq_len, batch,
                                       dtype_bytes) -> int (a function: "write the formula")
ch09_q2_kv_per_token                   answer_kv_per_token = <bytes, within 0.5%>
ch09_q3_concurrency                    answer_concurrency = <sequences, exact>
ch09_q4_pool                           answer_pool = <tokens, within 0.5%>
ch09_q5_crossover                      answer_crossover = <tokens, within 0.5%>
ch09_q6_step_time                      answer_step_time = <ms, within 0.5%>
ch09_q7_mla_vs_gqa                     answer_mla_vs_gqa = <bytes, within 0.5%>
ch09_q8_tp_per_gpu                     answer_tp_per_gpu = <bytes, within 0.5%>
ch09_q9_plan_step                      answer_plan_step = <nodes, exact>
ch09_q10_long_ttft                     answer_long_ttft = <ms, within 0.5%>
ch09_q11_moe_decode                    answer_moe_decode = <bytes, within 0.5%>
ch09_q12_requests_concurrency          answer_requests_concurrency = <requests, within 0.5%>
ch09_q13_disagg_transfer               answer_disagg_transfer = <ms, within 0.5%>
ch09_q14_expert_parallel               answer_expert_parallel = <bytes, within 0.5%>
ch09_q15_eagle_mtp                     answer_eagle_mtp = <times, within 0.5%>
ch09_q16_low_precision_compute         answer_low_precision_compute = <ms, within 0.5%>
ch09_q17_hybrid_state                  answer_hybrid_state = <bytes, within 0.5%>
ch09_q18_indexer_cache                 answer_indexer_cache = <tokens, within 0.5%>
=====================================  ==============================================================

q2-q18 are value exercises (``Exercise(value=True)``): each learner answers their
own problem, ``kvcoach.drills.student_problem(student, topic)`` with the topics of
``kvcoach.drills.GRADED_TOPICS`` in this order (a 2026 family of several question
types asks the one of ``kvcoach.drills.GRADED_KINDS``, so a grade id holds one
quantity, unit and tolerance), the student being
``current_student()`` in the kernel and the submission's student in the grader.
The rule is the drills' own ([interview 2026 §1]): a number, or text in any notation
``kvcoach.drills.read_answer`` reads ('16.6 GB', '1.66e10'), is right within the
tolerance its question states (``kvcoach.drills.tolerance_for``: 0.5%, exact for
sequences and nodes, whose rounding is asked); a wrong one is named by
``kvcoach.slips`` at the same tolerance (the same catalogue as ``Problem.check``).
The graded answer is the learner's own arithmetic: a value
equal to the answer of their own problem after code of theirs read it from the
drill object (``student_problem(me, topic).answer``, the answer ``check`` shows,
``repr``) is refused with a one-line reason, in the kernel and in the outside
verdict (``tripwires.drill_reads``; tests/hostile/ch09.py). q1's expected value is ``kv.kv_bytes_total`` over
bundled models' geometry; its hidden cases vary the model, dtype_bytes
(1, 2 or 4), the length and the batch, from the class seed.
"""

from __future__ import annotations

from dataclasses import dataclass

import kvlib as kv
from kvcoach.drills import GRADED_KINDS, GRADED_TOPICS, generate, read_answer

from .answers import Number
from .cases import (
    bytes_per_token,
    drill_answer,
    drill_cases,
    drill_label,
    drill_slip_inputs,
    geometry_case,
    geometry_hidden,
    no_hidden_cases,
    random_seq_len,
)
from .schema import Exercise, exercises

Q1_PARAMS = ("layers", "kv_heads", "head_dim", "seq_len", "batch", "dtype_bytes")
HIDDEN_NOTE_Q1 = "(Hidden cases use other models' geometry, dtype_bytes of 1, 2 or 4, other lengths and batches.)"

Q1_VISIBLE = (
    geometry_case("llama-3.1-8b", 2, "Llama 3.1 8B, bf16, 32 x 4,096 tokens", seq_len=4096, batch=32),
    geometry_case("llama-3.3-70b", 2, "Llama 3.3 70B, bf16, 1 x 131,072 tokens", seq_len=131072, batch=1),
    geometry_case("qwen2.5-7b", 1, "Qwen2.5 7B, fp8, 8 x 32,768 tokens", seq_len=32768, batch=8),
    geometry_case("llama-2-7b", 2, "Llama 2 7B (MHA), bf16, 5 x 3,000 tokens", seq_len=3000, batch=5),
    geometry_case("gpt2-large", 4, "GPT-2 large (MHA, head_dim 64), fp32, 3 x 1,024 tokens", seq_len=1024, batch=3),
)


def kv_total_expected(case: dict) -> int:
    k = case["kwargs"]
    return kv.kv_bytes_total(bytes_per_token(case), k["seq_len"], k["batch"])


def kv_total_slip_inputs(case: dict) -> dict:
    """kvcoach.slips' keywords for kv_bytes_total (it names the batch ``batch_size``)."""
    inputs = {k: v for k, v in case["kwargs"].items() if k != "batch"}
    inputs["batch_size"] = case["kwargs"]["batch"]
    inputs.update({k: case["context"][k] for k in ("num_heads", "hidden_size") if k in case["context"]})
    return inputs


def _with_length_and_batch(rng, case):
    case["kwargs"]["seq_len"] = random_seq_len(rng, case)
    case["kwargs"]["batch"] = rng.randint(1, 256)


@dataclass(frozen=True)
class DrillNumber(Number):
    """A graded drill answer, read as ``kvlib drill`` and drill mode read one ([interview 2026 §1]: one rule for every
    drill answer): a number, or text in any notation the drills read ('16.6 GB', '1.66e10', '16,600,000,000'),
    within the tolerance the question states."""

    units: str = ""

    def read(self, value):
        """The number ``value`` names (text read by ``kvcoach.drills.read_answer``), a float where a tolerance
        applies (so a slip is named within it, as ``Problem.check`` names it); anything else as it is."""
        if type(value) is str:
            number, problem, _ = read_answer(value, self.units)
            if problem:
                return value
            value = number
        if self.rel_tol and type(value) is int:
            return float(value)
        return value

    def wrong_type(self, fn: str, type_name_: str) -> str:
        if type_name_ == "builtins.str":
            return (f"{fn} is text that is not a number in {self.units}: write the number (16640000000, 16.64e9) "
                    f"or the number and its unit ('16.64 GB'), as kvlib drill reads it.")
        return super().wrong_type(fn, type_name_)


def _sample(topic: str):
    """One problem of the graded question type on ``topic`` (its quantity, units and tolerance are every learner's)."""
    return generate(topic, 0, kind=GRADED_KINDS.get(topic))


def drill_exercise(number: int, topic: str) -> Exercise:
    """The value exercise ``ch09_q<number>_<topic>``: ``answer_<topic>`` against the learner's own problem.

    A topic's quantity, units and tolerance are the same for every seed (a family's graded question type,
    ``GRADED_KINDS``); they are read from one problem.
    """
    sample = _sample(topic)
    return Exercise(
        grade_id=f"ch09_q{number}_{topic}",
        function_name=f"answer_{topic}",
        params=(),
        visible_cases=drill_cases(topic),
        hidden_cases=no_hidden_cases,
        expected=drill_answer,
        answer=DrillNumber(rel_tol=sample.tolerance, units=sample.units),
        quantity=sample.quantity,
        slip_inputs=drill_slip_inputs,
        unit=sample.units,
        value=True,
    )


#: The edges the exercise text decides (a tie, a rounding direction, a tolerance, an "other"), each
#: with the visible cases that sit on it (tests/test_case_variants.py checks that they exist). A value
#: exercise has one case, the learner's own question: its edges are in the answer, on that case, in the
#: kernel's check and in the outside verdict (the grader's, which holds no other cases):
#: tests/test_checks_ch09.py and tests/test_grading_ch09_variants.py type answers on each side.
_TOLERANCE_EDGE = {"rule": "to 0.5% of the answer (math.isclose's relative tolerance): 0.49% off either way passes, "
                           "0.51% off either way fails ('within 0.5%')",
                   "visible": ()}
_EXACT_EDGE = {"rule": "exact: one unit more or fewer fails, named as off by one (or, on a count the text "
                       "floors or ceils, as the rounding taken the other way)", "visible": ()}
EDGES = {f"ch09_q{n}_{topic}": (dict(_TOLERANCE_EDGE if _sample(topic).tolerance else _EXACT_EDGE,
                                     visible=(drill_label(topic),)),)
         for n, topic in enumerate(GRADED_TOPICS, start=2)}


EXERCISES = exercises(
    Exercise(
        grade_id="ch09_q1_kv_formula",
        function_name="kv_cache_bytes",
        params=Q1_PARAMS,
        visible_cases=Q1_VISIBLE,
        hidden_cases=geometry_hidden(_with_length_and_batch),
        expected=kv_total_expected,
        quantity="kv_bytes_total",
        slip_inputs=kv_total_slip_inputs,
        hidden_note=HIDDEN_NOTE_Q1,
    ),
    *(drill_exercise(n, topic) for n, topic in enumerate(GRADED_TOPICS, start=2)),
)
