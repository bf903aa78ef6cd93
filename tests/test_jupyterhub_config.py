"""course/jupyterhub/nbgrader_config.py (README "Scale-out on JupyterHub") loads and says what the README says.

The file is loaded with traitlets' config loader, as nbgrader does, and read
back through nbgrader's own classes (CourseDirectory, the default Exchange):
the exchange root, the course id and the PostgreSQL gradebook are set as
documented, every line the README quotes is in the file, and the database
URL can come from the environment.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "course" / "jupyterhub" / "nbgrader_config.py"
README = REPO / "README.md"
DEFAULT_DB = "postgresql+psycopg2://nbgrader@db.kv-course.internal/kv_course"


def _load(monkeypatch, db_url=None):
    from traitlets.config.loader import PyFileConfigLoader

    if db_url is None:
        monkeypatch.delenv("KV_COURSE_DB_URL", raising=False)
    else:
        monkeypatch.setenv("KV_COURSE_DB_URL", db_url)
    return PyFileConfigLoader(CONFIG.name, path=str(CONFIG.parent)).load_config()


def test_loads_into_nbgraders_classes(monkeypatch, tmp_path):
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.exchange.default.exchange import Exchange

    config = _load(monkeypatch)
    config.CourseDirectory.root = str(tmp_path)
    coursedir = CourseDirectory(config=config)
    exchange = Exchange(coursedir=coursedir, config=config)
    assert coursedir.course_id == "kv-course"
    assert coursedir.db_url == DEFAULT_DB and coursedir.db_url.startswith("postgresql+psycopg2://")
    assert exchange.root == "/srv/nbgrader/exchange"
    assert exchange.path_includes_course is True
    assert exchange.timezone == "UTC"


def test_db_url_from_the_environment(monkeypatch):
    url = "postgresql+psycopg2://grader@10.0.0.5:5433/kv_course_2027"
    assert _load(monkeypatch, url).CourseDirectory.db_url == url


def test_course_id_matches_the_course_config(monkeypatch):
    from traitlets.config.loader import PyFileConfigLoader

    course = PyFileConfigLoader("nbgrader_config.py", path=str(REPO / "course")).load_config()
    assert _load(monkeypatch).CourseDirectory.course_id == course.CourseDirectory.course_id


def test_readme_quotes_the_file():
    readme = README.read_text(encoding="utf-8")
    assert "course/jupyterhub/nbgrader_config.py" in readme
    section = readme.split("### Scale-out on JupyterHub", 1)[1].split("\n## ", 1)[0]
    quoted = re.findall(r"^(c\.\w+\.\w+ = .+)$", section, flags=re.M)
    assert len(quoted) >= 3, quoted
    text = CONFIG.read_text(encoding="utf-8")
    for line in quoted:
        assert line.split("#")[0].strip() in text, line
    for needle in ("c.Exchange.root", "c.CourseDirectory.course_id", "c.CourseDirectory.db_url"):
        assert needle in section


def test_no_password_in_the_file():
    text = CONFIG.read_text(encoding="utf-8")
    assert not re.search(r"postgresql\+psycopg2://[^@/\s]+:[^@/\s]+@", text)
