"""Whether a deployment could run at all, and if not, why: ``check_deployment``.

A figure about a deployment that no engine would start (weights larger than
the GPU, a batch whose cache is twice the pool, a tensor-parallel size the
engine refuses) is not a figure worth teaching. ``check_deployment`` applies
the rules vLLM applies before it serves, and returns a plain record: ``fits``
and one sentence per broken rule, each with its figures.

The rules, and where vLLM makes them (vLLM source, newest release):

1. **Query heads split evenly** -- ``num_attention_heads % tp == 0``
   (``ModelConfig.verify_with_parallel_config``, ``vllm/config/model.py``:
   "Total number of attention heads (28) must be divisible by tensor
   parallel size (8)").
2. **KV heads split or replicate evenly** -- ``tp`` divides K or is a
   multiple of it (``QKVParallelLinear`` in
   ``vllm/model_executor/layers/linear.py`` divides K by ``tp``, or ``tp`` by
   K when it replicates; either division must be exact). MLA keeps one
   latent on every rank, so it has no such rule.
3. **The context is within the model's** -- ``seq_len <=
   max_position_embeddings`` (``_get_and_verify_max_len`` in
   ``vllm/config/model.py`` refuses a longer ``max_model_len``).
4. **The weights fit** -- the busiest rank's weights ``ceil(W / (tp * pp))``
   are below the engine's budget less the other allocations,
   ``ceil(M * u) - O`` (``M`` memory as CUDA reports it, ``u`` utilization).
5. **The batch's KV fits what is left** -- ``batch_size`` sequences of
   ``seq_len`` tokens, on the busiest GPU (its KV heads under ``tp``, its
   share ``ceil(L / pp)`` of the layers), need no more than the pool
   ``ceil(M * u) - W / (tp * pp) - O``.
6. **The engine schedules that many sequences** -- ``batch_size <=``
   vLLM's default ``max_num_seqs`` (``default_max_num_seqs``).

The pool is kvlib's one pool rule (``formulas.kv_pool_bytes`` with vLLM's
rounding of the budget), taken through ``_pool_bytes`` alone.

Taught in ch06_crossover, ch07_capacity_plan and ch09_interview_drills.

>>> ok = check_deployment("llama-3.1-8b", "H100-SXM", batch_size=32, seq_len=4096)
>>> ok.fits, ok.reasons
(True, ())
>>> bad = check_deployment("llama-3.1-8b", "H100-SXM", batch_size=32, seq_len=32768)
>>> bad.fits
False
>>> print(bad.summary())
does not fit: KV for 32 sequences of 32,768 tokens is 137.44 GB (128.00 GiB) per GPU but the pool left after weights and overhead is 59.16 GB (55.09 GiB)
"""  # noqa: E501

from __future__ import annotations

import math
from dataclasses import dataclass

from . import formulas
from .assumptions import DEFAULT_OVERHEAD_BYTES, DEFAULT_UTILIZATION
from .config import load_model
from .gpus import GPU, get_gpu
from .spec import ATTENTION_KINDS, MAMBA2, STATE_KINDS, ModelSpec, SpecError
from .units import GB, GiB, format_gb_gib
from .vllm.engine import NEWEST_CHECKED_RELEASE, as_version

__all__ = ["Feasibility", "check_deployment", "default_max_num_seqs", "tp_refusal"]


def default_max_num_seqs(gpu, version=None) -> int:
    """vLLM's default ``max_num_seqs`` (sequences scheduled at once) on ``gpu``.

    ``EngineArgs.get_batch_defaults`` (``vllm/engine/arg_utils.py``): 1024 on
    a GPU with at least 70 GiB that is not an A100, 256 otherwise. Releases
    before 0.8 (the V0 engine's default) used 256 everywhere; V1 0.8.0-0.8.3
    used 1024 everywhere (reverted by vLLM PR #16158). ``version`` None = newest.

    >>> default_max_num_seqs("H100-SXM"), default_max_num_seqs("A100-80GB"), default_max_num_seqs("L40S")
    (1024, 256, 256)
    >>> default_max_num_seqs("H100-SXM", version="0.6.3")
    256
    """
    card = gpu if isinstance(gpu, GPU) else get_gpu(gpu)
    v = as_version(version)
    if v is not None and v < (0, 8, 0):
        return 256
    if v is not None and v < (0, 8, 4):
        return 1024
    return 1024 if card.cuda_memory_bytes >= 70 * GiB and "a100" not in card.name.lower() else 256


