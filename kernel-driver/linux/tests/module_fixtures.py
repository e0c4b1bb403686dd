"""Fixtures of the Linux module's tests: the built copdrv.ko, the guest.

    from module_fixtures import copdrv_ko, guest, register_file  # noqa: F401

copdrv_ko skips the test, naming the Debian packages, only when no kernel
image with its headers is installed (make deps installs them); with them
installed, a module that is not built fails the test.
"""

import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                ".."))
import guest as guest_module  # noqa: E402

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(SOURCE, "abi"))

import cheader  # noqa: E402

# The register file's layout, read from the header the module compiles.
REGS = cheader.load("trace-regs.h")
Mailbox = REGS.struct("trace_regs_mailbox")


def bind_message(slot, context, context_id, image_path, guard_ls_offset=0,
                 guards=()):
    """A BIND message (struct trace_regs_mailbox) as copsim posts it
    (docs/trace-unit.md, "Mailbox"), seq not yet moved."""
    image = image_path.encode()
    message = Mailbox(op=REGS.defines["TRACE_MAILBOX_BIND"],
                      context=context, slot=slot, context_id=context_id,
                      object_id=0x5000, pid=4242, tid=4243,
                      image_offset=0x1000, guard_ls_offset=guard_ls_offset,
                      guard_count=len(guards), path_length=len(image),
                      image_device=8, image_inode=9, image_file_size=0x4000,
                      image_hash=0x1234, path=image)
    for i, guard in enumerate(guards):
        message.guards[i] = guard
    return message


def message_body(message):
    """[(offset, bytes)] of a mailbox message's fields that its poster
    writes before seq: all but seq and the driver's ack line."""
    data = bytes(message)
    return [(start, data[start:end]) for start, end in (
        (Mailbox.op.offset, Mailbox.ack.offset),
        (Mailbox.guards.offset, len(data)))]


@pytest.fixture(scope="session")
def copdrv_ko(build_dir):
    reason = guest_module.missing_reason()
    if reason:
        pytest.skip(reason)
    path = os.path.join(build_dir, "kernel-driver", "linux", "copdrv.ko")
    if not os.path.exists(path):
        pytest.fail("%s is not built: run make" % path)
    return path


@pytest.fixture
def guest(copdrv_ko):
    """guest(regs_files, script, stream_files) boots the guest and returns
    its console; the script's $STREAMk lands in stream_files[k]."""
    def run(regs_files, script, stream_files=(), kernel_args="",
            timeout=60):
        return guest_module.run(copdrv_ko, regs_files, script, stream_files,
                                timeout=timeout, kernel_args=kernel_args)
    return run


@pytest.fixture
def register_file(build_dir, tmp_path):
    """register_file(NAME) creates a fresh register file with coptrace."""
    coptrace = os.path.join(build_dir, "bin", "coptrace")

    def create(name, *options):
        path = str(tmp_path / name)
        subprocess.run([coptrace, "create", path, *options], check=True)
        return path
    return create
