"""Plan mode: an interview's open capacity question ("size a cluster for X"), timed, step by step, against a rubric.

``draw(seed)`` draws a scenario: a model, a GPU and its node, traffic as a request rate with mean and p95
prompt and output lengths, a TTFT and an ITL SLO (seeded, the same on every machine). What the
scenario leaves open -- the share of peak bandwidth the kernels reach, the latency of one all-reduce,
the traffic spike to plan for -- is the candidate's to state (``read_assumptions``); kvlib's plan
(``kvlib.planner.plan_requests``) is then made with the stated values, and each step the candidate
enters is judged against it by ``kvcoach.drills.Problem.verdict`` (any notation, the units' tolerance,
the slip named at the step where it enters: ``kvcoach.slips.plan_mode`` and the catalogue):

1. KV bytes per token (the whole model), 2. the KV pool per GPU, 3. the sequences a replica may hold,
4. the binding constraint (memory, itl, ttft or prefill), 5. nodes, 6. nodes with headroom,
7. a sanity line: the requests in flight by Little's law, held against the plan's sequences.

``PlanSession`` is the state (a clock injected, so tests need no real time); ``run`` asks it at a
terminal (``kvlib drill --plan``) and ``kvdisplay.plan_mode`` in ch09. At the end the rubric scores
each of ``RUBRIC_KEYS`` from 0 to 1 (assumptions stated, steps right, the binding constraint named, the
sanity line), recorded in the drill history with ``record(rubric=...)``.

>>> s = PlanSession(draw(1), clock=lambda: 0.0)
>>> s.answer("efficiency=0.7 allreduce_us=20 spike=1.3").ok
True
>>> s.answer(str(s.expected("kv_per_token"))).ok, s.step.key
(True, 'pool')

Taught in ch09_interview_drills (plan mode).
"""

from __future__ import annotations

import math
import random
import re
import time
from dataclasses import dataclass, field
from types import MappingProxyType

from kvlib.config import load_model
from kvlib.feasibility import tp_refusal
from kvlib.gpus import get_gpu
from kvlib.planner import (BINDING_CONSTRAINTS, DEFAULT_ALLREDUCE_LATENCY_S, DEFAULT_EFFICIENCY, DEFAULT_SPIKE_FACTOR,
                           PlanError, plan_requests, sequences_under_itl, step_slowdown)
from kvlib.units import GB, GiB

from . import slips
from .drill_history import RUBRIC_KEYS
from .drills import Problem, _amount, read_answer, tolerance_for

__all__ = ["PLAN_TOPIC", "TARGET_SECONDS", "ASSUMPTIONS", "STEPS", "PlanModeError", "Scenario", "StepResult",
           "PlanSession", "draw", "read_assumptions", "read_binding", "run"]

#: The topic a plan is recorded under in the drill history.
PLAN_TOPIC = "plan"
#: The clock's target for a whole plan, the course's rule of thumb (not a measured figure): an interview gives a
#: capacity question about ten minutes of a 45-minute slot.
TARGET_SECONDS = 600
#: What the scenario leaves open: key -> (what it is, its unit, the plausible range, kvlib's default).
ASSUMPTIONS = {
    "efficiency": ("the share of peak memory bandwidth the decode kernels reach", "a share: a decimal or a percentage",
                   (0.3, 1.0),
                   DEFAULT_EFFICIENCY),
    "allreduce_us": ("the latency of one tensor-parallel all-reduce (two per layer per step)", "µs", (1.0, 200.0),
                     DEFAULT_ALLREDUCE_LATENCY_S * 1e6),
    "spike": ("the traffic spike to hold on top of the mean load", "a factor of the mean load, or a percentage on top",
              (1.0, 3.0),
              DEFAULT_SPIKE_FACTOR),
}
#: The steps after the assumptions: key, what is asked, units ("" for the binding constraint's name).
STEPS = (
    ("kv_per_token", "KV bytes per token, the whole model (all layers, K and V)", "bytes"),
    ("pool", "the KV pool on one GPU (the engine's share of what CUDA reports, less weights and overhead)", "bytes"),
    ("sequences", "the most sequences one replica may hold (memory, the ITL SLO, the TTFT SLO)", "sequences"),
    ("binding", "the binding constraint: memory, itl, ttft or prefill", ""),
    ("nodes", "nodes for the mean load, before headroom", "nodes"),
    ("headroom", "nodes to deploy: the spike you assumed, then one spare node (N+1)", "nodes"),
    ("sanity", "a sanity line: requests in flight by Little's law (to hold against the plan's sequences)",
     "requests"),
)
_NUMERIC = ("kv_per_token", "pool", "sequences", "nodes", "headroom")
_BINDING_WORDS = {"memory": "memory", "kv": "memory", "pool": "memory", "kv pool": "memory", "capacity": "memory",
                  "itl": "itl", "latency": "itl", "inter-token latency": "itl", "bandwidth": "itl", "decode": "itl",
                  "ttft": "ttft", "time to first token": "ttft", "first token": "ttft",
                  "prefill": "prefill", "prompts": "prefill", "prompt": "prefill", "prefill throughput": "prefill"}

