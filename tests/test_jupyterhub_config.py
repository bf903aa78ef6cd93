"""course/jupyterhub/ (docs/instructors.md "Scale-out on JupyterHub", GUIDE.md) loads and says what the docs say.

The nbgrader configs are loaded with traitlets' config loader, as nbgrader
does, and read back through nbgrader's own classes (CourseDirectory, the
default Exchange): the student config sets the exchange, the course and the
hub's groups as course membership and names no gradebook; the grader config,
layered on top the way Jupyter merges its config path, adds the PostgreSQL
gradebook from the environment. The hub config makes the groups and roles the
guide describes. Every config line docs/instructors.md quotes is in the files, and
every command of the guide's tested steps is one tests/test_hub.py runs.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
HUB_DIR = REPO / "course" / "jupyterhub"
STUDENT = HUB_DIR / "student" / "nbgrader_config.py"
GRADER = HUB_DIR / "grader" / "nbgrader_config.py"
HUB = HUB_DIR / "jupyterhub_config.py"
GUIDE = HUB_DIR / "GUIDE.md"
INSTRUCTORS = REPO / "docs" / "instructors.md"
HUB_TEST = REPO / "tests" / "test_hub.py"
DEFAULT_DB = "postgresql+psycopg2://nbgrader@db.kv-course.internal/kv_course"


def _load(path: Path):
    from traitlets.config.loader import PyFileConfigLoader

    return PyFileConfigLoader(path.name, path=str(path.parent)).load_config()


def _layered(monkeypatch, *paths, db_url=None, exchange=None):
    """The configs merged the way Jupyter merges nbgrader_config.py along its config path."""
    from traitlets.config import Config

    for var, value in (("KV_COURSE_DB_URL", db_url), ("KV_COURSE_EXCHANGE", exchange)):
        if value is None:
            monkeypatch.delenv(var, raising=False)
        else:
            monkeypatch.setenv(var, value)
    config = Config()
    for path in paths:
        config.merge(_load(path))
    return config


def _nbgrader(config, root):
    from nbgrader.auth import Authenticator
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.exchange.default.exchange import Exchange

    config.CourseDirectory.root = str(root)
    coursedir = CourseDirectory(config=config)
    return coursedir, Exchange(coursedir=coursedir, config=config), Authenticator(config=config)


def test_student_config_sets_the_exchange_and_no_gradebook(monkeypatch, tmp_path):
    from nbgrader.auth import JupyterHubAuthPlugin

    coursedir, exchange, auth = _nbgrader(_layered(monkeypatch, STUDENT), tmp_path)
    assert coursedir.course_id == "kv-course"
    assert exchange.root == "/srv/nbgrader/exchange"
    assert exchange.path_includes_course is True
    assert exchange.timezone == "UTC"
    assert isinstance(auth.plugin, JupyterHubAuthPlugin)
    # nbgrader's own default: a sqlite file in the course directory -- nothing of the grader's
    assert coursedir.db_url == f"sqlite:///{tmp_path / 'gradebook.db'}"
    assert "db_url" not in STUDENT.read_text(encoding="utf-8")
    assert "postgresql" not in STUDENT.read_text(encoding="utf-8")


def test_grader_config_adds_the_gradebook(monkeypatch, tmp_path):
    coursedir, exchange, _ = _nbgrader(_layered(monkeypatch, STUDENT, GRADER), tmp_path)
    assert coursedir.db_url == DEFAULT_DB
    assert exchange.root == "/srv/nbgrader/exchange" and coursedir.course_id == "kv-course"


def test_urls_from_the_environment(monkeypatch, tmp_path):
    url = "postgresql+psycopg2://grader@10.0.0.5:5433/kv_course_2027"
    coursedir, exchange, _ = _nbgrader(_layered(monkeypatch, STUDENT, GRADER, db_url=url, exchange="/mnt/x"),
                                       tmp_path)
    assert coursedir.db_url == url and exchange.root == "/mnt/x"


def test_course_id_matches_the_course_config():
    assert _load(STUDENT).CourseDirectory.course_id == _load(REPO / "course" / "nbgrader_config.py"
                                                             ).CourseDirectory.course_id


def test_hub_config_makes_the_groups_and_roles(monkeypatch, tmp_path):
    roster = tmp_path / "roster.txt"
    roster.write_text("# students\nann\nben  # a comment\n\n")
    monkeypatch.setenv("KV_COURSE_INSTRUCTORS", "ivy, ike")
    monkeypatch.setenv("KV_COURSE_ROSTER", str(roster))
    monkeypatch.delenv("KV_COURSE_GRADER_ACCOUNT", raising=False)
    hub = _load(HUB).JupyterHub
    assert hub.load_groups == {"formgrade-kv-course": {"users": ["ivy", "ike"]},
                               "nbgrader-kv-course": {"users": ["ann", "ben"]}}
    roles = {r["name"]: r for r in hub.load_roles}
    assert roles["server"]["scopes"] == ["inherit"]          # nbgrader reads the user's groups
    assert "access:services!service=kv-course" in roles["formgrade-kv-course"]["scopes"]
    assert roles["nbgrader-kv-course"]["groups"] == ["nbgrader-kv-course"]
    assert _load(HUB).Authenticator.allowed_users == {"ivy", "ike", "ann", "ben"}


def test_instructors_doc_quotes_the_files():
    doc = INSTRUCTORS.read_text(encoding="utf-8")
    section = doc.split("## Scale-out on JupyterHub", 1)[1].split("\n## ", 1)[0]
    for rel in ("course/jupyterhub/student/nbgrader_config.py", "course/jupyterhub/grader/nbgrader_config.py",
                "course/jupyterhub/GUIDE.md"):
        assert rel in section, rel
    quoted = re.findall(r"^ *(c\.\w+\.\w+ = .+)$", section, flags=re.M)
    assert len(quoted) >= 3, quoted
    text = STUDENT.read_text(encoding="utf-8") + GRADER.read_text(encoding="utf-8")
    for line in quoted:
        assert line.split("#")[0].strip() in text, line


def _tested_sections() -> list:
    sections = re.split(r"^## ", GUIDE.read_text(encoding="utf-8"), flags=re.M)[1:]
    return [s for s in sections if "**tested by tests/test_hub.py**" in s]


def test_the_guides_tested_steps_are_the_hub_tests():
    tested = _tested_sections()
    assert len(tested) >= 6, [s.splitlines()[0] for s in tested]
    test = HUB_TEST.read_text(encoding="utf-8")
    commands = set()
    for section in tested:
        for block in re.findall(r"```\n(.*?)```", section, flags=re.S):
            commands |= {f'"{verb}"' for verb in re.findall(r"^nbgrader (\w+)", block, flags=re.M)}
            commands |= {f'"{tool}"' for tool in re.findall(r"^(pg_dump|pg_restore)\b", block, flags=re.M)}
            if "grade-class" in block:
                commands.add('"grade-class"')
            if "-m 1777" in block:
                commands.add("0o1777")
    assert {'"generate_assignment"', '"release_assignment"', '"collect"', '"release_feedback"',
            '"grade-class"', "0o1777"} <= commands
    missing = sorted(c for c in commands if c not in test)
    assert missing == [], missing
    for name in ('"--format=custom"', '"pg_dump"', '"pg_restore"', "KV_COURSE_GRADING_SEED"):
        assert name in test, name


@pytest.mark.parametrize("path", [STUDENT, GRADER, HUB])
def test_no_password_in_the_files(path):
    assert not re.search(r"postgresql(\+psycopg2)?://[^@/\s]+:[^@/\s]+@", path.read_text(encoding="utf-8"))
