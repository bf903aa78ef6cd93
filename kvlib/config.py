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

from .dtypes import dtype_bytes
from .errors import ConfigError  # noqa: F401 -- raised here; kvlib.config.ConfigError stays importable
from .spec import CHUNKED, FULL, GATED_DELTANET, MAMBA2, NO_KV, SLIDING, ModelSpec


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
    # the 2025-26 families: hybrids with state, sparse-attention indexers, per-layer geometry, large MoEs
    "qwen3-next-80b-a3b": "Qwen/Qwen3-Next-80B-A3B-Thinking",
    "qwen3-next": "Qwen/Qwen3-Next-80B-A3B-Thinking",
    "qwen3-30b-a3b": "Qwen/Qwen3-30B-A3B",
    "nemotron-h-56b": "nvidia/Nemotron-H-56B-Base-8K",
    "nemotron-3-nano": "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
    "nemotron-3-nano-30b-a3b": "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
    "nemotron-3-ultra": "nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16",
    "nemotron-3-ultra-550b-a55b": "nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16",
    "deepseek-v3.2": "deepseek-ai/DeepSeek-V3.2",
    "glm-5": "zai-org/GLM-5",
    "gemma-4-26b-a4b": "google/gemma-4-26B-A4B",
    "gemma-4-26b": "google/gemma-4-26B-A4B",
    "llama-4-scout": "meta-llama/Llama-4-Scout-17B-16E-Instruct",
    "llama-4-scout-17b-16e": "meta-llama/Llama-4-Scout-17B-16E-Instruct",
    "gpt-oss-120b": "openai/gpt-oss-120b",
    "kimi-k2": "moonshotai/Kimi-K2-Instruct",
    "kimi-k2.5": "moonshotai/Kimi-K2.5",
}

# The models the chapters, drills and graded cases draw from. Configs bundled after them (the 2025-26
# families, for ``kvlib info`` and the engine checks) are left out, so a learner's seed keeps its problems
# and a chapter's tables and plots keep their rows.
COURSE_MODELS = (
    "Qwen/Qwen2.5-32B", "Qwen/Qwen2.5-3B", "Qwen/Qwen2.5-7B", "Qwen/Qwen3-0.6B", "deepseek-ai/DeepSeek-V3",
    "google/gemma-2-9b-it", "meta-llama/Llama-2-70b-chat-hf", "meta-llama/Llama-2-7b-hf", "meta-llama/Llama-3.1-8B",
    "meta-llama/Llama-3.3-70B-Instruct", "microsoft/Phi-3-mini-4k-instruct", "mistralai/Mistral-7B-v0.1",
    "mistralai/Mixtral-8x7B-v0.1", "openai-community/gpt2-large", "openai/gpt-oss-20b",
)

# Architectures whose MLP is up -> act -> down (no gate) and whose norms are LayerNorm.
_CLASSIC_MLP = {"gpt2", "gpt_neox", "falcon", "RefinedWeb", "RefinedWebModel", "opt", "gptj",
                "bloom", "phi", "gpt_bigcode", "starcoder2"}
_LAYERNORM = _CLASSIC_MLP


def _data_dir():
    return resources.files("kvlib") / "data" / "configs"


def bundled_models() -> list[str]:
    """Ids of the configs shipped with kvlib ('org/name')."""
    return list(_bundled_ids())


def course_models() -> list[str]:
    """Ids of the bundled configs the chapters, drills and graded cases draw from (``COURSE_MODELS``), sorted
    as ``bundled_models`` sorts them."""
    return [m for m in _bundled_ids() if m in COURSE_MODELS]


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


# The layer forms of hybrid configs, by the names real configs use. "linear_attention" is transformers'
# name for any recurrent layer (transformers >= 5 renames "mamba" to it, configuration_utils'
# _LEGACY_LAYER_TYPE_REMAP): which recurrence it is comes from the model's own fields.
_LAYER_TYPE_NAMES = {"full_attention": FULL, "attention": FULL, "global": FULL,
                     "indexed_attention": FULL, "deepseek_sparse_attention": FULL,   # MLA + indexer (V3.2, GLM-5)
                     "sliding_attention": SLIDING, "local": SLIDING,
                     "chunked_attention": CHUNKED,
                     "mlp": NO_KV, "moe": NO_KV,                                         # Nemotron-H's FFN blocks
                     "linear_attention": "recurrent", "mamba": "recurrent",
                     "conv": "unmodelled", "recurrent": "unmodelled"}
