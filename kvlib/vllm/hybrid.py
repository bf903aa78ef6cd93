"""vLLM's pages when a model's layers differ: the state page, the block that covers it, one page for all.

vLLM's V1 KV cache gives every layer's block the same number of bytes (one
pool of blocks, ``v1/core/kv_cache_utils.py``; ``kv_cache_planning.py`` from
0.33). Three rules get a model whose layers differ there, each read in the
0.32.0 and 0.34.0 source (paths under ``vllm/``):

- **the state page** (Mamba2, Gated DeltaNet): one layer's whole state for
  one request, ``sum(prod(shape) x bytes)`` over its tensors
  (``v1/kv_cache_interface.py`` ``MambaSpec.page_size_bytes``; the shapes
  and dtypes are the spec's ``state_tensor_shapes`` / ``state_dtype_bytes``);
- **the block that covers it** (``platforms/interface.py``
  ``Platform._align_hybrid_block_size``): the attention block grows to the
  smallest aligned size whose page holds the state page, and the state page
  is padded up to it::

      a  = max(smallest kernel block, block size)      (128 at least for MLA;
           in 'align' mode from 0.33, lcm with the layers' checkpoint alignment)
      bs = a x ceil(S / (a x P_token)),  rounded up to every backend's kernel block
      padding = (bs x P_token - S) / S                 ('Padding mamba page size by X%')

  ``P_token`` is one attention layer's bytes per token on the rank, ``S`` the
  state page. On the CPU build ``a = 128`` (its 128-token block), on a GPU
  the release's default block (16 through 0.33, 64 from 0.34) against the
  FlashAttention kernel's multiple of 16;
- **one page for all** (``unify_kv_cache_spec_page_size``): attention layers
  whose pages differ (Gemma 4's global layers, twice the head size) keep the
  largest page; a smaller page that divides it gets ``ratio x`` the block
  size (printed in ``kv cache group sizes``), one that does not is padded.

A request then holds, per state group, 2 pages in vLLM's 'align' mode (the
default, prefix caching on: the running state and the last block-aligned
one) plus one prefill-checkpoint page where the layer exports one (Mamba2's
``MambaMixer2`` in every release read; Gated DeltaNet from 0.33 with the
FlashInfer prefill kernel, CUDA on Hopper or Blackwell), or 1 page in 'none'
mode (``MambaSpec.max_memory_usage_bytes``).

Qwen3-Next-80B on one GPU, vLLM 0.32.0: the GDN state is 49,152 + 1,048,576 =
1,097,728 B, an attention token 2 x 2 x 256 x 2 = 2,048 B, so the block grows
to 16 x ceil(1,097,728 / 32,768) = 544 tokens, the state padded by 1.49%:

>>> from kvlib import load_model
>>> plan = page_plan(load_model("qwen3-next-80b-a3b"), 16, version="0.32.0")
>>> plan.block_size, plan.page_bytes, plan.state_page_bytes, plan.padding_text
(544, 1114112, 1097728, '1.49')
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..spec import ATTENTION_KINDS, GATED_DELTANET, MAMBA2, STATE_KINDS, ModelSpec, SpecError
from .engine import VllmLogError, as_version, checked_version
from .page import kv_element_bytes, layer_page_bytes

__all__ = ["PagePlan", "page_plan", "needs_plan", "state_page_bytes", "aligned_block_size", "unify_pages",
           "state_pages_per_request", "log_mamba_cache_mode", "log_ssm_dtype_bytes", "CPU", "GPU",
           "MAMBA_CACHE_MODES", "CHECKED_RELEASES"]

CPU, GPU = "cpu", "gpu"
MAMBA_CACHE_MODES = ("align", "none")
# The releases whose source these rules were read in; another release gets them with a note.
CHECKED_RELEASES = ("0.32.0", "0.33.0", "0.34.0")
# Smallest kernel block of the default attention backends: the CPU build's CPU_ATTN takes multiples of 32
# (v1/attention/backends/cpu_attn.py), FlashAttention and Triton multiples of 16 on CUDA (flash_attn.py,
# triton_attn.py get_supported_kernel_block_sizes; FA4's head-size-256 pages on Blackwell are not modelled).
KERNEL_BLOCK = {CPU: 32, GPU: 16}
MLA_HYBRID_ALIGNMENT = 128          # _align_hybrid_block_size: TRTLLM / FlashInfer MLA decode kernels
FLASHINFER_GDN_CHECKPOINT_ALIGNMENT = 64   # v1/attention/backends/gdn_attn.py, 0.33 and 0.34


@dataclass(frozen=True)
class PagePlan:
    """One rank's pages as vLLM settles them before it groups the layers (every block the same bytes).

    ``block_sizes``: tokens per block of each kind that has a KV cache (a
    state kind's block holds one state, whatever the tokens); ``page_bytes``:
    the one page size every layer's block takes; ``state_pages_per_request``:
    pages a request holds in a state group (0 without state layers).
    """

    block_size: int                 # the attention block after alignment (what the engine holds as block_size)
    requested_block_size: int       # the block before alignment (the platform's or the user's)
    page_bytes: int
    block_sizes: dict = field(compare=False)
    attention_bytes_per_token: dict = field(compare=False)   # kind -> one layer's bytes per token on the rank
    state_page_bytes: int | None = None     # one state layer's page before padding
    state_pages_per_request: int = 0
    checkpoint_pages: int = 0
    mamba_cache_mode: str | None = None
    notes: tuple = ()

    @property
    def grew(self) -> bool:
        """Whether vLLM printed 'Setting attention block size to N tokens' (the block grew to cover the state)."""
        return self.block_size > self.requested_block_size

    @property
    def padding_percent(self) -> float | None:
        """What 'Padding mamba page size by X%' prints, unrounded; None when the state page is not padded."""
        if self.state_page_bytes is None or self.state_page_bytes == self.page_bytes:
            return None
        return 100 * (self.page_bytes - self.state_page_bytes) / self.state_page_bytes

    @property
    def padding_text(self) -> str | None:
        """The padding as vLLM prints it (``%.2f``)."""
        pct = self.padding_percent
        return None if pct is None else f"{pct:.2f}"

    def summary(self) -> dict:
        """The plan as plain data (``kvlib vllm-log --json``'s ``predicted_hybrid``)."""
        return {"block_size": self.block_size, "requested_block_size": self.requested_block_size,
                "attention_block_size_printed": self.block_size if self.grew else None,
                "page_bytes": self.page_bytes, "block_sizes": dict(sorted(self.block_sizes.items())),
                "state_page_bytes": self.state_page_bytes, "mamba_padding_percent": self.padding_text,
                "state_pages_per_request": self.state_pages_per_request, "checkpoint_pages": self.checkpoint_pages,
                "mamba_cache_mode": self.mamba_cache_mode}


def needs_plan(spec: ModelSpec) -> bool:
    """Whether the model's layers differ in page (state layers, or attention kinds of different geometry)."""
    kinds = set(spec.layer_kinds)
    if kinds & set(STATE_KINDS):
        return True
    attention = kinds & set(ATTENTION_KINDS)
    return len({spec.kv_geometry(kind) for kind in attention}) > 1


def _model_bytes(model_dtype, default: int) -> int:
    return default if model_dtype is None else kv_element_bytes("auto", model_dtype)


def state_page_bytes(spec: ModelSpec, tp: int = 1, *, model_dtype=None, ssm_dtype_bytes: int | None = None) -> int:
    """Bytes of one state layer's page on one rank: ``sum(prod(shape) x bytes)`` over its state tensors.

    The conv state is in the model dtype (``mamba_cache_dtype`` 'auto'); the
    SSM / recurrent state in ``ssm_dtype_bytes`` when given (vLLM's
    ``mamba_ssm_cache_dtype``; the CPU build sets float32 on a CPU with
    AVX-512 BF16), else the spec's default (``ModelSpec.state_dtype_bytes``).

    >>> from kvlib import load_model
    >>> state_page_bytes(load_model("qwen3-next-80b-a3b"), tp=4)          # 3 x 2,048 x 2 + 8 x 128 x 128 x 2
    274432
    """
    kinds = sorted(set(spec.layer_kinds) & set(STATE_KINDS))
    if not kinds:
        raise VllmLogError(f"{spec.name}: no Mamba2 or Gated DeltaNet layer, so no state page")
    if len(kinds) > 1:
        raise VllmLogError(f"{spec.name}: layers of two state kinds ({', '.join(kinds)}) are not modelled")
    kind = kinds[0]
    try:
        shapes, sizes = spec.state_tensor_shapes(kind, tp), spec.state_dtype_bytes(kind)
    except SpecError as exc:
        raise VllmLogError(f"{spec.name}: {exc}") from None
    model_b = _model_bytes(model_dtype, spec.dtype_bytes)
    fixed_ssm = kind == MAMBA2 and getattr(spec, "mamba_ssm_dtype", None) is not None
    total = 0
    for name, shape in shapes.items():
        if name == "conv":
            b = model_b
        elif ssm_dtype_bytes is not None:
            b = ssm_dtype_bytes
        else:
            b = sizes[name] if fixed_ssm else model_b
        total += math.prod(shape) * b
    return total


def aligned_block_size(bytes_per_token: int, state_page: int, block_size: int, *, kernel_block: int,
                       mla: bool = False, checkpoint_alignment: int | None = None) -> int:
    """The attention block vLLM settles on so that its page holds the state page (``_align_hybrid_block_size``).

    ``a = max(kernel_block, block_size)`` (at least 128 for MLA; lcm with
    ``checkpoint_alignment`` when given), then ``a x ceil(S / (a x P))``
    rounded up to a multiple of ``kernel_block``; never below ``block_size``.

    >>> aligned_block_size(512, 135680, 128, kernel_block=32)      # 128 x ceil(135,680 / 65,536)
    384
    >>> aligned_block_size(2048, 1097728, 64, kernel_block=16)     # 0.34's 64-token default block
    576
    """
    for name, value in (("bytes_per_token", bytes_per_token), ("state_page", state_page),
                        ("block_size", block_size), ("kernel_block", kernel_block)):
        if type(value) is not int or value < 1:
            raise VllmLogError(f"{name} must be a positive integer, got {value!r}")
    align = max(kernel_block, block_size)
    if mla:
        align = max(align, MLA_HYBRID_ALIGNMENT)
    if checkpoint_alignment:
        align = math.lcm(align, checkpoint_alignment)
    size = align * -(-state_page // (align * bytes_per_token))
    size = kernel_block * -(-size // kernel_block)
    return max(size, block_size)


def unify_pages(pages: dict, block_sizes: dict) -> tuple[int, dict]:
    """(the one page, each kind's block) as ``unify_kv_cache_spec_page_size`` makes them equal.

    ``pages``: each attention kind's page at its block; the largest is kept;
    a smaller one that divides it gets its block times the ratio, one that
    does not keeps its block and is padded.

    >>> unify_pages({"sliding": 65536, "full": 262144}, {"sliding": 128, "full": 128})
    (262144, {'sliding': 512, 'full': 128})
    """
    top = max(pages.values())
    out = {}
    for kind, page in pages.items():
        out[kind] = block_sizes[kind] * (top // page) if top % page == 0 else block_sizes[kind]
    return top, out


def state_pages_per_request(kind: str, *, mamba_cache_mode: str = "align", version=None, platform: str = GPU,
                            gdn_flashinfer: bool | None = None) -> tuple[int, int]:
    """(pages, of which prefill-checkpoint pages) one request holds in a state group of ``kind``.

    ``MambaSpec.max_memory_usage_bytes``: 'none' mode 1 page; 'align' mode 2
    plus ``num_prefill_checkpoint_blocks``: 1 for Mamba2 (``MambaMixer2.
    get_kv_cache_spec``, every release read), 1 for Gated DeltaNet from 0.33
    when it runs FlashInfer's prefill kernel (``gdn_flashinfer``; default: a
    GPU, i.e. CUDA on Hopper or Blackwell), else 0.

    >>> state_pages_per_request("mamba2"), state_pages_per_request("gated_deltanet", version="0.32.0")
    ((3, 1), (2, 0))
    """
    if mamba_cache_mode not in MAMBA_CACHE_MODES:
        raise VllmLogError(f"mamba_cache_mode must be one of {', '.join(MAMBA_CACHE_MODES)}, "
                           f"got {mamba_cache_mode!r}")
    if kind not in STATE_KINDS:
        raise VllmLogError(f"kind {kind!r} keeps no state")
    if mamba_cache_mode == "none":
        return 1, 0
    checkpoint = 0
    if kind == MAMBA2:
        checkpoint = 1
    elif _gdn_checkpoints(version, platform, gdn_flashinfer):
        checkpoint = 1
    return 2 + checkpoint, checkpoint


def _gdn_checkpoints(version, platform: str, gdn_flashinfer: bool | None) -> bool:
    v = as_version(version)
    if v is not None and v < (0, 33, 0):
        return False
    return platform == GPU if gdn_flashinfer is None else bool(gdn_flashinfer)


def _check_platform(platform: str) -> None:
    if platform not in (CPU, GPU):
        raise VllmLogError(f"platform must be 'cpu' or 'gpu', got {platform!r}")


def page_plan(spec: ModelSpec, block_size: int, kv_cache_dtype=None, *, tp: int = 1, model_dtype=None,
              platform: str = GPU, version=None, ssm_dtype_bytes: int | None = None,
              mamba_cache_mode: str = "align", gdn_flashinfer: bool | None = None,
              kernel_block: int | None = None) -> PagePlan:
    """vLLM's pages on one rank for ``spec`` at ``block_size`` (the platform's, or the user's, block).

    Ordinary models: one page, ``block_size`` for every kind. State hybrids:
    the block grows to cover the state page (``aligned_block_size``), which
    is padded up. Attention kinds of different geometry: ``unify_pages``.
    ``platform`` 'cpu' (the CPU build, 0.32.0) or 'gpu' (CUDA); ``version``
    picks the release's rules (None: the newest read). ``mamba_cache_mode``:
    'align' (prefix caching on, vLLM's default) or 'none'.

    >>> from kvlib import load_model
    >>> p = page_plan(load_model("qwen3-next-80b-a3b"), 64, version="0.34.0", tp=4)
    >>> p.block_size, p.state_pages_per_request         # 64 x ceil(274,432 / 65,536); 2 + a FlashInfer checkpoint
    (320, 3)
    """
    _check_platform(platform)
    if type(block_size) is not int or block_size < 1:
        raise VllmLogError(f"block_size must be a positive integer, got {block_size!r}")
    v = checked_version(version)      # past the newest release read: its rules, and a warning
    notes = []
    if v is not None and v < (0, 32, 0) and needs_plan(spec):
        notes.append(f"vLLM {'.'.join(map(str, v))}: the hybrid page rules (state page, block alignment, page "
                     f"unification) are read in vLLM {', '.join(CHECKED_RELEASES)}; this release's are not checked")
    attention = [k for k in dict.fromkeys(spec.layer_kinds) if k in ATTENTION_KINDS]
    state = [k for k in dict.fromkeys(spec.layer_kinds) if k in STATE_KINDS]
    per_token = {k: layer_page_bytes(spec, 1, kv_cache_dtype, tp=tp, model_dtype=model_dtype, kind=k)
                 for k in attention}
    bs = block_size
    state_page = pages_req = checkpoint = 0
    if state:
        if len(set(per_token.values())) > 1:
            raise VllmLogError(f"{spec.name}: a state hybrid with attention layers of different geometry is not "
                               f"modelled")
        if not attention:
            raise VllmLogError(f"{spec.name}: no attention layer: an attention-free model's pool is not modelled")
        state_page = state_page_bytes(spec, tp, model_dtype=model_dtype, ssm_dtype_bytes=ssm_dtype_bytes)
        pages_req, checkpoint = state_pages_per_request(state[0], mamba_cache_mode=mamba_cache_mode, version=v,
                                                        platform=platform, gdn_flashinfer=gdn_flashinfer)
        alignment = None
        if mamba_cache_mode == "align" and state[0] == GATED_DELTANET and checkpoint:
            alignment = FLASHINFER_GDN_CHECKPOINT_ALIGNMENT   # 0.33+: checkpoints land on block boundaries
            if gdn_flashinfer is None:
                notes.append("Gated DeltaNet: FlashInfer's prefill kernel assumed (CUDA on Hopper or Blackwell): "
                             "one prefill-checkpoint page a request and blocks on a 64-token grid")
        kb = kernel_block if kernel_block is not None else KERNEL_BLOCK[platform]
        bs = aligned_block_size(next(iter(per_token.values())), state_page, block_size, kernel_block=kb,
                                mla=spec.is_mla, checkpoint_alignment=alignment)
    pages = {k: bs * per_token[k] for k in attention}
    page, block_sizes = unify_pages(pages, {k: bs for k in attention})
    for k in state:
        block_sizes[k] = bs
    return PagePlan(block_size=bs, requested_block_size=block_size, page_bytes=page, block_sizes=block_sizes,
                    attention_bytes_per_token=per_token, state_page_bytes=state_page or None,
                    state_pages_per_request=pages_req, checkpoint_pages=checkpoint,
                    mamba_cache_mode=mamba_cache_mode if state else None, notes=tuple(notes))


_SSM_DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def log_ssm_dtype_bytes(start) -> int | None:
    """Bytes of the SSM state's dtype a start printed it chose ('Reset SSM cache type to float32', 'Updating
    mamba_ssm_cache_dtype to ...'); None when it printed none (the spec's default applies)."""
    name = start.mamba_ssm_cache_dtype
    return _SSM_DTYPE_BYTES.get(name) if name else None


def log_mamba_cache_mode(start) -> str:
    """'align' or 'none': what a start printed, else 'none' when it shows prefix caching off, else 'align'."""
    if start.mamba_cache_mode in MAMBA_CACHE_MODES:
        return start.mamba_cache_mode
    return "none" if start.enable_prefix_caching is False else "align"
