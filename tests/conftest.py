"""Shared pytest configuration for tests/: markers."""


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "slow: builds an environment or drives a browser (a minute or more); still runs in "
        "./dev.sh test and CI, deselect locally with -m 'not slow'")
