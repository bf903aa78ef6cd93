"""tests/pg_server.py: a throwaway PostgreSQL server that nbgrader's Gradebook can use.

Skipped with one line when PostgreSQL or psycopg2 is missing; a failure instead
under REQUIRE_POSTGRES=1 (CI).
"""

from __future__ import annotations


import pytest

import pg_server as P
from pg_server import postgres_url  # noqa: F401 -- the fixture


def test_nbgrader_gradebook_on_postgres(postgres_url):  # noqa: F811
    assert postgres_url.startswith("postgresql+psycopg2://postgres@/")
    got = P.gradebook_roundtrip(postgres_url)
    assert got == {"students": ["alice"], "student_last_name": "Liddell",
                   "assignments": ["ch01_kv_formula"], "assignment": "ch01_kv_formula"}


def test_server_is_private_and_removed_at_teardown():
    why = P.missing()
    if why:
        action, line = P.unavailable(why)
        (pytest.fail if action == "fail" else pytest.skip)(line)
    import psycopg2
    server = P.PgServer()
    server.start()
    where = server.dir
    try:
        conn = psycopg2.connect(dbname=P.DB_NAME, user="postgres", host=str(where), port=P.PORT)
        with conn.cursor() as cur:
            cur.execute("SHOW listen_addresses")
            assert cur.fetchone()[0] == ""          # no TCP port: only the socket in its own directory
            cur.execute("SELECT 6 * 7")
            assert cur.fetchone()[0] == 42
        conn.close()
    finally:
        server.stop()
    assert not where.exists()


def test_missing_postgres_skips_or_fails(monkeypatch):
    monkeypatch.setattr(P, "find_bindir", lambda: None)
    why = P.missing()
    assert "apt-get install -y postgresql" in why
    monkeypatch.delenv("REQUIRE_POSTGRES", raising=False)
    assert P.unavailable(why) == ("skip", f"PostgreSQL unavailable: {why}")
    monkeypatch.setenv("REQUIRE_POSTGRES", "1")
    assert P.unavailable(why)[0] == "fail" and "REQUIRE_POSTGRES=1" in P.unavailable(why)[1]
    with pytest.raises(P.PostgresUnavailable):
        P.PgServer().start()
