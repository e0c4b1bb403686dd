"""Fixtures of the driver's pytest suites, imported by each test module
(no conftest.py here: other folders' tests import theirs by that name).

    from driver_fixtures import example, test_bin  # noqa: F401 (fixtures)
"""

import os

import pytest


@pytest.fixture(scope="session")
def test_bin(build_dir):
    """test_bin(NAME) is the path of build/tests/NAME."""
    def path(name):
        p = os.path.join(build_dir, "tests", name)
        if not os.access(p, os.X_OK):
            pytest.fail("%s is not built: run make" % p)
        return p
    return path


@pytest.fixture(scope="session")
def example(build_dir):
    """example(NAME) is the path of build/examples/NAME.elf."""
    def path(name):
        p = os.path.join(build_dir, "examples", name + ".elf")
        if not os.path.exists(p):
            pytest.fail("%s is not built: run make" % p)
        return p
    return path
