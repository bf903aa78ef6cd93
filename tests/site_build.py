"""The executed site for the tests that read it: built once per test session.

``built_site()`` returns ``site/`` when ./dev.sh site built it from the current inputs (CI runs
./dev.sh site before the tests: tools/build_site.py's stamp says so), otherwise it builds one
into a temporary folder (about 1.5 to 2.5 minutes on 2 cores: ten kernels, then Sphinx) and
reuses it for the rest of the session. Without the site's tools (tools/site/requirements.txt,
which ./dev.sh site installs) the tests skip with one line, unless REQUIRE_SITE=1 (CI).
"""

from __future__ import annotations

import atexit
import functools
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
REQUIRE = os.environ.get("REQUIRE_SITE") == "1"
TOOLS = ("sphinx", "myst_nb", "sphinx_book_theme")


def builder():
    spec = importlib.util.spec_from_file_location("build_site", REPO / "tools" / "build_site.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def need_tools() -> None:
    missing = [name for name in TOOLS if importlib.util.find_spec(name) is None]
    if missing:
        reason = f"the site's tools are not installed ({', '.join(missing)}: ./dev.sh site installs them)"
        if REQUIRE:
            pytest.fail(reason + " and REQUIRE_SITE=1")
        pytest.skip(reason + "; REQUIRE_SITE=1 fails instead")


@functools.lru_cache(maxsize=1)
def built_site() -> Path:
    need_tools()
    build = builder()
    if build.is_fresh(REPO / "site"):
        return REPO / "site"
    out = Path(tempfile.mkdtemp(prefix="kv-site-test-")) / "site"
    atexit.register(shutil.rmtree, out.parent, True)
    build.build(out, jobs=2, repo="OWNER/kv-course", branch="HEAD")
    return out


def chapter_ids() -> list[str]:
    return sorted(p.stem for p in (REPO / "chapters").glob("ch*.ipynb"))
