"""Mutation score of kvlib: mutmut over the whole package against the fast kvlib tests.

    .venv/bin/python benchmarks/mutation.py [--only formulas config vllm/log ...] [--max-children 2]
                                            [--no-write] [--keep]

Installs nothing: ``pip install -r benchmarks/requirements-mutation.txt`` first
(``./dev.sh mutation`` does both). Not run by CI (slow: about an hour on 2 cores
for the whole package).

How: the package, the fast kvlib tests (``FAST_TESTS``: no notebooks, grading,
browser or build tests) and a ``[tool.mutmut]`` section are copied into a
scratch folder (``.mutation/``, git-ignored), so the checkout is never touched;
mutmut mutates every function body of ``kvlib/`` (pointing it at one file
fails on kvlib's own imports, so ``--only`` restricts what is *mutated*, never
what is copied) and runs, for each mutant, the fast tests that call the
mutated function. ``--only`` takes module paths under ``kvlib/`` without
``.py`` ('formulas', 'vllm/log', 'cli/*').

Tests that run kvlib in a subprocess (the CLI tests that spawn ``python -m
kvlib``) are invisible to mutmut's per-test tracing, so they kill nothing
here; the in-process CLI tests do. ``DESELECT`` lists the tests left out of
mutation runs and why.

Speed: each mutant runs the tests that reach it with ``-x``; the scratch
conftest runs the mutated module's own test file first (``OWN_TESTS_FIRST``),
so most kills end within its tests. Survivors pay for every reaching test, so
closing gaps also speeds the next run. After adding tests, ``--keep
--rerun-survivors`` checks only the survivors and the mutants no test reached
again (the test files are re-copied, mutmut traces only the new tests, every
other verdict is kept);
``--keep`` alone resumes a stopped run.

The report (per module: killed, survived, no tests, timeout, score) is
written into BENCHMARKS.md between the ``MUTATION_BEGIN`` / ``MUTATION_END``
markers, with the date; ``benchmarks/run.py`` keeps that section when it
rewrites the file. Modules not mutated in this run keep their last row.
The score is killed / (killed + survived); "no tests" and timeouts are
listed apart (a timeout is a mutant that made the tests loop: a kill in
mutmut's own score). Equivalent mutants (no behaviour change) are listed
with reasons in ``benchmarks/mutation-equivalent.md`` and counted apart.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WORK = ROOT / ".mutation"   # --workdir
BENCHMARKS = ROOT / "BENCHMARKS.md"
EQUIVALENT = HERE / "mutation-equivalent.md"
BEGIN, END = "<!-- MUTATION_BEGIN -->", "<!-- MUTATION_END -->"

# The fast kvlib tests: in-process, seconds each (the quick tier's kvlib part).
FAST_TESTS = [
    "tests/test_formulas.py", "tests/test_units.py", "tests/test_dtypes.py", "tests/test_gpus.py",
    "tests/test_config.py", "tests/test_config_wild.py", "tests/test_spec.py", "tests/test_params.py",
    "tests/test_slips.py", "tests/test_planner.py", "tests/test_roofline.py", "tests/test_alloc_sim.py",
    "tests/test_prefix_cache.py", "tests/test_offload.py", "tests/test_drills.py", "tests/test_info.py",
    "tests/test_cli.py", "tests/test_argtypes.py", "tests/test_properties.py",
    "tests/test_vllm.py", "tests/test_vllm_log.py", "tests/test_vllm_engine.py", "tests/test_vllm_layout.py",
    "tests/test_vllm_tokens.py", "tests/test_vllm_predict.py", "tests/test_vllm_pool.py",
    "tests/test_vllm_report.py", "tests/test_vllm_mismatch.py", "tests/test_vllm_cli.py", "tests/test_vllm_pp.py",
    "tests/test_vllm_bundled.py", "tests/test_vllm_cpu_runs.py", "tests/test_vllm_cpu.py",
    "tests/test_sglang.py", "tests/test_sglang_log.py",
]
# Data the fast tests read, copied beside them: the real vLLM CPU engine starts that tests/test_vllm_cpu.py
# predicts block for block, and the SGLang starts whose pools tests/test_sglang_log.py predicts.
FIXTURES = ["tests/fixtures/vllm_cpu", "tests/fixtures/sglang_logs"]
# Left out of mutation runs (still in the quick tier):
DESELECT = {
    # 10 s of random text through the whole log reader: every mutant of vllm/log.py would pay it;
    # the reader's behaviour is pinned by the line-by-line tests of tests/test_vllm_log.py.
    "tests/test_vllm.py::test_parser_never_raises_anything_but_vllm_log_error":
        "fuzz test, 10 s per mutant; never-raises is a robustness property, not arithmetic",
}

# Appended to the scratch copy's tests/conftest.py (never to the checkout's): runs the mutated
# module's own test file first, then its family's (tests/test_vllm*.py for kvlib/vllm/). Only the
# order changes -- every test that covers the mutant still runs for a survivor -- but mutmut runs
# each mutant's tests with ``-x``, so a mutant its own module's tests kill stops after them
# instead of after the whole set of tests that reach it.
OWN_TESTS_FIRST = '''

def pytest_collection_modifyitems(session, config, items):  # added by benchmarks/mutation.py
    import os
    mutant = os.environ.get("MUTANT_UNDER_TEST", "")
    if "__mutmut_" not in mutant:
        return
    module = mutant.split(".x_", 1)[0].split(".x\u01c1", 1)[0]        # kvlib.vllm.predict
    own = "tests/test_" + "_".join(module.split(".")[1:]) + ".py"     # tests/test_vllm_predict.py
    family = "tests/test_" + module.split(".")[1]                     # tests/test_vllm*.py, tests/test_config*.py
    items.sort(key=lambda item: 0 if item.nodeid.startswith(own) else 1 if item.nodeid.startswith(family) else 2)
'''

STATUS = {1: "killed", 3: "killed", 0: "survived", 5: "no tests", 33: "no tests", 34: "skipped",
          36: "timeout", 24: "timeout", -24: "timeout", 152: "timeout", 255: "timeout", None: "not checked"}


def _fast_tests() -> list[str]:
    return [t for t in FAST_TESTS if (ROOT / t).is_file()]


def _mutmut_config(only: list[str] | None, max_stack_depth: int) -> str:
    tests = _fast_tests()
    lines = ["", "[tool.mutmut]", 'source_paths = ["kvlib/"]',
             "pytest_add_cli_args_test_selection = " + json.dumps(tests + ["kvlib"]),
             # the repo's addopts collect doctests from kvlib/: keep them (they are tests too), and
             # leave out the fuzz test (DESELECT)
             "pytest_add_cli_args = " + json.dumps(["-p", "no:randomly", "-q"]
                                                     + [f"--deselect={t}" for t in DESELECT]),
             # a timeout counts as a kill; mutmut allows (estimate + 1 s) x multiplier x 2 CPU seconds,
             # and a mutant that loops spends all of it: 4 keeps a margin of 8x over the clean run.
             "timeout_multiplier = 4.0",
             "use_git_change_detection = false",
             f"max_stack_depth = {max_stack_depth}"]
    if only:
        lines.append("only_mutate = " + json.dumps([f"kvlib/{m}.py" for m in only]))
    return "\n".join(lines) + "\n"


def _copy_tests() -> None:
    """The fast tests (as they are now) into the scratch folder; mutmut copies them on into mutants/."""
    for name in ["conftest.py"] + [Path(t).name for t in _fast_tests()]:
        shutil.copy2(ROOT / "tests" / name, WORK / "tests" / name)
    for folder in FIXTURES:
        shutil.copytree(ROOT / folder, WORK / folder, dirs_exist_ok=True)
    with open(WORK / "tests" / "conftest.py", "a") as conftest:
        conftest.write(OWN_TESTS_FIRST)


def _prepare(only, max_stack_depth: int) -> None:
    if WORK.exists():
        shutil.rmtree(WORK)
    (WORK / "tests").mkdir(parents=True)
    shutil.copytree(ROOT / "kvlib", WORK / "kvlib", ignore=shutil.ignore_patterns("__pycache__"))
    _copy_tests()
    text = (ROOT / "pyproject.toml").read_text()
    # pytest's testpaths would collect tests/ and kvlib/; mutmut passes the test selection itself.
    (WORK / "pyproject.toml").write_text(text + _mutmut_config(only, max_stack_depth))


def _meta_files():
    return sorted((WORK / "mutants" / "kvlib").rglob("*.py.meta"))


def module_counts() -> dict:
    """{module: Counter(status)} from mutmut's per-file result files."""
    out = {}
    for meta in _meta_files():
        data = json.loads(meta.read_text())
        module = str(meta.relative_to(WORK / "mutants")).removesuffix(".py.meta")
        counts = Counter(STATUS.get(code, "suspicious") for code in data.get("exit_code_by_key", {}).values())
        if counts:
            out[module] = counts
    return out


