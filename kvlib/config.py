"""Read a Hugging Face ``config.json`` into a validated ModelSpec.

``load_model`` takes a bundled model id ('meta-llama/Llama-3.1-8B'), a short
alias ('llama-3.1-8b'), a path to a config.json or to a folder holding one,
or a dict. Nothing is read at import time; the network is touched only when
``hub=True`` is asked for.

A config that cannot be interpreted raises ``ConfigError`` naming the field,
never a silently wrong spec. Fields that only feed the parameter count
(hidden, vocabulary and feed-forward widths) may go by names kvlib does not
know: the spec keeps every KV figure and its parameter count is unknown
(``ParamsError`` naming the field). Taught in ch01_kv_formula.
"""

from __future__ import annotations

import copy
import functools
import json
from importlib import resources
from pathlib import Path

from .spec import CHUNKED, FULL, NO_KV, SLIDING, ModelSpec


class ConfigError(ValueError):
    """A config cannot be read or interpreted; the message names the field or file."""


ALIASES = {
    "llama-3.1-8b": "meta-llama/Llama-3.1-8B",
    "llama3.1-8b": "meta-llama/Llama-3.1-8B",
    "llama-3-8b": "meta-llama/Llama-3.1-8B",
    "llama-3.3-70b": "meta-llama/Llama-3.3-70B-Instruct",
    "llama-3-70b": "meta-llama/Llama-3.3-70B-Instruct",
    "llama-2-7b": "meta-llama/Llama-2-7b-hf",
    "llama-2-70b": "meta-llama/Llama-2-70b-chat-hf",
    "qwen2.5-7b": "Qwen/Qwen2.5-7B",
    "qwen2.5-3b": "Qwen/Qwen2.5-3B",
    "qwen2.5-32b": "Qwen/Qwen2.5-32B",
    "qwen3-0.6b": "Qwen/Qwen3-0.6B",
    "mistral-7b": "mistralai/Mistral-7B-v0.1",
    "mixtral-8x7b": "mistralai/Mixtral-8x7B-v0.1",
    "deepseek-v3": "deepseek-ai/DeepSeek-V3",
    "gpt-oss-20b": "openai/gpt-oss-20b",
    "gemma-2-9b": "google/gemma-2-9b-it",
    "phi-3-mini": "microsoft/Phi-3-mini-4k-instruct",
    "gpt2-large": "openai-community/gpt2-large",
}

# Architectures whose MLP is up -> act -> down (no gate) and whose norms are LayerNorm.
_CLASSIC_MLP = {"gpt2", "gpt_neox", "falcon", "RefinedWeb", "RefinedWebModel", "opt", "gptj",
                "bloom", "phi", "gpt_bigcode", "starcoder2"}
_LAYERNORM = _CLASSIC_MLP


def _data_dir():
    return resources.files("kvlib") / "data" / "configs"


def bundled_models() -> list[str]:
    """Ids of the configs shipped with kvlib ('org/name')."""
    return list(_bundled_ids())


@functools.cache
def _bundled_ids() -> tuple[str, ...]:
    # The package's data never changes while it runs; listing it on every lookup made the graders'
    # case builders (thousands of lookups a class) spend most of their time in importlib.resources.
    names = [p.name for p in _data_dir().iterdir() if p.name.endswith(".json")]
    return tuple(sorted(n[: -len(".json")].replace("__", "/") for n in names))


def resolve_model_id(text: str) -> str | None:
    """The bundled id for an id or alias (case-insensitive), else None."""
    key = text.strip().lower()
    if key in ALIASES:
        return ALIASES[key]
    for model_id in bundled_models():
        if key in (model_id.lower(), model_id.split("/", 1)[1].lower()):
            return model_id
    return None


def bundled_config(model: str) -> dict:
    """The raw config.json dict of a bundled model (id or alias), as published.

    >>> bundled_config("llama-3.1-8b")["num_key_value_heads"]
    8
    """
    model_id = resolve_model_id(model)
    if model_id is None:
        raise ConfigError(f"unknown model {model!r}: not a bundled id (see 'kvlib models')")
    return copy.deepcopy(_bundled_file(model_id))     # a copy: callers may edit theirs


