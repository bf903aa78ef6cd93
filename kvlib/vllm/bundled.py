"""The real vLLM startup logs shipped with kvlib (``kvlib/data/vllm_logs``, see its PROVENANCE.md), and reading a log file.

Also five vLLM CPU-engine starts of tiny models (``kvlib/data/vllm_cpu``): ``bundled_cpu_starts()``,
``bundled_cpu_start(name)`` -> (config path, log text). And real periodic stats lines of running engines
(``kvlib/data/vllm_stats``): ``bundled_stats_logs()``, ``read_bundled_stats_log(name)``.

Taught in ch08_vllm_lab.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from .engine import VllmLogError

__all__ = ["bundled_logs", "read_bundled_log", "read_log_file", "bundled_cpu_starts", "bundled_cpu_start",
           "bundled_stats_logs", "read_bundled_stats_log"]


def _logs_dir():
    return resources.files("kvlib") / "data" / "vllm_logs"


def bundled_logs() -> list[str]:
    """Names of the real vLLM logs shipped with kvlib ('02', '04', ...)."""
    return sorted(p.name[:-4] for p in _logs_dir().iterdir() if p.name.endswith(".log"))


def read_bundled_log(name: str) -> str:
    """The text of a bundled log ('07' or '07.log')."""
    stem = str(name).removesuffix(".log")
    if stem not in bundled_logs():
        raise VllmLogError(f"no bundled vLLM log {name!r} (have: {', '.join(bundled_logs())})")
    return (_logs_dir() / f"{stem}.log").read_text(encoding="utf-8")


def _cpu_dir():
    return resources.files("kvlib") / "data" / "vllm_cpu"


def bundled_cpu_starts() -> list[str]:
    """Names of the bundled vLLM CPU-engine starts ('deepseek_mla', 'gemma2_hybrid', 'llama_gqa', ...)."""
    return sorted(p.name for p in _cpu_dir().iterdir() if p.is_dir())


def bundled_cpu_start(name: str) -> tuple[Path, str]:
    """(path of the config.json the engine read, the start's log text) for a bundled CPU start."""
    if name not in bundled_cpu_starts():
        raise VllmLogError(f"no bundled CPU start {name!r} (have: {', '.join(bundled_cpu_starts())})")
    folder = _cpu_dir() / name
    return Path(str(folder / "config.json")), (folder / "kv1g_len1000.log").read_text(encoding="utf-8")


def read_log_file(path) -> str:
    """Read a log file as text (undecodable bytes replaced); one-line VllmLogError if unreadable."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise VllmLogError(f"cannot read {path}: {exc.strerror or type(exc).__name__}") from None
    return raw.decode("utf-8", errors="replace")


def _stats_dir():
    return resources.files("kvlib") / "data" / "vllm_stats"


def bundled_stats_logs() -> dict:
    """The real periodic stats lines shipped with kvlib (``kvlib/data/vllm_stats``, see its PROVENANCE.md):
    ``{name: {"thread", "url", "posted", "source_tag", "engine"}}``."""
    import json
    return json.loads((_stats_dir() / "sources.json").read_text(encoding="utf-8"))


def read_bundled_stats_log(name: str) -> str:
    """The text of a bundled stats-line excerpt ('vllm-43295')."""
    stem = str(name).removesuffix(".log")
    if stem not in bundled_stats_logs():
        raise VllmLogError(f"no bundled stats lines {name!r} (have: {', '.join(bundled_stats_logs())})")
    return (_stats_dir() / f"{stem}.log").read_text(encoding="utf-8")
