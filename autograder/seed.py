"""The grading seed: where the outside check's hidden cases come from (a class secret, or random)."""

from __future__ import annotations

import hashlib
import os
import re
import secrets
from pathlib import Path

from .course import UsageError, inside_checkout

SEED_ENV = "KV_COURSE_GRADING_SEED"


SEED_FILE_ENV = "KV_COURSE_GRADING_SEED_FILE"


def grading_seed() -> tuple[int, dict]:
    """(seed, what to record) for the hidden cases of the outside check.

    ``$KV_COURSE_GRADING_SEED`` (a class secret: an integer or any text), else
    the file named by ``$KV_COURSE_GRADING_SEED_FILE`` (outside the checkout),
    else a random seed for this run. A secret is recorded only as a
    fingerprint; a random seed by value (it is used once).
    """
    text, source = os.environ.get(SEED_ENV, "").strip(), f"${SEED_ENV}"
    if not text and os.environ.get(SEED_FILE_ENV, "").strip():
        path = Path(os.environ[SEED_FILE_ENV].strip()).expanduser()
        if inside_checkout(path):
            raise UsageError(f"${SEED_FILE_ENV} ({path}) is inside the checkout: keep the class secret "
                             "where students cannot read it")
        try:
            text = path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise UsageError(f"cannot read ${SEED_FILE_ENV} ({path}): {exc.strerror}") from None
        if not text:
            raise UsageError(f"${SEED_FILE_ENV} ({path}) is empty")
        source = f"${SEED_FILE_ENV}"
    if text:
        seed = int(text) if re.fullmatch(r"-?\d{1,18}", text) else \
            int(hashlib.sha256(text.encode()).hexdigest()[:15], 16)
        return seed, {"source": source, "fingerprint": hashlib.sha256(str(seed).encode()).hexdigest()[:12]}
    seed = secrets.randbits(62)
    return seed, {"source": "random (this run)", "value": seed}


def describe_seed(info: dict | None) -> str:
    if not info:
        return "unknown"
    if "value" in info:
        return f"{info['value']} ({info['source']})"
    return f"from {info['source']} (fingerprint {info['fingerprint']})"