# Nemotron-H's hybrid_override_pattern (vllm/model_executor/models/nemotron_h.py; transformers'
# NemotronHConfig._pattern_to_list): M Mamba2, * attention, - MLP, E MoE.
_PATTERN_CHARS = {"M": MAMBA2, "*": FULL, "-": NO_KV, "E": NO_KV}
_GDN_TYPES = ("qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text")


def _recurrent_kind(f: _Fields, model_type: str) -> str | None:
    """The state kind of a config's recurrent ("linear_attention" / "mamba") layers, None when it names none."""
    if model_type in _GDN_TYPES or f.has("linear_num_value_heads"):
        return GATED_DELTANET
    if model_type == "nemotron_h" or f.has("mamba_num_heads"):
        return MAMBA2
    return None


class _Kinds:
    """What the layer-kind reader found: one kind a layer, the window, the chunk, a state it cannot size."""

    def __init__(self, kinds, window=None, chunk=None, unmodelled=None):
        self.kinds, self.window, self.chunk, self.unmodelled = tuple(kinds), window, chunk, unmodelled


def _typed_kinds(f: _Fields, key: str, types, model_type: str) -> _Kinds:
    """Kinds from a list of layer-type names (``layer_types``, ``layers_block_type``)."""
    recurrent, kinds, unmodelled = _recurrent_kind(f, model_type), [], None
    for i, value in enumerate(types):
        kind = _LAYER_TYPE_NAMES.get(value) if isinstance(value, str) else None
        if kind is None:
            raise ConfigError(f"field {f.where(key)}[{i}] is {value!r}, which kvlib cannot interpret")
        if kind == "recurrent" and recurrent is None or kind == "unmodelled":
            # KV figures stay exact (the layer keeps no KV); its state is refused, never counted as 0
            unmodelled = unmodelled or (f"field {f.where(key)}[{i}] is {value!r}: kvlib does not model that "
                                        f"layer's state (Mamba2 and Gated DeltaNet only)")
            kind = NO_KV
        elif kind == "recurrent":
            kind = recurrent
        kinds.append(kind)
    return _Kinds(kinds, unmodelled=unmodelled)


def _hybrid_pattern(f: _Fields, model_type: str):
    """(field, list of layer names or pattern chars) of a Nemotron-H-style config, or None."""
    if f.has("hybrid_override_pattern"):
        pattern = f.data["hybrid_override_pattern"]
        if not isinstance(pattern, str) or not pattern:
            raise ConfigError(f"field {f.where('hybrid_override_pattern')} must be a string of layer kinds, "
                              f"got {pattern!r}")
        return "hybrid_override_pattern", pattern
    if f.has("layers_block_type"):
        types = f.data["layers_block_type"]
        if not isinstance(types, list) or not types:
            raise ConfigError(f"field {f.where('layers_block_type')} must list one type per layer, got {types!r}")
        return "layers_block_type", types
    return None


