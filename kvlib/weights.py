"""The bytes a model's weights take on one GPU as vLLM loads them: as stored, not as counted.

vLLM's "Model loading took X GiB" is the torch memory the loaded modules hold
on a rank. That is not ``parameters x 2``:

- **quantized checkpoints** (``quantization_config`` in config.json) hold
  their linear layers at 1 byte (FP8) or half a byte (int4 AWQ / GPTQ /
  compressed-tensors W4A16, plus a 16-bit scale per group, AWQ's 4-bit zero
  per group and GPTQ's int32 ``g_idx`` per input row), and MXFP4 experts
  (gpt-oss) at 4 bits plus an 8-bit scale per 32 values, 4.25 bits. The
  embedding, the norms, the router and whatever ``ignore`` /
  ``modules_to_not_convert`` names (``lm_head`` in every bundled checkpoint)
  stay at the model dtype;
- **multimodal** wrappers load their vision tower and projector too;
- **tied embeddings** are held once;
- **under tensor parallelism** the projections, experts, embedding and head
  are split over the ranks (the vocabulary padded to a multiple of 64 first,
  vLLM's ``DEFAULT_VOCAB_PADDING_SIZE``), the norms are replicated, and so
  are the K/V projections when t > K (each rank keeps ``max(1, K // t)``
  heads, vLLM's ``QKVParallelLinear``);
- the rotary ``cos_sin_cache`` buffer (max positions x rotary dim, model
  dtype, ``RotaryEmbedding._compute_cos_sin_cache``) is allocated with them.

A safetensors index's ``total_size`` (``model.safetensors.index.json``), when
given, is the exact stored figure and replaces the count (split by tp x pp).

>>> w = stored_weights("llama-3.1-8b")
>>> round(w.bytes_per_rank / 2**30, 2)     # vLLM 0.19 prints 7.51 per PP2 stage, 14.99 unsplit
14.99
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from .config import ConfigError, load_model, resolve_model_id
from .params import _QK_NORM_PER_HEAD, _attention_params, _gdn_params, _indexer_params, _mamba2_params
from .spec import ATTENTION_KINDS, FULL, GATED_DELTANET, MAMBA2, ModelSpec, ParamsError

__all__ = ["WeightPart", "StoredWeights", "stored_weights", "config_dict", "quantization_scheme",
           "VOCAB_PADDING", "MXFP4_BITS"]

VOCAB_PADDING = 64          # vllm/model_executor/layers/vocab_parallel_embedding.py DEFAULT_VOCAB_PADDING_SIZE
MXFP4_BITS = 4 + 8 / 32     # OCP MX FP4: a 4-bit value, one 8-bit shared scale per block of 32


@dataclass(frozen=True)
class WeightPart:
    name: str
    bytes: int       # on one rank
    rule: str


@dataclass(frozen=True)
class StoredWeights:
    """Weights on one rank (one pipeline stage), part by part."""

    bytes_per_rank: int
    scheme: str                    # 'bf16', 'fp8', 'int4-g128', 'mxfp4 experts', 'index total_size'
    parts: tuple = ()
    tp: int = 1
    pp: int = 1
    stage: int = 0


def config_dict(source) -> dict | None:
    """The raw config.json of a bundled id, a path or a folder (None for a spec or unknown source)."""
    if isinstance(source, dict):
        return source
    if isinstance(source, ModelSpec) or not isinstance(source, (str, Path)):
        return None
    path = Path(str(source)).expanduser()
    if path.is_dir():
        path = path / "config.json"
    if path.is_file():
        return json.loads(path.read_text())
    model_id = resolve_model_id(str(source))
    if model_id is None:
        return None
    file = resources.files("kvlib") / "data" / "configs" / (model_id.replace("/", "__") + ".json")
    return json.loads(file.read_text())


def quantization_scheme(config: dict | None) -> dict:
    """What the checkpoint stores its quantized linears as, from ``quantization_config``.

    Returns ``{"scheme": 'none'|'fp8'|'int4'|'mxfp4', "group_size", "zeros", "g_idx", "ignore"}``.

    >>> quantization_scheme({"quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128}})["zeros"]
    True
    """
    q = (config or {}).get("quantization_config") or {}
    if not isinstance(q, dict):
        raise ConfigError("field quantization_config must be an object")
    method = str(q.get("quant_method", "")).lower()
    ignore = tuple(q.get("ignore") or q.get("modules_to_not_convert") or ())
    # lm_head is quantized only where the method says so: compressed-tensors unless ``ignore`` names it,
    # GPTQ when its ``lm_head`` flag is set; AWQ, FP8 and MXFP4 leave it 16-bit.
    lm_head = method == "compressed-tensors" or (method.startswith("gptq") and bool(q.get("lm_head")))
    out = {"scheme": "none", "group_size": None, "zeros": False, "g_idx": False, "ignore": ignore,
           "method": method, "lm_head": lm_head}
    if not q:
        return out
    if method == "mxfp4":
        return {**out, "scheme": "mxfp4", "group_size": 32}
    if method in ("fp8", "fbgemm_fp8"):
        return {**out, "scheme": "fp8"}
    if method in ("awq", "awq_marlin", "gptq", "gptq_marlin"):
        bits = int(q.get("bits", q.get("w_bit", 4)))
        if bits != 4:
            raise ConfigError(f"quantization_config: {method} with {bits} bits is not modelled (4 only)")
        group = int(q.get("group_size", q.get("q_group_size", 128)))
        return {**out, "scheme": "int4", "group_size": group, "zeros": method.startswith("awq"),
                "g_idx": method.startswith("gptq")}
    if method == "compressed-tensors":
        for group in (q.get("config_groups") or {}).values():
            w = group.get("weights") or {}
            bits, kind = int(w.get("num_bits", 16)), str(w.get("type", "int"))
            if bits == 8 and kind == "float":
                return {**out, "scheme": "fp8"}
            if bits == 4 and kind == "int":
                return {**out, "scheme": "int4", "group_size": int(w.get("group_size") or 128),
                        "zeros": not w.get("symmetric", True), "g_idx": bool(w.get("actorder"))}
        raise ConfigError("quantization_config: compressed-tensors scheme not modelled (fp8 or int4 weights only)")
    raise ConfigError(f"quantization_config: quant_method {method!r} not modelled "
                      f"(fp8, awq, gptq, compressed-tensors, mxfp4)")


def _ignored(ignore, module: str) -> bool:
    for pattern in ignore:
        if pattern.startswith("re:"):
            if re.search(pattern[3:], module):
                return True
        elif pattern == module or module.endswith("." + pattern) or pattern in module.split("."):
            return True
    return False


def _linear_bytes(in_f: int, out_f: int, q: dict, dtype_bytes: int, quantized: bool) -> int:
    """One linear layer's stored bytes: weight plus the scales, zeros and g_idx its scheme keeps."""
    if not quantized or q["scheme"] == "none":
        return in_f * out_f * dtype_bytes
    if q["scheme"] == "fp8":
        return in_f * out_f + out_f * 4          # fp8 weight + a float32 scale per output channel
    if q["scheme"] == "int4":
        groups = math.ceil(in_f / q["group_size"])
        b = in_f * out_f // 2 + groups * out_f * 2          # packed int4 + fp16/bf16 scale per group
        if q["zeros"]:
            b += groups * out_f // 2                          # 4-bit zero point per group
        if q["g_idx"]:
            b += in_f * 4                                     # int32 group index per input row
        return b
    raise AssertionError(q["scheme"])


def _pad(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def _vision_bytes(config: dict, text_hidden: int, dtype_bytes: int) -> int:
    """A ViT tower (CLIP / SigLIP layout) and a two-layer projector, at the model dtype."""
    v = config.get("vision_config")
    if not isinstance(v, dict):
        return 0
    d, inter = int(v.get("hidden_size", 1024)), int(v.get("intermediate_size", 4096))
    layers = int(v.get("num_hidden_layers", 24))
    feature_layer = config.get("vision_feature_layer", -1)
    if isinstance(feature_layer, int) and feature_layer < 0:
        layers = layers + feature_layer + 1       # vLLM loads the tower only up to the feature layer
    patch, image = int(v.get("patch_size", 14)), int(v.get("image_size", 336))
    per_layer = 4 * d * d + 4 * d + 2 * d * inter + inter + d + 4 * d
    embed = 3 * patch * patch * d + ((image // patch) ** 2 + 1) * d + d + 2 * d
    projector = d * text_hidden + text_hidden + text_hidden * text_hidden + text_hidden
    return (layers * per_layer + embed + projector) * dtype_bytes


def stored_weights(model, config: dict | None = None, *, tp: int = 1, pp: int = 1, stage: int | None = None,
                   index_total_size: int | None = None) -> StoredWeights:
    """Weights on one rank as vLLM loads them (the "Model loading took" figure), part by part.

    ``model`` is a bundled id, a path, a config dict or a ModelSpec (then pass
    ``config`` for its ``quantization_config`` / ``vision_config``). With
    pipeline parallelism the stage holding the most is returned unless
    ``stage`` is given. ``index_total_size`` (bytes) overrides the count.
    """
    for name, value in (("tp", tp), ("pp", pp)):
        if type(value) is not int or value < 1:
            raise ConfigError(f"{name} must be a positive integer, got {value!r}")
    if index_total_size is not None:
        if type(index_total_size) is not int or index_total_size <= 0:
            raise ConfigError(f"index total_size must be a positive integer of bytes, got {index_total_size!r}")
        share = index_total_size // (tp * pp)
        return StoredWeights(share, "index total_size",
                             (WeightPart("safetensors total_size / (tp x pp)", share, "model.safetensors.index.json"),),
                             tp, pp, 0)
    spec = load_model(model)
    config = config if config is not None else config_dict(model)
    if stage is None:
        return max((stored_weights(spec, config or {}, tp=tp, pp=pp, stage=s) for s in range(pp)),
                   key=lambda w: w.bytes_per_rank)
    from .vllm.layout import pp_layer_split
    q = quantization_scheme(config)
    if spec.model_type == "gpt_oss" and q["scheme"] != "mxfp4":
        # openai ships gpt-oss with quant_method "mxfp4" (experts only); the bundled mirror's config reads
        # "gptq" (kvlib/data/configs/PROVENANCE.md), and no gpt-oss checkpoint is GPTQ-quantized as published.
        q = quantization_scheme({"quantization_config": {**(config or {}).get("quantization_config", {}),
                                                         "quant_method": "mxfp4"}})
    b = 2  # bf16 / fp16; vLLM serves float32 checkpoints in 16-bit unless told otherwise
    d, vocab = spec.hidden_size, spec.vocab_size
    if d is None or vocab is None or spec.intermediate_size is None and not spec.num_experts:
        raise ParamsError("stored weights need hidden_size, vocab_size and intermediate_size")
    split = pp_layer_split(spec.num_layers, pp)
    first, last = stage == 0, stage == pp - 1
    start = sum(split[:stage])
    layers = range(start, start + split[stage])
    vocab_rank = _pad(vocab, VOCAB_PADDING * tp) // tp
    parts = []
    if first:
        parts.append(WeightPart("embedding", vocab_rank * d * b, "vocab padded to 64 x tp, split over tp, 16-bit"))
    if last and (not spec.tie_word_embeddings or pp > 1):
        head_q = q["lm_head"] and not _ignored(q["ignore"], "lm_head")
        parts.append(WeightPart("lm_head", _linear_bytes(d, vocab_rank, q, b, head_q),
                                "split over tp; " + ("quantized" if head_q else "16-bit")))
    if last:
        parts.append(WeightPart("final norm", d * b, "replicated"))
    attn_q = q["scheme"] in ("fp8", "int4") and not _ignored(q["ignore"], "self_attn")
    mlp_q = q["scheme"] in ("fp8", "int4") and not _ignored(q["ignore"], "mlp")
    h = spec.num_heads
    attn = mixers = mlp = experts = norms = 0
    for i in layers:
        kind = spec.layer_kinds[i]
        if kind == MAMBA2 or kind == GATED_DELTANET:
            # Mamba2 / Gated DeltaNet mixers split by heads over tp (mamba_mixer2.py, qwen_gdn_linear_attn.py)
            mixers += (_mamba2_params(spec) if kind == MAMBA2 else _gdn_params(spec)) * b // tp
        elif kind not in ATTENTION_KINDS:
            pass        # Nemotron-H's MLP / MoE blocks: no token mixer
        elif spec.is_mla:
            attn += _attention_params(spec) * b // tp
            if i in spec.indexer_layers:
                # the DSA indexer's projections are whole on every rank (ReplicatedLinear, disable_tp)
                attn += _indexer_params(spec) * b
        else:
            k, hd = spec.kv_geometry(kind)
            kv_rank = max(1, k // tp)
            q_out = h * hd // tp
            q_proj = q_out * (2 if spec.attention_output_gate else 1)   # Qwen3-Next: query and gate
            kv_proj = (1 if spec.attention_k_eq_v and kind == FULL and spec.global_head_dim else 2) * kv_rank * hd
            attn += _linear_bytes(d, q_proj + kv_proj, q, b, attn_q) + _linear_bytes(q_out, d, q, b, attn_q)
            if spec.qkv_bias:
                attn += (q_out + 2 * kv_rank * hd) * b
            if spec.o_bias:
                attn += d * b
            if spec.attention_sinks:
                attn += h // tp * 4
            if spec.model_type in _QK_NORM_PER_HEAD:
                attn += 2 * hd * b
        norms += spec.norms_per_layer * d * b * (2 if spec.layernorm_bias else 1)
        moe = bool(spec.num_experts) and i in spec.moe_layers
        if moe:
            ff = (spec.moe_intermediate_size or spec.intermediate_size) // tp
            width = spec.moe_latent_size or d     # Nemotron 3 Super / Ultra: experts in the latent
            n_lin = 3 if spec.mlp_gated else 2
            if q["scheme"] == "mxfp4":
                one = n_lin * width * ff * MXFP4_BITS / 8
                experts += int(spec.num_experts * one)
                if spec.mlp_bias:
                    experts += spec.num_experts * ((n_lin - 1) * ff + width) * b
            else:
                one = _linear_bytes(width, (n_lin - 1) * ff, q, b, mlp_q) + _linear_bytes(ff, width, q, b, mlp_q)
                experts += spec.num_experts * one
            experts += d * spec.num_experts * b + (spec.num_experts * b if spec.mlp_bias else 0)   # router
            if spec.router_bias and not spec.mlp_bias:
                experts += spec.num_experts * 4                     # Nemotron-H's fp32 correction bias
            if spec.moe_latent_size:
                experts += 2 * d * width * b                        # the latent projections, whole on every rank
            # shared experts: DeepSeek, Kimi, GLM n_shared_experts and Llama 4 one, each as wide as a routed one;
            # Qwen one of shared_expert_intermediate_size with a one-output gate; Nemotron-H one, ungated
            shared = [ff] * spec.num_shared_experts
            if spec.shared_expert_intermediate_size:
                shared.append(spec.shared_expert_intermediate_size // tp)
                experts += d * b if spec.shared_expert_gate else 0
            for sff in shared:
                experts += _linear_bytes(d, (n_lin - 1) * sff, q, b, mlp_q) + _linear_bytes(sff, d, q, b, mlp_q)
        dense = i in spec.dense_mlp_layers if spec.dense_mlp_layers is not None else not moe
        if dense:
            ff = spec.intermediate_size // tp
            n_in = 2 if spec.mlp_gated else 1
            mlp += _linear_bytes(d, n_in * ff, q, b, mlp_q) + _linear_bytes(ff, d, q, b, mlp_q)
            if spec.mlp_bias:
                mlp += (n_in * ff + d) * b
    parts.append(WeightPart("attention", attn, "q/o split over tp; K/V split, or max(1, K // tp) heads when tp > K"))
    if mixers:
        parts.append(WeightPart("Mamba2 / Gated DeltaNet mixers", mixers, "split over tp, 16-bit"))
    if mlp:
        parts.append(WeightPart("mlp", mlp, "split over tp"))
    if experts:
        parts.append(WeightPart("experts", experts, "split over tp" + (", MXFP4 4.25 bits" if q["scheme"] == "mxfp4"
                                                                        else "")))
    parts.append(WeightPart("norms", norms, "replicated"))
    if not spec.is_mla and spec.max_position_embeddings:
        hd = spec.head_dim
        parts.append(WeightPart("rotary cos/sin cache", spec.max_position_embeddings * hd * b,
                                "max positions x head dim, model dtype"))
    if first and config:
        vision = _vision_bytes(config, d, b) // tp
        if vision:
            parts.append(WeightPart("vision tower + projector", vision, "16-bit, split over tp"))
    scheme = {"none": "bf16", "fp8": "fp8", "mxfp4": "mxfp4 experts"}.get(q["scheme"], f"int4-g{q['group_size']}")
    return StoredWeights(sum(p.bytes for p in parts), scheme, tuple(parts), tp, pp, stage)
