"""The trace unit's exact instruction counts (counts=, `cop-run
--exact-counts`, `coptrace run --exact-counts`, `copsim --exact-counts`)
and their reader, tests/exact_counts.py: the counts add up to the
instructions the run retired, equal the reference mode's captures at N = 1
pc for pc, attribute overlay code to the right overlay section, leave the
captures alone, and come one file per context out of copsim."""

import collections
import io
import os
import re
import subprocess
import sys

import pytest
from elftools.elf.elffile import ELFFile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import exact_counts  # noqa: E402

COUNTERS = re.compile(r"^captures=(\d+) dropped=(\d+) instructions=(\d+) "
                      r"outside_ls=(\d+)$", re.M)
LS_BASE = 0x80000000
BIG_FIFO = str(1 << 22)

# Overlay example: hot function -> its overlay's section.
HOT = {
    "blur_picture": ".overlay.blur",
    "crc16_bitwise": ".overlay.crc",
    "histogram_median": ".overlay.histogram",
    "count_primes": ".overlay.sieve",
    "shell_sort": ".overlay.sort",
}


def counters_of(stderr):
    match = COUNTERS.search(stderr)
    assert match, stderr
    return dict(zip(("captures", "dropped", "instructions", "outside"),
                    (int(g) for g in match.groups())))


