"""A throwaway PostgreSQL server for tests (a fixture helper).

``postgres_url`` (a session-scoped pytest fixture; import it into a test
module or a conftest) starts a server with ``initdb`` into a fresh temporary
directory and ``pg_ctl start`` listening only on a Unix socket in that
directory (no TCP port, so nothing to collide with), creates a database and
yields its SQLAlchemy URL (``postgresql+psycopg2://postgres@/kvtest?host=DIR``).
At teardown the server is stopped (``pg_ctl stop -m immediate``) and the
directory removed.

PostgreSQL refuses to run as root: as root, the data directory is handed to
the ``postgres`` user (Debian's package creates it) and every server command
runs as that user through ``setpriv``; otherwise as the current user.

Missing pieces (the server binaries, ``psycopg2``, the ``postgres`` user
when root) skip the tests with one line saying what is missing, unless
``REQUIRE_POSTGRES=1``, which makes them fail instead (CI sets it).

Debian: ``apt-get install -y postgresql`` (the binaries live in
``/usr/lib/postgresql/<major>/bin``, off PATH); PyPI: ``psycopg2-binary``.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

DB_NAME = "kvtest"
# A role that must give its password (every other connection is trusted): for wrong-password tests.
PASSWORD_ROLE, PASSWORD = "kv_password_role", "the-right-password"
PORT = 5432  # only names the socket file; the server listens on no TCP port


class PostgresUnavailable(RuntimeError):
    """What is missing to start a throwaway server here."""


def require_postgres() -> bool:
    return os.environ.get("REQUIRE_POSTGRES", "").strip().lower() in ("1", "true", "yes", "on")


def find_bindir() -> Path | None:
    """The directory holding initdb and pg_ctl: $PG_BINDIR, Debian's newest, then PATH."""
    candidates = [os.environ.get("PG_BINDIR", "")]
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_major, reverse=True)
    initdb = shutil.which("initdb")
    if initdb:
        candidates.append(os.path.dirname(initdb))
    for c in candidates:
        if c and os.access(os.path.join(c, "initdb"), os.X_OK) and os.access(os.path.join(c, "pg_ctl"), os.X_OK):
            return Path(c)
    return None


def _major(path: str) -> int:
    try:
        return int(Path(path).parent.name.split(".")[0])
    except ValueError:
        return 0


def missing() -> str | None:
    """None when a server can be started here, else what is missing (one line)."""
    if find_bindir() is None:
        return "PostgreSQL server binaries not found (Debian: apt-get install -y postgresql)"
    try:
        import psycopg2  # noqa: F401
    except ImportError:
        return "psycopg2 is not installed (pip install psycopg2-binary)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no 'postgres' user to run the server as"
        if not shutil.which("setpriv"):
            return "running as root and setpriv (util-linux) is missing"
    return None


class PgServer:
    """One throwaway server. ``start()`` returns the SQLAlchemy URL; ``stop()`` removes everything."""

    def __init__(self):
        self.bindir = find_bindir()
        self.dir: Path | None = None
        self.url: str | None = None
        self._as: list = []

    @property
    def data(self) -> Path:
        return self.dir / "data"

    def _run(self, *argv, timeout=60, check=True):
        cmd = self._as + [str(a) for a in argv]
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=timeout, cwd=self.dir, env=dict(os.environ, LC_ALL="C.UTF-8"))
        if check and proc.returncode != 0:
            raise PostgresUnavailable(f"{Path(argv[0]).name} failed ({proc.returncode}): "
                                      f"{(proc.stderr or proc.stdout).strip()[-600:]}")
        return proc

    def start(self) -> str:
        why = missing()
        if why:
            raise PostgresUnavailable(why)
        self.dir = Path(tempfile.mkdtemp(prefix="kv-pg-"))
        if os.geteuid() == 0:
            pw = pwd.getpwnam("postgres")
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
            self._as = [shutil.which("setpriv"), f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}",
                        "--init-groups", "--"]
        try:
            self._run(self.bindir / "initdb", "-D", self.data, "-U", "postgres", "-A", "trust",
                      "-E", "UTF8", "--no-sync", "--no-instructions")
            hba = self.data / "pg_hba.conf"
            hba.write_text(f"local all {PASSWORD_ROLE} scram-sha-256\n" + hba.read_text())
            opts = (f"-k {self.dir} -c listen_addresses='' -p {PORT} -F "
                    "-c fsync=off -c full_page_writes=off -c synchronous_commit=off")
            self._run(self.bindir / "pg_ctl", "-D", self.data, "-l", self.dir / "server.log",
                      "-o", opts, "-w", "-t", "60", "start")
            self._create_db()
        except BaseException:
            self.stop()
            raise
        self.url = f"postgresql+psycopg2://postgres@/{DB_NAME}?host={self.dir}&port={PORT}"
        return self.url

    def _create_db(self):
        import psycopg2
        deadline = time.monotonic() + 30
        while True:
            try:
                conn = psycopg2.connect(dbname="postgres", user="postgres", host=str(self.dir), port=PORT)
                break
            except psycopg2.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE {DB_NAME}")
            cur.execute(f"CREATE ROLE {PASSWORD_ROLE} LOGIN PASSWORD '{PASSWORD}'")
        conn.close()

    def log(self) -> str:
        with contextlib.suppress(OSError):
            return (self.dir / "server.log").read_text(errors="replace")
        return ""

    def stop(self):
        if self.dir is None:
            return
        if (self.data / "postmaster.pid").exists():
            with contextlib.suppress(Exception):
                self._run(self.bindir / "pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop",
                          timeout=60, check=False)
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir = None


