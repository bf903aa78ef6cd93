"""The page/block layout of vLLM's KV cache on one rank: bytes per layer page, per block, per stage.

- page per layer ``P_layer = bs * kvh * (k_dim + v_dim) * b``; ``kvh =
  kv_heads_per_gpu(K, tp)`` (``kvlib.formulas``: ``max(1, K // tp)``); MLA:
  ``kvh = 1``, ``k_dim = kv_lora_rank + qk_rope_head_dim``, ``v_dim = 0``
  (replicated on every TP rank); ``b`` = 2 for 16-bit, 1 for fp8, the model
  dtype for ``auto``.
- pipeline stages hold ``pp_layer_split(L, pp)`` layers each (vLLM's
  ``get_pp_indices``).
- uniform models: ``B = (KV layers on the PP stage) * P_layer``.
- V1 hybrids (sliding window + full, equal pages): ``B = group_size *
  P_layer``, with layers bucketed by kind and group_size the smallest
  bucket, or the largest when largest < 1.5 x smallest (1.25 in 0.11-0.14;
  always the smallest through 0.10). Each bucket makes ceil(n / group_size)
  groups. V0 sizes every attention layer as full attention.
- layers whose pages differ (Mamba2 / Gated DeltaNet state layers, Gemma 4's
  per-layer geometry): ``kvlib.vllm.hybrid.page_plan`` makes one page for all
  (the block grown to cover the state page, the state padded, smaller
  attention pages given more tokens per block), then the same grouping, a
  state kind being one more bucket (``plan_layouts``).

Taught in ch04_pool_paging (pages and blocks) and ch08_vllm_lab.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..spec import FULL, NO_KV, STATE_KINDS, ModelSpec
from .engine import DEFAULT_BLOCK_SIZE, V0, V1, VllmLogError, as_version, group_rule
from .hybrid import GPU, PagePlan, needs_plan, page_plan
from .page import (  # noqa: F401 -- the page's names are this module's too
    KV_CACHE_DTYPES,
    MLA_PACKED_BYTES,
    _kv_heads_per_rank,
    fp8_ds_mla_token_bytes,
    kv_element_bytes,
    layer_page_bytes,
)

__all__ = ["KV_CACHE_DTYPES", "kv_element_bytes", "layer_page_bytes", "pp_layer_split", "kv_cache_groups",
           "Layout", "stage_layouts", "plan_layouts", "bytes_per_block", "fp8_ds_mla_token_bytes"]


def pp_layer_split(num_layers: int, pp: int) -> list[int]:
    """Layers per pipeline stage, as vLLM's ``get_pp_indices`` splits them.

    Each stage gets ``L // pp``; the remainder goes one each to the stages
    before the last, counting back from the second-to-last. Confirmed in
    vLLM's source, ``vllm/distributed/utils.py``, function ``get_pp_indices``
    (``partitions[-i] += 1 for i in range(2, remaining_layers + 2)``; the
    last stage is left out because it also holds the final norm and LM
    head). The environment variable ``VLLM_PP_LAYER_PARTITION`` overrides
    the split there; a log does not print it, so it is not modelled here.

    >>> pp_layer_split(61, 2), pp_layer_split(32, 4), pp_layer_split(10, 4)
    ([31, 30], [8, 8, 8, 8], [2, 3, 3, 2])
    """
    if type(pp) is not int or pp < 1:
        raise VllmLogError(f"pipeline_parallel_size must be a positive integer, got {pp!r}")
    if pp > num_layers:
        raise VllmLogError(f"pipeline_parallel_size={pp} exceeds the {num_layers} layers")
    parts = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        parts[-i] += 1
    return parts


_THRESHOLD = {"1.5": 1.5, "1.25": 1.25}


def kv_cache_groups(kinds, rule: str = "1.5") -> tuple[int, tuple]:
    """(group_size, kind of each group) for one rank's KV layers under V1's grouping.

    One kind: one group of all layers. Several kinds with equal pages: layers
    are bucketed by kind; ``group_size`` is the smallest bucket, or the
    largest if largest < threshold x smallest (``rule`` '1.5' from 0.15,
    '1.25' in 0.11-0.14, 'smallest' through 0.10); each bucket makes
    ceil(n / group_size) groups.

    >>> kv_cache_groups(["sliding", "full"] * 18)          # gpt-oss-120b: 18 + 18
    (18, ('full', 'sliding'))
    >>> kv_cache_groups(["sliding"] * 5 + ["full"])       # Gemma 3 pattern 5:1
    (1, ('full', 'sliding', 'sliding', 'sliding', 'sliding', 'sliding'))
    """
    counts: dict = {}
    for kind in kinds:
        counts[kind] = counts.get(kind, 0) + 1
    if not counts:
        raise VllmLogError("no layer keeps a KV cache")
    if len(counts) == 1:
        (kind, n), = counts.items()
        return n, (kind,)
    smallest, largest = min(counts.values()), max(counts.values())
    if rule == "smallest" or largest >= _THRESHOLD[rule] * smallest:
        size = smallest
    else:
        size = largest
    groups = tuple(kind for kind in sorted(counts) for _ in range(-(-counts[kind] // size)))
    return size, groups


@dataclass(frozen=True)
class Layout:
    """One pipeline stage's block: ``group_size`` layers' pages, and the kind of each KV-cache group.

    ``block_sizes``: (kind, tokens per block) when kinds differ (per-layer
    geometry), else () and every group has the scenario's block;
    ``printed_groups``: the groups in vLLM's order (buckets as the layers
    first show them), for its 'kv cache group sizes' line; ``state_pages``:
    pages a request holds in each state group.
    """

    page_bytes: int
    group_size: int
    groups: tuple
    block_sizes: tuple = ()
    printed_groups: tuple = ()
    state_pages: int = 0

    @property
    def bytes_per_block(self) -> int:
        return self.group_size * self.page_bytes

    def block_size_of(self, kind: str, default: int) -> int:
        """Tokens per block of a group of ``kind`` (``default``: the scenario's block)."""
        return dict(self.block_sizes).get(kind, default)

    def printed_block_sizes(self, default: int) -> tuple:
        """What 'kv cache group sizes (...)' prints: each group's block, in vLLM's order."""
        return tuple(self.block_size_of(kind, default) for kind in (self.printed_groups or self.groups))


def _stage_kinds(spec: ModelSpec, pp: int) -> list[tuple]:
    kinds, out, start = spec.layer_kinds, [], 0
    for n in pp_layer_split(spec.num_layers, pp):
        out.append(tuple(kinds[start:start + n]))
        start += n
    return out


def _printed_order(kinds, size: int) -> tuple:
    """The groups in vLLM's order: buckets as the layers first show them, ceil(n / size) groups each."""
    counts: dict = {}
    for kind in kinds:
        counts[kind] = counts.get(kind, 0) + 1
    return tuple(kind for kind in counts for _ in range(-(-counts[kind] // size)))


def stage_layouts(spec: ModelSpec, engine: str, pp: int, rule: str, page: int, hybrid: bool = True, *,
                  plan: PagePlan | None = None) -> list:
    """One ``Layout`` per pipeline stage (its own layers, vLLM's split), for a page of ``page`` bytes.

    A model whose layers differ in page (state layers, per-layer geometry) needs vLLM's ``plan``
    (``kvlib.vllm.hybrid.page_plan``), whose one page replaces ``page``; ``plan_layouts`` makes both.
    """
    if getattr(spec, "unmodelled_state", None):
        raise VllmLogError(f"{spec.name}: {spec.unmodelled_state}")
    needs = needs_plan(spec)
    layouts = []
    for kinds in _stage_kinds(spec, pp):
        kv = [k for k in kinds if k != NO_KV]       # attention and state layers: each has a page in the pool
        if not kv:
            raise VllmLogError(f"pipeline stage without a KV-cache layer (pp={pp}); not modelled")
        if needs and (engine == V0 or not hybrid):
            what = "V0" if engine == V0 else "the hybrid KV-cache manager disabled"
            raise VllmLogError(f"{spec.name}: {what} with state layers or per-layer geometry is not modelled")
        if engine == V0 or not hybrid:
            layouts.append(Layout(page, len(kv), (FULL,)))
            continue
        size, groups = kv_cache_groups(kv, rule)
        if not needs:
            layouts.append(Layout(page, size, groups))
            continue
        if plan is None:
            raise VllmLogError(f"{spec.name}: layers of different pages (state layers or per-layer geometry) need "
                               f"vLLM's page plan (kvlib.vllm.hybrid.page_plan)")
        sizes = tuple(sorted(plan.block_sizes.items()))
        layouts.append(Layout(plan.page_bytes, size, groups, sizes, _printed_order(kv, size),
                              plan.state_pages_per_request if set(kv) & set(STATE_KINDS) else 0))
    if pp > 1 and len({layout.groups for layout in layouts}) > 1:
        raise VllmLogError("pipeline stages with different KV-cache groups are not modelled")
    return layouts


def plan_layouts(spec: ModelSpec, engine: str, pp: int, rule: str, *, block_size: int, kv_cache_dtype=None,
                 tp: int = 1, model_dtype=None, mla_pad_256: bool = False, hybrid: bool = True,
                 platform: str = GPU, version=None, ssm_dtype_bytes: int | None = None,
                 mamba_cache_mode: str = "align", gdn_flashinfer: bool | None = None) -> tuple[list, PagePlan | None]:
    """(one ``Layout`` per stage, vLLM's page plan or None) for ``spec`` at ``block_size`` on one rank.

    The plan (``kvlib.vllm.hybrid.page_plan``) only for models whose layers
    differ in page; its ``block_size`` is the block vLLM settles on (a state
    hybrid's grows). Ordinary models: ``layer_page_bytes`` and no plan.

    >>> from kvlib import load_model
    >>> layouts, plan = plan_layouts(load_model("qwen3-next-80b-a3b"), "v1", 1, "1.5", block_size=16,
    ...                              version="0.32.0")
    >>> plan.block_size, layouts[0].group_size, layouts[0].groups, layouts[0].state_pages
    (544, 12, ('full', 'gated_deltanet', 'gated_deltanet', 'gated_deltanet'), 2)
    """
    plan = None
    if getattr(spec, "unmodelled_state", None):
        raise VllmLogError(f"{spec.name}: {spec.unmodelled_state}")
    if needs_plan(spec) and engine == V1 and hybrid:
        plan = page_plan(spec, block_size, kv_cache_dtype, tp=tp, model_dtype=model_dtype, platform=platform,
                         version=version, ssm_dtype_bytes=ssm_dtype_bytes, mamba_cache_mode=mamba_cache_mode,
                         gdn_flashinfer=gdn_flashinfer)
        page = plan.page_bytes
    elif needs_plan(spec):
        page = 0    # stage_layouts refuses: V0 or the hybrid manager off
    else:
        page = layer_page_bytes(spec, block_size, kv_cache_dtype, tp=tp, model_dtype=model_dtype,
                                mla_pad_256=mla_pad_256)
    return stage_layouts(spec, engine, pp, rule, page, hybrid, plan=plan), plan


def bytes_per_block(spec: ModelSpec, block_size: int = DEFAULT_BLOCK_SIZE, kv_cache_dtype=None, *,
                    tp: int = 1, pp: int = 1, engine: str = V1, version=None) -> int:
    """Bytes one block takes on the busiest rank (the largest over PP stages).

    >>> from kvlib import load_model
    >>> bytes_per_block(load_model("llama-3.1-8b"))               # 32 layers * 65,536 B
    2097152
    >>> bytes_per_block(load_model("deepseek-v3"))                # 61 * 16 * 576 * 2
    1124352
    """
    v = as_version(version)
    layouts, _ = plan_layouts(spec, engine, pp, group_rule(v), block_size=block_size, kv_cache_dtype=kv_cache_dtype,
                              tp=tp, version=v)
    return max(layout.bytes_per_block for layout in layouts)