def tp_refusal(spec: ModelSpec, tp: int) -> str | None:
    """Why vLLM refuses tensor parallelism ``tp`` for ``spec`` (rules 1 and 2), or None.

    >>> from kvlib import load_model
    >>> tp_refusal(load_model("qwen2.5-7b"), 8)
    'TP 8 does not divide the 28 query heads (vLLM: verify_with_parallel_config)'
    >>> tp_refusal(load_model("qwen2.5-7b"), 4) is None
    True
    """
    if spec.num_heads % tp:
        return f"TP {tp} does not divide the {spec.num_heads} query heads (vLLM: verify_with_parallel_config)"
    for kind in sorted(set(spec.layer_kinds) & set(ATTENTION_KINDS)):   # Gemma 4: each kind its own KV heads
        k = spec.kv_geometry(kind)[0]
        if not spec.is_mla and k % tp and tp % k:
            return f"TP {tp} neither divides the {k} KV heads nor is a multiple of them (vLLM: QKVParallelLinear)"
    for kind in sorted(set(spec.layer_kinds) & set(STATE_KINDS)):
        try:
            spec.state_tensor_shapes(kind, tp)
        except SpecError as exc:   # the mixer splits its heads (and Mamba2 its groups) over TP
            if str(exc).startswith(f"tp={tp} "):
                return f"TP {tp}: {exc} (vLLM: {'mamba_mixer2.py' if kind == MAMBA2 else 'qwen_gdn_linear_attn.py'})"
    return None


def _pool_bytes(gpu_memory_bytes, utilization, weight_bytes_per_gpu, other_bytes) -> int:
    """The KV pool per GPU (may be negative): the one place the check takes the pool rule from."""
    return formulas.kv_pool_bytes(gpu_memory_bytes, utilization, weight_bytes_per_gpu, other_bytes,
                                  round_budget_up=True)   # vLLM's V1 rounds the request up


@dataclass(frozen=True)
class Feasibility:
    """Whether one deployment could run, with every figure the rules compared."""

    model: str
    gpu: str
    tp: int
    pp: int
    batch_size: int
    seq_len: int
    gpu_memory_bytes: int          # as CUDA reports it
    utilization: float
    other_bytes: int               # activations, workspace, CUDA graphs
    weight_bytes_per_gpu: int      # busiest rank
    weight_room_bytes: int         # ceil(M * u) - O: what weights and KV share
    pool_bytes: int                # weight_room - weights; negative when the weights do not fit
    kv_bytes_per_gpu: int          # the batch's KV on the busiest GPU (and a hybrid's constant state per sequence)
    max_num_seqs: int
    max_position_embeddings: int | None
    reasons: tuple = ()

    @property
    def fits(self) -> bool:
        return not self.reasons

    def summary(self) -> str:
        """One line: 'fits: ...' or 'does not fit: reason; reason'."""
        if self.fits:
            return (f"fits: KV {format_gb_gib(self.kv_bytes_per_gpu)} per GPU within a pool of "
                    f"{format_gb_gib(self.pool_bytes)}")
        return "does not fit: " + "; ".join(self.reasons)

    __str__ = summary