# what a scenario draws from: dense full-attention models the planner's formulas hold for, data-centre GPUs
_MODELS = ("meta-llama/Llama-3.1-8B", "Qwen/Qwen2.5-7B", "Qwen/Qwen2.5-32B", "meta-llama/Llama-3.3-70B-Instruct")
_GPUS = ("A100-80GB", "H100-SXM", "H200", "B200")
_RATES = (10, 25, 50, 100, 200)
_PROMPTS = (500, 1000, 2000, 4000)
_OUTPUTS = (150, 300, 600)
_ITL_MS = (30, 40, 50, 60)
_TTFT_MS = (500, 1000, 2000)
_HITS = (0.0, 0.0, 0.3, 0.6)
UTILIZATION = 0.9            # the scenario states it (vLLM's gpu_memory_utilization default)
OVERHEAD_BYTES = 3 * GB      # per GPU: activations and other allocations, stated
REDUNDANCY_NODES = 1


class PlanModeError(ValueError):
    """Input plan mode cannot read; one line that names the field."""


@dataclass(frozen=True)
class Scenario:
    """A drawn capacity question: what it states (the assumptions it leaves open are not here)."""

    seed: int
    model: str
    gpu: str
    gpus_per_node: int
    tp: int
    rate_per_s: float
    prompt_tokens: int
    prompt_tokens_p95: int
    output_tokens: int
    output_tokens_p95: int
    itl_ms: float
    ttft_ms: float
    prefix_hit_rate: float
    utilization: float = UTILIZATION
    overhead_bytes: int = OVERHEAD_BYTES
    redundancy_nodes: int = REDUNDANCY_NODES

    def label(self) -> str:
        """One line the drill history keeps of the scenario: its seed (``kvlib drill --plan --seed``), the
        model, the node and the request rate.

        >>> Scenario(7, "meta-llama/Llama-3.1-8B", "H100-SXM", 8, 1, 25.0, 1000, 2000, 300, 600, 40.0, 1000.0,
        ...          0.0).label()
        'scenario 7: meta-llama/Llama-3.1-8B, 8 x H100-SXM (TP 1), 25 requests/s'
        """
        return (f"scenario {self.seed}: {self.model}, {self.gpus_per_node} x {self.gpu} (TP {self.tp}), "
                f"{self.rate_per_s:g} requests/s")

    def text(self) -> str:
        """The question as an interviewer puts it, with every figure it states."""
        spec, card = load_model(self.model), get_gpu(self.gpu)
        hits = (f" {self.prefix_hit_rate:.0%} of prompt tokens hit the prefix cache." if self.prefix_hit_rate
                else " No prefix caching.")
        return (f"Size a cluster to serve {spec.name} ({spec.num_params() / 1e9:.1f}B parameters, bf16 weights and "
                f"KV cache; config.json: num_hidden_layers {spec.num_layers}, num_attention_heads {spec.num_heads}, "
                f"num_key_value_heads {spec.num_kv_heads}, head_dim {spec.head_dim}) on nodes of "
                f"{self.gpus_per_node} x {card.name} ({card.memory_bytes / GB:.0f} GB on the label, "
                f"{card.cuda_memory_bytes / GiB:.2f} GiB as CUDA reports it, "
                f"{card.bandwidth_bytes_per_s / 1e12:.2f} TB/s, {card.bf16_flop_per_s / 1e12:,.0f} bf16 TFLOP/s), "
                + ("one replica per GPU (no tensor parallelism). Traffic: " if self.tp == 1 else
                   f"one replica per {self.tp} GPUs with tensor parallelism {self.tp}. Traffic: ")
                + f"{self.rate_per_s:g} requests/s, prompts of {self.prompt_tokens:,} tokens on average "
                f"({self.prompt_tokens_p95:,} at p95), {self.output_tokens:,} output tokens on average "
                f"({self.output_tokens_p95:,} at p95).{hits} SLOs: TTFT {self.ttft_ms:g} ms and ITL "
                f"{self.itl_ms:g} ms, both at p95. vLLM takes {self.utilization:g} of GPU memory; activations and "
                f"other allocations {self.overhead_bytes / GB:g} GB per GPU; chunked prefill of 512 tokens a step "
                f"at 50% MFU; one spare node (N+1).")