@contextlib.contextmanager
def pg_server():
    """``with pg_server() as url:`` -- PostgresUnavailable when it cannot start."""
    server = PgServer()
    url = server.start()
    try:
        yield url
    finally:
        server.stop()


def new_database(url: str, name: str) -> str:
    """A fresh database ``name`` on the throwaway server of ``url`` (a URL this module made); its URL."""
    import psycopg2
    from urllib.parse import parse_qs, urlsplit

    query = parse_qs(urlsplit(url).query)
    conn = psycopg2.connect(dbname="postgres", user="postgres", host=query["host"][0], port=query["port"][0])
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {name}")
    conn.close()
    return url.replace(f"/{DB_NAME}?", f"/{name}?")


def gradebook_roundtrip(url: str) -> dict:
    """nbgrader's Gradebook on ``url``: create the schema, add a student and an assignment, read back."""
    import sys
    bindir = os.path.dirname(sys.executable)
    if shutil.which("alembic") is None and os.path.exists(os.path.join(bindir, "alembic")):
        os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")  # nbgrader runs it by name
    from nbgrader.api import Gradebook
    with Gradebook(url) as gb:
        gb.add_student("alice", first_name="Alice", last_name="Liddell", email="alice@example.org")
        gb.add_assignment("ch01_kv_formula")
    with Gradebook(url) as gb:  # a second connection: the rows really are in the server
        student = gb.find_student("alice")
        assignment = gb.find_assignment("ch01_kv_formula")
        return {"students": [s.id for s in gb.students], "student_last_name": student.last_name,
                "assignments": [a.name for a in gb.assignments], "assignment": assignment.name}


try:
    import pytest
except ImportError:  # pragma: no cover -- the helper also works without pytest
    pytest = None

def unavailable(why: str) -> tuple[str, str]:
    """("skip" | "fail", the one line to show) when PostgreSQL cannot be had."""
    if require_postgres():
        return "fail", f"REQUIRE_POSTGRES=1 but {why}"
    return "skip", f"PostgreSQL unavailable: {why}"


def _give_up(why: str):
    action, line = unavailable(why)
    (pytest.fail if action == "fail" else pytest.skip)(line)


if pytest is not None:
    @pytest.fixture(scope="session")
    def postgres_url():
        """A throwaway PostgreSQL database's SQLAlchemy URL (skipped, or failed under REQUIRE_POSTGRES=1)."""
        why = missing()
        if why:
            _give_up(why)
        server = PgServer()
        try:
            url = server.start()
        except PostgresUnavailable as exc:
            server.stop()
            _give_up(f"the server did not start: {exc}")
        try:
            yield url
        finally:
            server.stop()


if __name__ == "__main__":
    why = missing()
    if why:
        raise SystemExit(f"unavailable: {why}")
    with pg_server() as url:
        print(url)
        print(gradebook_roundtrip(url))
