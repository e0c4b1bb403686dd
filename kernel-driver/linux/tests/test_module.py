"""copdrv.ko in a Linux guest: build, boot, probe, refusals, unload.

The guest is the installed Debian kernel booted under QEMU (PVH) with a
busybox initramfs (kernel-driver/linux/guest.py); each register file is an
ivshmem device, the first at PCI slot 0x10, the next at 0x11, ...
"""

import ctypes
import os
import re
import subprocess
import sys

from module_fixtures import copdrv_ko, guest, register_file  # noqa: F401

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(SOURCE, "abi"))

import cheader  # noqa: E402

# The register file's layout, read from the header the module compiles.
REGS = cheader.load("trace-regs.h")
Header = REGS.struct("trace_regs_header")
Mailbox = REGS.struct("trace_regs_mailbox")


def device_lines(console, slot):
    """The kernel's lines about the PCI device in slot (0x10, 0x11, ...)."""
    name = "copdrv 0000:00:%02x.0: " % slot
    return [line.split(name, 1)[1] for line in console.splitlines()
            if name in line]


def kernel_trouble(console):
    """Lines of kernel warnings, oopses and bugs in the console."""
    return [line for line in console.splitlines()
            if re.search(r"WARNING:|BUG:|Oops|Call Trace|kernel BUG",
                         line)]


def read_struct(path, cls, offset=0):
    """The structure cls at offset of a register file."""
    with open(path, "rb") as f:
        f.seek(offset)
        return cls.from_buffer_copy(f.read(ctypes.sizeof(cls)))


def patch_header(path, **fields):
    """Sets fields of a register file's header."""
    header = read_struct(path, Header)
    for name, value in fields.items():
        setattr(header, name, value)
    with open(path, "r+b") as f:
        f.write(bytes(header))


def test_probe_unload_and_refusals(guest, register_file):
    good = register_file("good", "--slots", "4", "--fifo-depth", "1024")
    bad_magic = register_file("magic")
    patch_header(bad_magic, magic=b"XOPTRACE")
    bad_version = register_file("version")
    patch_header(bad_version, version=2)

    console = guest([good, bad_magic, bad_version],
                    "insmod /copdrv.ko || exit 1\n"
                    "echo bound: $(ls /sys/bus/pci/drivers/copdrv | "
                    "grep 0000)\n"
                    "rmmod copdrv || exit 2\n"
                    "dmesg\n")

    assert "coprof-guest: script status 0" in console, console
    assert device_lines(console, 0x10)[:1] == [
        "trace unit: 4 slots, 64 contexts, FIFO depth 1024, "
        "local store 262144 bytes"], console
    assert "refused: register file magic is not COPTRACE" in \
        device_lines(console, 0x11), console
    assert "refused: register file version 2, this driver speaks 5" in \
        device_lines(console, 0x12), console
    assert "bound: 0000:00:10.0\n" in console, console
    assert kernel_trouble(console) == [], console


CONTROL = "/sys/bus/pci/devices/0000:00:10.0/copdrv"


def set_rate(coplfsr, count):
    """Shell lines that set the session's parameters for one capture
    every count cycles, with the LFSR value lfsr/ computes."""
    value = subprocess.run([coplfsr, str(count)], capture_output=True,
                           text=True, check=True).stdout.split()[0]
    return ("echo %s > %s/lfsr_value\n"
            "echo %d > %s/lfsr_count\n"
            "echo 1000000 > %s/poll_interval_ns\n"
            "echo 3200000000 > %s/clock_hz\n"
            % (value, CONTROL, count, CONTROL, CONTROL, CONTROL))


def read_session(stream):
    """Shell lines that open /dev/copdrv for a reader copying it into the
    port $STREAM<stream> (opened by the shell, so it is open before
    anything follows) and start a session; $reader is the copy."""
    return ("exec 3</dev/copdrv\n"
            "cat <&3 > $STREAM%d &\n"
            "reader=$!\n"
            "exec 3<&-\n"
            "echo 1 > %s/enable\n" % (stream, CONTROL))


def check_stream(copstream, path):
    """copstream check's summary line of the stream file, then its errors."""
    done = subprocess.run([copstream, "check", path], capture_output=True,
                          text=True)
    return (done.stdout + done.stderr).strip()