def _layer_kinds(f: _Fields, num_layers: int, model_type: str) -> _Kinds:
    """Per-layer kind, the window, the chunk size, and the reason a state is unknown (if one is)."""
    window = f.int("sliding_window", required=False)
    if model_type in ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe") and not f.bool("use_sliding_window"):
        window = None  # Qwen ships sliding_window but only uses it when asked
    if f.data.get("use_sliding_window") is False:
        window = None
    if model_type in ("gemma4", "gemma4_text") and f.data.get("use_bidirectional_attention") == "all" and window:
        window = window // 2 + 1   # transformers' Gemma4TextConfig: exclusive bounds for bidirectional attention
    chunk = f.int("attention_chunk_size", required=False)

    hybrid = _hybrid_pattern(f, model_type)
    if hybrid is not None:
        key, layers = hybrid
        if key == "hybrid_override_pattern":
            kinds = []
            for i, char in enumerate(layers):
                if char not in _PATTERN_CHARS:
                    raise ConfigError(f"field {f.where(key)}[{i}] is {char!r}, which kvlib cannot interpret "
                                      f"(M Mamba2, * attention, - MLP, E MoE)")
                kinds.append(_PATTERN_CHARS[char])
            found = _Kinds(kinds)
        else:
            found = _typed_kinds(f, key, layers, "nemotron_h")
        return _Kinds(found.kinds, window if SLIDING in found.kinds else None, None, found.unmodelled)

    types = f.data.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != num_layers:
            raise ConfigError(f"field {f.where('layer_types')} must list one type per layer ({num_layers})")
        found = _typed_kinds(f, "layer_types", types, model_type)
        kinds = list(found.kinds)
        if model_type in ("gemma4", "gemma4_text"):
            # the last num_kv_shared_layers read the cache of an earlier layer of their type and keep none
            # (vllm/model_executor/models/gemma4.py: kv_sharing_target_layer_name)
            shared = f.int("num_kv_shared_layers", default=0, minimum=0)
            for i in range(max(0, num_layers - shared), num_layers):
                kinds[i] = NO_KV
        if SLIDING in kinds and window is None:
            raise ConfigError(f"field {f.where('layer_types')} has sliding layers but sliding_window is not set")
        if CHUNKED in kinds and chunk is None:
            raise ConfigError(f"field {f.where('layer_types')} has chunked layers but attention_chunk_size is not set")
        return _Kinds(kinds, window, chunk, found.unmodelled)

    if f.has("full_attention_interval"):
        # Hybrid linear-attention models (Qwen3-Next): every n-th layer keeps a KV cache.
        every = f.int("full_attention_interval")
        recurrent = _recurrent_kind(f, model_type)
        kinds = tuple(FULL if (i + 1) % every == 0 else (recurrent or NO_KV) for i in range(num_layers))
        unmodelled = None if recurrent else (f"field {f.where('full_attention_interval')} is {every}: the other "
                                             f"layers are linear attention whose state kvlib cannot size "
                                             f"(no linear_num_value_heads / mamba_num_heads)")
        return _Kinds(kinds, unmodelled=unmodelled)
    if f.has("attn_layer_period"):
        # Jamba: attention at layers i with i % period == offset, Mamba (Mamba1) elsewhere.
        period, offset = f.int("attn_layer_period"), f.int("attn_layer_offset", default=0, minimum=0)
        return _Kinds((FULL if i % period == offset else NO_KV for i in range(num_layers)),
                      unmodelled=f"field {f.where('attn_layer_period')} is {period}: the other layers are Mamba1 "
                                 f"layers, whose state kvlib does not model (Mamba2 and Gated DeltaNet only)")
    if chunk is not None:
        # Llama 4: RoPE layers attend within chunks, every 4th (NoPE) layer is global.
        flags = f.data.get("no_rope_layers")
        if isinstance(flags, list) and len(flags) == num_layers:
            return _Kinds((CHUNKED if flag else FULL for flag in flags), window, chunk)
        interval = f.int("no_rope_layer_interval", default=4)
        return _Kinds((FULL if (i + 1) % interval == 0 else CHUNKED for i in range(num_layers)), window, chunk)
    if window is None:
        return _Kinds((FULL,) * num_layers)
    if model_type in ("gemma2",):
        # Gemma 2 alternates, starting with a local layer.
        return _Kinds((SLIDING if i % 2 == 0 else FULL for i in range(num_layers)), window)
    if model_type in ("gemma3", "gemma3_text", "cohere2"):
        pattern = f.int("sliding_window_pattern", default=6)
        return _Kinds((FULL if (i + 1) % pattern == 0 else SLIDING for i in range(num_layers)), window)
    if model_type in ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe"):
        first = f.int("max_window_layers", default=num_layers, minimum=0)
        return _Kinds((SLIDING if i >= first else FULL for i in range(num_layers)), window)
    # Mistral, Phi-3 and others: the window applies to every layer.
    return _Kinds((SLIDING,) * num_layers, window)


