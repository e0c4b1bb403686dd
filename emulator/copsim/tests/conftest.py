"""Fixtures for copsim's tests (the helpers behind them are in
copsim_harness.py, which the tests import by that name)."""

import os

import pytest

from copsim_harness import Copsim


@pytest.fixture
def copsim(build_dir):
    """copsim(OPTION, ..., prefix=COMMAND) starts a copsim for this test;
    prefix, a command that runs copsim with the options appended, replaces
    build/bin/copsim."""
    started = []

    def start(*options, prefix=()):
        sim = Copsim(build_dir, options, prefix)
        started.append(sim)
        return sim
    yield start
    for sim in started:
        alive = sim.alive()
        status = sim.stop()
        assert not alive or status == 0, "copsim exited with %d" % status


@pytest.fixture(scope="session")
def test_bin(build_dir):
    """test_bin(NAME) is build/tests/NAME."""
    def path(name):
        p = os.path.join(build_dir, "tests", name)
        if not os.path.exists(p):
            pytest.fail("%s is not built: run make" % p)
        return p
    return path


@pytest.fixture(scope="session")
def probe_image(build_dir):
    return os.path.join(build_dir, "tests", "cop", "copsim-probe.elf")