def cop_run(coprof_bin, image, args, every, *options, counts=None,
            samples=None):
    command = [coprof_bin("cop-run"), "--event", "SPU_INSTRUCTIONS", "--sample-every", str(every),
               "--fifo-depth", BIG_FIFO, *options]
    if counts:
        command += ["--exact-counts", str(counts)]
    if samples:
        command += ["--samples-out", str(samples)]
    proc = subprocess.run(command + [image, *args], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return counters_of(proc.stderr)


def example(build_dir, name):
    return os.path.join(build_dir, "examples", name + ".elf")


def functions(image_path, elf_offset=0):
    """[(name, section, first file offset, end)] of the image's functions,
    offsets in image_path."""
    with open(image_path, "rb") as f:
        f.seek(elf_offset)
        elf = ELFFile(io.BytesIO(f.read()))
    out = []
    for sym in elf.get_section_by_name(".symtab").iter_symbols():
        if sym["st_info"]["type"] != "STT_FUNC" or not sym["st_size"]:
            continue
        sec = elf.get_section(sym["st_shndx"])
        start = elf_offset + sec["sh_offset"] + sym["st_value"] - sec["sh_addr"]
        out.append((sym.name, sec.name, start, start + sym["st_size"]))
    return out


def per_function(by_offset, funcs):
    totals = collections.Counter()
    for offset, count in by_offset.items():
        names = [(n, s) for n, s, a, b in funcs if a <= offset < b]
        assert len(names) <= 1, (offset, names)
        totals[names[0] if names else None] += count
    return totals


@pytest.mark.parametrize("name,args", [("kernels", ["1"]),
                                       ("overlays", ["1"]),
                                       ("pipeline", ["1"])])
def test_sum_equals_the_instructions_retired(coprof_bin, build_dir, tmp_path,
                                             name, args):
    counts = tmp_path / "run.counts"
    counters = cop_run(coprof_bin, example(build_dir, name), args, 1000,
                       counts=counts)
    runs = exact_counts.read_counts(str(counts))
    assert len(runs) == 1 and runs[0].mode == "fast"
    assert runs[0].instructions == counters["instructions"]
    attributed = exact_counts.attribute(str(counts), example(build_dir, name))
    assert sum(a.count for a in attributed) == counters["instructions"]
    outside = [a for a in attributed if a.where is None]
    assert all(a.pc < LS_BASE for a in outside)        # QEMU's reset code
    by_offset = exact_counts.counts_by_file_offset(str(counts),
                                                   example(build_dir, name))
    assert sum(by_offset.values()) == \
        counters["instructions"] - sum(a.count for a in outside)


@pytest.mark.parametrize("mode", ["fast", "reference"])
def test_counts_leave_the_captures_alone(coprof_bin, build_dir, tmp_path,
                                         mode):
    image = example(build_dir, "overlays")
    options = ["--reference"] if mode == "reference" else []
    plain = cop_run(coprof_bin, image, ["1"], 7, *options,
                    samples=tmp_path / "plain")
    counted = cop_run(coprof_bin, image, ["1"], 7, *options,
                      samples=tmp_path / "counted",
                      counts=tmp_path / "run.counts")
    assert plain == counted and plain["dropped"] == 0
    assert (tmp_path / "plain").read_text() == \
        (tmp_path / "counted").read_text()
    assert exact_counts.total_instructions(str(tmp_path / "run.counts")) \
        == counted["instructions"]


def qemu_command(build_dir, name):
    """Test guest NAME on the virt machine, entered through QEMU's reset
    code (instructions outside the local store)."""
    return ["qemu-system-riscv32", "-M", "virt", "-bios", "none",
            "-display", "none", "-monitor", "none", "-serial", "stdio",
            "-kernel", os.path.join(build_dir, "tests", "guest",
                                    name + ".elf")]


@pytest.mark.parametrize("guest_name", ["short", "mix"])
@pytest.mark.parametrize("mode", ["fast", "reference"])
def test_counts_equal_captures_at_every_instruction(coprof_bin, build_dir,
                                                    tmp_path, guest_name,
                                                    mode):
    """At N = 1 every instruction is captured (both modes give the
    reference's captures: emulator/tests), so the captures per LS address
    are the exact counts.  short.elf exits in the middle of a block."""
    samples, counts = tmp_path / "samples", tmp_path / "run.counts"
    proc = subprocess.run(
        [coprof_bin("coptrace"), "run", "--event", "SPU_INSTRUCTIONS", "--sample-every", "1",
         "--fifo-depth", BIG_FIFO, "--samples-out", str(samples),
         "--exact-counts", str(counts)]
        + (["--reference"] if mode == "reference" else [])
        + ["--", *qemu_command(build_dir, guest_name)],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == (7 if guest_name == "short" else 0), \
        proc.stderr
    counters = counters_of(proc.stderr)
    assert counters["dropped"] == 0
    captured = collections.Counter(int(x, 16) for x in
                                   samples.read_text().split())
    assert {run.mode for run in exact_counts.read_counts(str(counts))} \
        == {mode}
    per_pc = per_pc_counts(counts)
    in_ls = {pc - LS_BASE: n for pc, n in per_pc.items()
             if LS_BASE <= pc < LS_BASE + 0x40000 and n}
    assert in_ls == dict(captured)
    assert sum(per_pc.values()) - sum(in_ls.values()) == counters["outside"]
    assert sum(per_pc.values()) == counters["instructions"]


def per_pc_counts(counts):
    per_pc = collections.Counter()
    for run in exact_counts.read_counts(str(counts)):
        for code in run.codes:
            for insn in code.insns:
                if insn.count:
                    per_pc[insn.pc] += insn.count
    return per_pc


@pytest.mark.parametrize("command,status", [("illegal", 132), ("fault", 132),
                                            ("abort", 134)])
def test_traps_and_errors_counted_exactly(coprof_bin, build_dir, tmp_path,
                                          command, status):
    """Programs that trap (a block left at the faulting instruction) or stop
    in the runtime: the counts equal the reference mode's captures at N = 1
    pc for pc, and are the same whichever mode samples (the fast mode
    itself counts the rest of a block cut by a fault: docs/trace-unit.md)."""
    image = os.path.join(build_dir, "tests", "cop", "runtime-probe.elf")
    results = {}
    for mode in ("fast", "reference"):
        samples, counts = tmp_path / (mode + ".s"), tmp_path / (mode + ".c")
        proc = subprocess.run(
            [coprof_bin("cop-run"), "--event", "SPU_INSTRUCTIONS", "--sample-every", "1", "--fifo-depth",
             BIG_FIFO, "--samples-out", str(samples), "--exact-counts",
             str(counts)] + (["--reference"] if mode == "reference" else [])
            + [image, command], capture_output=True, text=True, timeout=120)
        assert proc.returncode == status, proc.stderr
        results[mode] = (counters_of(proc.stderr), samples, counts)
    reference, samples, _ = results["reference"]
    captured = collections.Counter(int(x, 16) for x in
                                   samples.read_text().split())
    for mode in ("fast", "reference"):
        per_pc = per_pc_counts(results[mode][2])
        assert {pc - LS_BASE: n for pc, n in per_pc.items()
                if pc >= LS_BASE} == dict(captured)
        assert sum(per_pc.values()) == reference["instructions"]


def test_overlay_functions_counted_in_their_own_overlay(coprof_bin,
                                                        build_dir, tmp_path):
    image = example(build_dir, "overlays")
    counts = tmp_path / "run.counts"
    counters = cop_run(coprof_bin, image, ["2"], 10007, counts=counts)
    by_offset = exact_counts.counts_by_file_offset(str(counts), image)
    totals = per_function(by_offset, functions(image))
    mapped = sum(by_offset.values())
    assert mapped > 0.99 * counters["instructions"]
    # Nearly everything is inside some function.
    assert totals[None] < 0.01 * mapped
    for name, section in HOT.items():
        assert totals[(name, section)] > 0.01 * mapped, (name, totals)
        assert not any(n == name and s != section for n, s in totals
                       if n), (name, totals)
    # Every overlay's code is attributed to that overlay section: the
    # reader's `where` agrees with the sections the offsets fall in.
    where = collections.Counter()
    for a in exact_counts.attribute(str(counts), image):
        where[a.where] += a.count
    for section in HOT.values():
        assert where[section] > 0
    assert where[".overlay.crc"] > where[".overlay.sort"]


def test_identical_overlay_code_is_an_error(coprof_bin, build_dir, tmp_path):
    """An image whose crc overlay carries blur's bytes: blur's code matches
    two overlays, and the reader says so instead of picking one."""
    image = example(build_dir, "overlays")
    counts = tmp_path / "run.counts"
    cop_run(coprof_bin, image, ["1"], 1000, counts=counts)
    data = bytearray(open(image, "rb").read())
    with open(image, "rb") as f:
        elf = ELFFile(f)
        blur = elf.get_section_by_name(".overlay.blur")
        crc = elf.get_section_by_name(".overlay.crc")
        n = min(blur["sh_size"], crc["sh_size"])
        data[crc["sh_offset"]:crc["sh_offset"] + n] = \
            data[blur["sh_offset"]:blur["sh_offset"] + n]
        blur_start = blur["sh_addr"]
    twin = tmp_path / "twin.elf"
    twin.write_bytes(bytes(data))
    # Keep only the blur code in the region's first bytes.
    run = exact_counts.read_counts(str(counts))[0]
    code = next(c for c in run.codes if c.pc == blur_start
                and c.insns[0].data == data[blur["sh_offset"]:
                                            blur["sh_offset"] + 4]
                and c.insns[0].data != open(image, "rb").read()[
                    crc["sh_offset"]:crc["sh_offset"] + 4])
    lines = ["coprof-exact-counts 1",
             "run context=0 mode=fast ls_base=0x80000000 ls_size=0x40000",
             "code 0x%08x %d 0x%08x" % (code.pc, len(code.insns), code.hash)]
    lines += ["0x%08x %s %d" % (i.pc, i.data.hex(), i.count)
              for i in code.insns]
    lines.append("end instructions=%d codes=1"
                 % sum(i.count for i in code.insns))
    one = tmp_path / "one.counts"
    one.write_text("\n".join(lines) + "\n")
    assert exact_counts.attribute(str(one), image)[0].where == ".overlay.blur"
    with pytest.raises(exact_counts.CountsError, match="ambiguous"):
        exact_counts.counts_by_file_offset(str(one), str(twin))


def tenfold_count(line):
    """An instruction line with its count (third column) ten times over."""
    words = line.split()
    words[2] += "0"
    return " ".join(words) + "\n"


def test_reader_refuses_damaged_files(coprof_bin, build_dir, tmp_path):
    image = example(build_dir, "kernels")
    counts = tmp_path / "run.counts"
    cop_run(coprof_bin, image, ["1"], 1000, counts=counts)
    text = counts.read_text()
    lines = text.splitlines(keepends=True)
    for bad, why in [("".join(lines[:len(lines) // 2]), "cut short"),
                     ("".join(lines[:3] + [tenfold_count(lines[3])]
                              + lines[4:]), "end line says"),
                     ("garbage\n", "expected"),
                     ("", "no runs")]:
        path = tmp_path / "bad.counts"
        path.write_text(bad)
        with pytest.raises(exact_counts.CountsError, match=why):
            exact_counts.read_counts(str(path))
    # Code that is not the image's.
    other = example(build_dir, "pipeline")
    with pytest.raises(exact_counts.CountsError, match="not the image's"):
        exact_counts.counts_by_file_offset(str(counts), other)


def test_unwritable_counts_file(coprof_bin, build_dir, tmp_path):
    bad = tmp_path / "missing" / "run.counts"
    proc = subprocess.run(
        [coprof_bin("cop-run"), "--event", "SPU_INSTRUCTIONS", "--sample-every", "1000", "--exact-counts",
         str(bad), example(build_dir, "kernels"), "1"],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 125
    assert proc.stderr.strip().splitlines() == \
        ["cop-run: %s: %s: no such directory (a missing parent is not "
         "created)" % (bad, bad.parent)]
    proc = subprocess.run(
        [coprof_bin("cop-run"), "--exact-counts", str(tmp_path / "x"),
         example(build_dir, "kernels"), "1"],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 125 and "need --sample-every" in proc.stderr
    proc = subprocess.run(
        [coprof_bin("coptrace"), "run", "--event", "SPU_INSTRUCTIONS", "--sample-every", "1000",
         "--exact-counts", str(bad), "--", *qemu_command(build_dir, "short")],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == \
        ["coptrace: %s: %s: no such directory (a missing parent is not "
         "created)" % (bad, bad.parent)]


def test_plugin_refuses_an_unwritable_counts_file(coprof_bin, build_dir,
                                                  tmp_path):
    """The plugin's own check (copsim's DIR gone after its start): one
    line, and QEMU stops before the guest runs."""
    plugin = os.path.join(build_dir, "lib", "libcoptrace.so")
    regs = tmp_path / "regs"
    subprocess.run([coprof_bin("coptrace"), "create", str(regs)], check=True)
    bad = tmp_path / "missing" / "c.counts"
    proc = subprocess.run(
        ["qemu-system-riscv32", "-M", "virt", "-bios", "none", "-display",
         "none", "-monitor", "none", "-serial", "none", "-plugin",
         "%s,regs=%s,context=0,counts=%s" % (plugin, regs, bad)],
        capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "coptrace: %s: cannot write: No such file or directory" % bad \
        in proc.stderr


def sched_records(coprof_bin, log, kind):
    dump = subprocess.run([coprof_bin("coplog"), "dump", str(log), "--subsys",
                           "SCHED"], capture_output=True, text=True,
                          check=True).stdout
    out = []
    for line in dump.splitlines():
        words = line.split()
        if kind in words:
            fields = words[words.index(kind) + 1:]
            out.append(dict(w.split("=", 1) for w in fields if "=" in w))
    return out


def test_copsim_writes_one_file_per_context(coprof_bin, build_dir, tmp_path):
    """host-pipeline under copsim, 6 contexts time-sliced on 2 slots: one
    counts file per context, each adding up to the instructions of its exit
    record, the overlays context attributed through the host executable."""
    counts_dir = tmp_path / "counts"
    counts_dir.mkdir()
    log = tmp_path / "sched.coplog"
    host = os.path.join(build_dir, "examples", "host-pipeline")
    # copsim binds nothing until the 6 contexts wait (COPSIM_TEST_GATHER):
    # 4 wait while 2 run, so the running ones are preempted.
    proc = subprocess.run(
        [coprof_bin("copsim"), "--event=SPU_CYCLES:10007", "--stream-out",
         str(tmp_path / "stream"), "--slots", "2", "--slice", "10000",
         "--event-log", str(log), "--exact-counts", str(counts_dir),
         "--", host, "--threads", "6", "--contexts", "6", "--frames",
         "1", "--rounds", "1", "--console-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=600,
        env=dict(os.environ, COPSIM_TEST_GATHER="6"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    exits = {int(r["context"]): int(r["instructions"])
             for r in sched_records(coprof_bin, log, "exit")}
    loads = {int(r["context"]): r for r in sched_records(coprof_bin, log,
                                                         "load")}
    assert len(exits) == 6
    assert sched_records(coprof_bin, log, "preempt")
    assert sorted(os.listdir(counts_dir)) == \
        sorted("context-%d.counts" % c for c in exits)
    for context, instructions in exits.items():
        path = str(counts_dir / ("context-%d.counts" % context))
        runs = exact_counts.read_counts(path)
        assert len(runs) == 1
        assert runs[0].instructions == instructions
        load = loads[context]
        assert load["path"] == host and int(load["offset"]) > 0
        by_offset = exact_counts.counts_by_file_offset(
            path, load["path"], int(load["offset"]))
        assert 0.99 * instructions < sum(by_offset.values()) <= instructions
        if load["name"] == "overlays":
            totals = per_function(by_offset, functions(host,
                                                       int(load["offset"])))
            for name, section in HOT.items():
                assert totals[(name, section)] > 0, (name, totals)


def test_copsim_counts_dir_parent_must_exist(coprof_bin, tmp_path):
    """copsim makes the counts directory (the safe-write rule), never a
    missing parent of it."""
    counts = tmp_path / "nowhere" / "counts"
    proc = subprocess.run(
        [coprof_bin("copsim"), "--socket", str(tmp_path / "s"),
         "--exact-counts", str(counts)],
        capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == \
        ["copsim: --exact-counts: %s: %s: no such directory (a missing "
         "parent is not created)" % (counts, tmp_path / "nowhere")]
    assert not (tmp_path / "nowhere").exists()
