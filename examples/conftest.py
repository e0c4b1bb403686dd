"""Fixtures for the examples' tests.

The helpers for reading images and RAM files live with the SDK's tests in
sdk/tests/copimage.py; this folder's tests import them from there.
"""

import os
import sys

import pytest

SOURCE = os.environ.get("COPROF_SOURCE",
                        os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(SOURCE, "sdk", "tests"))

import copimage  # noqa: E402  (needs the path above)
from copimage import run  # noqa: E402,F401  (a fixture)


@pytest.fixture(scope="session")
def example(build_dir):
    """example(NAME) is the path of build/examples/NAME.elf."""
    def path(name):
        return copimage.image_path(build_dir, "examples", name + ".elf")
    return path
