"""cop-run and the coprocessor runtime, through the runtime-probe program:
arguments, console, exit statuses, traps, the windows of the boot block,
the RAM file, and cop-run's own errors."""

import os
import re
import struct

import pytest

import copimage


@pytest.fixture(scope="module")
def probe(test_image):
    return test_image("runtime-probe")


def test_arguments_reach_main(run, probe):
    result = run(probe, "args", "a", "-b", "c d", "")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "argc=6", "argv[0]=%s" % probe, "argv[1]=args", "argv[2]=a",
        "argv[3]=-b", "argv[4]=c d", "argv[5]="]


def test_printf_conversions(run, probe):
    result = run(probe, "printf")
    assert result.returncode == 0
    assert result.stdout.splitlines() == [
        "[-42] [7] [4000000000] [beef] [BEEF]",
        "[   42] [42   ] [00042] [-0042]",
        "[-123456789] [123456789] [-1234567890123] [18446744073709551615] "
        "[123456789abc]",
        "[x] [  y] [abc] [   abc] [abc   ] [64]",
        "[0x80001000] [   9] [5  ] [%]",
        "puts line",
    ]


@pytest.mark.parametrize("args, status", [
    (("return", "0"), 0), (("return", "3"), 3), (("exit", "255"), 255),
    (("exit", "300"), 300 % 256), (("libc-exit", "9"), 9),
])
def test_exit_status_is_the_programs(run, probe, args, status):
    result = run(probe, *args)
    assert result.returncode == status
    assert result.stdout == "" and result.stderr == ""


@pytest.mark.parametrize("args, status, message", [
    (("abort",), 134, "cop: abort() called"),
    (("illegal",), 132, "cop: trap: illegal instruction at 0x8"),
    (("compressed",), 132, "cop: trap: illegal instruction at 0x8"),
    (("fault",), 132, "cop: trap: load access fault at 0x8"),
    (("no-boot-block",), 134,
     "cop: no boot block at 0x80040000: start the program with cop-run"),
])
def test_runtime_failures(run, probe, args, status, message):
    result = run(probe, *args)
    assert result.returncode == status
    assert result.stdout.startswith(message)
    assert result.stdout.count("\n") == 1


STORM = re.compile(r"cop-run: (.*): trap storm at (0x[0-9a-f]{8}) "
                   r"\(mtvec (\2)\)")


@pytest.mark.parametrize("options", [(), ("--sample-every", "1000")])
def test_a_trap_storm_ends_the_run(run, build_dir, tmp_path, options):
    """Issue 32: storm.elf's trap vector is an illegal word, so every trap
    is taken at the vector itself, for ever (the old cop-run never ended).
    cop-run ends it with one line naming the image and the vector, status
    132, and keeps the samples taken until then."""
    storm = copimage.image_path(build_dir, "tests", "guest", "storm.elf")
    samples = tmp_path / "samples"
    if options:
        options += ("--samples-out", str(samples))
    result = run(storm, options=options, timeout=30)
    assert result.returncode == 132, result.stderr
    assert result.stdout == "storm\n"
    lines = result.stderr.splitlines()
    match = STORM.fullmatch(lines[0])
    assert match and match.group(1) == storm, result.stderr
    if options:
        assert lines[1].startswith("captures="), result.stderr
        captures = int(lines[1].split()[0].split("=")[1])
        assert captures > 0
        assert len(samples.read_text().split()) == captures
        vector = int(match.group(2), 16) - 0x80000000
        assert vector in [int(pc, 16) for pc in samples.read_text().split()]
    else:
        assert len(lines) == 1, result.stderr


def test_errno_and_thread_locals(run, probe):
    """picolibc's errno is a __thread variable: the runtime gives the
    program a TLS block and tp (it used to leave tp at 0, and an
    overflowing strtol trapped with a store access fault at 0)."""
    result = run(probe, "errno")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines() == [
        "strtol=2147483647 errno=ERANGE", "strtoul=4294967295 errno=ERANGE",
        "strtol=-12 errno=0", "errno in the local store: yes",
        "tdata=7 tbss=7"]


def test_fault_reports_the_address(run, probe):
    assert "mtval 0x00000004" in run(probe, "fault").stdout


def test_compressed_instruction_is_illegal(run, probe):
    """QEMU runs without the C extension: c.nop (0x0001) does not run."""
    assert "(mcause 2, mtval 0x00000001)" in run(probe, "compressed").stdout


def test_windows_and_name(run, probe):
    result = run(probe, "windows")
    assert result.returncode == 0
    assert result.stdout.splitlines() == [
        "name=runtime-probe",
        "data=0x%08x size=%d" % (copimage.DATA_BASE, copimage.DATA_SIZE),
        "image=0x%08x size=%d magic=ELF" % (copimage.IMAGE_BASE,
                                            os.path.getsize(probe)),
    ]