def check_deployment(model, gpu, *, tp: int = 1, pp: int = 1, batch_size: int = 1, seq_len: int,
                     kv_dtype_bytes=None, weight_bytes=None, weight_dtype_bytes=2,
                     utilization: float = DEFAULT_UTILIZATION, other_bytes=DEFAULT_OVERHEAD_BYTES,
                     gpu_memory_bytes=None, version=None) -> Feasibility:
    """Can ``model`` serve ``batch_size`` sequences of ``seq_len`` tokens on ``gpu`` x ``tp`` x ``pp``?

    ``model`` is a name kvlib knows or a ``ModelSpec``; ``gpu`` a name or a
    ``GPU``. ``weight_bytes`` (whole model) defaults to kvlib's parameter
    count x ``weight_dtype_bytes``; ``kv_dtype_bytes`` to the served dtype;
    ``gpu_memory_bytes`` to what CUDA reports; ``utilization`` and
    ``other_bytes`` (per GPU) to kvlib's serving assumptions. The rules are
    in the module docstring; every broken one adds a sentence to ``reasons``.
    """
    spec = model if isinstance(model, ModelSpec) else load_model(model)
    card = gpu if isinstance(gpu, GPU) else get_gpu(gpu)
    for name, value in (("tp", tp), ("pp", pp), ("batch_size", batch_size), ("seq_len", seq_len)):
        if type(value) is not int or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    memory = card.cuda_memory_bytes if gpu_memory_bytes is None else gpu_memory_bytes
    b = spec.dtype_bytes if kv_dtype_bytes is None else kv_dtype_bytes
    w_total = spec.weight_bytes(weight_dtype_bytes) if weight_bytes is None else weight_bytes
    w_gpu = formulas.weight_bytes_per_gpu(math.ceil(w_total), tp * pp)
    room = _pool_bytes(memory, utilization, 0, other_bytes)
    pool = _pool_bytes(memory, utilization, w_gpu, other_bytes)
    max_seqs = default_max_num_seqs(card, version)
    reasons = []

    refusal = tp_refusal(spec, tp)
    if refusal:
        reasons.append(refusal)
        heads_ok_tp = 1                     # size the cache as if unsplit; the TP reason already stands
    else:
        heads_ok_tp = tp
    if spec.max_position_embeddings is not None and seq_len > spec.max_position_embeddings:
        reasons.append(f"context {seq_len:,} is over the model's max_position_embeddings "
                       f"{spec.max_position_embeddings:,}")
    # The busiest pipeline stage holds ceil(L / pp) of the KV layers.
    per_seq = spec.kv_bytes_per_sequence(seq_len, b, tp=heads_ok_tp)
    layers = spec.num_kv_layers
    kv_gpu = math.ceil(batch_size * per_seq * math.ceil(layers / pp) / layers) if layers else 0
    # a hybrid's Mamba2 / Gated DeltaNet layers keep a constant state per sequence beside the KV
    state = 0 if spec.unmodelled_state else spec.state_bytes_per_sequence(heads_ok_tp)
    n_state = spec.num_state_layers
    if state:
        kv_gpu += math.ceil(batch_size * state * math.ceil(n_state / pp) / n_state)
    if w_gpu > room:
        reasons.append(f"weights are {format_gb_gib(w_gpu)} per GPU but the engine's budget for weights and KV "
                       f"({utilization:g} x {memory / GB:.2f} GB less {other_bytes / GB:.2f} GB of overhead) is "
                       f"{format_gb_gib(room)}")
    elif kv_gpu > pool:
        reasons.append(f"KV{' and state' if state else ''} for {batch_size:,} sequence{'s' if batch_size != 1 else ''} "
                       f"of {seq_len:,} tokens is "
                       f"{format_gb_gib(kv_gpu)} per GPU but the pool left after weights and overhead is "
                       f"{format_gb_gib(pool)}")
    if batch_size > max_seqs:
        reasons.append(f"a batch of {batch_size:,} is over vLLM {version or NEWEST_CHECKED_RELEASE}'s default "
                       f"max_num_seqs of {max_seqs:,} on {card.name}")
    return Feasibility(model=spec.name, gpu=card.name, tp=tp, pp=pp, batch_size=batch_size, seq_len=seq_len,
                       gpu_memory_bytes=memory, utilization=utilization, other_bytes=other_bytes,
                       weight_bytes_per_gpu=w_gpu, weight_room_bytes=room, pool_bytes=pool,
                       kv_bytes_per_gpu=kv_gpu, max_num_seqs=max_seqs,
                       max_position_embeddings=spec.max_position_embeddings, reasons=tuple(reasons))
