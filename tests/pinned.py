"""A dependency the course pins (binder/requirements.txt), imported for a test that needs it.

Where it does not import, the test skips in one line, unless ``REQUIRE_PINNED=1`` (CI: ``.ci/run`` sets it
with the other ``REQUIRE_*`` switches), which fails instead: CI never skips a test because a pinned
dependency is missing.
"""

from __future__ import annotations

import importlib
import os

import pytest

REQUIRE_ENV = "REQUIRE_PINNED"


def pinned(name: str):
    """The module ``name``, or a skip (a failure under ``REQUIRE_PINNED=1``) naming it."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        reason = f"{name} is pinned in binder/requirements.txt but does not import ({exc})"
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{reason}; {REQUIRE_ENV}=1 fails instead of skipping", pytrace=False)
        pytest.skip(reason, allow_module_level=True)
