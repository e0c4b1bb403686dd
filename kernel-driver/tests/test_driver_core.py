"""The driver core is portable: it calls nothing but the OS shim, the
stream encoder and its own functions, and it builds freestanding."""

import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
FOLDER = os.path.dirname(HERE)
SOURCE = os.path.dirname(FOLDER)
CORE = ("core.c", "event-buffer.c")

# What the core may call: the shim (copdrv-os.h), the encoder
# (escape-protocol/copstream.h) and the core's own files.
SHIM = {"copdrv_os_alloc", "copdrv_os_free", "copdrv_os_lock",
        "copdrv_os_unlock", "copdrv_os_now_ns", "copdrv_os_timer_start",
        "copdrv_os_timer_stop", "copdrv_os_buffer_wake", "copdrv_os_read_ls",
        "copdrv_os_wake_producer"}
ENCODER = {"copstream_record_bytes", "copstream_encode_record",
           "copstream_encode_pc_fields"}


def undefined_symbols(objects):
    """What the objects call, but the sanitizers' runtime (make
    check-sanitize instruments them)."""
    result = subprocess.run(["nm", "-u"] + objects, capture_output=True,
                            text=True, check=True)
    return {line.split()[-1] for line in result.stdout.splitlines()
            if line.strip() and not line.endswith(":")
            and not line.split()[-1].startswith(("__asan_", "__ubsan_"))}


def defined_symbols(objects):
    result = subprocess.run(["nm", "--defined-only", "-g"] + objects,
                            capture_output=True, text=True, check=True)
    return {line.split()[-1] for line in result.stdout.splitlines()
            if len(line.split()) == 3}


def test_core_calls_only_the_shim_and_the_encoder(build_dir):
    objects = [os.path.join(build_dir, "obj", "kernel-driver",
                            name[:-2] + ".o") for name in CORE]
    outside = undefined_symbols(objects) - defined_symbols(objects)
    assert outside <= SHIM | ENCODER | {"_GLOBAL_OFFSET_TABLE_"}


def test_core_builds_freestanding(tmp_path):
    for name in CORE:
        subprocess.run(["gcc", "-std=gnu11", "-O2", "-ffreestanding",
                        "-fno-builtin", "-nostdlib", "-Wall", "-Wextra",
                        "-Werror", "-I", SOURCE, "-c",
                        os.path.join(FOLDER, name), "-o",
                        str(tmp_path / (name + ".o"))], check=True)