def test_ram_file_holds_the_run(run, probe, tmp_path):
    ram = str(tmp_path / "ram")
    result = run(probe, "fill-data", 100, ram_file=ram)
    assert result.returncode == 0, result.stdout + result.stderr
    assert os.path.getsize(ram) == copimage.RAM_SIZE
    image = copimage.Image(probe)
    # The whole ELF file in the image window, byte for byte.
    assert copimage.read_ram(ram, copimage.IMAGE_BASE, len(image.data)) == \
        image.data
    # Read-only resident segments are in the local store as in the file.
    for seg in image.segments:
        if not seg.p_flags & 2:
            assert copimage.read_ram(ram, seg.p_vaddr, seg.p_filesz) == \
                image.data[seg.p_offset:seg.p_offset + seg.p_filesz]
    # The boot block and what the program wrote to the data window.
    boot = copimage.read_words(ram, copimage.BOOT_BASE, 8)
    assert boot == [0x42504f43, 1, copimage.IMAGE_BASE, len(image.data),
                    copimage.DATA_BASE, copimage.DATA_SIZE, 3,
                    copimage.BOOT_BASE + 64]
    assert copimage.read_words(ram, copimage.DATA_BASE, 100) == \
        [i * 0x01010101 & 0xffffffff for i in range(100)]


def test_entry_is_start_of_local_store(probe):
    assert copimage.Image(probe).entry == copimage.LS_BASE


def test_missing_image(run, tmp_path):
    result = run(str(tmp_path / "nothing.elf"))
    assert result.returncode == 125
    assert result.stderr == "cop-run: %s: No such file or directory\n" % (
        tmp_path / "nothing.elf")


def test_host_program_is_refused(run):
    result = run("/bin/true")
    assert result.returncode == 125
    assert result.stderr == "cop-run: /bin/true: not a 32-bit ELF file " \
        "(coprocessor images are ELF32 RISC-V)\n"


def test_truncated_image_is_refused(run, probe, tmp_path):
    bad = tmp_path / "cut.elf"
    with open(probe, "rb") as f:
        bad.write_bytes(f.read()[:1000])
    result = run(str(bad))
    assert result.returncode == 125
    assert result.stderr.startswith("cop-run: %s: " % bad)
    assert result.stderr.count("\n") == 1


def test_image_without_overlay_table_finish(run, test_image, tmp_path):
    """An image whose file offsets were not filled in is refused."""
    image = copimage.Image(test_image("overlay-calls"))
    data = bytearray(image.data)
    at = image.file_offset(image.symbols["_ovly_table"]) + 8
    struct.pack_into("<I", data, at, 0x90000000)
    bad = tmp_path / "unfinished.elf"
    bad.write_bytes(bytes(data))
    result = run(str(bad))
    assert result.returncode == 125
    assert "was the image finished by cop-overlays finish?" in result.stderr


def test_missing_qemu(run, probe):
    result = run(probe, options=["--qemu", "/nonexistent/qemu-system-riscv32"])
    assert result.returncode == 127
    assert result.stderr == "cop-run: /nonexistent/qemu-system-riscv32: not " \
        "found (install the Debian package qemu-system-misc)\n"


@pytest.mark.parametrize("program, status", [("/bin/false", 1),
                                             ("/bin/true", 0)])
def test_qemu_that_never_runs_the_program(run, probe, program, status):
    """A 'QEMU' that ends without running the program (which marks its
    boot block at start) is cop-run's error, not the program's status: it
    used to exit 1, or 0, silently."""
    result = run(probe, "return", "5", options=["--qemu", program])
    assert result.returncode == 126
    assert result.stdout == ""
    assert result.stderr == ("cop-run: %s exited with status %d before the "
                             "program started\n" % (program, status))


def test_qemu_arguments_are_appended(run, probe):
    # -icount is harmless; a bad option makes QEMU itself fail.
    ok = run(probe, "return", "5", options=["--qemu-arg", "-icount",
                                            "--qemu-arg", "shift=0"])
    assert ok.returncode == 5
    bad = run(probe, options=["--qemu-arg", "-no-such-option"])
    assert bad.returncode not in (0, 125)
    assert "-no-such-option" in bad.stderr


def test_usage(coprof_bin):
    import subprocess
    cop_run = coprof_bin("cop-run")
    help_text = subprocess.run([cop_run, "--help"], capture_output=True,
                               text=True)
    assert help_text.returncode == 0
    assert help_text.stdout.startswith("usage: cop-run [OPTIONS] IMAGE")
    assert "--ram-file" in help_text.stdout
    no_image = subprocess.run([cop_run], capture_output=True, text=True)
    assert no_image.returncode == 125
    assert no_image.stderr.startswith("usage:")
