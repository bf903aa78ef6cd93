"""The serving assumptions kvlib's reports start from, each defined once.

``kvlib info`` and the planner (``kvlib plan``) share them; every one is a
parameter there, and the reports print the value used. Taught in
ch04_pool_paging and ch07_capacity_plan.
"""

from __future__ import annotations

from .units import GB
from .vllm.engine import default_utilization

__all__ = ["DEFAULT_UTILIZATION", "DEFAULT_OVERHEAD_BYTES"]

DEFAULT_UTILIZATION = default_utilization()   # vLLM's default for the newest release (0.92 from 0.20)
DEFAULT_OVERHEAD_BYTES = 3 * GB                # per GPU: activations and other allocations (seed 000, seed 003 s8)
