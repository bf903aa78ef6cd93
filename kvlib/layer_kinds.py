"""What one layer of a model keeps: a KV cache, a constant state per sequence, or nothing.

The attention kinds keep a KV cache per token (``full``, ``sliding``, ``chunked``); the state kinds a
constant state per sequence (``mamba2``: Nemotron-H; ``gated_deltanet``: Qwen3-Next); ``none`` neither.
``kvlib.spec`` reads each layer's kind from a config (``ModelSpec.layer_kinds``) and re-exports these names.
"""

from __future__ import annotations

__all__ = ["FULL", "SLIDING", "CHUNKED", "NO_KV", "MAMBA2", "GATED_DELTANET", "LAYER_KINDS", "ATTENTION_KINDS",
           "STATE_KINDS"]

FULL, SLIDING, CHUNKED, NO_KV = "full", "sliding", "chunked", "none"
MAMBA2, GATED_DELTANET = "mamba2", "gated_deltanet"
LAYER_KINDS = (FULL, SLIDING, CHUNKED, NO_KV, MAMBA2, GATED_DELTANET)
ATTENTION_KINDS = (FULL, SLIDING, CHUNKED)
STATE_KINDS = (MAMBA2, GATED_DELTANET)