def survivors() -> dict:
    out = {}
    for meta in _meta_files():
        data = json.loads(meta.read_text())
        names = [k for k, code in data.get("exit_code_by_key", {}).items()
                 if STATUS.get(code, "suspicious") not in ("killed", "not checked")]
        if names:
            module = str(meta.relative_to(WORK / "mutants")).removesuffix(".py.meta")
            out[module] = {k: STATUS.get(data["exit_code_by_key"][k], "suspicious") for k in names}
    return out


def _not_checked() -> list:
    """Mutants generated but not yet run (a run stopped early)."""
    return sorted(k for meta in _meta_files()
                  for k, code in json.loads(meta.read_text()).get("exit_code_by_key", {}).items() if code is None)


def equivalent_names() -> set:
    """Mutant names listed in mutation-equivalent.md (a line starting '- `name`')."""
    if not EQUIVALENT.is_file():
        return set()
    return set(re.findall(r"^- `([\w.]+__mutmut_\d+)`", EQUIVALENT.read_text(), flags=re.M))


def _row(module: str, counts: Counter, equivalent: int) -> list:
    killed = counts["killed"] + counts["timeout"]
    survived = counts["survived"] - equivalent
    behaviour = killed + survived
    score = f"{100 * killed / behaviour:.1f}%" if behaviour else "-"
    return [module, counts["killed"], counts["survived"], equivalent, counts["no tests"], counts["timeout"],
            sum(counts.values()) - counts["not checked"], sum(counts.values()), score]