def _tp(spec, card) -> int | None:
    """The smallest tensor parallelism the engine accepts whose weights take at most half of each GPU."""
    for tp in (1, 2, 4, 8):
        if tp_refusal(spec, tp) is None and spec.weight_bytes(2) / tp <= 0.5 * card.cuda_memory_bytes:
            return tp
    return None


def draw(seed: int) -> Scenario:
    """A scenario for ``seed`` (the same on every machine) whose plan kvlib can make with its own assumptions.

    >>> draw(3) == draw(3)
    True
    """
    rng = random.Random(seed)
    while True:
        spec, card = load_model(rng.choice(_MODELS)), get_gpu(rng.choice(_GPUS))
        tp = _tp(spec, card)
        prompt, output = rng.choice(_PROMPTS), rng.choice(_OUTPUTS)
        scenario = Scenario(seed=seed, model=spec.name, gpu=card.name, gpus_per_node=8, tp=tp or 8,
                            rate_per_s=rng.choice(_RATES), prompt_tokens=prompt, prompt_tokens_p95=prompt * 3,
                            output_tokens=output, output_tokens_p95=output * 2, itl_ms=rng.choice(_ITL_MS),
                            ttft_ms=rng.choice(_TTFT_MS), prefix_hit_rate=rng.choice(_HITS))
        if tp is None:
            continue
        try:
            _plan(scenario, {k: v[3] for k, v in ASSUMPTIONS.items()})
        except PlanError:
            continue
        return scenario


def _plan(scenario: Scenario, assumed: dict):
    return plan_requests(scenario.model, rate_per_s=scenario.rate_per_s, prompt_tokens=scenario.prompt_tokens,
                         prompt_tokens_p95=scenario.prompt_tokens_p95, output_tokens=scenario.output_tokens,
                         output_tokens_p95=scenario.output_tokens_p95, itl_ms=scenario.itl_ms,
                         ttft_ms=scenario.ttft_ms, prefix_hit_rate=scenario.prefix_hit_rate, gpu=scenario.gpu,
                         gpus_per_node=scenario.gpus_per_node, tp=scenario.tp,
                         allreduce_latency_s=assumed["allreduce_us"] * 1e-6, efficiency=assumed["efficiency"],
                         spike_factor=assumed["spike"], redundancy_nodes=scenario.redundancy_nodes,
                         utilization=scenario.utilization, overhead_bytes_per_gpu=scenario.overhead_bytes)


# --- reading what the candidate types ---------------------------------------------------------------------------
_PAIR = re.compile(r"([A-Za-z_]+)\s*[=:]\s*([^\s;,]+(?:\s*(?:%|us|µs|ms))?)")


