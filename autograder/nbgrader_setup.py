"""What the course config (``course/nbgrader_config.py``) sets up in nbgrader, by plain nbgrader or the CLI.

``configure(c)``:

* the sandboxed kernel for every notebook nbgrader runs (``autograder.kernel.sandboxed_autograde``);
* the feedback page (``FeedbackExporter``: ``autograder/templates/feedback/feedback_page.html.j2``
  on nbgrader's own ``feedback`` page): each test named by its grade id instead of nbgrader's
  "Test cell", and no MathJax fetched from a CDN (maths becomes MathML when the feedback is
  made, ``autograder.feedback``). The folder is named ``feedback`` like nbgrader's template,
  which nbgrader (and its formgrader API) always selects, and comes first in the search path;
  the page's own name is set on the exporter class, so other HTML exports are left alone;
* the student being graded, seen by the kernel (``GradingStudentExecute``, in place of nbgrader's
  ``Execute`` in ``Autograde.autograde_preprocessors``): nbgrader knows whose submission it runs
  (``resources["nbgrader"]["student"]``), the kernel is started with it as
  ``KV_COURSE_GRADING_STUDENT`` (the sandbox's launcher passes that one variable on), and
  ``autograder.checks.current_student()`` puts it before anything the notebook claims, so
  per-learner problems (ch09's drills) are the submission's own, by plain ``nbgrader autograde``
  and by ``python -m autograder grade`` alike;
* quiet logs: nbgrader 0.9.6 reports a changed checksum for every test cell that holds hidden
  tests (the release lacks them, so the student's copy never matches the source; nbgrader issue
  1961), on every run and for every student. The cell is put back from the source whatever its
  checksum, so ``RestoreTestCells`` stops reporting it for test cells (other locked cells still
  warn). SQLAlchemy 2's "not in session" warnings about nbgrader 0.9's relationships, nbconvert's
  notice that our preprocessors do not take ``display_data_priority`` (they do not render) and
  its note about images without alternative text (a student's plots) are filtered as well.
"""

from __future__ import annotations

import logging
import os
import warnings

from nbclient.util import run_sync
from nbgrader.preprocessors import Execute, OverwriteCells
from nbgrader.utils import is_grade, is_solution

from nbconvert.exporters import HTMLExporter
from traitlets import default

TEMPLATES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")
FEEDBACK_PAGE = "feedback_page.html.j2"

# nbconvert/nbgrader log lines that say nothing about a submission (see the module doc).
_NOISE = ("Config option `display_data_priority` not recognized by",
          "Alternative text is missing on")
_APP_LOGGERS = ("AutogradeApp", "GenerateFeedbackApp", "GenerateAssignmentApp", "NbGraderApp", "ValidateApp",
                "FormgradeApp", "traitlets")


GRADING_STUDENT_ENV = "KV_COURSE_GRADING_STUDENT"   # autograder.sandbox / autograder.checks.core use the same


class GradingStudentExecute(Execute):
    """nbgrader's Execute, whose kernel sees the student nbgrader grades as ``KV_COURSE_GRADING_STUDENT``.

    Whatever that variable held in the grader's own environment is replaced
    (or removed, when nbgrader names no student: ``nbgrader validate``).
    """

    _grading_student: str | None = None

    def preprocess(self, nb, resources=None, km=None):
        student = ((resources or {}).get("nbgrader") or {}).get("student")
        self._grading_student = str(student) if student else None
        try:
            return super().preprocess(nb, resources, km)
        finally:
            self._grading_student = None

    async def async_start_new_kernel(self, **kwargs):
        env = {k: v for k, v in (kwargs.pop("env", None) or os.environ).items() if k != GRADING_STUDENT_ENV}
        if self._grading_student:
            env[GRADING_STUDENT_ENV] = self._grading_student
        return await super().async_start_new_kernel(env=env, **kwargs)

    start_new_kernel = run_sync(async_start_new_kernel)


def autograde_preprocessors() -> list:
    """nbgrader's ``Autograde.autograde_preprocessors`` with ``GradingStudentExecute`` for ``Execute``."""
    from nbgrader.converters.autograde import Autograde

    default = Autograde.class_traits()["autograde_preprocessors"].default()
    return [GradingStudentExecute if pp is Execute else pp for pp in default]


class RestoreTestCells(OverwriteCells):
    """nbgrader's OverwriteCells, without the checksum warning for test cells (restored anyway)."""

    _test_cell = False

    def preprocess_cell(self, cell, resources, cell_index):
        self._test_cell = is_grade(cell) and not is_solution(cell)
        try:
            return super().preprocess_cell(cell, resources, cell_index)
        finally:
            self._test_cell = False

    def report_change(self, name, attr, old, new):
        if attr == "checksum" and self._test_cell:
            return
        super().report_change(name, attr, old, new)


class FeedbackExporter(HTMLExporter):
    """nbgrader's feedback HTML exporter, rendering the course's page (see the module doc)."""

    @default("template_file")
    def _template_file_default(self):
        return FEEDBACK_PAGE


class _DropNoise(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a record that cannot format itself is not ours to judge
            return True
        return not message.startswith(_NOISE)


def quiet_known_warnings() -> None:
    """Filter the warnings and log lines listed in the module doc (once per process)."""
    warnings.filterwarnings("ignore", message=".*not in session.*")
    try:
        from sqlalchemy.exc import SAWarning
        warnings.filterwarnings("ignore", category=SAWarning)
    except ImportError:  # pragma: no cover
        pass
    for name in _APP_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DropNoise) for f in logger.filters):
            logger.addFilter(_DropNoise())


def configure(c) -> None:
    """Apply the course's nbgrader set-up to the config ``c`` (see the module doc)."""
    import nbgrader.server_extensions.formgrader as formgrader
    from nbgrader.preprocessors import CheckCellMetadata, ClearOutput, DeduplicateIds, OverwriteKernelspec

    from .kernel import sandboxed_autograde

    sandboxed_autograde(c)
    c.Autograde.autograde_preprocessors = autograde_preprocessors()
    c.Autograde.sanitize_preprocessors = [ClearOutput, DeduplicateIds, OverwriteKernelspec, RestoreTestCells,
                                          CheckCellMetadata]
    c.GenerateFeedback.exporter_class = FeedbackExporter
    c.HTMLExporter.extra_template_basedirs = [TEMPLATES, os.path.join(os.path.dirname(formgrader.__file__),
                                                                      "templates")]
    quiet_known_warnings()
