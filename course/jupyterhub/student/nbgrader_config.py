"""nbgrader on a JupyterHub, for every user's server: the exchange and the course, no gradebook.

Install as ``/etc/jupyter/nbgrader_config.py`` in the single-user image that
students and graders alike start. It says where the exchange is and which
course this is, and that course membership is JupyterHub's groups
(``nbgrader-kv-course`` for students, ``formgrade-kv-course`` for graders).
It names no gradebook: a student's server has no business knowing where the
grades are kept. Graders add ``course/jupyterhub/grader/nbgrader_config.py``
on top. Guide: ``course/jupyterhub/GUIDE.md``.
"""

import os

from nbgrader.auth import JupyterHubAuthPlugin

c = get_config()  # noqa: F821 (injected by traitlets' config loader)

c.CourseDirectory.course_id = "kv-course"

# The shared exchange: one directory mounted read-write on every user's server;
# its root is world-writable with the sticky bit (GUIDE.md, "The exchange volume").
c.Exchange.root = os.environ.get("KV_COURSE_EXCHANGE", "/srv/nbgrader/exchange")
c.Exchange.path_includes_course = True        # several courses may share the exchange
c.Exchange.timezone = "UTC"

# Who is in the course is the hub's groups, read through the hub's API with the
# server's own token: a user outside nbgrader-kv-course cannot fetch or submit.
c.Authenticator.plugin_class = JupyterHubAuthPlugin
