"""Fixtures for the kernel driver's tests.

The stream is decoded with escape-protocol's Python decoder
(coprof_stream.py), imported from its folder.
"""

import os
import sys

import pytest

SOURCE = os.environ.get(
    "COPROF_SOURCE",
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(SOURCE, "escape-protocol"))


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
