"""Fixtures for the SDK's tests: the test programs' images, and cop-run.

copimage.py (beside this file) holds the helpers; pytest puts this folder
on sys.path, so tests import it directly.
"""

import pytest

import copimage


@pytest.fixture(scope="session")
def test_image(build_dir):
    """test_image(NAME) is the path of build/tests/cop/NAME.elf."""
    def path(name):
        return copimage.image_path(build_dir, "tests", "cop", name + ".elf")
    return path


@pytest.fixture(scope="session")
def run(coprof_bin):
    """run(IMAGE, *ARGS, ram_file=None, options=()) runs cop-run."""
    def run_image(image, *args, **kwargs):
        return copimage.cop_run(coprof_bin("cop-run"), image, *args, **kwargs)
    return run_image