@functools.cache
def _bundled_spec(model_id: str, name: str) -> ModelSpec:
    # a frozen ModelSpec, so one per (bundled id, name) serves every caller
    return parse_config(copy.deepcopy(_bundled_file(model_id)), name=name, source=f"bundled:{model_id}")


@functools.cache
def _bundled_file(model_id: str) -> dict:
    file = _data_dir() / (model_id.replace("/", "__") + ".json")
    with resources.as_file(file) as real:
        return _read_json(real)


def _read_json(path: Path) -> dict:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a config.json must hold a JSON object, not {type(data).__name__}")
    return data


def _fetch_from_hub(repo_id: str) -> tuple[dict, str]:
    try:
        from huggingface_hub import hf_hub_download
    except ImportError:
        raise ConfigError("fetching from the Hugging Face Hub needs huggingface_hub "
                          "(pip install huggingface_hub)") from None
    try:
        path = hf_hub_download(repo_id, "config.json")
    except Exception as exc:  # offline, gated repo, unknown id: all one line
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"could not fetch {repo_id}/config.json from the Hugging Face Hub "
                          f"(offline or gated?): {first}") from None
    return _read_json(Path(path)), f"hub:{repo_id}"


def load_model(source, *, hub: bool = False, name: str | None = None) -> ModelSpec:
    """Load a model spec from a bundled id or alias, a path, or a dict.

    >>> load_model("llama-3.1-8b").kv_bytes_per_token()
    131072
    >>> load_model({"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 256,
    ...             "vocab_size": 100, "intermediate_size": 512}).attention
    'mha'
    """
    if isinstance(source, ModelSpec):
        return source
    if isinstance(source, dict):
        return parse_config(source, name=name or "<dict>", source="dict")
    if not isinstance(source, (str, Path)):
        raise ConfigError(f"load_model takes an id, a path or a dict, not {type(source).__name__}")
    text = str(source)
    path = Path(text).expanduser()
    if path.is_dir():
        path = path / "config.json"
        if not path.is_file():
            raise ConfigError(f"{path.parent}: folder holds no config.json")
    if path.is_file():
        return parse_config(_read_json(path), name=name or _name_from_path(path), source=str(path))
    model_id = resolve_model_id(text)
    if model_id is not None:
        return _bundled_spec(model_id, name or model_id)
    if hub:
        data, origin = _fetch_from_hub(text)
        return parse_config(data, name=name or text, source=origin)
    raise ConfigError(f"unknown model {text!r}: not a bundled id (see 'kvlib models'), a config.json "
                      f"or a folder holding one; add --hub to fetch it from the Hugging Face Hub")


def _name_from_path(path: Path) -> str:
    if path.name == "config.json":
        return path.parent.name or str(path)
    return path.stem.replace("__", "/")


# --- field readers -----------------------------------------------------------
class _Fields:
    """Reads fields of one config object, naming them by their path in errors."""

    def __init__(self, data: dict, prefix: str = ""):
        self.data, self.prefix = data, prefix

    def where(self, key: str) -> str:
        return f"{self.prefix}{key}"

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def first(self, *keys):
        for key in keys:
            if self.data.get(key) is not None:
                return key
        return None

    def int(self, *keys, default=None, required=True, minimum=1):
        key = self.first(*keys)
        if key is None:
            if default is not None or not required:
                return default
            names = " / ".join(self.where(k) for k in keys)
            raise ConfigError(f"missing field {names}")
        value = self.data[key]
        if type(value) is not int:
            kind = "a string" if isinstance(value, str) else type(value).__name__
            raise ConfigError(f"field {self.where(key)} must be an integer, got {value!r} ({kind})")
        if value < minimum:
            raise ConfigError(f"field {self.where(key)} must be at least {minimum}, got {value}")
        return value

    def bool(self, key: str, default: bool = False) -> bool:
        value = self.data.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise ConfigError(f"field {self.where(key)} must be true or false, got {value!r}")
        return value


