"""What the course config (``course/nbgrader_config.py``) sets up in nbgrader, by plain nbgrader or the CLI.

``configure(c)``:

* the sandboxed kernel for every notebook nbgrader runs (``autograder.kernel.sandboxed_autograde``);
* the feedback page (``FeedbackExporter``: ``autograder/templates/feedback/feedback_page.html.j2``
  on nbgrader's own ``feedback`` page): each test named by its grade id instead of nbgrader's
  "Test cell", and no MathJax fetched from a CDN (maths becomes MathML when the feedback is
  made, ``autograder.feedback``). The folder is named ``feedback`` like nbgrader's template,
  which nbgrader (and its formgrader API) always selects, and comes first in the search path;
  the page's own name is set on the exporter class, so other HTML exports are left alone;
* outputs of a bounded size in the autograded notebook, and so in its feedback page
  (``LimitOutputSize``, in place of nbgrader's ``LimitOutput``, which counts lines only: one
  ``print("x" * 30_000_000)`` is one line): at most ``max_cell_chars`` characters of text per cell,
  ``max_data_chars`` per image or other data, ``max_notebook_chars`` in all; what is cut is replaced by a
  line that says so;
* the student being graded, seen by the kernel (``GradingStudentExecute``, in place of nbgrader's
  ``Execute`` in ``Autograde.autograde_preprocessors``): nbgrader knows whose submission it runs
  (``resources["nbgrader"]["student"]``), the kernel is started with it as
  ``KV_COURSE_GRADING_STUDENT`` (the sandbox's launcher passes that one variable on), and
  ``autograder.checks.current_student()`` puts it before anything the notebook claims, so
  per-learner problems (ch09's drills) are the submission's own, by plain ``nbgrader autograde``
  and by ``python -m autograder grade`` alike;
* the outside check after nbgrader's own scores (``autograder.outside_check.OutsideCheck``, right
  after ``SaveAutoGrades``): the gradebook keeps, per test, the lower of nbgrader's score and the
  out-of-process verdict's, whoever runs autograde (plain nbgrader, the formgrader, the CLI);
* a kernel that stops early keeps what ran (``GradingStudentExecute``): the autograded notebook
  is written, the tests that ran keep their scores, those after the stop wait for a manual grade;
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

import json

import zmq
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbclient.util import run_sync
from nbformat.v4 import new_output
from nbgrader.preprocessors import Execute, LimitOutput, OverwriteCells
from nbgrader.utils import is_grade, is_solution

from nbconvert.exporters import HTMLExporter
from traitlets import Integer, default

from .outside_check import STOPPED, OutsideCheck

TEMPLATES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")
FEEDBACK_PAGE = "feedback_page.html.j2"

# nbconvert/nbgrader log lines that say nothing about a submission (see the module doc).
_NOISE = ("Config option `display_data_priority` not recognized by",
          "Alternative text is missing on")
_APP_LOGGERS = ("AutogradeApp", "GenerateFeedbackApp", "GenerateAssignmentApp", "NbGraderApp", "ValidateApp",
                "FormgradeApp", "traitlets")


GRADING_STUDENT_ENV = "KV_COURSE_GRADING_STUDENT"   # autograder.sandbox / kvcoach.learner use the same


class GradingStudentExecute(Execute):
    """nbgrader's Execute, whose kernel sees the student nbgrader grades as ``KV_COURSE_GRADING_STUDENT``,
    and which keeps what ran when the kernel stops early.

    Whatever that variable held in the grader's own environment is replaced
    (or removed, when nbgrader names no student: ``nbgrader validate``).

    nbgrader's own Execute raises when the kernel dies (``os._exit``, a crash,
    the memory or wall-time limit), stops answering, or ignores the interrupt
    at a cell's time limit; nbgrader then drops the autograded notebook and
    leaves the submission neither autograded nor marked for a manual grade.
    Here the cell where it stopped gets an error output saying why, the cells
    after it are left unrun, and the notebook goes on through the other
    preprocessors; ``resources[STOPPED]`` says where and why (``{"cell":
    index, "grade_id", "why", "died"}``), and ``OutsideCheck`` leaves the tests after
    that cell to a manual grade (``died``: the kernel died or was killed,
    rather than a cell that ignored its interrupt). A kernel that never starts
    still fails the notebook (the grading environment, not the student).
    """

    _grading_student: str | None = None
    _stopped: dict | None = None

    def preprocess(self, nb, resources=None, km=None):
        student = ((resources or {}).get("nbgrader") or {}).get("student")
        self._grading_student = str(student) if student else None
        self._stopped = None
        try:
            nb, resources = super().preprocess(nb, resources, km)
        finally:
            self._grading_student = None
        if self._stopped is not None:
            resources[STOPPED] = self._stopped
        return nb, resources

    def preprocess_cell(self, cell, resources, index):
        if self._stopped is not None:   # the kernel is gone: nothing after it runs
            return cell, resources
        try:
            return super().preprocess_cell(cell, resources, index)
        except (DeadKernelError, CellTimeoutError, zmq.Again) as exc:
            gid = (cell.metadata.get("nbgrader") or {}).get("grade_id")
            why, ename = self._why(exc, gid or f"cell {index + 1}")
            self._stopped = {"cell": index, "grade_id": gid, "why": why,
                             "died": not isinstance(exc, CellTimeoutError)}
            cell.setdefault("outputs", []).append(new_output("error", ename=ename, evalue=why, traceback=[why]))
            return cell, resources

    def _why(self, exc, where: str) -> tuple[str, str]:
        """(what stopped the kernel in ``where``, in words; the error name the cell shows)."""
        if isinstance(exc, CellTimeoutError):
            return (f"{where} ran past the {self.timeout} s limit and did not stop when interrupted (a loop that "
                    "catches KeyboardInterrupt?), so the grader stopped the kernel there", "CellTimeoutError")
        if isinstance(exc, zmq.Again) or getattr(self.km, "unreachable", False):
            return (f"the kernel stopped answering the grader in {where} (its connection broken from inside?) "
                    "and was killed", "DeadKernelError")
        return (f"the kernel died in {where} (os._exit(), a crash, running out of memory, or the time limit "
                "for the whole notebook)", "DeadKernelError")

    async def async_start_new_kernel(self, **kwargs):
        env = {k: v for k, v in (kwargs.pop("env", None) or os.environ).items() if k != GRADING_STUDENT_ENV}
        if self._grading_student:
            env[GRADING_STUDENT_ENV] = self._grading_student
        return await super().async_start_new_kernel(env=env, **kwargs)

    start_new_kernel = run_sync(async_start_new_kernel)


#: The line that stands where output was cut (``LimitOutputSize``).
CUT_NOTE = "[output cut by the grader: {more:,} more characters; it keeps {kept}]"


def _size(value) -> int:
    return len(value) if isinstance(value, str) else len("".join(value)) if isinstance(value, list) \
        else len(json.dumps(value))


class LimitOutputSize(LimitOutput):
    """nbgrader's ``LimitOutput`` (stream lines, traceback lines), and a bound on characters (the module doc).

    Text (streams, ``text/*`` data, an error's message and traceback) counts against the cell's
    ``max_cell_chars``; the text past it is cut and a ``CUT_NOTE`` line says how much. Other data (an
    image, JSON) larger than ``max_data_chars`` is replaced by that line. Past ``max_notebook_chars`` for
    the whole notebook, every further output is. Widget views and small images pass unchanged.
    """

    # A chapter run whole (solutions) writes at most about 5,000 characters of text in a cell, an 80 kB plot and
    # 170 kB in all (chapters 01, 04, 07, 09): these bounds are far above what a chapter needs.
    max_cell_chars = Integer(100_000, help="characters of text output kept per cell").tag(config=True)
    max_data_chars = Integer(1_000_000, help="characters of one image or other non-text data").tag(config=True)
    max_notebook_chars = Integer(5_000_000, help="characters of output kept in the whole notebook").tag(config=True)

    def preprocess(self, nb, resources):
        self._left = self.max_notebook_chars
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, cell_index):
        cell, resources = super().preprocess_cell(cell, resources, cell_index)
        if cell.cell_type == "code" and cell.get("outputs"):
            self._left = bound_outputs(cell.outputs, self.max_cell_chars, self.max_data_chars,
                                       getattr(self, "_left", self.max_notebook_chars))
        return cell, resources


def _cut_text(text: str, room: int, what: str) -> str:
    kept = text[:room]
    return kept + ("\n" if kept and not kept.endswith("\n") else "") + \
        CUT_NOTE.format(more=len(text) - len(kept), kept=what) + "\n"


def bound_outputs(outputs: list, max_cell_chars: int, max_data_chars: int, notebook_left: int) -> int:
    """Cut one cell's ``outputs`` in place (``LimitOutputSize``); returns the characters the notebook has left."""
    room = min(max_cell_chars, max(0, notebook_left))      # text this cell may still keep
    kept = 0                                               # characters this cell keeps, text and data
    what = f"the first {max_cell_chars:,} characters of a cell's output"

    def text(value: str) -> str:
        nonlocal room, kept
        if len(value) > room:
            value = _cut_text(value, room, what)
            kept, room = kept + room, 0
        else:
            kept, room = kept + len(value), room - len(value)
        return value

    for output in outputs:
        kind = output.get("output_type")
        if kind == "stream":
            output["text"] = text(_text_of(output.get("text", "")))
        elif kind == "error":
            output["evalue"] = text(_text_of(output.get("evalue", "")))
            lines = [str(line) for line in output.get("traceback") or []]
            if sum(len(line) for line in lines) > room:
                lines = [text("\n".join(lines))]
            else:
                lines = [text(line) for line in lines]
            output["traceback"] = lines
        elif kind in ("display_data", "execute_result"):
            data = output.get("data") or {}
            notes = []
            for mime in list(data):
                size = _size(data[mime])
                if mime == "text/plain":
                    data[mime] = text(_text_of(data[mime]))
                elif mime.startswith("text/") and size <= room:
                    text(_text_of(data[mime]))
                elif not mime.startswith("text/") and size <= min(max_data_chars, notebook_left - kept):
                    kept += size
                else:
                    del data[mime]
                    notes.append(CUT_NOTE.format(more=size, kept=what if mime.startswith("text/") else
                                                 f"no {mime} output over {max_data_chars:,} characters"))
            if notes:
                data["text/plain"] = "\n".join(([_text_of(data["text/plain"])] if "text/plain" in data else []) + notes)
    return notebook_left - kept


def _text_of(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def autograde_preprocessors() -> list:
    """nbgrader's ``Autograde.autograde_preprocessors`` with ``GradingStudentExecute`` for ``Execute`` and
    ``LimitOutputSize`` for ``LimitOutput``, and ``OutsideCheck`` right after ``SaveAutoGrades`` (before
    ``AssignLatePenalties``)."""
    from nbgrader.converters.autograde import Autograde
    from nbgrader.preprocessors import SaveAutoGrades

    swap = {Execute: GradingStudentExecute, LimitOutput: LimitOutputSize}
    out = []
    for pp in Autograde.class_traits()["autograde_preprocessors"].default():
        out.append(swap.get(pp, pp))
        if pp is SaveAutoGrades:
            out.append(OutsideCheck)
    return out


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
