"""The slip catalogue: the mistakes learners make, recomputed.

A wrong answer is recognised by recomputing the quantity *with the slip
applied* and comparing, never by guessing from a ratio. The autograder's
checks, the chapters' instant checks and the drills all call ``diagnose``.

>>> d = diagnose("kv_bytes_per_token", 524288, layers=32, kv_heads=8, head_dim=128,
...              dtype_bytes=2, num_heads=32)
>>> d.correct, d.slip.key
(False, 'query_heads')
>>> print(d.message)
4x too large: you multiplied by the query heads (num_attention_heads = 32) instead of the KV heads (num_key_value_heads = 8).

The engine (``kvcoach/slips/engine.py``) matches and words; each topic module
declares its slips' words and its quantities, and joins the catalogue through
``register`` in the order of ``TOPICS`` below. To add a chapter's slips: its
topic module (or a new one, added to ``TOPICS``), each slip's two texts in its
``SLIP_WORDS``, each quantity in its ``QUANTITIES``; a key declared twice is
refused at import.
"""

from __future__ import annotations

from .engine import (COMBINED, COUNT_SLIPS, DESCRIPTIVE, GENERAL, PREFIX_MIX_KEYS, QUANTITIES, ROUNDING_KEYS, SLIPS,
                     TIE_RULES, UNROUNDED, VARIANT, VARIANT_SLIPS, Diagnosis, Slip, base_key, diagnose, expected_value,
                     general, generic_slips, matching, matching_variants, message, ratio_text, register, rounding_slips,
                     ruled_out, unrounded, variants)
# the engine's helpers the chapters' shared test helpers call (tests/chapter_checks.py)
from .engine import _VARIANTS, _matches, close as _close  # noqa: F401
from . import (capacity_plan, crossover, disagg_transfer, eagle_mtp, expert_parallel, generic, gqa_tp, hybrid_state,
               indexer_cache, kv_formula, long_ttft, low_precision_compute, mla, moe_decode, plan_mode, pool_paging,
               prefix_reuse, requests_concurrency, serving, state_sparsity, vllm_lab)

__all__ = ["COMBINED", "COUNT_SLIPS", "DESCRIPTIVE", "GENERAL", "PREFIX_MIX_KEYS", "QUANTITIES", "ROUNDING_KEYS",
           "SLIPS", "TIE_RULES", "UNROUNDED", "VARIANT", "VARIANT_SLIPS", "Diagnosis", "Slip", "TOPICS", "base_key",
           "diagnose", "expected_value", "general", "generic_slips", "matching", "matching_variants", "message",
           "ratio_text", "rounding_slips", "ruled_out", "unrounded", "variants"]

#: The topic modules, in the order their declarations join the catalogue (one home per slip and quantity).
TOPICS = (generic, kv_formula, gqa_tp, mla, pool_paging, prefix_reuse, crossover, capacity_plan, vllm_lab, serving,
          state_sparsity, plan_mode, moe_decode, requests_concurrency, disagg_transfer, long_ttft, expert_parallel,
          eagle_mtp, low_precision_compute, hybrid_state, indexer_cache)
for _topic in TOPICS:
    register(_topic)
del _topic