def _num_layers(f: _Fields) -> int:
    """Decoder layers: ``num_hidden_layers``, or the length of a Nemotron-H layer list, which transformers >= 5
    saves without ``num_hidden_layers`` (``NemotronHConfig.num_hidden_layers`` is ``len(layers_block_type)``)."""
    hybrid = _hybrid_pattern(f, "")
    given = f.int("num_hidden_layers", "n_layer", "num_layers", "n_layers", required=hybrid is None)
    if hybrid is None:
        return given
    key, layers = hybrid
    if given is not None and given != len(layers):
        raise ConfigError(f"field {f.where(key)} lists {len(layers)} layers but num_hidden_layers is {given}")
    return len(layers)


def _check_dtype(f: _Fields, key: str, value) -> None:
    """A state dtype named by the config: None, or a name kvlib's dtype table knows (else ConfigError)."""
    if value is None:
        return
    try:
        dtype_bytes(value if isinstance(value, str) else "")
    except ValueError:
        raise ConfigError(f"field {f.where(key)} is {value!r}, an unknown dtype") from None


def _mamba2_geometry(f: _Fields, model_type: str) -> dict:
    """vLLM's Mamba2 state inputs, by the names configs use (old remote-code names second), or {}.

    The mixer is ``heads x head dim`` wide (nemotron_h.py: ``mamba_num_heads * mamba_head_dim``)."""
    heads = f.int("mamba_num_heads", "mamba_n_heads", required=False)
    if heads is None:
        return {}
    head_dim = f.int("mamba_head_dim", "mamba_d_head")
    ssm = f.data.get("mamba_ssm_cache_dtype")
    if model_type == "nemotron_h":
        # NemotronHForCausalLMConfig: the config's mamba_ssm_cache_dtype, else float32 (vLLM's default for
        # Nemotron-H, "Only float32 is known to have no accuracy issues")
        ssm = ssm or "float32"
    _check_dtype(f, "mamba_ssm_cache_dtype", ssm)
    return dict(mamba_num_heads=heads, mamba_head_dim=head_dim, mamba_intermediate_size=heads * head_dim,
                mamba_n_groups=f.int("n_groups", "mamba_n_groups", default=1),
                mamba_state_size=f.int("ssm_state_size", "mamba_d_state"),
                mamba_conv_kernel=f.int("conv_kernel", "mamba_d_conv", default=4, minimum=2),
                mamba_ssm_dtype=ssm)


def _gdn_geometry(f: _Fields, model_type: str) -> dict:
    """Gated DeltaNet's state inputs (Qwen3-Next's linear_* fields), or {}.

    Qwen3.5 names its recurrent state's dtype (``mamba_ssm_dtype``, float32 in the published configs), which vLLM
    takes as ``mamba_ssm_cache_dtype`` (``Qwen3_5ForConditionalGenerationConfig`` in
    vllm/model_executor/models/config.py); Qwen3-Next names none, so the state is in the model dtype."""
    if not f.has("linear_num_value_heads"):
        return {}
    ssm = f.data.get("mamba_ssm_dtype") if model_type.startswith("qwen3_5") else None
    _check_dtype(f, "mamba_ssm_dtype", ssm)
    return dict(mamba_ssm_dtype=ssm,linear_num_key_heads=f.int("linear_num_key_heads"),
                linear_num_value_heads=f.int("linear_num_value_heads"),
                linear_key_head_dim=f.int("linear_key_head_dim"),
                linear_value_head_dim=f.int("linear_value_head_dim"),
                linear_conv_kernel_dim=f.int("linear_conv_kernel_dim", minimum=2))


