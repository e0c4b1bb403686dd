"""Fixtures for the tests of coprofd: the test images, the Python stream
encoder (escape-protocol/coprof_stream.py), and running coprofd and copovl.
"""

import os
import subprocess
import sys

import pytest

SOURCE = os.environ.get("COPROF_SOURCE", os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(SOURCE, "escape-protocol"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def built_file(build_dir, *parts):
    """build/PARTS..., or the test fails: make has not built it."""
    path = os.path.join(build_dir, *parts)
    if not os.path.exists(path):
        pytest.fail("%s is not built: run make" % path)
    return path


@pytest.fixture(scope="session")
def test_image(build_dir):
    """test_image(NAME) is the path of an image overlay/module.mk built:
    overlays.elf (three regions, five overlays) or plain.elf (none)."""
    return lambda name: built_file(build_dir, "tests", "overlay", name)


@pytest.fixture(scope="session")
def example_image(build_dir):
    """example_image(NAME) is build/examples/NAME.elf, an SDK example
    program (examples/README.md)."""
    return lambda name: built_file(build_dir, "examples", name + ".elf")


@pytest.fixture(scope="session")
def coprofd(coprof_bin):
    """coprofd(*ARGS, **kw) runs build/bin/coprofd to its end and returns
    the CompletedProcess (text output)."""
    program = coprof_bin("coprofd")

    def run(*args, **kw):
        kw.setdefault("timeout", 120)
        return subprocess.run([program, *map(str, args)], capture_output=True,
                              text=True, **kw)
    run.program = program
    return run


@pytest.fixture(scope="session")
def resolver(coprof_bin):
    """A coprofd_support.Resolver on build/bin/copovl."""
    import coprofd_support
    return coprofd_support.Resolver(coprof_bin("copovl"))