def render(rows_by_module: dict, stamp: str, command: str) -> str:
    headers = ["module", "killed", "survived", "of which equivalent", "no tests", "timeout", "checked",
               "mutants", "score", "mutants/s"]
    lines = [BEGIN, "## Mutation score of kvlib (mutmut)", "",
             f"{stamp}. Command: `{command}`. mutmut mutates every function body of `kvlib/` and runs the fast "
             "kvlib tests that call it. Score = (killed + timeout) / (mutants that change behaviour), "
             "behaviour-changing = all checked mutants less the equivalent ones listed in "
             "`benchmarks/mutation-equivalent.md`; \"no tests\" counts mutants no in-process test reaches "
             "(the CLI tests that spawn a subprocess are not traced). A row whose \"checked\" is below its "
             "\"mutants\" is a partial run (the rest not yet run). mutants/s: mutants checked per second of "
             "wall time in the run that checked them (1 or 2 mutmut children (`--max-children`), under `nice` beside "
             "other work, so a rate compares runs only roughly). "
             "Rows carry the date of the run that produced them.", "",
             "| " + " | ".join(headers + ["run"]) + " |", "|" + "---|" * (len(headers) + 1)]
    for module in sorted(rows_by_module):
        lines.append("| " + " | ".join(str(c) for c in rows_by_module[module]) + " |")
    lines.append(END)
    return "\n".join(lines)