def _indexer(f: _Fields, num_layers: int) -> dict:
    """DeepSeek-V3.2 / GLM-5's lightning indexer: its widths and the layers that build one, or {}.

    A layer reuses the top-k of an earlier one (and keeps no indexer cache) where ``indexer_types`` says
    "shared", else where ``index_topk_pattern`` says "S", else where ``max(i - offset + 1, 0) % freq != 0``
    (``index_topk_freq``, ``index_skip_topk_offset`` = 2); by default every layer builds one
    (vllm/model_executor/models/utils.py ``compute_skip_topk_layers``, 0.34.0; the same rule without
    ``indexer_types`` inline in vllm/models/deepseek_v32/attention.py, 0.32.0)."""
    if not f.has("index_topk"):
        return {}
    if not f.has("kv_lora_rank"):
        # DeepSeek-V4's compressed sparse attention also names index_topk, over caches that are not MLA's
        raise ConfigError(f"field {f.where('index_topk')}: a sparse-attention indexer on a model without MLA "
                          f"(no kv_lora_rank) is not modelled")
    types = f.data.get("indexer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != num_layers:
            raise ConfigError(f"field {f.where('indexer_types')} must list one type per layer ({num_layers})")
        for i, value in enumerate(types):
            if value not in ("full", "shared"):
                raise ConfigError(f"field {f.where('indexer_types')}[{i}] is {value!r} (full or shared)")
        layers = tuple(i for i, value in enumerate(types) if value == "full")
    else:
        freq = f.int("index_topk_freq", default=1)
        offset = f.int("index_skip_topk_offset", default=2, minimum=0)
        pattern = f.data.get("index_topk_pattern")
        if pattern is not None and not isinstance(pattern, (str, list)):
            raise ConfigError(f"field {f.where('index_topk_pattern')} must be a string, got {pattern!r}")
        if pattern is None:
            layers = tuple(i for i in range(num_layers) if max(i - offset + 1, 0) % freq == 0)
        else:
            layers = tuple(i for i in range(num_layers) if not (i < len(pattern) and pattern[i] == "S"))
    return dict(index_head_dim=f.int("index_head_dim"), index_n_heads=f.int("index_n_heads", required=False),
                index_topk=f.int("index_topk"), indexer_layers=layers)


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


def _llama4_moe_layers(f: _Fields, num_layers: int) -> tuple:
    """Llama 4's MoE layers: ``moe_layers`` when listed, else every ``interleave_moe_layer_step``-th
    (vllm/model_executor/models/llama4.py: ``(layer_idx + 1) % interleave_moe_layer_step == 0``)."""
    listed = f.data.get("moe_layers")
    if isinstance(listed, list) and all(type(i) is int and 0 <= i < num_layers for i in listed):
        return tuple(sorted(set(listed)))
    step = f.int("interleave_moe_layer_step", default=1, minimum=0)
    return tuple(i for i in range(num_layers) if step > 0 and (i + 1) % step == 0)


def _nemotron_h(f: _Fields) -> dict:
    """Nemotron-H's blocks for the parameter count: each layer is one mixer (Mamba2, attention, MLP or MoE)
    with one norm (vllm/model_executor/models/nemotron_h.py); the FFNs are up -> relu2 -> down, the MoE's
    shared expert ``moe_shared_expert_intermediate_size x n_shared_experts`` wide, its experts in
    ``moe_latent_size`` where given (Nemotron 3 Super / Ultra)."""
    key, layers = _hybrid_pattern(f, "nemotron_h")
    if key == "hybrid_override_pattern":
        mlp = tuple(i for i, c in enumerate(layers) if c == "-")
        moe = tuple(i for i, c in enumerate(layers) if c == "E")
    else:
        mlp = tuple(i for i, t in enumerate(layers) if t == "mlp")
        moe = tuple(i for i, t in enumerate(layers) if t == "moe")
    out = dict(dense_mlp_layers=mlp, norms_per_layer=1, mamba_conv_bias=f.bool("use_conv_bias", default=True),
               mamba_proj_bias=f.bool("use_bias"))
    widths = f.data.get("intermediate_size")
    if isinstance(widths, list):
        # one width per MLP block (nemotron_h.py indexes intermediate_size by the block's MLP index)
        if len(set(widths)) != 1:
            out["unmodelled_params"] = (f"field {f.where('intermediate_size')} gives one width per MLP block: "
                                        f"the count takes one width")
    if moe:
        experts = f.int("n_routed_experts")
        shared = f.int("n_shared_experts", default=0, minimum=0)
        out.update(num_experts=experts, moe_layers=moe, num_experts_per_tok=f.int("num_experts_per_tok"),
                   moe_intermediate_size=f.int("moe_intermediate_size"),
                   moe_latent_size=f.int("moe_latent_size", required=False),
                   shared_expert_intermediate_size=(f.int("moe_shared_expert_intermediate_size") * shared
                                                    if shared else None),
                   shared_expert_gate=False, router_bias=True)
    return out


def _parse(f: _Fields, top: _Fields, name: str, source: str) -> ModelSpec:
    model_type = _model_type(f, top)
    num_layers = _num_layers(f)
    num_heads = f.int("num_attention_heads", "n_head", "num_heads")
    hidden_keys = ("hidden_size", "n_embd", "d_model", "model_dim")
    # Nemotron-H's remote-code configs name the head size attention_head_dim (nemotron_h.py reads head_dim,
    # else hidden / heads; the two agree on every published config)
    head_key = f.first("head_dim", "attention_head_dim") if model_type == "nemotron_h" else \
        ("head_dim" if f.has("head_dim") else None)
    # The hidden size is a KV figure only when head_dim is not given (D = d / H).
    hidden = f.int(*hidden_keys, required=head_key is None)
    num_kv_heads = _kv_heads(f, num_heads, model_type)
    if head_key is not None:
        head_dim = f.int(head_key)
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
    if model_type == "llama4_text" and f.has("intermediate_size_mlp"):
        intermediate = f.int("intermediate_size_mlp")    # Llama 4: the dense layers' width; experts use intermediate_size
    elif model_type == "nemotron_h" and isinstance(f.data.get("intermediate_size"), list) \
            and f.data["intermediate_size"] and type(f.data["intermediate_size"][0]) is int:
        intermediate = f.data["intermediate_size"][0]
    else:
        intermediate = _ffn_width(f, hidden, classic)
    missing = []
    for field_name, value, keys in (("hidden_size", hidden, hidden_keys), ("vocab_size", vocab, vocab_keys),
                                    ("intermediate_size", intermediate,
                                     FFN_WIDTH_FIELDS + ("ffn_config.ffn_hidden_size",))):
        if value is None:
            missing.append((field_name, " / ".join(f.where(k) for k in keys)))
    kinds = _layer_kinds(f, num_layers, model_type)
    layer_kinds, window, chunk = kinds.kinds, kinds.window, kinds.chunk

    mla = {}
    if f.has("kv_lora_rank"):
        mla = dict(kv_lora_rank=f.int("kv_lora_rank"),
                   qk_rope_head_dim=f.int("qk_rope_head_dim"),
                   q_lora_rank=f.int("q_lora_rank", required=False),
                   qk_nope_head_dim=f.int("qk_nope_head_dim", required=False),
                   v_head_dim=f.int("v_head_dim", required=False))

    extra = {}
    gemma4 = model_type in ("gemma4", "gemma4_text")
    if gemma4:
        if f.has("per_layer_config"):
            # newer transformers store the global layers' geometry per layer; read wrongly it would silently give
            # the 512-wide default (a tiny Gemma 4 saved so started with 1/3 of the tokens kvlib predicted)
            raise ConfigError(f"{f.where('per_layer_config')}: Gemma 4's per-layer geometry in this form is not read "
                              "by kvlib; give global_head_dim and num_global_key_value_heads instead")
        # transformers' Gemma4TextConfig: full-attention layers take global_head_dim (512 when absent) and,
        # when attention_k_eq_v is set, num_global_key_value_heads KV heads (their K and V share a projection)
        k_eq_v = f.bool("attention_k_eq_v")
        extra.update(global_head_dim=f.int("global_head_dim", default=512), attention_k_eq_v=k_eq_v,
                     num_global_kv_heads=f.int("num_global_key_value_heads", required=False) if k_eq_v else None,
                     norms_per_layer=4)
        if f.int("num_kv_shared_layers", default=0, minimum=0) or f.int("hidden_size_per_layer_input", default=0,
                                                                        minimum=0):
            extra["unmodelled_params"] = ("Gemma 4's per-layer embeddings and KV-shared layers (num_kv_shared_layers, "
                                          "hidden_size_per_layer_input) are not in kvlib's parameter count")
    extra.update(_mamba2_geometry(f, model_type))
    extra.update(_gdn_geometry(f, model_type))
    extra.update(_indexer(f, num_layers))
    if model_type in _GDN_TYPES:
        extra["attention_output_gate"] = f.bool("attn_output_gate", default=True)   # Qwen3-Next gates every head
    if kinds.unmodelled:
        extra.update(unmodelled_state=kinds.unmodelled, unmodelled_params=kinds.unmodelled)

    num_experts = f.int("num_local_experts", "n_routed_experts", "num_experts", default=0, minimum=0)
    top_k_fields = _TOP_K_FIELDS + (("top_k_experts",) if gemma4 else ())    # Gemma 4 names its top-k so
    moe = {}
    if num_experts:
        moe = dict(num_experts=num_experts,
                   num_experts_per_tok=f.int(*top_k_fields, required=False),
                   moe_intermediate_size=f.int("moe_intermediate_size", "expert_intermediate_size",
                                               required=False),
                   num_shared_experts=f.int("n_shared_experts", default=0, minimum=0),
                   # 0 means none (Qwen3-Coder-480B's config says so)
                   shared_expert_intermediate_size=f.int("shared_expert_intermediate_size", required=False,
                                                         minimum=0) or None,
                   moe_layers=_moe_layers(f, num_layers, num_experts))
        if model_type == "llama4_text":
            # every Llama 4 MoE layer adds one shared expert as wide as a routed one (llama4.py: shared_expert)
            moe.update(moe_intermediate_size=f.int("intermediate_size"), num_shared_experts=1,
                       moe_layers=_llama4_moe_layers(f, num_layers))
        if gemma4:
            # Gemma 4's MoE block runs beside the dense MLP in every layer, with three more norms
            moe.update(dense_mlp_layers=tuple(range(num_layers)))
            extra["norms_per_layer"] = 7
    if model_type == "nemotron_h":
        moe = {}
        extra.update(_nemotron_h(f))

    if moe and moe["num_experts_per_tok"] is None:
        missing.append(("num_experts_per_tok", " / ".join(f.where(k) for k in top_k_fields)))

    dtype = f.data.get("torch_dtype") or f.data.get("dtype") or top.data.get("torch_dtype") or \
        top.data.get("dtype") or "bfloat16"
    if not isinstance(dtype, str):
        raise ConfigError(f"field {f.where('torch_dtype')} must be a string, got {dtype!r}")

    tie = f.data.get("tie_word_embeddings", top.data.get("tie_word_embeddings"))
    if tie is None:
        tie = model_type in ("gpt2", "gemma", "gemma2", "gemma3", "gemma3_text", "gemma4", "gemma4_text")
    attention_bias = f.bool("attention_bias")
    qkv_bias = attention_bias or model_type in ("qwen2", "qwen2_moe", "gpt2")
    o_bias = (attention_bias and model_type not in ("qwen2", "qwen2_moe")) or model_type == "gpt2"
    if model_type in ("falcon", "RefinedWeb", "RefinedWebModel"):
        qkv_bias = o_bias = f.bool("bias")
    fields = dict(
        name=name, model_type=model_type, num_layers=num_layers, num_heads=num_heads,
        num_kv_heads=num_kv_heads, head_dim=head_dim, hidden_size=hidden, vocab_size=vocab,
        intermediate_size=intermediate, layer_kinds=layer_kinds, sliding_window=window,
        attention_chunk_size=chunk, **mla, **moe,
        tie_word_embeddings=bool(tie), qkv_bias=qkv_bias, o_bias=o_bias,
        mlp_gated=not classic and model_type != "nemotron_h", mlp_bias=model_type in ("gpt2", "gpt_oss"),
        layernorm_bias=model_type in _LAYERNORM,
        norms_per_layer=4 if model_type in ("gemma2", "gemma3", "gemma3_text") else 2,
        learned_positions=f.int("n_positions", default=0, minimum=0) if model_type == "gpt2" else 0,
        attention_sinks=model_type == "gpt_oss",
        mtp_layers=f.int("num_nextn_predict_layers", default=0, minimum=0),
        dtype=dtype.removeprefix("torch."),
        max_position_embeddings=f.int("max_position_embeddings", "n_positions", "seq_length", required=False),
        source=source, missing_fields=tuple(missing),
    )
    return ModelSpec(**{**fields, **extra})
