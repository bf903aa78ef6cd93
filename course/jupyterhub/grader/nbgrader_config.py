"""nbgrader on a JupyterHub, for graders only: the class's one PostgreSQL gradebook.

Loaded on top of ``course/jupyterhub/student/nbgrader_config.py`` (the
exchange and the course): Jupyter reads ``nbgrader_config.py`` from every
directory on its config path, so install this one in a second directory of
the graders' image only, e.g. ``/usr/local/etc/jupyter/nbgrader_config.py``
(or a directory named in ``JUPYTER_CONFIG_PATH``). Graders collect, run
``python -m autograder grade-class --db "$KV_COURSE_DB_URL"`` and release
feedback against the same gradebook, from as many servers as there are
graders. Guide: ``course/jupyterhub/GUIDE.md``, "The gradebook".
"""

import os

c = get_config()  # noqa: F821 (injected by traitlets' config loader)

# One gradebook for every grader: PostgreSQL, never a sqlite file on a shared disk.
# The password comes from the environment (~/.pgpass or PGPASSWORD), never from this file.
c.CourseDirectory.db_url = os.environ.get(
    "KV_COURSE_DB_URL", "postgresql+psycopg2://nbgrader@db.kv-course.internal/kv_course")
