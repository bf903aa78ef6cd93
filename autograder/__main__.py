"""``python -m autograder grade|grade-class|report``: the grading command line.

Exit statuses (the report, or the JSON, is on stdout whenever one was made):

* 0 -- every submission ``graded`` or ``needs_manual``;
* 1 -- ``grade-class`` only: the gradebook ended inconsistent with the results;
* 2 -- a usage error (no such file or folder, unknown assignment or student, a
  database URL that does not connect), one line on stderr, nothing graded;
* 3 -- isolation weaker than REQUIRE_ISOLATION=1 demands, before anything runs;
* 4 -- at least one submission's status is ``error`` (not graded: see its reason);
* 5 -- the grading environment is broken (the sandboxed kernel does not see
  the course's packages, ``autograder.preflight``), one line, nothing recorded.
"""

from __future__ import annotations

import argparse
import json
import sys

from kvlib.argtypes import positive_int as _positive_int


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        sys.exit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m autograder", description="Grade kv-course notebooks with nbgrader.")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    sub.required = True

    p = sub.add_parser("grade", help="grade one notebook in a throwaway course")
    p.add_argument("submission", help="the student's notebook (.ipynb)")
    p.add_argument("--assignment", required=True, help="chapter id, e.g. ch01_kv_formula")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--student", help="student id in the gradebook (default: from submitted/<student>/..., "
                                     "else 'student')")
    p.add_argument("--timeout", type=_positive_int, help="per-cell limit in seconds (default: the course config)")
    p.add_argument("--course", help="course directory (default: course/ in the checkout)")
    p.add_argument("--verbose", action="store_true", help="show nbgrader's and the kernel's stderr")

    p = sub.add_parser("grade-class", help="grade submitted/<student>/<assignment>/ for a whole class")
    p.add_argument("submitted", help="nbgrader's submitted/ folder")
    p.add_argument("--assignment", required=True, help="chapter id, e.g. ch01_kv_formula")
    p.add_argument("--jobs", type=_positive_int, help="worker processes (default: os.cpu_count())")
    p.add_argument("--db", help="gradebook SQLAlchemy URL (default: sqlite gradebook.db in the output folder)")
    p.add_argument("--csv", help="scores per student and test (default: <out>/<assignment>_grades.csv)")
    p.add_argument("--out", help="output folder: gradebook, CSV, results/, the random seed (default: the folder "
                                 "holding submitted/; when that is inside the checkout, "
                                 "$XDG_DATA_HOME/kv-course/grading/<course id>, ~/.local/share/... by default)")
    p.add_argument("--timeout", type=_positive_int, help="per-cell limit in seconds (default: the course config)")
    p.add_argument("--force", action="store_true", help="regrade students already graded")
    p.add_argument("--course", help="course directory (default: course/ in the checkout)")
    p.add_argument("--feedback", metavar="DIR", help="also write each student's feedback HTML (grades, the "
                                                     "notebook, no hidden tests) to DIR/<student>/<assignment>/")
    p.add_argument("--student", action="append", metavar="ID", help="grade (or regrade) only this student, "
                                                                    "keeping everyone else's grades (repeatable)")
    p.add_argument("--lms", choices=("canvas",), help="also write <out>/<assignment>_canvas.csv, Canvas's "
                                                      "gradebook import (needs --roster)")
    p.add_argument("--roster", metavar="FILE", help="your Canvas gradebook export (Grades, Export): the ids "
                                                    "Canvas imports by, matched to nbgrader's student ids")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")

    p = sub.add_parser("report", help="what the class got wrong: slips and scores per exercise of a graded class")
    p.add_argument("out", help="grade-class's output folder (holds results/<assignment>/ and gradebook.db)")
    p.add_argument("--assignment", required=True, help="chapter id, e.g. ch01_kv_formula")
    p.add_argument("--db", help="gradebook SQLAlchemy URL (default: the sqlite gradebook.db in the output folder)")
    p.add_argument("--html", metavar="FILE", help="write the report as one self-contained HTML page")
    p.add_argument("--csv", metavar="FILE", help="write the report's tables as CSV")
    p.add_argument("--names", action="store_true", help="name the students behind each slip (default: nobody named)")
    p.add_argument("--json", action="store_true", help="print the report's figures as JSON")
    return parser


def _report(args) -> int:
    from . import report as R

    built = R.class_report(args.out, args.assignment, db_url=args.db)
    written = R.write(built, args.html, args.csv, names=args.names)
    if args.json:
        print(json.dumps(R.to_dict(built, names=args.names) | {"written": written}, indent=2))
    else:
        print(R.to_text(built, names=args.names))
        for kind, path in written.items():
            print(f"{kind}: {path}")
    return EXIT_OK


EXIT_OK, EXIT_INCONSISTENT, EXIT_USAGE, EXIT_ISOLATION, EXIT_ERROR_STATUS, EXIT_ENVIRONMENT = 0, 1, 2, 3, 4, 5


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    from .classroom import format_summary, grade_class
    from .grade import UsageError, format_report, grade_submission
    from .preflight import EnvironmentFault
    from .sandbox import IsolationError

    try:
        if args.command == "report":
            return _report(args)
        if args.command == "grade":
            result = grade_submission(args.submission, args.assignment, course=args.course,
                                      timeout=args.timeout, student=args.student, quiet=not args.verbose)
            print(json.dumps(result, indent=2) if args.json else format_report(result))
            return EXIT_ERROR_STATUS if result["status"] == "error" else EXIT_OK
        summary = grade_class(args.submitted, args.assignment, course=args.course, jobs=args.jobs,
                              db_url=args.db, csv_path=args.csv, out_dir=args.out, timeout=args.timeout,
                              force=args.force, feedback_dir=args.feedback, students=args.student,
                              progress=True, lms=args.lms, roster=args.roster)
        print(json.dumps(summary, indent=2) if args.json else format_summary(summary))
        if not summary["consistent"]:
            return EXIT_INCONSISTENT
        return EXIT_ERROR_STATUS if summary["counts"]["error"] else EXIT_OK
    except UsageError as exc:
        print(f"python -m autograder: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except IsolationError as exc:
        print(f"python -m autograder: isolation: {exc}", file=sys.stderr)
        return EXIT_ISOLATION
    except EnvironmentFault as exc:
        print(f"python -m autograder: grading environment: {exc}; nothing was graded", file=sys.stderr)
        return EXIT_ENVIRONMENT
    except BrokenPipeError:  # piped into head and the like
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