def read_assumptions(text: str) -> dict:
    """``{key: value}`` from ``efficiency=0.7 allreduce_us=20 spike=1.3`` (any order, any subset; ``70%``, ``30%``
    spike for 1.3, ``20us`` or ``0.02ms``). A key not asked, a value that is not a number or outside its
    plausible range: a one-line ``PlanModeError`` naming the field.

    >>> read_assumptions("efficiency=70% allreduce_us=0.02ms spike=30%")
    {'efficiency': 0.7, 'allreduce_us': 20.0, 'spike': 1.3}
    """
    text = str(text).strip()
    pairs = _PAIR.findall(text)
    if text and not pairs:
        raise PlanModeError(f"assumptions: expected key=value pairs ({', '.join(ASSUMPTIONS)}), got {text!r}")
    out = {}
    for key, value in pairs:
        key = key.lower()
        if key in ("allreduce", "all_reduce", "allreduce_latency"):
            key = "allreduce_us"
        if key not in ASSUMPTIONS:
            raise PlanModeError(f"{key}: not an assumption plan mode asks ({', '.join(ASSUMPTIONS)})")
        raw = value.replace(" ", "").lower()
        scale = 1.0
        for suffix, factor in (("%", 0.01), ("µs", 1.0), ("us", 1.0), ("ms", 1e3)):
            if raw.endswith(suffix):
                raw, scale = raw[: -len(suffix)], factor
                break
        try:
            number = float(raw) * scale
        except ValueError:
            raise PlanModeError(f"{key}: expected a number, got {value!r}") from None
        if key == "spike" and value.strip().endswith("%"):
            number = 1 + number                    # "30%" of spike: 1.3 times the mean load
        if key == "allreduce_us" and scale == 0.01:
            raise PlanModeError(f"allreduce_us: expected a time in µs, got {value!r}")
        low, high = ASSUMPTIONS[key][2]
        if not low <= number <= high:
            raise PlanModeError(f"{key}: {value} is outside the plausible range {low:g} to {high:g} "
                                f"({ASSUMPTIONS[key][1]})")
        out[key] = round(number, 12)
    return out


def read_binding(text: str) -> str:
    """The binding constraint named (``memory``, ``itl``, ``ttft`` or ``prefill``; ``latency``, ``kv pool``,
    ``prompts`` ... too); a one-line ``PlanModeError`` naming the field otherwise.

    >>> read_binding("  Latency "), read_binding("prefill throughput")
    ('itl', 'prefill')
    """
    said = " ".join(str(text).lower().replace("_", " ").split())
    if said in BINDING_CONSTRAINTS:
        return said
    if said in _BINDING_WORDS:
        return _BINDING_WORDS[said]
    raise PlanModeError(f"binding: expected one of {', '.join(BINDING_CONSTRAINTS)}, got {str(text).strip()!r}")


# --- the steps as problems the drills' verdict judges -----------------------------------------------------------
def _problem(scenario, key, quantity, inputs, units, answer) -> Problem:
    expected = slips.expected_value(quantity, **inputs)
    if expected != answer and not math.isclose(expected, answer, rel_tol=1e-9):   # the catalogue redoes kvlib's step
        raise AssertionError(f"plan mode: {quantity} recomputed {expected!r}, kvlib's plan has {answer!r}")
    label = dict((k, lab) for k, lab, _ in STEPS)[key]
    return Problem(topic=PLAN_TOPIC, seed=scenario.seed, question=label, answer=answer, units=units,
                   tolerance=tolerance_for(units), quantity=quantity, params=MappingProxyType({}),
                   inputs=MappingProxyType(inputs), template=f"{PLAN_TOPIC}/{key}")