def parse_config(data: dict, *, name: str = "<config>", source: str = "") -> ModelSpec:
    """Turn a config dict into a ModelSpec, or raise ConfigError naming the field."""
    if not isinstance(data, dict):
        raise ConfigError(f"{name}: a config must be a JSON object, not {type(data).__name__}")
    top = _Fields(data)
    f = top
    text_config = data.get("text_config")
    if text_config is not None:
        # Multimodal wrappers keep the language model in text_config; its
        # vision_config describes the image encoder and holds no KV cache.
        if not isinstance(text_config, dict):
            raise ConfigError(f"field text_config must be an object, got {type(text_config).__name__}")
        f = _Fields(text_config, "text_config.")
    return _parse(f, top, name, source)


def _model_type(f: _Fields, top: _Fields) -> str:
    for fields in (f, top):
        value = fields.data.get("model_type")
        if isinstance(value, str):
            return value
    return "unknown"


def _kv_heads(f: _Fields, num_heads: int, model_type: str) -> int:
    if model_type in ("falcon", "RefinedWeb", "RefinedWebModel") or f.has("multi_query") \
            or f.has("new_decoder_architecture"):
        # Falcon: the new decoder (40B/180B) reads num_kv_heads (old name
        # n_head_kv) and ignores multi_query; the old one (7B) has one KV head
        # when multi_query is set, else one per query head. GPT-BigCode's
        # multi_query lands here too (one KV head when set).
        new_arch = f.bool("new_decoder_architecture")
        multi_query = f.bool("multi_query", default=True if not new_arch and model_type == "falcon" else False)
        if new_arch or not multi_query:
            return f.int("num_kv_heads", "n_head_kv", "num_key_value_heads", default=num_heads)
        return 1
    # num_key_value_heads absent or null means MHA.
    return f.int("num_key_value_heads", "num_kv_heads", "n_head_kv", default=num_heads)


# Feed-forward width, by the names real configs use: Llama / Mistral / Qwen /
# Gemma (intermediate_size), GPT-2 / GPT-J / CodeGen (n_inner), OPT / XGLM
# (ffn_dim), T5 / UMT5 (d_ff), Falcon / ChatGLM 2-3 (ffn_hidden_size),
# ChatGLM-6B (inner_hidden_size), Mistral's params.json (hidden_dim); DBRX
# nests it as ffn_config.ffn_hidden_size.
FFN_WIDTH_FIELDS = ("intermediate_size", "n_inner", "ffn_dim", "d_ff", "ffn_hidden_size", "inner_hidden_size",
                    "hidden_dim")


_TOP_K_FIELDS = ("num_experts_per_tok", "experts_per_token", "num_experts_per_token")


def _ffn_width(f: _Fields, hidden, classic: bool):
    """The dense MLP's width, or None when no known name gives it (the parameter count is then unknown)."""
    width = f.int(*FFN_WIDTH_FIELDS, required=False)
    if width is not None:
        return width
    nested = f.data.get("ffn_config")
    if isinstance(nested, dict):
        width = _Fields(nested, f.where("ffn_config.")).int("ffn_hidden_size", required=False)
        if width is not None:
            return width
    if classic and hidden is not None:
        return 4 * hidden  # GPT-2 (n_inner null), Bloom, Falcon 7B: 4 x the hidden size
    return None


