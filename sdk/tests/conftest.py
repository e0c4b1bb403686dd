"""Fixtures for the SDK's tests: the test programs' images, and cop-run.

copimage.py (beside this file) holds the helpers; pytest puts this folder
on sys.path, so tests import it directly.
"""

import pytest

import copimage
from copimage import run  # noqa: F401  (a fixture)


@pytest.fixture(scope="session")
def test_image(build_dir):
    """test_image(NAME) is the path of build/tests/cop/NAME.elf."""
    def path(name):
        return copimage.image_path(build_dir, "tests", "cop", name + ".elf")
    return path