def _problems(scenario: Scenario, plan, assumed: dict) -> dict:
    """``{step key: Problem}`` for the numeric steps and the sanity line, kvlib's plan their answers."""
    spec, card, d = load_model(scenario.model), get_gpu(scenario.gpu), plan.decode
    geometry = {"layers": spec.num_layers, "kv_heads": spec.num_kv_heads, "head_dim": spec.head_dim,
                "dtype_bytes": d.kv_dtype_bytes, "num_heads": spec.num_heads, "hidden_size": spec.hidden_size}
    pool = {"gpu_bytes": d.gpu_memory_bytes, "label_bytes": card.memory_bytes, "utilization": d.utilization,
            "weight_bytes": d.weight_bytes, "other_bytes": d.overhead_bytes_per_gpu, "tp": d.tp}
    slowdown = step_slowdown(d.tp, 0, d.efficiency)

    def by_itl(target_s):
        return sequences_under_itl(target_s, d.weight_bytes_per_gpu, d.kv_bytes_per_sequence_per_gpu,
                                   d.bandwidth_bytes_per_s, slowdown)

    n, replicas = plan.max_sequences_per_replica, d.replicas_per_node
    sequences = {"sequences_per_replica": n, "sequences_by_memory": d.sequences_per_replica_by_memory,
                 "sequences_by_itl": d.sequences_per_replica_by_latency, "max_num_seqs": d.max_num_seqs,
                 "token_budget": plan.token_budget, "itl_margin_ms": plan.itl_margin_s * 1e3,
                 "allreduce_ms": d.allreduce_s_per_step * 1e3,
                 "sequences_by_itl_without_margin": by_itl(plan.itl_target_s - d.allreduce_s_per_step),
                 "sequences_by_itl_without_allreduce": by_itl(plan.itl_target_s - plan.itl_margin_s),
                 "sequences_before_ttft": min(d.sequences_per_replica, plan.token_budget - 1)}
    nodes = {"nodes": plan.nodes, "users": d.users, "replicas": replicas, "sequences_per_replica": n,
             "nodes_for_decode": plan.nodes_for_decode, "gpus_per_node": d.gpus_per_node, "tp": d.tp,
             "rate_per_s": scenario.rate_per_s, "prompt_tokens": scenario.prompt_tokens}
    headroom = {"nodes": plan.nodes, "spike_factor": assumed["spike"], "redundancy_nodes": scenario.redundancy_nodes,
                "gpus_per_node": d.gpus_per_node}
    little = {"rate_per_s": scenario.rate_per_s, "ttft_ms": scenario.ttft_ms, "itl_ms": scenario.itl_ms,
              "output_tokens": scenario.output_tokens, "output_tokens_p95": scenario.output_tokens_p95}
    return {
        "kv_per_token": _problem(scenario, "kv_per_token", "kv_bytes_per_token", geometry, "bytes",
                                 d.kv_bytes_per_token),
        "pool": _problem(scenario, "pool", "plan_pool_bytes_per_gpu", pool, "bytes", d.kv_pool_bytes_per_gpu),
        "sequences": _problem(scenario, "sequences", "plan_sequences_per_replica", sequences, "sequences", n),
        "nodes": _problem(scenario, "nodes", "plan_nodes", nodes, "nodes", plan.nodes),
        "headroom": _problem(scenario, "headroom", "plan_nodes_with_headroom", headroom, "nodes",
                             plan.nodes_with_headroom),
        "sanity": _problem(scenario, "sanity", "plan_concurrency", little, "requests", plan.concurrency),
    }


# --- the session ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StepResult:
    """One line typed: ``ok`` whether it is right, ``scored`` False for input that could not be read (asked
    again), the feedback (one line or a few), the slip keys it names."""

    key: str
    text: str
    ok: bool
    scored: bool
    feedback: str
    slips: tuple = ()


@dataclass
class _Step:
    key: str
    label: str
    units: str


