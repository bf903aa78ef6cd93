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
STORED_SEED = "grading-seed"     # in a class's output folder, mode 0600: the random seed of its runs


def grading_seed(out_dir: Path | None = None) -> tuple[int, dict]:
    """(seed, what to record) for the hidden cases of the outside check.

    ``$KV_COURSE_GRADING_SEED`` (a class secret: an integer or any text), else
    the file named by ``$KV_COURSE_GRADING_SEED_FILE`` (outside the checkout),
    else a random seed: for a class (``out_dir``, grade-class's output folder)
    the one stored in ``out_dir/grading-seed`` (mode 0600), drawn and stored by
    its first run and reused by every later one, so that a resumed run grades
    the rest of the class like the first part; for one notebook, a seed for this
    run. A secret is recorded only as a fingerprint; a random seed by value.
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
        return seed, {"source": source, "fingerprint": fingerprint(seed)}
    if out_dir is not None:
        return _stored_seed(Path(out_dir) / STORED_SEED)
    seed = secrets.randbits(62)
    return seed, {"source": "random (this run)", "value": seed}


def class_secret_set() -> bool:
    """True when a class secret names the seed (``$KV_COURSE_GRADING_SEED`` or ``$KV_COURSE_GRADING_SEED_FILE``):
    every grader that sets the same one draws the same hidden cases."""
    return bool(os.environ.get(SEED_ENV, "").strip() or os.environ.get(SEED_FILE_ENV, "").strip())


def _stored_seed(path: Path) -> tuple[int, dict]:
    """The seed kept in ``path`` (0600), drawn and written atomically by the first run that needs it."""
    info = {"source": f"random (kept in {path})"}
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        text = path.read_text(encoding="ascii").strip()
        if not re.fullmatch(r"\d{1,19}", text):
            raise UsageError(f"{path} does not hold a grading seed (a number); remove it to draw a new one")
        return int(text), dict(info, value=int(text))
    seed = secrets.randbits(62)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(f"{seed}\n")
    return seed, dict(info, value=seed)


def fingerprint(seed: int) -> str:
    """What a result records of the seed it was graded with (a secret's stays unreadable)."""
    return hashlib.sha256(str(seed).encode()).hexdigest()[:12]


def describe_seed(info: dict | None) -> str:
    if not info:
        return "unknown"
    if "value" in info:
        return f"{info['value']} ({info['source']})"
    return f"from {info['source']} (fingerprint {info['fingerprint']})"
