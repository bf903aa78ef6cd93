"""The vLLM CPU engine's costs: `./dev.sh engine` on an empty venv (time, disk) and one engine start.

Run through ``benchmarks/run.py --only engine`` (not part of the default run: it installs
3.4 GB and starts the engine). run.py keeps this section of BENCHMARKS.md as it is when
another run leaves it out.
"""

from __future__ import annotations

import datetime
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))
from common import md_table, median  # noqa: E402

from kvlib import load_model  # noqa: E402
from kvlib.vllm import parse_log  # noqa: E402
from kvlib.vllm.cpu import predict_cpu_from_log  # noqa: E402
from kvlib.vllm.cpu_engine import run_engine  # noqa: E402

HEADING = "## vLLM CPU engine (`./dev.sh engine`, tests/test_engine_live.py)"
FIXTURES = ROOT / "tests" / "fixtures" / "vllm_cpu"


def _du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def _fresh_engine_setup(repeats: int) -> tuple[float, int, bool, list]:
    """Time `./dev.sh engine` in a copy of the checkout, measure the venv, then start the engine `repeats` times."""
    with tempfile.TemporaryDirectory(prefix="kv-engine-setup-") as tmp:
        copy = Path(tmp) / "repo"
        shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(".venv", ".venv-engine", ".git", "artefacts",
                                                                   "workspace"))
        t0 = time.perf_counter()
        proc = subprocess.run(["bash", str(copy / "dev.sh"), "engine"], cwd=copy, capture_output=True, text=True)
        took = time.perf_counter() - t0
        venv = copy / ".venv-engine"
        size = _du(venv) if venv.exists() else 0
        runs = []
        if proc.returncode == 0:
            # The first start follows the install (cold file cache); the others reuse the warm venv.
            runs = [run_engine(FIXTURES / "llama_gqa" / "config.json", 1, 1000, timeout_s=600,
                               python=venv / "bin" / "python") for _ in range(max(1, repeats))]
    return took, size, proc.returncode == 0, runs


def _fixture_agreement() -> tuple[int, int]:
    logs = sorted(FIXTURES.glob("*/*.log"))
    agree = 0
    for log in logs:
        [start] = parse_log(log.read_text())
        agree += bool(predict_cpu_from_log(start, load_model(str(log.parent / "config.json"))).agrees)
    return agree, len(logs)


def bench_engine(args) -> str:
    took, size, ok, runs = _fresh_engine_setup(args.repeats)
    rows = [("`./dev.sh engine` on an empty venv" + ("" if ok else " (FAILED)"), f"{took:.0f} s",
             f"{size / 1e9:.2f} GB ({size / 2**30:.2f} GiB)")]
    done = [r for r in runs if r.ok]
    if done:
        rows.append((f"engine start, tiny GQA model at 1 GiB, max_model_len 1000, model build included "
                     f"(median of {len(done)}; range {min(r.seconds for r in done):.0f}-"
                     f"{max(r.seconds for r in done):.0f} s)", f"{median([r.seconds for r in done]):.0f} s", "-"))
        rows.append(("of which: building the random-weight model",
                     f"{median([r.build_seconds for r in done]):.0f} s", "-"))
    agree, total = _fixture_agreement()
    return "\n".join([
        HEADING, "",
        f"Measured {datetime.date.today().isoformat()} on {os.cpu_count()} cores ({platform.machine()}), "
        f"vLLM's CPU build as pinned in tools/engine-requirements.txt; "
        f"`python benchmarks/run.py --only engine --repeats {args.repeats}`; load average at the end "
        f"{os.getloadavg()[0]:.1f} (other jobs on the machine slow the install and the starts).", "",
        md_table(["what", "time", "disk"], rows), "",
        f"kvlib's CPU-path prediction agrees to the token with **{agree} of {total}** committed engine starts "
        f"(tests/fixtures/vllm_cpu). CI adds the install plus tests/test_engine_live.py (two starts). "
        "Pip reads the machine's wheel caches; a cold download takes longer."])
