"""What vLLM reserves for one request at a context: its worst-case blocks, times the bytes of one block.

vLLM's V1 engine sizes one request at ``max_model_len`` by
``get_max_concurrency_for_kv_cache_config`` (``v1/core/kv_cache_utils.py``):
each KV-cache group needs ``ceil(max memory usage / page)`` blocks, and every
block a group takes costs ``group_size`` pages, one per layer slot of the
group (``bytes_per_block``, padding layers and padded state pages included)::

    planned = blocks_per_request x bytes_per_block
    blocks_per_request = sum over groups of
        full      ceil(C / b)
        sliding   ceil(min(W - 1 + F, C) / b) + 1      (the window's worst step)
        chunked   ceil(min(chunk + F, C) / b)
        state     2 (+ 1 prefill checkpoint) pages in 'align' mode, 1 in 'none'

with ``C`` the context, ``b`` the group's block (grown to cover a state page
for Mamba / Gated DeltaNet hybrids, ``kvlib.vllm.hybrid``), ``F`` the tokens
in flight (``kvlib.vllm.window.max_in_flight_tokens``). It is the divisor of
vLLM's "Maximum concurrency" line (``concurrency = (pool // bytes_per_block)
/ blocks_per_request``) and of its start-up memory check, so it is what the
engine admits by, not what a running request holds (a sliding window frees
its skipped blocks, ``kvlib.vllm.window.window_blocks_held``).

Llama 3.1 8B at 1,000 tokens, 16-token blocks of 32 layers x 64 KiB: 63 blocks of
2 MiB, against 1,000 x 128 KiB = 125 MiB for the tokens alone:

>>> from kvlib import load_model
>>> a = planned_bytes_per_sequence(load_model("llama-3.1-8b"), 1000, version="0.32.0")
>>> a.blocks_per_request, a.bytes_per_block, a.bytes
(63, 2097152, 132120576)
"""

from __future__ import annotations

from dataclasses import dataclass

from ..spec import CHUNKED, SLIDING, ModelSpec
from .cpu import CPU_BLOCK_SIZE
from .engine import V1, VllmLogError, as_version, default_block_size, group_rule
from .hybrid import CPU, GPU, PagePlan
from .layout import plan_layouts
from .tokens import Scenario
from .window import max_in_flight_tokens

__all__ = ["Admission", "planned_bytes_per_sequence", "ASSUMED_BATCHED_TOKENS"]

# vllm serve's max_num_batched_tokens on a GPU of 70 GiB or more that is not an A100
# (engine/arg_utils.py get_batch_defaults), assumed when no GPU is named.
ASSUMED_BATCHED_TOKENS = 8192


@dataclass(frozen=True)
class Admission:
    """One request's planned share of the pool on one rank, and the steps to it."""

    bytes: int                      # blocks_per_request x bytes_per_block
    blocks_per_request: int
    bytes_per_block: int            # the busiest pipeline stage's block
    block_size: int                 # the attention block (a state hybrid's grows)
    groups: tuple
    context: int
    max_in_flight_tokens: int | None    # F, when a sliding or chunked group needs it
    plan: PagePlan | None
    notes: tuple = ()


def planned_bytes_per_sequence(spec: ModelSpec, context: int, *, tp: int = 1, pp: int = 1, kv_cache_dtype=None,
                               version=None, block_size: int | None = None,
                               max_num_batched_tokens: int | None = None, platform: str = GPU,
                               mamba_cache_mode: str = "align", gdn_flashinfer: bool | None = None,
                               ssm_dtype_bytes: int | None = None) -> Admission:
    """What vLLM plans for one request of ``context`` tokens on one rank (``Admission.bytes``).

    ``version`` picks the release's rules (block size, grouping, tokens in
    flight, hybrid alignment; None: the newest). ``max_num_batched_tokens``
    only matters for sliding-window and chunked layers; without it vLLM's
    default on a large GPU (8,192) is assumed and a note says so.
    ``mamba_cache_mode``: 'align' (prefix caching on, vLLM's default) or 'none'.
    """
    if not isinstance(spec, ModelSpec):
        raise VllmLogError(f"planned_bytes_per_sequence takes a ModelSpec, not {type(spec).__name__}")
    if type(context) is not int or context < 1:
        raise VllmLogError(f"context must be a positive integer, got {context!r}")
    v = as_version(version)
    notes = []
    if block_size is not None:
        bs = block_size
    else:
        bs = CPU_BLOCK_SIZE if platform == CPU else default_block_size(v)
    if spec.is_mla and block_size is None:
        notes.append(f"MLA: block {bs} assumed (the release's default); FlashMLA forces 64, CUTLASS MLA 128")
    layouts, plan = plan_layouts(spec, V1, pp, group_rule(v), block_size=bs, kv_cache_dtype=kv_cache_dtype, tp=tp,
                                 platform=platform, version=v, ssm_dtype_bytes=ssm_dtype_bytes,
                                 mamba_cache_mode=mamba_cache_mode, gdn_flashinfer=gdn_flashinfer)
    if plan is not None:
        notes.extend(plan.notes)
    bs_used = plan.block_size if plan is not None else bs
    f = None
    if any(kind in (SLIDING, CHUNKED) for kind in layouts[0].groups):
        batched = max_num_batched_tokens
        if batched is None:
            batched = ASSUMED_BATCHED_TOKENS
            notes.append(f"max_num_batched_tokens {batched:,} assumed (vllm serve on a GPU of 70 GiB or more)")
        # the CPU build turns async scheduling off (platforms/cpu.py): F = max_num_batched_tokens x pp
        f = max_in_flight_tokens(batched, v, pp=pp, async_scheduling=False if platform == CPU else None)
    s = Scenario(V1, "concurrency", group_rule(v), 1, tuple(layouts), bs_used, context, f, spec, tp=tp)
    bpr = s.bpr()
    return Admission(bytes=bpr * s.b_max, blocks_per_request=bpr, bytes_per_block=s.b_max, block_size=bs_used,
                     groups=layouts[0].groups, context=context, max_in_flight_tokens=f, plan=plan,
                     notes=tuple(notes))
