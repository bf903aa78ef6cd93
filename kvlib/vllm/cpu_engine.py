"""Start vLLM's CPU engine on a tiny model and capture its KV-cache lines; never hangs, works without the engine.

``run_engine(config, kv_space_gib, max_model_len, timeout_s)`` builds a random-weight
model from ``config`` in a temporary folder and starts it in vLLM's ``LLM(...)`` on the
CPU, in the engine venv (``./dev.sh engine`` makes ``.venv-engine/``; or
``KV_COURSE_ENGINE_PYTHON`` names its Python). Everything runs in one child process
(``tools/engine_child.py``, by path) in its own process group; when ``timeout_s`` passes (or the caller is interrupted) the whole
group is killed. The result holds the log lines and the parsed KV figures
(``kvlib.vllm.parse_log``), ready for ``kvlib.vllm.cpu.predict_cpu_from_log``.

Without the engine it does not fail: it returns a one-line ``message`` and a committed
log of the bundled start closest to the request (MLA, Gated DeltaNet or Mamba2 state hybrid,
sliding-window hybrid or plain attention; ``kvlib/data/vllm_cpu``), with that start's own config and settings.

Standard library only (the course's venv has no vLLM). Taught in ch08_vllm_lab.

>>> run = run_engine({"model_type": "llama", "num_hidden_layers": 2}, 1, 1000, python="/no/engine/python")
>>> run.ran, run.source, run.start.gpu_kv_cache_tokens
(False, 'bundled:llama_gqa', 1365250)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from .bundled import bundled_cpu_start
from .engine import VllmLogError
from .log import EngineStart, parse_log

__all__ = ["EngineRun", "engine_python", "run_engine", "DEFAULT_TIMEOUT_S", "ENGINE_PYTHON_ENV"]

ENGINE_PYTHON_ENV = "KV_COURSE_ENGINE_PYTHON"
DEFAULT_TIMEOUT_S = 300     # a start takes ~40 s on 2 idle cores, ~100 s on busy ones, plus ~10 s to build
_REPO = Path(__file__).resolve().parents[2]
# Run by path with the engine venv's Python; it lives outside kvlib because it imports torch and vLLM.
_CHILD = _REPO / "tools" / "engine_child.py"
_BUILT, _READY = "KVCOURSE-ENGINE-BUILT", "KVCOURSE-ENGINE-READY"   # engine_child.py's markers
_BUNDLED_SPACE_GIB, _BUNDLED_MAX_MODEL_LEN = 1, 1000                # the bundled starts' settings


@dataclass(frozen=True)
class EngineRun:
    """One engine start (``ran``), or the committed log shown instead (``source`` 'bundled:<name>').

    ``start`` is the parsed start (None when the log holds none); ``engine_reported`` what the
    engine itself held (block size, block count, token capacity), None unless it got that far.
    """

    ran: bool
    message: str
    source: str                     # 'engine' | 'bundled:<name>'
    config: dict                    # the config of the model the log is for
    kv_space_gib: int
    max_model_len: int
    log_lines: tuple = field(repr=False)
    start: EngineStart | None = field(repr=False, default=None)
    engine_reported: dict | None = None
    returncode: int | None = None
    timed_out: bool = False
    build_seconds: float | None = None
    seconds: float | None = None    # wall time of the child process, build included

    @property
    def ok(self) -> bool:
        """Whether the log holds the KV-cache figures (a finished start, or the bundled one)."""
        return self.start is not None and self.start.gpu_kv_cache_tokens is not None

    @property
    def log_text(self) -> str:
        return "\n".join(self.log_lines)


def engine_python() -> Path | None:
    """The engine venv's Python: ``$KV_COURSE_ENGINE_PYTHON`` if set, else ``.venv-engine/bin/python``
    in the checkout; None when that file is not there."""
    named = os.environ.get(ENGINE_PYTHON_ENV)
    path = Path(named) if named else _REPO / ".venv-engine" / "bin" / "python"
    return path if path.is_file() and os.access(path, os.X_OK) else None


def _read_config(config) -> dict:
    if isinstance(config, dict):
        data = dict(config)
    else:
        path = Path(config)
        if path.is_dir():
            path = path / "config.json"
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise VllmLogError(f"config: cannot read {path}: {exc}") from None
    if not isinstance(data, dict) or not data.get("model_type"):
        raise VllmLogError("config: a transformers config.json with a 'model_type' is needed")
    return data


def _check_int(name: str, value) -> int:
    if type(value) is not int or value < 1:
        raise VllmLogError(f"{name} must be a positive whole number, got {value!r}")
    return value


def _closest_bundled(config: dict) -> str:
    if config.get("kv_lora_rank"):
        return "deepseek_mla"
    kinds = config.get("layer_types") or config.get("layers_block_type") or []
    if config.get("linear_num_value_heads") or "linear_attention" in kinds and not config.get("mamba_num_heads"):
        return "qwen3_next_gdn"          # Gated DeltaNet state layers
    if config.get("mamba_num_heads") or config.get("hybrid_override_pattern"):
        return "nemotron_h_pattern"      # Mamba2 state layers
    if config.get("sliding_window") and (config.get("layer_types") or config.get("use_sliding_window", True)):
        return "gemma2_hybrid"
    return "llama_gqa"


def _cpu_start(text: str) -> EngineStart | None:
    starts = parse_log(text)
    cpu = [s for s in starts if s.device == "cpu"]
    return (cpu or starts or [None])[-1]


def _bundled(config: dict, why: str) -> EngineRun:
    name = _closest_bundled(config)
    config_path, text = bundled_cpu_start(name)
    return EngineRun(
        ran=False, source=f"bundled:{name}", config=json.loads(config_path.read_text()),
        kv_space_gib=_BUNDLED_SPACE_GIB, max_model_len=_BUNDLED_MAX_MODEL_LEN,
        log_lines=tuple(text.splitlines()), start=_cpu_start(text),
        message=(f"{why}: showing a committed vLLM 0.32.0 CPU log of the bundled '{name}' model at "
                 f"{_BUNDLED_SPACE_GIB} GiB, max_model_len {_BUNDLED_MAX_MODEL_LEN}, instead"))


def _kill_group(proc: subprocess.Popen) -> None:
    # The engine core and its worker are the child's children, in its process group.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_process(cmd: list, env: dict, log_path: Path, timeout_s: float) -> tuple[int | None, bool, float]:
    """Run ``cmd`` in a new process group, stdout + stderr to ``log_path``; kill the group on timeout.

    Returns (exit status or None, timed out, seconds). The group is killed on every way out,
    so no engine process outlives the call.
    """
    t0 = time.monotonic()
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True)
        timed_out = False
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out, rc = True, None
        finally:
            _kill_group(proc)
            proc.wait()
    return rc, timed_out, time.monotonic() - t0


def engine_env(kv_space_gib: int) -> dict:
    """The child's environment: the KV space, and nothing that reaches the network."""
    return dict(os.environ, VLLM_CPU_KVCACHE_SPACE=str(kv_space_gib), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
                VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1")


def run_engine(config, kv_space_gib: int, max_model_len: int, timeout_s: float = DEFAULT_TIMEOUT_S, *,
               llm_kwargs: dict | None = None, model_dir=None, python=None) -> EngineRun:
    """Start vLLM's CPU engine on a random-weight model of ``config`` and return its log and KV figures.

    ``config``: a config dict, a config.json path or a model folder. ``kv_space_gib``: the
    ``VLLM_CPU_KVCACHE_SPACE`` (whole GiB). ``timeout_s``: the hard limit for build and start
    together; past it the process group is killed and ``timed_out`` is True. ``llm_kwargs``:
    more ``LLM(...)`` arguments (e.g. ``{"kv_cache_dtype": "fp8"}``). ``model_dir``: keep the
    built model there (reused when it already holds weights) instead of a temporary folder.
    ``python``: the engine venv's Python (default: ``engine_python()``).

    Without the engine venv: the bundled log closest to ``config`` and a one-line ``message``.
    A start that fails or times out returns its log and ``ok`` False; nothing raises but
    bad arguments (``VllmLogError``).
    """
    data = _read_config(config)
    _check_int("kv_space_gib", kv_space_gib)
    _check_int("max_model_len", max_model_len)
    if not isinstance(timeout_s, (int, float)) or timeout_s <= 0:
        raise VllmLogError(f"timeout_s must be a positive number of seconds, got {timeout_s!r}")
    exe = Path(python) if python is not None else engine_python()
    if exe is None or not exe.is_file():
        where = python or os.environ.get(ENGINE_PYTHON_ENV) or ".venv-engine/"
        return _bundled(data, f"vLLM's CPU engine is not installed (no {where}; ./dev.sh engine makes it)")
    if not _CHILD.is_file():
        return _bundled(data, f"the engine runner needs the course checkout ({_CHILD.name} not found beside kvlib)")
    with tempfile.TemporaryDirectory(prefix="kv-engine-run-") as tmp:
        folder = Path(model_dir) if model_dir is not None else Path(tmp) / "model"
        config_path = Path(tmp) / "config.json"
        config_path.write_text(json.dumps(data))
        log_path = Path(tmp) / "engine.log"
        cmd = [str(exe), str(_CHILD), "--config", str(config_path), "--model-dir", str(folder),
               "--max-model-len", str(max_model_len), "--llm-kwargs", json.dumps(llm_kwargs or {})]
        rc, timed_out, seconds = run_process(cmd, engine_env(kv_space_gib), log_path, timeout_s)
        text = log_path.read_bytes().decode("utf-8", errors="replace")
        built = folder / "config.json"
        used_config = json.loads(built.read_text()) if built.is_file() else data
    lines = tuple(text.splitlines())
    reported, build_seconds = None, None
    for line in lines:
        if line.startswith(_READY):
            reported = json.loads(line[len(_READY):])
        elif line.startswith(_BUILT):
            build_seconds = json.loads(line[len(_BUILT):]).get("seconds")
    start = _cpu_start(text)
    if timed_out:
        message = f"the engine did not finish within {timeout_s:g} s; stopped (its log so far is kept)"
    elif rc != 0 or reported is None:
        last = next((line for line in reversed(lines) if line.strip()), "no output")
        message = f"the engine failed (exit {rc}): {last.strip()[:200]}"
    else:
        message = f"vLLM's CPU engine started in {seconds:.0f} s at {kv_space_gib} GiB, max_model_len {max_model_len}"
    return EngineRun(ran=True, message=message, source="engine", config=used_config, kv_space_gib=kv_space_gib,
                     max_model_len=max_model_len, log_lines=lines, start=start, engine_reported=reported,
                     returncode=rc, timed_out=timed_out, build_seconds=build_seconds, seconds=seconds)