def _old_rows(text: str) -> dict:
    if BEGIN not in text:
        return {}
    section = text.split(BEGIN, 1)[1].split(END, 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 9 and cells[0].startswith("kvlib/"):   # before 'mutants' and 'mutants/s': complete runs
            cells = cells[:7] + [cells[6], cells[7], "-", cells[8]]
        if len(cells) == 11 and cells[0].startswith("kvlib/"):
            rows[cells[0]] = cells
    return rows


def write_section(text: str, section: str) -> str:
    """``text`` with the mutation section replaced (or appended when absent)."""
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        return head + section + rest.split(END, 1)[1]
    return text.rstrip("\n") + "\n\n" + section + "\n"


def main(argv=None) -> int:
    global WORK
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=None, help="modules under kvlib/ to mutate (default: all)")
    parser.add_argument("--max-children", type=int, default=2)
    parser.add_argument("--max-stack-depth", type=int, default=-1,
                        help="mutmut's max_stack_depth: a test kills a mutant only if it calls it within this "
                             "many frames (-1: any depth)")
    parser.add_argument("--no-write", action="store_true", help="print the table, leave BENCHMARKS.md alone")
    parser.add_argument("--keep", action="store_true", help="reuse .mutation/ (results so far) instead of "
                                                            "starting afresh")
    parser.add_argument("--rerun-survivors", action="store_true",
                        help="with --keep: run the surviving mutants and those no test reached again (after adding "
                             "tests), and any not yet run")
    parser.add_argument("--workdir", default=str(WORK), help="scratch folder (default .mutation/)")
    parser.add_argument("--report-only", action="store_true", help="only read .mutation/'s results")
    args = parser.parse_args(argv)
    WORK = Path(args.workdir).resolve()
    mutmut = Path(sys.executable).with_name("mutmut")
    if not mutmut.exists():
        print("mutation.py: mutmut is not installed; pip install -r benchmarks/requirements-mutation.txt",
              file=sys.stderr)
        return 2
    rates = {}
    if not args.report_only:
        if not (args.keep and WORK.exists()):
            _prepare(args.only, args.max_stack_depth)
        else:
            # verdicts kept; tests added since are picked up (mutmut traces only the new tests), and
            # functions edited since are mutated afresh (mutmut compares each function's hash)
            shutil.copytree(ROOT / "kvlib", WORK / "kvlib", ignore=shutil.ignore_patterns("__pycache__"),
                            dirs_exist_ok=True)
            _copy_tests()
            # mutmut's test selection is fixed when the folder is prepared (changing it resets every verdict):
            # a test file created since is copied but never run
            selection = (WORK / "pyproject.toml").read_text()
            unselected = [t for t in _fast_tests() if json.dumps(t) not in selection]
            if unselected:
                print(f"mutation.py: {', '.join(unselected)} created since {WORK.name}/ was prepared: mutmut will "
                      "not run them (start afresh, without --keep, to include them)", file=sys.stderr)
        names = []
        if args.rerun_survivors:   # the survivors so far (not the listed equivalents) and the mutants no test
            equivalent = equivalent_names()   # reached, against today's tests, and those a stopped run had not reached
            names = sorted(n for mutants in survivors().values() for n, status in mutants.items()
                           if status in ("survived", "no tests") and n not in equivalent) + _not_checked()
            if not names:
                print("mutation.py: no survivors to rerun")
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        before = {m: sum(c.values()) - c["not checked"] for m, c in module_counts().items()}
        started = time.monotonic()
        with open(WORK / "mutmut.log", "w") as log:   # mutmut's progress spinner: kept out of the terminal
            proc = subprocess.run([str(mutmut), "run", "--max-children", str(args.max_children)] + names,
                                  cwd=WORK, env=env, stdout=log, stderr=subprocess.STDOUT)
        if proc.returncode not in (0, 1):
            print(f"mutation.py: mutmut exited {proc.returncode}", file=sys.stderr)
            return proc.returncode
        wall = time.monotonic() - started
        for module, c in module_counts().items():
            newly = sum(c.values()) - c["not checked"] - before.get(module, 0)
            if newly > 0:
                rates[module] = f"{newly / wall:.2f}"
        if rates:   # kept beside the results, for --report-only and later reruns
            saved = json.loads((WORK / "rates.json").read_text()) if (WORK / "rates.json").is_file() else {}
            (WORK / "rates.json").write_text(json.dumps(saved | rates))
    if (WORK / "rates.json").is_file():
        rates = json.loads((WORK / "rates.json").read_text()) | rates
    counts = module_counts()
    equivalent = equivalent_names()
    rows = {}
    stamp = datetime.date.today().isoformat()
    old_rows = _old_rows(BENCHMARKS.read_text()) if BENCHMARKS.is_file() else {}
    for module, c in counts.items():
        if sum(c.values()) == c["not checked"]:
            continue     # generated but not run yet: keep the last row
        n_eq = sum(1 for name, status in (survivors().get(module) or {}).items()
                   if name in equivalent and status == "survived")
        rate = rates.get(module) or (old_rows.get(module) or [""] * 11)[9] or "-"
        rows[module] = _row(module, c, n_eq) + [rate, stamp]
    for module, mutants in survivors().items():
        for name, status in mutants.items():
            if name not in equivalent:
                print(f"{status:10s} {name}")
    section_rows = dict(old_rows)
    section_rows.update(rows)
    only = f" --only {' '.join(args.only)}" if args.only else ""
    section = render(section_rows, f"Last run {stamp} on {os.cpu_count()} cores",
                     f"python benchmarks/mutation.py{only}")
    print(section)
    if not args.no_write:
        BENCHMARKS.write_text(write_section(BENCHMARKS.read_text() if BENCHMARKS.is_file() else "", section))
        print(f"wrote the mutation section of {BENCHMARKS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