def test_reader_control_and_removal_mid_session(guest, register_file,
                                                build_dir, tmp_path):
    regs = register_file("regs", "--slots", "2")
    coplfsr = os.path.join(build_dir, "bin", "coplfsr")
    copstream = os.path.join(build_dir, "bin", "copstream")
    stopped, removed = str(tmp_path / "stopped"), str(tmp_path / "removed")

    console = guest([regs],
                    ("set -e\n"
                     "insmod /copdrv.ko\n"
                     "mdev -s\n"
                     + set_rate(coplfsr, 997)
                     # A session started and stopped through the control
                     # files, read whole by the one reader.
                     + read_session(0) +
                    "cat /dev/copdrv 2>&1 | grep -q 'resource busy' && "
                    "echo second reader refused\n"
                    "echo 5 > %(c)s/lfsr_count 2>/dev/null || "
                    "echo set refused while running\n"
                    "echo 0 > %(c)s/enable\n"
                    "wait $reader\n"
                    "grep ended /sys/kernel/debug/copdrv/stats\n"
                    # The device removed during a session: STOP, then
                    # end-of-file for the reader.
                    + read_session(1) +
                    "echo 0000:00:10.0 > /sys/bus/pci/drivers/copdrv/unbind\n"
                    "wait $reader\n"
                    "echo reader got end-of-file\n"
                    "rmmod copdrv\n"
                    "dmesg\n") % {"c": CONTROL},
                    [stopped, removed])

    assert "coprof-guest: script status 0" in console, console
    assert "second reader refused" in console
    assert "set refused while running" in console
    assert "ended 1" in console
    assert "reader got end-of-file" in console
    assert "removed during a session: stopped it" in \
        device_lines(console, 0x10), console
    assert kernel_trouble(console) == [], console
    for stream in (stopped, removed):
        assert check_stream(copstream, stream) == \
            "samples=0 lost=0 contexts=0 errors=0"


def test_poll_says_readable_only_with_a_stream(guest, register_file,
                                               build_dir):
    """busybox's read -t waits in poll(): before any start nothing can be
    readable, so it times out (status 1) and never blocks in read(); after
    the start, START is there at once."""
    regs = register_file("regs", "--slots", "2")
    coplfsr = os.path.join(build_dir, "bin", "coplfsr")

    console = guest([regs],
                    "insmod /copdrv.ko\n"
                    "mdev -s\n"
                    + set_rate(coplfsr, 997) +
                    "exec 3</dev/copdrv\n"
                    "read -t 0.2 -n 1 x <&3; echo before start: $?\n"
                    "echo 1 > %(c)s/enable\n"
                    "read -t 30 -n 8 x <&3; echo after start: $?\n"
                    "echo 0 > %(c)s/enable\n"
                    "exec 3<&-\n"
                    "rmmod copdrv\n"
                    "dmesg\n" % {"c": CONTROL})

    assert "before start: 1\n" in console, console
    assert "after start: 0\n" in console, console
    assert kernel_trouble(console) == [], console


def post_bind(path, slot, context_id, image_path):
    """Posts a BIND in slot's mailbox as copsim does (docs/trace-unit.md,
    "Mailbox"): the message (the controller's lines, the guard words and
    the path), then seq + 1."""
    header = read_struct(path, Header)
    box = header.mailbox_offset + slot * header.mailbox_stride
    image = image_path.encode()
    message = Mailbox(op=REGS.defines["TRACE_MAILBOX_BIND"], context=0,
                      slot=slot, context_id=context_id, object_id=0x5000,
                      pid=4242, tid=4243, image_offset=0x1000,
                      guard_ls_offset=0, guard_count=0,
                      path_length=len(image), image_device=8, image_inode=9,
                      image_file_size=0x4000, image_hash=0x1234, path=image)
    data = bytes(message)
    with open(path, "r+b") as f:
        for start, end in ((Mailbox.op.offset, Mailbox.ack.offset),
                           (Mailbox.guards.offset, len(data))):
            f.seek(box + start)
            f.write(data[start:end])
        message.seq = 1
        seq = Mailbox.seq
        f.seek(box + seq.offset)
        f.write(bytes(message)[seq.offset:seq.offset + seq.size])
    return box


def test_binds_come_from_the_mailbox(guest, register_file, build_dir,
                                     tmp_path):
    """A context copsim posted in slot 1's mailbox before the module was
    loaded is bound by it (the session's stream names it) and acked, and
    the module says it reads the mailboxes only while it is loaded."""
    regs = register_file("regs", "--slots", "2")
    box = post_bind(regs, 1, 77, "/srv/images/kernel.elf")
    coplfsr = os.path.join(build_dir, "bin", "coplfsr")
    copstream = os.path.join(build_dir, "bin", "copstream")
    stream = str(tmp_path / "stream")

    console = guest([regs],
                    "set -e\n"
                    "insmod /copdrv.ko\n"
                    "mdev -s\n"
                    + set_rate(coplfsr, 997)
                    + read_session(0) +
                    "echo 0 > %(c)s/enable\n"
                    "wait $reader\n"
                    "rmmod copdrv\n"
                    "dmesg\n" % {"c": CONTROL},
                    [stream])

    assert "coprof-guest: script status 0" in console, console
    assert kernel_trouble(console) == [], console
    assert read_struct(regs, Mailbox, box).ack == 1
    assert read_struct(regs, Header).mailbox_reader == 0
    assert check_stream(copstream, stream) == \
        "samples=0 lost=0 contexts=1 errors=0"
    dump = subprocess.run([copstream, "dump", stream], capture_output=True,
                          text=True, check=True).stdout
    assert "/srv/images/kernel.elf" in dump, dump
