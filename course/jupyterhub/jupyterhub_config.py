"""JupyterHub for kv-course on one machine: Unix accounts, roles and groups, the formgrader service.

The layout of nbgrader's "multiple classes on JupyterHub" setup, for one course:

* group ``nbgrader-kv-course``: the students (nbgrader's ``JupyterHubAuthPlugin``,
  set in ``student/nbgrader_config.py``, shows the course to its members only);
* group ``formgrade-kv-course``: the instructors and graders (access to the
  formgrader service and membership of the course);
* role ``server`` with ``inherit``: a user's server may read its own user
  record (its groups), which is how nbgrader learns the user's courses;
* the formgrader, when ``KV_COURSE_GRADER_ACCOUNT`` names the Unix account that
  owns the course directory: a hub-managed service ``kv-course`` running
  ``jupyterhub-singleuser`` as that account in its ``~/kv-course``.

Read from the environment (the hub's service unit sets them):
``KV_COURSE_INSTRUCTORS`` (comma-separated usernames), ``KV_COURSE_ROSTER`` (a
file, one student username a line, ``#`` comments), ``KV_COURSE_GRADER_ACCOUNT``
(optional), ``KV_COURSE_SINGLEUSER`` (the ``jupyterhub-singleuser`` to run,
default the one on PATH). Guide: ``course/jupyterhub/GUIDE.md``;
``tests/test_hub.py`` loads this file and changes only what a test must
(addresses, ports, the dummy authenticator, its own state directory).
"""

import os
import pwd

COURSE = "kv-course"

c = get_config()  # noqa: F821 (injected by traitlets' config loader)


def _roster(path):
    with open(path, encoding="utf-8") as f:
        return [line.split("#", 1)[0].strip() for line in f if line.split("#", 1)[0].strip()]


instructors = [u.strip() for u in os.environ.get("KV_COURSE_INSTRUCTORS", "").split(",") if u.strip()]
roster = os.environ.get("KV_COURSE_ROSTER")
students = _roster(roster) if roster else []
singleuser = os.environ.get("KV_COURSE_SINGLEUSER", "jupyterhub-singleuser")

# Unix accounts, their passwords through PAM; each user's server runs as that account.
c.JupyterHub.authenticator_class = "pam"
c.Authenticator.allowed_users = set(instructors) | set(students)
c.JupyterHub.spawner_class = "localprocess"
c.Spawner.cmd = [singleuser]
c.Spawner.default_url = "/lab"
c.Spawner.notebook_dir = "~"

c.JupyterHub.load_groups = {
    f"formgrade-{COURSE}": {"users": instructors},
    f"nbgrader-{COURSE}": {"users": students},
}
c.JupyterHub.load_roles = [
    # A user's server reads its own groups: nbgrader's course list and exchange checks.
    {"name": "server", "scopes": ["inherit"]},
    {"name": f"formgrade-{COURSE}", "groups": [f"formgrade-{COURSE}"],
     "scopes": [f"access:services!service={COURSE}", "list:services", f"read:services!service={COURSE}",
                # nbgrader adds a student to nbgrader-kv-course when the formgrader adds them
                f"groups!group=nbgrader-{COURSE}", "list:users", "read:users"]},
    {"name": f"nbgrader-{COURSE}", "groups": [f"nbgrader-{COURSE}"],
     "scopes": ["list:services", f"read:services!service={COURSE}"]},
]

grader = os.environ.get("KV_COURSE_GRADER_ACCOUNT")
if grader:
    home = pwd.getpwnam(grader).pw_dir
    c.JupyterHub.services = [{
        "name": COURSE,
        "url": "http://127.0.0.1:9999",
        "command": [singleuser, "--ServerApp.port=9999"],
        "user": grader,
        "cwd": os.path.join(home, COURSE),
        "oauth_no_confirm": True,
        "environment": {"JUPYTERHUB_DEFAULT_URL": "/lab"},
    }]
    c.JupyterHub.load_roles.append({"name": f"formgrader-service-{COURSE}", "services": [COURSE],
                                    "scopes": ["list:users", "read:users", "list:groups", f"groups!group=nbgrader-{COURSE}"]})
