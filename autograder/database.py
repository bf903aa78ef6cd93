"""The gradebook's database URL: normalised, connected to first, its faults in one line.

nbgrader hands a URL to SQLAlchemy as it is and reports a failed connection
late and misleadingly (a missing driver as a failed ``generate_assignment``, a
wrong password as "run ``nbgrader db upgrade``"). ``gradebook_url`` connects
once before any grading: a URL SQLAlchemy cannot read, a driver that is not
installed, a server that refuses the connection or the password each become a
``UsageError`` (the command line's exit 2) naming the cause. A plain
``postgresql://`` (or ``postgres://``) URL means the driver the project installs,
psycopg2 (``tests/requirements.txt``).
"""

from __future__ import annotations

import contextlib
import hashlib

from .course import UsageError

_DEFAULT_DRIVER = {"postgresql": "postgresql+psycopg2", "postgres": "postgresql+psycopg2"}


def normalise(url: str) -> str:
    """``postgresql://`` and ``postgres://`` -> ``postgresql+psycopg2://``; other URLs unchanged."""
    scheme, sep, rest = url.partition("://")
    return f"{_DEFAULT_DRIVER[scheme]}://{rest}" if sep and scheme in _DEFAULT_DRIVER else url


def shown(url: str) -> str:
    """The URL as reports print it: the password, if any, replaced by ``***``."""
    try:
        from sqlalchemy.engine import make_url
        parsed = make_url(url)
        return parsed.render_as_string(hide_password=True) if parsed.password else url
    except Exception:  # not a URL: nothing to hide that we could find
        return url.split("@")[-1] if "@" in url else url


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def gradebook_url(url: str) -> str:
    """``url`` normalised, once a connection to it has worked; else UsageError in one line."""
    from sqlalchemy import create_engine, exc as sa_exc

    url = normalise(url.strip())
    where = shown(url)
    try:
        engine = create_engine(url)
    except sa_exc.NoSuchModuleError as exc:
        raise UsageError(f"--db {where}: SQLAlchemy has no driver for it ({_first_line(exc)}); "
                         "for PostgreSQL use postgresql://... (psycopg2)") from None
    except sa_exc.ArgumentError as exc:
        raise UsageError(f"--db {where}: not a database URL ({_first_line(exc)})") from None
    except ImportError as exc:
        raise UsageError(f"--db {where}: its driver is not installed ({exc}); for PostgreSQL use "
                         "postgresql://... with psycopg2 (pip install -r tests/requirements.txt)") from None
    try:
        with engine.connect():
            pass
    except sa_exc.OperationalError as exc:
        raise UsageError(f"--db {where}: cannot connect: {_first_line(exc)}") from None
    except sa_exc.DBAPIError as exc:
        raise UsageError(f"--db {where}: the database refused the connection: {_first_line(exc)}") from None
    finally:
        engine.dispose()
    return url


@contextlib.contextmanager
def exclusive(url: str, name: str):
    """Hold the lock ``name`` on the gradebook's database server for the block (PostgreSQL's advisory lock,
    released when the block ends or the connection drops): graders that share a gradebook and start together
    set it up one at a time (nbgrader's ``generate_assignment`` into one database from two processes at once
    can insert the same row twice). A sqlite gradebook, one grader's file, needs none."""
    if not url.startswith("postgresql"):
        yield
        return
    from sqlalchemy import create_engine, text

    key = int(hashlib.sha256(name.encode()).hexdigest()[:15], 16)      # a bigint for pg_advisory_lock
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT pg_advisory_lock(:key)"), {"key": key})
            try:
                yield
            finally:
                connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": key})
    finally:
        engine.dispose()
