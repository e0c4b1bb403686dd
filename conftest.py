"""Fixtures shared by every pytest test in the tree.

`make check` sets COPROF_BUILD to the build folder; run by hand, the tests
fall back to ./build beside this file.
"""

import os

import pytest

SOURCE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="session")
def build_dir():
    return os.environ.get("COPROF_BUILD", os.path.join(SOURCE, "build"))


@pytest.fixture(scope="session")
def coprof_bin(build_dir):
    """coprof_bin(NAME) is the path of build/bin/NAME; the test fails if absent."""
    def path(name):
        p = os.path.join(build_dir, "bin", name)
        if not os.access(p, os.X_OK):
            pytest.fail("%s is not built: run make" % p)
        return p
    return path
