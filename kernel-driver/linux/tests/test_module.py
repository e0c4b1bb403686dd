"""copdrv.ko in a Linux guest: build, boot, probe, refusals, unload.

The guest is the installed Debian kernel booted under QEMU (PVH) with a
busybox initramfs (kernel-driver/linux/guest.py); each register file is an
ivshmem device, the first at PCI slot 0x10, the next at 0x11, ...
"""

import ctypes
import os
import re
import subprocess

from module_fixtures import (REGS, Mailbox, bind_message,  # noqa: F401
                             copdrv_ko, guest, message_body, register_file)

Header = REGS.struct("trace_regs_header")


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


def patch_struct(path, cls, offset=0, **fields):
    """Sets fields of the structure cls at offset of a register file."""
    block = read_struct(path, cls, offset)
    for name, value in fields.items():
        setattr(block, name, value)
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(bytes(block))


def patch_header(path, **fields):
    """Sets fields of a register file's header."""
    patch_struct(path, Header, **fields)


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
    message = bind_message(slot, 0, context_id, image_path)
    with open(path, "r+b") as f:
        for start, data in message_body(message):
            f.seek(box + start)
            f.write(data)
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


Slot = REGS.struct("trace_regs_slot")


def test_one_trace_unit_and_no_mailbox_thread_between_sessions(
        guest, register_file, build_dir, tmp_path):
    """A second trace unit is refused at probe with one line, before the
    module acks anything of it or registers anything for it (no sysfs
    duplicate-name splat); the mailbox thread runs only while a session
    does, and the header's mailbox_reader says so.  Slot 0's LFSR seqlock
    is held (lfsr_seq odd): its loads at start and stop are skipped,
    counted in lfsr_busy and said once in dmesg."""
    first = register_file("first", "--slots", "2")
    slot0 = read_struct(first, Header).slots_offset
    patch_struct(first, Slot, slot0, lfsr_seq=3)
    second = register_file("second", "--slots", "2")
    first_box = post_bind(first, 1, 77, "/srv/images/first.elf")
    second_box = post_bind(second, 0, 78, "/srv/images/second.elf")
    coplfsr = os.path.join(build_dir, "bin", "coplfsr")
    stream = str(tmp_path / "stream")
    # ps into a file first: grep then never counts itself.
    threads = "ps > /tmp/ps; grep -c copdrv-mailbox /tmp/ps"

    script = ("set -e\n"
              "insmod /copdrv.ko\n"
              "mdev -s\n"
              "echo bound: $(ls /sys/bus/pci/drivers/copdrv | grep 0000)\n"
              "echo threads before: $(%(t)s)\n"
              + set_rate(coplfsr, 997)
              + read_session(0) +
              "echo threads during: $(%(t)s)\n"
              "echo 0 > %(c)s/enable\n"
              "wait $reader\n"
              "grep lfsr_busy /sys/kernel/debug/copdrv/stats\n"
              "echo threads after: $(%(t)s)\n"
              "rmmod copdrv\n"
              "dmesg\n") % {"c": CONTROL, "t": threads}
    console = guest([first, second], script, [stream])

    assert "coprof-guest: script status 0" in console, console
    assert "bound: 0000:00:10.0\n" in console, console
    # The console has the line as it happened and in dmesg's copy.
    assert set(device_lines(console, 0x11)) == {
        "refused: trace unit 0000:00:10.0 is already bound (one at a "
        "time)"}, console
    assert "duplicate" not in console, console
    assert kernel_trouble(console) == [], console
    assert read_struct(first, Mailbox, first_box).ack == 1
    assert read_struct(second, Mailbox, second_box).ack == 0
    assert "threads before: 0\n" in console, console
    assert "threads during: 1\n" in console, console
    assert "threads after: 0\n" in console, console
    assert read_struct(first, Header).mailbox_reader == 0
    assert "lfsr_busy 2\n" in console, console
    said = [line for line in device_lines(console, 0x10)
            if line.startswith("LFSR loads skipped")]
    assert said == ["LFSR loads skipped: 1, a slot's lfsr_seq stayed odd; "
                    "those slots keep their old sampling state (said "
                    "once)"], console
    assert read_struct(first, Slot, slot0).lfsr_seq == 3
