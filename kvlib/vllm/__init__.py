"""vLLM's KV-cache accounting: read its startup log, predict its figures, check one against the other.

One sub-package, one module per job:

- ``log``: ``parse_log(text)`` -> one ``EngineStart`` per engine start, every
  figure as printed (a table of (pattern, handler) pairs, one per line format), and
  whether the pool was estimated or measured (0.34); ``parse_stats_line`` the periodic
  stats line of a running engine (running, waiting, KV usage, prefix-cache hit rate);
- ``engine``: what depends on the engine and release, from each release's source (``BOUNDARIES``, the
  release table; ``release_rules``, ``default_utilization``, ``default_block_size``, ``budget_rounds_up``,
  ``parse_version``, ``DEFAULT_BLOCK_SIZE``); a release newer than ``NEWEST_CHECKED_RELEASE`` gets its
  rules with an ``UncheckedReleaseWarning``;
- ``page``: one layer's page on one rank (``kv_element_bytes``, ``layer_page_bytes``);
- ``layout``: the block and stages on one rank, from those pages (``bytes_per_block``,
  ``pp_layer_split``, ``kv_cache_groups``, ``plan_layouts``);
- ``hybrid``: pages when layers differ (``page_plan``): a Mamba2 / Gated DeltaNet
  state page, the attention block grown to cover it and the state padded, attention
  kinds of different geometry given one page, the state pages a request holds;
- ``tokens``: from blocks to the printed token and concurrency figures;
- ``window``: a sliding-window or chunked group's worst case (start-up, admission, "Maximum
  concurrency", with the release's tokens in flight) against the blocks a running request holds once the
  skipped ones are freed;
- ``predict``: backwards, ``predict_from_log(start, spec)`` -> the block/token
  range vLLM should print from the available GiB it printed (per pipeline
  stage when the log says which rank printed what), and whether it did;
- ``pool``: forwards, ``forecast_pool(model, total_gpu_memory_bytes, version=...)``
  -> every part (weights as stored, torch peak, non-torch, CUDA graphs; 0.34's
  margin) and the pool and tokens to expect before starting vLLM, estimated
  or measured as the release sizes it; ``predict_pool`` when the parts are known;
- ``admission``: ``planned_bytes_per_sequence(spec, context)`` -> what vLLM reserves for one
  request (its worst-case blocks x the bytes of a block), the divisor of "Maximum concurrency";
- ``report``: ``report(start, prediction)`` -> the dict ``kvlib vllm-log --json`` prints;
- ``bundled``: the course's real logs (``bundled_logs()``, ``read_bundled_log(name)``);
- ``built``: a 0.34 start's lines *built* from the forecast in 0.34's log formats, for reading
  the format where no real 0.34 log was found -- never evidence for a prediction.

These model vLLM's GPU workers. A reader for another backend (the CPU
engine's log lines, its own pool rule) goes in its own module beside these,
reusing ``engine``, ``layout`` and ``tokens``. The CLI (``kvlib vllm-log``)
lives in ``kvlib.cli``.

Taught in ch08_vllm_lab (the pool itself in ch04_pool_paging).

>>> from kvlib import load_model
>>> [start] = parse_log(read_bundled_log("12"))
>>> p = predict_from_log(start, load_model("llama-2-7b"))
>>> start.num_gpu_blocks, (p.blocks_min, p.blocks_max), p.agrees
(7191, (7190, 7191), True)
"""

from __future__ import annotations

from .bundled import bundled_logs, read_bundled_log, read_log_file
from .cpu_runs import CpuEngineRun, cpu_engine_runs, read_cpu_engine_run
from .engine import (
    DEFAULT_BLOCK_SIZE,
    NEWEST_CHECKED_RELEASE,
    UncheckedReleaseWarning,
    VllmLogError,
    budget_rounds_up,
    default_block_size,
    default_utilization,
    parse_version,
)
from .layout import KV_CACHE_DTYPES, bytes_per_block, kv_cache_groups, kv_element_bytes, layer_page_bytes, \
    pp_layer_split
from .log import EngineStart, StatsLine, gib_window, parse_log, parse_stats_line, stats_lines
from . import window  # noqa: F401 -- the worst-case vs held sliding-window rules (ch04_pool_paging)
from . import built   # noqa: F401 -- a 0.34 start built from the forecast, in 0.34's formats (ch08_vllm_lab)
from .engine import ReleaseRules, batch_defaults, release_rules
from .pool import Forecast, PoolForecast, PoolPart, forecast_pool, predict_pool
from .predict import LogPrediction, predict_from_log
from .report import report

__all__ = [
    "VllmLogError", "EngineStart", "parse_log", "parse_version", "gib_window", "StatsLine", "parse_stats_line",
    "stats_lines",
    "LogPrediction", "predict_from_log", "PoolForecast", "predict_pool", "Forecast", "PoolPart", "forecast_pool",
    "ReleaseRules", "release_rules", "batch_defaults",
    "DEFAULT_BLOCK_SIZE", "default_block_size", "NEWEST_CHECKED_RELEASE", "UncheckedReleaseWarning",
    "default_utilization", "budget_rounds_up", "kv_element_bytes", "layer_page_bytes",
    "bytes_per_block", "pp_layer_split", "kv_cache_groups", "KV_CACHE_DTYPES", "report", "read_log_file",
    "bundled_logs", "read_bundled_log", "CpuEngineRun", "cpu_engine_runs", "read_cpu_engine_run",
]
