"""Fixtures for the tests of overlay/: its test images and copovl."""

import os
import subprocess

import pytest


@pytest.fixture(scope="session")
def overlay_image(build_dir):
    """overlay_image(NAME) is the path of a test image that make built."""
    def path(name):
        p = os.path.join(build_dir, "tests", "overlay", name)
        if not os.path.exists(p):
            pytest.fail("%s is not built: run make" % p)
        return p
    return path


@pytest.fixture(scope="session")
def copovl(coprof_bin):
    """copovl(*ARGS, input=None) runs build/bin/copovl and returns the
    CompletedProcess, with text output."""
    program = coprof_bin("copovl")

    def run(*args, input=None):
        return subprocess.run([program, *map(str, args)], input=input,
                              capture_output=True, text=True, timeout=120)
    return run
