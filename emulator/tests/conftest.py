"""Fixtures for the trace unit's pytest tests: the test guests and the QEMU
command line that runs them (without the plugin; coptrace run adds it)."""

import os

import pytest


@pytest.fixture(scope="session")
def guest(build_dir):
    """guest(NAME) is the path of the test guest build/tests/guest/NAME.elf."""
    def path(name):
        elf = os.path.join(build_dir, "tests", "guest", name + ".elf")
        if not os.path.exists(elf):
            pytest.fail("%s is not built: run make" % elf)
        return elf
    return path


@pytest.fixture(scope="session")
def qemu_command(guest):
    """qemu_command(NAME) runs guest NAME on the virt machine, console on
    stdout, entered through QEMU's reset code (six instructions outside the
    local store)."""
    def command(name):
        return ["qemu-system-riscv32", "-M", "virt", "-bios", "none",
                "-display", "none", "-monitor", "none", "-serial", "stdio",
                "-kernel", guest(name)]
    return command
