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


@pytest.fixture(scope="session")
def test_image(build_dir):
    """test_image(NAME) is the path of an image overlay/module.mk built:
    overlays.elf (three regions, five overlays) or plain.elf (none)."""
    def path(name):
        p = os.path.join(build_dir, "tests", "overlay", name)
        if not os.path.exists(p):
            pytest.fail("%s is not built: run make" % p)
        return p
    return path


@pytest.fixture(scope="session")
def example_image(build_dir):
    """example_image(NAME) is build/examples/NAME.elf, an SDK example
    program (examples/README.md)."""
    def path(name):
        p = os.path.join(build_dir, "examples", name + ".elf")
        if not os.path.exists(p):
            pytest.fail("%s is not built: run make" % p)
        return p
    return path


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
