"""kvcoach.guard: a read of a guarded field counts when the learner's code makes it, not the course's."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from kvcoach.guard import COURSE_PACKAGES, GuardedField


@dataclass(frozen=True)
class Box:
    name: str
    secret: int

    def peek(self):
        return self.secret      # the owner's own method: whoever called it is the reader


Box.secret = GuardedField(lambda box: box.name)
Box.secret.__set_name__(Box, "secret")


@pytest.fixture
def box():
    Box.secret.reads.clear()
    yield Box("b", 42)
    Box.secret.reads.clear()


def _read_as(module: str, code: str, box):
    """Run ``code`` as if it were module ``module``'s (a notebook's cell is ``__main__``)."""
    scope = {"__name__": module, "box": box}
    exec(code, scope)
    return scope.get("value")


@pytest.mark.parametrize("code", ["value = box.secret", "value = box.peek()", "value = repr(box)",
                                  "import dataclasses; value = dataclasses.asdict(box)",
                                  "import pprint; value = pprint.pformat(box)"])
def test_a_notebook_that_reads_the_field_is_noted(box, code):
    _read_as("__main__", code, box)
    assert Box.secret.reads == {"b"}


@pytest.mark.parametrize("module", ["kvlib.info", "kvcoach.drill_steps", "kvdisplay.drills", "autograder.checks.runner"])
def test_the_course_packages_read_it_freely(box, module):
    assert _read_as(module, "value = box.secret", box) == 42
    _read_as(module, "value = box.peek()", box)
    _read_as(module, "value = repr(box)", box)
    assert Box.secret.reads == set()


def test_a_package_named_like_the_course_but_not_one_of_it_is_outside(box):
    # only the top-level package counts: a learner's module "kvlib_answers" is not kvlib
    _read_as("kvlib_answers", "value = box.secret", box)
    assert Box.secret.reads == {"b"}


def test_the_value_is_the_one_set_and_the_class_attribute_is_the_guard(box):
    assert box.secret == 42 and isinstance(Box.secret, GuardedField)


def test_the_course_packages_are_the_autograders_and_the_installed_ones():
    from autograder.packages import COURSE_PACKAGES as bound
    assert bound is COURSE_PACKAGES
    assert COURSE_PACKAGES == ("kvlib", "kvcoach", "kvdisplay", "autograder")
