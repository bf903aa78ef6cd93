"""A failed instant check shows its message, never the checker (autograder.checks.failure).

In-process, through IPython's own shell: ``InteractiveShell.showtraceback`` builds the error output
the kernel sends (``ename``, ``evalue``, ``traceback``) the same way ipykernel does, so what is
asserted on ``traceback`` here is what JupyterLab draws and nbgrader stores.
"""

from __future__ import annotations

import builtins

import pytest
from pinned import pinned

IPython = pinned("IPython")
from IPython.core.interactiveshell import InteractiveShell  # noqa: E402

GRADE_ID = "ch01_q1_bytes_per_token_from_config"
CHECKER_TEXT = ("core.py", "autograder/", "Traceback", "__init__.py")


@pytest.fixture(scope="module")
def shell():
    had = set(vars(builtins))
    shell = InteractiveShell.instance()
    errors = []
    shell._showtraceback = lambda etype, evalue, stb: errors.append(
        {"ename": etype.__name__, "evalue": str(evalue), "traceback": stb})

    def run(code: str):
        errors.clear()
        shell.run_cell(code, store_history=True)
        return errors[0] if errors else None
    yield run
    InteractiveShell.clear_instance()
    for name in set(vars(builtins)) - had:    # __IPYTHON__, display: later tests run outside IPython
        delattr(builtins, name)


def test_a_wrong_answer_shows_the_message_alone(shell):
    error = shell(f"from autograder.checks import check\n"
                  f"def bytes_per_token_from_config(config, dtype_bytes=2):\n"
                  f"    return 3\n"
                  f"check({GRADE_ID!r}, bytes_per_token_from_config)")
    assert error is not None, "the check passed a wrong answer"
    shown = "\n".join(error["traceback"])
    assert error["traceback"][0] == f"✗ {GRADE_ID}"
    assert "returned 3" in shown and "expected" in shown, shown
    assert not [text for text in CHECKER_TEXT if text in shown], shown
    assert "\x1b[" not in shown                     # plain text, like the ✓ line
    # nbgrader and autograder.results read these: a failed check, its one message
    assert error["ename"] == "AssertionError" and error["evalue"].startswith(f"✗ {GRADE_ID}: ")


def test_the_learners_own_exception_shows_their_frame(shell):
    error = shell("from autograder.checks import check\n"
                  "def bytes_per_token_from_config(config, dtype_bytes=2):\n"
                  "    layers = config['n_layers_misspelt']\n"
                  "    return layers\n"
                  f"check({GRADE_ID!r}, bytes_per_token_from_config)")
    shown = "\n".join(error["traceback"])
    assert "KeyError" in shown and "Cell In[" in shown, shown
    assert "layers = config['n_layers_misspelt']" in shown, shown   # their line, from their cell
    assert not [text for text in CHECKER_TEXT if text in shown], shown


def test_a_stub_shows_no_frame(shell):
    error = shell("from autograder.checks import check\n"
                  "def bytes_per_token_from_config(config, dtype_bytes=2):\n"
                  "    raise NotImplementedError()\n"
                  f"check({GRADE_ID!r}, bytes_per_token_from_config)")
    assert "not written yet" in error["evalue"] and "Cell In[" not in "\n".join(error["traceback"])


def test_a_right_answer_raises_nothing(shell):
    assert shell("from autograder.checks import check\n"
                 "def kv_bytes_for_sequence(layers, kv_heads, head_dim, dtype_bytes, seq_len):\n"
                 "    return 2 * layers * kv_heads * head_dim * dtype_bytes * seq_len\n"
                 "check('ch01_q2_kv_bytes_per_sequence', kv_bytes_for_sequence)") is None
