"""nbgrader on a JupyterHub: one exchange and one PostgreSQL gradebook for every grader.

Install as ``/etc/jupyter/nbgrader_config.py`` on the hub's single-user
images (students and graders read it), next to the course's own
``course/nbgrader_config.py`` in the graders' course directory. Students
fetch and submit through the exchange (a directory every user's server
mounts); graders collect, autograde (``python -m autograder grade-class
--db "$KV_COURSE_DB_URL"``) and give feedback against the same gradebook,
from as many servers as there are graders. README: "Scale-out on JupyterHub".
"""

import os

c = get_config()  # noqa: F821 (injected by traitlets' config loader)

c.CourseDirectory.course_id = "kv-course"

# The shared exchange: a directory mounted read-write on every user's server
# (sticky, world-writable: nbgrader's own layout under it keeps students apart).
c.Exchange.root = "/srv/nbgrader/exchange"
c.Exchange.path_includes_course = True        # several courses may share the exchange
c.Exchange.timezone = "UTC"

# One gradebook for every grader: PostgreSQL, never a sqlite file on a shared disk.
# The password comes from the environment (or ~/.pgpass), never from this file.
c.CourseDirectory.db_url = os.environ.get(
    "KV_COURSE_DB_URL", "postgresql+psycopg2://nbgrader@db.kv-course.internal/kv_course")
