"""Every deployment the course asks about could run (kvlib.check_deployment), or is the one shown not to.

Three sources of scenarios:

* exercise cases, visible and hidden (two class seeds), of every chapter's checks: a case that names a
  model is held to vLLM's tensor-parallel rules (``tp_refusal``) and to the model's context; one that
  names a GPU (by name, by the bandwidth it states, or by the memory it states) to the weights and the
  batch's cache fitting that GPU's pool;
* drill draws, 2,000 per topic that states a deployment (kvcoach.drills);
* the worked scenarios: ch06, ch07 and ch09 assert ``check_deployment(...).fits`` in the very cells
  that compute them, so the executed-notebook tests fail on an infeasible one; the two the source
  documents get wrong (32 x 32,768 and 128 x 4,096 tokens of Llama 3.1 8B on one H100) are asserted
  here not to fit, as the errata say.
"""

import functools

import pytest

import kvlib as kv
from autograder.checks import chapter_module, chapter_of
from course_chapters import GRADED
from kvcoach.drills import generate
from kvlib.feasibility import check_deployment, tp_refusal

#: Every graded chapter (``autograder.chapter.CHAPTER_IDS``), by its checks module's name.
CHAPTERS = tuple(chapter_of(c) for c in GRADED)
SEEDS = (0, 1)
# Exercises whose cases are deliberately not deployments: the learner names a colleague's slip
# (ch02_q4 states a wrong figure to diagnose), or reads a real engine log (ch08: the engine ran).
NOT_DEPLOYMENTS = {"ch02_q4_diagnose_colleague", "ch03_q3_name_the_slip"}


def _spec(case):
    name = (case.get("context") or {}).get("model") or (case.get("context") or {}).get("config_name")
    if not name:
        return None
    try:
        return kv.load_model(name)
    except ValueError:
        return None


def _gpu_by_bandwidth(bw):
    found = [g for g in kv.GPUS.values() if g.bandwidth_bytes_per_s == bw]
    return found[0] if found else None


def problems(case, grade_id):
    """Why the case's deployment could not run: a list of sentences (empty when it could)."""
    k, spec = case["kwargs"], _spec(case)
    out = []
    if spec is None:
        return out
    tp = k.get("tp", 1)
    if isinstance(tp, int) and tp > 1 and tp_refusal(spec, tp):
        out.append(tp_refusal(spec, tp))
    for field in ("seq_len", "context", "max_seq_len", "long_context"):
        t = k.get(field)
        if isinstance(t, int) and spec.max_position_embeddings and t > spec.max_position_embeddings:
            out.append(f"{field} {t:,} over max_position_embeddings {spec.max_position_embeddings:,}")
    # a GPU stated by its bandwidth (ch06): the weights and the batch's cache must fit its pool
    gpu = _gpu_by_bandwidth(k.get("bandwidth_bytes_per_s"))
    if gpu is not None and "seq_len" in k and "weight_bytes" in k and not out:
        check = check_deployment(spec, gpu, batch_size=k.get("batch_size", 1), seq_len=k["seq_len"],
                                 kv_dtype_bytes=k.get("dtype_bytes"), weight_bytes=k["weight_bytes"])
        out.extend(check.reasons)
    return out


# A case that states hardware or a TP size describes a deployment; one that only gives a geometry and a
# length is a formula drill. Every case, visible or hidden, is held to every rule: a formula drill's length
# (autograder.checks.cases.random_seq_len) stays within its model's context too.
@functools.cache
def _chapter_cases(chapter: str) -> tuple:
    """``(grade_id, kind, cases)`` of every deployment exercise of ``chapter`` (``ch01``), visible and hidden."""
    return tuple(_iter_cases(chapter))


def _iter_cases(chapter: str):
    module = chapter_module(chapter)        # LookupError naming autograder/checks/<chapter>.py when it is missing
    for grade_id, ex in module.EXERCISES.items():
        if grade_id in NOT_DEPLOYMENTS or ex.value:
            continue
        yield grade_id, "visible", ex.cases()
        for seed in SEEDS:
            yield grade_id, f"hidden seed {seed}", tuple(ex.cases(hidden=True, seed=seed))


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_exercise_case_could_run(chapter):
    found = []
    for grade_id, kind, cases in _chapter_cases(chapter):
        for case in cases:
            why = problems(case, grade_id)
            if why:
                found.append(f"{grade_id} {kind} {case['label']!r}: {'; '.join(why)}")
    assert not found, "\n".join(found)


# --- drills ------------------------------------------------------------------------------------
DRAWS = 2000


def _drill_problems(p):
    spec = kv.load_model(p.params["model"]) if "model" in p.params else None
    prm = p.params
    if p.topic == "pool":
        return list(check_deployment(spec, kv.get_gpu(prm["gpu"]), seq_len=1, weight_bytes=prm["weight_bytes"],
                                     utilization=prm["utilization"], other_bytes=prm["other_bytes"],
                                     gpu_memory_bytes=prm["gpu_bytes"]).reasons)
    if p.topic == "step_time":
        return list(check_deployment(spec, kv.get_gpu(prm["gpu"]), batch_size=prm["batch_size"],
                                     seq_len=prm["seq_len"], weight_bytes=prm["weight_bytes"]).reasons)
    out = []
    if "tp" in prm and tp_refusal(spec, prm["tp"]):
        out.append(tp_refusal(spec, prm["tp"]))
    t = prm.get("seq_len")
    if p.topic == "crossover":
        t = prm["weight_bytes"] / (spec.kv_bytes_per_token() * prm["batch_size"])
    if t is not None and spec.max_position_embeddings and t > spec.max_position_embeddings:
        out.append(f"context {t:,.0f} over max_position_embeddings {spec.max_position_embeddings:,}")
    return out


@pytest.mark.parametrize("topic", ["pool", "step_time", "tp_per_gpu", "plan_step", "per_sequence", "concurrency",
                                   "crossover"])
def test_drill_draws_could_run(topic):
    bad = []
    for seed in range(DRAWS):
        p = generate(topic, seed)
        why = _drill_problems(p)
        if why:
            bad.append(f"seed {seed}: {p.question[:80]}... {'; '.join(why)}")
    assert not bad, "\n".join(bad[:10])


# --- the source documents' impossible batches, shown on purpose --------------------------------
@pytest.mark.parametrize("batch, context", [(32, 32768), (128, 4096)])
def test_the_sources_batches_do_not_fit_one_h100(batch, context):
    # Llama 3.1 8B, 131,072 B per token: 32 x 32,768 -> 137.4 GB, 128 x 4,096 -> 68.7 GB of cache, against
    # ceil(0.92 x 85,018,877,624) - 16,060,522,496 - 3e9 = 59,156,844,919 B of pool
    r = check_deployment("llama-3.1-8b", "H100-SXM", batch_size=batch, seq_len=context)
    assert r.kv_bytes_per_gpu == 131072 * batch * context > 59_156_844_919 == r.pool_bytes
    assert not r.fits