def _layer_kinds(f: _Fields, num_layers: int, model_type: str):
    """Per-layer cache kind, the window and the chunk size."""
    window = f.int("sliding_window", required=False)
    if model_type in ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe") and not f.bool("use_sliding_window"):
        window = None  # Qwen ships sliding_window but only uses it when asked
    if f.data.get("use_sliding_window") is False:
        window = None
    chunk = f.int("attention_chunk_size", required=False)

    types = f.data.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != num_layers:
            raise ConfigError(f"field {f.where('layer_types')} must list one type per layer ({num_layers})")
        mapping = {"full_attention": FULL, "attention": FULL, "global": FULL,
                   "sliding_attention": SLIDING, "local": SLIDING,
                   "chunked_attention": CHUNKED,
                   "linear_attention": NO_KV, "mamba": NO_KV, "conv": NO_KV, "recurrent": NO_KV}
        kinds = []
        for i, value in enumerate(types):
            if value not in mapping:
                raise ConfigError(f"field {f.where('layer_types')}[{i}] is {value!r}, which kvlib cannot interpret")
            kinds.append(mapping[value])
        if SLIDING in kinds and window is None:
            raise ConfigError(f"field {f.where('layer_types')} has sliding layers but sliding_window is not set")
        if CHUNKED in kinds and chunk is None:
            raise ConfigError(f"field {f.where('layer_types')} has chunked layers but attention_chunk_size is not set")
        return tuple(kinds), window, chunk

    if f.has("full_attention_interval"):
        # Hybrid linear-attention models (Qwen3-Next): every n-th layer keeps a KV cache.
        every = f.int("full_attention_interval")
        return tuple(FULL if (i + 1) % every == 0 else NO_KV for i in range(num_layers)), None, None
    if f.has("attn_layer_period"):
        # Jamba: attention at layers i with i % period == offset, Mamba elsewhere.
        period, offset = f.int("attn_layer_period"), f.int("attn_layer_offset", default=0, minimum=0)
        return tuple(FULL if i % period == offset else NO_KV for i in range(num_layers)), None, None
    if chunk is not None:
        # Llama 4: RoPE layers attend within chunks, every 4th (NoPE) layer is global.
        flags = f.data.get("no_rope_layers")
        if isinstance(flags, list) and len(flags) == num_layers:
            return tuple(CHUNKED if flag else FULL for flag in flags), window, chunk
        interval = f.int("no_rope_layer_interval", default=4)
        return tuple(FULL if (i + 1) % interval == 0 else CHUNKED for i in range(num_layers)), window, chunk
    if window is None:
        return (FULL,) * num_layers, None, None
    if model_type in ("gemma2",):
        # Gemma 2 alternates, starting with a local layer.
        return tuple(SLIDING if i % 2 == 0 else FULL for i in range(num_layers)), window, None
    if model_type in ("gemma3", "gemma3_text", "cohere2"):
        pattern = f.int("sliding_window_pattern", default=6)
        return tuple(FULL if (i + 1) % pattern == 0 else SLIDING for i in range(num_layers)), window, None
    if model_type in ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe"):
        first = f.int("max_window_layers", default=num_layers, minimum=0)
        return tuple(SLIDING if i >= first else FULL for i in range(num_layers)), window, None
    # Mistral, Phi-3 and others: the window applies to every layer.
    return (SLIDING,) * num_layers, window, None


def _moe_layers(f: _Fields, num_layers: int, num_experts: int) -> tuple:
    if not num_experts:
        return ()
    first_dense = f.int("first_k_dense_replace", default=0, minimum=0)
    freq = f.int("moe_layer_freq", "decoder_sparse_step", default=1)
    dense_only = f.data.get("mlp_only_layers") or ()
    if not isinstance(dense_only, (list, tuple)) or not all(type(i) is int for i in dense_only):
        raise ConfigError(f"field {f.where('mlp_only_layers')} must list layer indices, got {dense_only!r}")
    dense_only = set(dense_only)
    return tuple(i for i in range(num_layers)
                 if i >= first_dense and i % freq == 0 and i not in dense_only)


