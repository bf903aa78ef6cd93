"""The serving assumptions kvlib's reports start from, each defined once.

``kvlib info`` and the planner (``kvlib plan``) share them; every one is a
parameter there, and the reports print the value used. Taught in
ch04_pool_paging and ch07_capacity_plan.
"""

from __future__ import annotations

from .units import GB
from .vllm.engine import default_utilization

__all__ = ["DEFAULT_UTILIZATION", "DEFAULT_OVERHEAD_BYTES"]

# vLLM's default for estimate-based sizing, the rule these reports apply (ceil(M u) - W - O): 0.92 from 0.20, and
# still 0.34's without its extensible KV cache (measured after warmup at 1.0: kvlib.vllm.forecast_pool)
DEFAULT_UTILIZATION = default_utilization(extensible=False)
DEFAULT_OVERHEAD_BYTES = 3 * GB                # per GPU: activations and other allocations ([chains], [kv-math] s8)
