"""tests/pinned.py: a pinned dependency that does not import skips a test, or fails it under REQUIRE_PINNED=1."""

from __future__ import annotations

import pytest

from pinned import REQUIRE_ENV, pinned

MISSING = "kv_course_no_such_module"


def test_a_pinned_module_is_returned():
    import json
    assert pinned("json") is json


def test_a_missing_module_skips_naming_it(monkeypatch):
    monkeypatch.delenv(REQUIRE_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception, match=f"{MISSING} is pinned in binder/requirements.txt"):
        pinned(MISSING)


def test_under_require_pinned_a_missing_module_fails(monkeypatch):
    monkeypatch.setenv(REQUIRE_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match=f"{MISSING} .*REQUIRE_PINNED=1 fails instead of skipping"):
        pinned(MISSING)
