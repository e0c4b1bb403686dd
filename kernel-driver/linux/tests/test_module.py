"""copdrv.ko in a Linux guest: build, boot, probe, refusals, unload.

The guest is the installed Debian kernel booted under QEMU (PVH) with a
busybox initramfs (kernel-driver/linux/guest.py); each register file is an
ivshmem device, the first at PCI slot 0x10, the next at 0x11, ...
"""

import re
import struct

from module_fixtures import copdrv_ko, guest, register_file  # noqa: F401

VERSION_OFFSET = 8


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


def patch(path, offset, data):
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def test_probe_unload_and_refusals(guest, register_file):
    good = register_file("good", "--slots", "4", "--fifo-depth", "1024")
    bad_magic = register_file("magic")
    patch(bad_magic, 0, b"XOPTRACE")
    bad_version = register_file("version")
    patch(bad_version, VERSION_OFFSET, struct.pack("<I", 2))

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
    assert "refused: register file version 2, this driver speaks 3" in \
        device_lines(console, 0x12), console
    assert "bound: 0000:00:10.0\n" in console, console
    assert kernel_trouble(console) == [], console
