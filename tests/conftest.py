"""Shared pytest configuration for tests/: markers."""


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "slow: builds an environment or drives a browser (a minute or more); still runs in "
        "./dev.sh test and CI, deselect locally with -m 'not slow'")
    config.addinivalue_line(
        "markers",
        "kernel: starts a Jupyter kernel or the sandboxed grader (seconds each); ./dev.sh quick leaves it "
        "out, ./dev.sh test and CI run it")