@dataclass
class PlanSession:
    """A plan in progress: ``answer(text)`` judges the current step and moves on; ``rubric()`` at the end."""

    scenario: Scenario
    clock: object = time.monotonic
    results: list = field(default_factory=list)

    def __post_init__(self):
        self.started = self.clock()
        self.assumed: dict | None = None
        self.stated: dict = {}
        self.plan = None
        self.problems: dict = {}
        self.index = 0            # 0: the assumptions; then STEPS in order
        self.finished_at: float | None = None

    # -- where we are
    @property
    def steps(self) -> tuple:
        return (_Step("assumptions", "your assumptions for what the scenario leaves open", ""),
                *(_Step(k, lab, u) for k, lab, u in STEPS))

    @property
    def done(self) -> bool:
        return self.index >= len(self.steps)

    @property
    def step(self) -> _Step | None:
        return None if self.done else self.steps[self.index]

    def elapsed(self) -> float:
        """Seconds since the scenario was drawn; once the plan is complete, the seconds it took."""
        return (self.clock() if self.finished_at is None else self.finished_at) - self.started

    def prompt(self) -> str:
        """What to type at the current step: its number, what is asked, the units line or the choices."""
        s = self.step
        if s is None:
            return ""
        if s.key == "assumptions":
            asked = " ".join(f"{k}=<{what}; {unit}>" for k, (what, unit, _, _) in ASSUMPTIONS.items())
            return f"assumptions: state what the scenario leaves open, as {asked}"
        head = f"step {self.index}/{len(STEPS)}: {s.label}"
        if s.key == "binding":
            return head
        return f"{head}; {self.problems[s.key].units_line()}"

    def expected(self, key: str):
        """kvlib's figure for step ``key`` (after the assumptions): for tests and the worked plan."""
        if key == "binding":
            return self.plan.binding_constraint
        return self.problems[key].answer

    # -- answering
    def answer(self, text) -> StepResult:
        """Judge ``text`` at the current step; unreadable input is not scored and the step is asked again."""
        s = self.step
        if s is None:
            raise PlanModeError("plan: the plan is complete; draw a new scenario")
        text = str(text).strip()
        if s.key == "assumptions":
            result = self._assumptions(text)
        elif s.key == "binding":
            result = self._binding(text)
        else:
            result = self._numeric(s.key, text)
        self.results.append(result)
        if result.scored:
            self.index += 1
            if self.done:
                self.finished_at = self.clock()
        return result

    def _assumptions(self, text) -> StepResult:
        try:
            stated = read_assumptions(text)
        except PlanModeError as e:
            return StepResult("assumptions", text, False, False, str(e))
        assumed = {k: stated.get(k, v[3]) for k, v in ASSUMPTIONS.items()}
        try:
            plan = _plan(self.scenario, assumed)
        except PlanError as e:
            return StepResult("assumptions", text, False, False, f"with those assumptions the SLOs cannot be met "
                                                                  f"({e}); state others")
        self.stated, self.assumed, self.plan = stated, assumed, plan
        self.problems = _problems(self.scenario, plan, assumed)
        lines = []
        for k, (what, unit, _, default) in ASSUMPTIONS.items():
            if k in stated:
                lines.append(f"✓ {k} = {stated[k]:g}: stated.")
            else:
                lines.append(f"✗ {k}: not stated ({what}); an interviewer asks for it. The plan below uses "
                             f"kvlib's {default:g}.")
        return StepResult("assumptions", text, len(stated) == len(ASSUMPTIONS), True, "\n".join(lines))

    def _binding(self, text) -> StepResult:
        try:
            said = read_binding(text)
        except PlanModeError as e:
            return StepResult("binding", text, False, False, str(e))
        right = self.plan.binding_constraint
        if said == right:
            return StepResult("binding", text, True, True, f"correct: {right} sets the node count.")
        words = slips.message("binding_misnamed", binding=right)
        return StepResult("binding", text, False, True, f"not quite [binding_misnamed]: {words}",
                          ("binding_misnamed",))

    def _numeric(self, key, text) -> StepResult:
        p = self.problems[key]
        _, problem, _ = read_answer(text, p.units)
        if problem:
            return StepResult(key, text, False, False, f"{key}: {problem}")
        v = p.verdict(text)
        feedback = v.feedback
        if key == "sanity":
            held = self.plan.nodes * self.plan.decode.replicas_per_node * self.plan.max_sequences_per_replica
            verdict = "it holds" if held >= self.plan.concurrency else "it does not"
            hold = "holds" if self.plan.nodes == 1 else "hold"
            feedback += (f" The plan's {_amount(self.plan.nodes, 'nodes')} {hold} up to {held:,} sequences against "
                         f"{self.plan.concurrency:,.1f} in flight: {verdict}.")
        return StepResult(key, text, v.correct, True, feedback, v.slips)

    # -- the end
    def last(self) -> dict:
        """The last scored result of each step: ``{key: StepResult}``."""
        return {r.key: r for r in self.results if r.scored}

    def rubric(self) -> dict:
        """``{assumptions, steps, binding, sanity}``, each from 0 to 1 (``drill_history.RUBRIC_KEYS``)."""
        last = self.last()
        right = [last[k].ok for k in _NUMERIC if k in last]
        scores = {"assumptions": round(len(self.stated) / len(ASSUMPTIONS), 4),
                  "steps": round(sum(right) / len(_NUMERIC), 4),
                  "binding": float(bool(last.get("binding") and last["binding"].ok)),
                  "sanity": float(bool(last.get("sanity") and last["sanity"].ok))}
        return {k: scores[k] for k in RUBRIC_KEYS}

    def slips(self) -> list:
        """Every slip key named, in order."""
        return list(dict.fromkeys(k for r in self.results for k in r.slips))

    def summary(self) -> str:
        """The rubric as the candidate reads it, and the time against the target."""
        r = self.rubric()
        total = sum(r.values())
        parts = (f"assumptions stated {r['assumptions']:.0%}", f"steps right {r['steps']:.0%}",
                 f"binding constraint {'named' if r['binding'] else 'missed'}",
                 f"sanity line {'right' if r['sanity'] else 'missed'}")
        over = self.elapsed() - TARGET_SECONDS
        clock = f"time {self.elapsed():.0f} s (target {TARGET_SECONDS} s" + (f", {over:.0f} s over)" if over > 0 else ")")
        line = f"rubric {total:g}/4: " + "; ".join(parts) + "."
        if self.plan is not None:
            line += (f"\nkvlib's plan: {_amount(self.plan.nodes_with_headroom, 'nodes')} of "
                     f"{self.scenario.gpus_per_node} x {self.scenario.gpu} (binding: {self.plan.binding_constraint}).")
        return line + "\n" + clock

    def record(self, history, session, now=None) -> None:
        """Add this plan to ``history`` (a ``drill_history.History``): right when every score is 1, its slips, its
        rubric and its scenario's label."""
        r = self.rubric()
        history.record(session, PLAN_TOPIC, all(v == 1 for v in r.values()), self.elapsed(), slips=self.slips(),
                       now=now, target=TARGET_SECONDS, rubric=r, scenario=self.scenario.label())


def run(seed: int, *, stdin, stdout, history=None, session=None, clock=time.monotonic, wall=time.time,
        echo: bool = True) -> PlanSession:
    """Ask a plan at a terminal (``kvlib drill --plan``): the scenario, then each step read from ``stdin``.

    Unreadable input is answered in one line and asked again; the end of input stops the plan (what was
    answered is scored). ``echo``: print what was read (answers that are not typed at a terminal).
    """
    def say(*lines):
        for line in lines:
            print(line, file=stdout)

    s = PlanSession(draw(seed), clock=clock)
    say(f"kvlib drill --plan: scenario {seed}. Enter your plan step by step; target {TARGET_SECONDS} s.", "",
        s.scenario.text(), "")
    while not s.done:
        say(s.prompt())
        print("> ", end="", file=stdout, flush=True)
        line = stdin.readline()
        if not line:
            say("\n(end of input)")
            break
        if echo:
            say(line.strip())
        say(s.answer(line).feedback)
    say("", s.summary())
    if s.slips():
        say("slips: " + ", ".join(s.slips()))
    if history is not None and session is not None and s.plan is not None:
        s.record(history, session, now=wall())
    return s