def _parse(f: _Fields, top: _Fields, name: str, source: str) -> ModelSpec:
    model_type = _model_type(f, top)
    num_layers = f.int("num_hidden_layers", "n_layer", "num_layers", "n_layers")
    num_heads = f.int("num_attention_heads", "n_head", "num_heads")
    hidden_keys = ("hidden_size", "n_embd", "d_model", "model_dim")
    # The hidden size is a KV figure only when head_dim is not given (D = d / H).
    hidden = f.int(*hidden_keys, required=not f.has("head_dim"))
    num_kv_heads = _kv_heads(f, num_heads, model_type)
    if f.has("head_dim"):
        head_dim = f.int("head_dim")
    else:
        if hidden % num_heads:
            raise ConfigError(f"field {f.where('hidden_size')} ({hidden}) is not divisible by "
                              f"num_attention_heads ({num_heads}) and no head_dim is given")
        head_dim = hidden // num_heads
    if num_heads % num_kv_heads:
        raise ConfigError(f"field {f.where('num_key_value_heads')} ({num_kv_heads}) must divide "
                          f"num_attention_heads ({num_heads})")
    vocab_keys = ("vocab_size", "n_vocab", "padded_vocab_size")
    vocab = f.int(*vocab_keys, required=False)
    classic = model_type in _CLASSIC_MLP
    intermediate = _ffn_width(f, hidden, classic)
    missing = []
    for field_name, value, keys in (("hidden_size", hidden, hidden_keys), ("vocab_size", vocab, vocab_keys),
                                    ("intermediate_size", intermediate,
                                     FFN_WIDTH_FIELDS + ("ffn_config.ffn_hidden_size",))):
        if value is None:
            missing.append((field_name, " / ".join(f.where(k) for k in keys)))
    layer_kinds, window, chunk = _layer_kinds(f, num_layers, model_type)

    mla = {}
    if f.has("kv_lora_rank"):
        mla = dict(kv_lora_rank=f.int("kv_lora_rank"),
                   qk_rope_head_dim=f.int("qk_rope_head_dim"),
                   q_lora_rank=f.int("q_lora_rank", required=False),
                   qk_nope_head_dim=f.int("qk_nope_head_dim", required=False),
                   v_head_dim=f.int("v_head_dim", required=False))

    num_experts = f.int("num_local_experts", "n_routed_experts", "num_experts", default=0, minimum=0)
    moe = {}
    if num_experts:
        moe = dict(num_experts=num_experts,
                   num_experts_per_tok=f.int(*_TOP_K_FIELDS, required=False),
                   moe_intermediate_size=f.int("moe_intermediate_size", required=False),
                   num_shared_experts=f.int("n_shared_experts", default=0, minimum=0),
                   shared_expert_intermediate_size=f.int("shared_expert_intermediate_size", required=False),
                   moe_layers=_moe_layers(f, num_layers, num_experts))

    if moe and moe["num_experts_per_tok"] is None:
        missing.append(("num_experts_per_tok", " / ".join(f.where(k) for k in _TOP_K_FIELDS)))

    dtype = f.data.get("torch_dtype") or f.data.get("dtype") or top.data.get("torch_dtype") or "bfloat16"
    if not isinstance(dtype, str):
        raise ConfigError(f"field {f.where('torch_dtype')} must be a string, got {dtype!r}")

    tie = f.data.get("tie_word_embeddings", top.data.get("tie_word_embeddings"))
    if tie is None:
        tie = model_type in ("gpt2", "gemma", "gemma2", "gemma3", "gemma3_text")
    attention_bias = f.bool("attention_bias")
    qkv_bias = attention_bias or model_type in ("qwen2", "qwen2_moe", "gpt2")
    o_bias = (attention_bias and model_type not in ("qwen2", "qwen2_moe")) or model_type == "gpt2"
    if model_type in ("falcon", "RefinedWeb", "RefinedWebModel"):
        qkv_bias = o_bias = f.bool("bias")
    spec = ModelSpec(
        name=name, model_type=model_type, num_layers=num_layers, num_heads=num_heads,
        num_kv_heads=num_kv_heads, head_dim=head_dim, hidden_size=hidden, vocab_size=vocab,
        intermediate_size=intermediate, layer_kinds=layer_kinds, sliding_window=window,
        attention_chunk_size=chunk, **mla, **moe,
        tie_word_embeddings=bool(tie), qkv_bias=qkv_bias, o_bias=o_bias,
        mlp_gated=not classic, mlp_bias=model_type in ("gpt2", "gpt_oss"),
        layernorm_bias=model_type in _LAYERNORM,
        norms_per_layer=4 if model_type in ("gemma2", "gemma3", "gemma3_text") else 2,
        learned_positions=f.int("n_positions", default=0, minimum=0) if model_type == "gpt2" else 0,
        attention_sinks=model_type == "gpt_oss",
        mtp_layers=f.int("num_nextn_predict_layers", default=0, minimum=0),
        dtype=dtype.removeprefix("torch."),
        max_position_embeddings=f.int("max_position_embeddings", "n_positions", "seq_length", required=False),
        source=source, missing_fields=tuple(missing),
    )
    return spec
