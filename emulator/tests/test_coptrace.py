"""Tests of the trace unit through `coptrace` and qemu-system-riscv32.

Exactness is checked against QEMU's own single-step execution log, which
knows nothing of the plugin, and the fast mode against the reference mode
on every test guest for several N.  Also: FIFO overflow counted exactly,
two emulators on two slots of one register file at once, and corrupt or
wrong-version register files refused before the guest runs.
"""

import hashlib
import os
import re
import signal
import subprocess
import time

import pytest

LS_BASE = 0x80000000
LS_SIZE = 0x40000
BIG_FIFO = str(1 << 20)
COUNTERS = re.compile(r"^captures=(\d+) dropped=(\d+) instructions=(\d+) "
                      r"outside_ls=(\d+)$", re.M)


class Traced:
    def __init__(self, proc, samples_path):
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        match = COUNTERS.search(proc.stderr)
        assert match, proc.stderr
        self.captures, self.dropped, self.instructions, self.outside = (
            int(g) for g in match.groups())
        with open(samples_path) as f:
            self.samples = f.read().split()


def trace_args(every, samples, reference=False, depth=None, regs=None,
               context=None, slot=None, drain=True):
    args = ["run", "--event", "SPU_INSTRUCTIONS", "--sample-every", str(every), "--samples-out", samples]
    if reference:
        args.append("--reference")
    if depth:
        args += ["--fifo-depth", depth]
    if regs:
        args += ["--regs", regs]
    if context is not None:
        args += ["--context", str(context), "--slot", str(slot)]
    if not drain:
        args.append("--no-drain")
    return args


def run_traced(coprof_bin, command, tmp_path, every, **options):
    samples = str(tmp_path / ("samples-%d-%d" % (every, time.monotonic_ns())))
    proc = subprocess.run([coprof_bin("coptrace"),
                           *trace_args(every, samples, **options), "--",
                           *command], capture_output=True, text=True,
                          timeout=120)
    return Traced(proc, samples)


def single_step_pcs(command, tmp_path):
    """Every PC the guest executes, from QEMU's exec log, one TB per insn."""
    log = tmp_path / "exec.log"
    subprocess.run([*command, "-singlestep", "-d", "exec,nochain", "-D",
                    str(log)], capture_output=True, timeout=120)
    return [int(pc, 16) for pc in
            re.findall(r"^Trace \d+: \S+ \[[0-9a-f]+/([0-9a-f]+)/",
                       log.read_text(), re.M)]


def ls_address(pc):
    return "0x%05x" % (pc - LS_BASE)


def in_local_store(pc):
    return LS_BASE <= pc < LS_BASE + LS_SIZE


@pytest.mark.parametrize("every", [1, 3, 10, 97])
@pytest.mark.parametrize("reference", [False, True], ids=["fast", "reference"])
def test_captures_match_qemu_single_step_log(coprof_bin, qemu_command,
                                             tmp_path, every, reference):
    command = qemu_command("short")
    pcs = single_step_pcs(command, tmp_path)
    assert len(pcs) > 500
    captured = pcs[every - 1::every]          # instructions k*N, 1-based
    run = run_traced(coprof_bin, command, tmp_path, every,
                     reference=reference, depth=BIG_FIFO)
    assert run.returncode == 7                # short's own exit status
    assert run.instructions == len(pcs)
    assert run.captures == len(captured)
    assert run.dropped == 0
    assert run.outside == sum(not in_local_store(pc) for pc in captured)
    assert run.samples == [ls_address(pc) for pc in captured
                           if in_local_store(pc)]


@pytest.mark.parametrize("name,every", [
    ("short", 1), ("short", 2),
    ("mix", 1), ("mix", 7), ("mix", 1009), ("mix", 65536),
    ("spin", 997), ("spin", 100003), ("spin", 16777215),
])
def test_fast_mode_equals_reference_mode(coprof_bin, qemu_command, tmp_path,
                                         name, every):
    command = qemu_command(name)
    fast = run_traced(coprof_bin, command, tmp_path, every, depth=BIG_FIFO)
    reference = run_traced(coprof_bin, command, tmp_path, every,
                           reference=True, depth=BIG_FIFO)
    assert fast.returncode == reference.returncode
    assert fast.dropped == reference.dropped == 0
    assert fast.instructions == reference.instructions
    assert fast.captures == reference.captures == fast.instructions // every
    assert fast.outside == reference.outside
    assert fast.samples == reference.samples


def test_overflow_counted_exactly(coprof_bin, qemu_command, tmp_path):
    command = qemu_command("mix")
    full = run_traced(coprof_bin, command, tmp_path, 7, depth=BIG_FIFO)
    stuck = run_traced(coprof_bin, command, tmp_path, 7, depth="1024",
                       drain=False)
    assert stuck.captures == full.captures == full.instructions // 7
    assert stuck.outside == full.outside == 0
    assert stuck.dropped == stuck.captures - 1024
    assert stuck.samples == full.samples[:1024]   # the oldest stay queued


def test_two_emulators_on_two_slots(coprof_bin, qemu_command, tmp_path):
    regs = str(tmp_path / "regs")
    subprocess.run([coprof_bin("coptrace"), "create", regs, "--slots", "2",
                    "--fifo-depth", "262144"], check=True)
    jobs = []
    for context, (name, every) in enumerate([("spin", 997), ("mix", 101)]):
        samples = str(tmp_path / ("shared-%s" % name))
        proc = subprocess.Popen(
            [coprof_bin("coptrace"),
             *trace_args(every, samples, regs=regs, context=context,
                         slot=context), "--", *qemu_command(name)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        jobs.append((name, every, samples, proc))
    for name, every, samples, proc in jobs:
        stdout, stderr = proc.communicate(timeout=120)
        shared = Traced(subprocess.CompletedProcess(
            proc.args, proc.returncode, stdout, stderr), samples)
        alone = run_traced(coprof_bin, qemu_command(name), tmp_path, every,
                           depth="262144")
        assert shared.returncode == 0
        assert (shared.captures, shared.dropped, shared.instructions) == \
            (alone.captures, 0, alone.instructions)
        assert shared.samples == alone.samples
    show = subprocess.run([coprof_bin("coptrace"), "show", regs],
                          capture_output=True, text=True, check=True).stdout
    assert re.search(r"^slot 0: context 0 .* dropped=0 outside_ls=0 queued=0$",
                     show, re.M)
    assert re.search(r"^slot 1: context 1 .* dropped=0 outside_ls=0 queued=0$",
                     show, re.M)
    assert re.search(r"^context 1: slot 1 status=exited .*mode=fast", show,
                     re.M)


def damage_magic(data):
    data[0:8] = b"NOTTRACE"


def damage_version(data):
    data[8] = 2


def damage_depth(data):
    data[32] = 100


def damage_truncate(data):
    del data[-64:]


@pytest.mark.parametrize("damage,reason", [
    (damage_magic, "not a trace-unit register file (bad magic)"),
    (damage_version, "register file version 2, this build reads version 5"),
    (damage_depth, "is not a power of two"),
    (damage_truncate, "header says"),
])
def test_bad_register_file_refused(coprof_bin, build_dir, qemu_command,
                                   tmp_path, damage, reason):
    regs = tmp_path / "regs"
    subprocess.run([coprof_bin("coptrace"), "create", str(regs)], check=True)
    data = bytearray(regs.read_bytes())
    damage(data)
    regs.write_bytes(bytes(data))
    before = hashlib.sha256(regs.read_bytes()).hexdigest()
    plugin = os.path.join(build_dir, "lib", "libcoptrace.so")
    proc = subprocess.run(
        [*qemu_command("mix"), "-plugin",
         "%s,regs=%s,context=0" % (plugin, regs)],
        capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "mix crc" not in proc.stdout       # the guest never ran
    ours = [line for line in proc.stderr.splitlines()
            if line.startswith("coptrace: ")]
    assert ours == ["coptrace: %s: %s" % (regs, ours[0].split(": ", 2)[2])]
    assert reason in ours[0]
    assert hashlib.sha256(regs.read_bytes()).hexdigest() == before


@pytest.mark.parametrize("options,message", [
    ("context=0", "usage: -plugin libcoptrace.so,regs=FILE,context=N"),
    ("regs=REGS,context=0,speed=9", "unknown option 'speed=9'"),
    ("regs=REGS,context=zero", "bad context id 'zero'"),
    ("regs=REGS,context=64", "context 64 is out of range (64 contexts)"),
    ("regs=REGS.missing,context=0", "cannot open: No such file or directory"),
])
def test_bad_plugin_options_refused(coprof_bin, build_dir, qemu_command,
                                    tmp_path, options, message):
    regs = str(tmp_path / "regs")
    subprocess.run([coprof_bin("coptrace"), "create", regs], check=True)
    plugin = os.path.join(build_dir, "lib", "libcoptrace.so")
    proc = subprocess.run(
        [*qemu_command("mix"), "-plugin",
         "%s,%s" % (plugin, options.replace("REGS", regs))],
        capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "mix crc" not in proc.stdout
    assert message in proc.stderr


def test_context_in_use_refused(coprof_bin, build_dir, qemu_command, tmp_path):
    regs = str(tmp_path / "regs")
    subprocess.run([coprof_bin("coptrace"), "create", regs], check=True)
    plugin = os.path.join(build_dir, "lib", "libcoptrace.so")
    argument = "%s,regs=%s,context=5" % (plugin, regs)
    # Context 5's gate is closed and nobody opens it: the first emulator
    # waits there, owning the context.
    first = subprocess.Popen([*qemu_command("mix"), "-plugin", argument],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while "status=held" not in subprocess.run(
                [coprof_bin("coptrace"), "show", regs], capture_output=True,
                text=True).stdout:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        second = subprocess.run([*qemu_command("mix"), "-plugin", argument],
                                capture_output=True, text=True, timeout=60)
        assert second.returncode != 0
        assert "context 5 is attached to emulator pid %d" % first.pid \
            in second.stderr
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()


@pytest.mark.parametrize("args,message", [
    (["run", "--", "true"], "run needs --sample-every N"),
    (["run", "--event", "SPU_INSTRUCTIONS", "--sample-every", "0", "--", "true"], "outside 1..16777215"),
    (["run", "--event", "SPU_INSTRUCTIONS", "--sample-every", "16777216", "--", "true"], "outside 1..16777215"),
    (["run", "--event", "SPU_INSTRUCTIONS", "--sample-every", "5"], "needs an emulator command"),
    (["run", "--event", "SPU_INSTRUCTIONS", "--sample-every", "5", "--fifo-depth", "1000", "--", "true"],
     "FIFO depth 1000 is not a power of two"),
    (["run", "--event", "SPU_INSTRUCTIONS", "--sample-every", "5", "--slot", "8", "--", "true"],
     "out of range"),
    (["create"], "create needs exactly one FILE"),
    (["create", "/tmp/coptrace-never-made", "--stack-depth", "65"],
     "call-stack depth 65 is above 64"),
    (["show", "/nonexistent/regs"], "/nonexistent/regs: cannot open"),
    (["frobnicate"], "unknown command 'frobnicate'"),
])
def test_cli_errors(coprof_bin, args, message):
    proc = subprocess.run([coprof_bin("coptrace"), *args],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert len(proc.stderr.splitlines()) == 1


def test_create_with_a_call_stack_area(coprof_bin, tmp_path):
    regs = str(tmp_path / "regs")
    subprocess.run([coprof_bin("coptrace"), "create", regs, "--slots", "2",
                    "--fifo-depth", "1024", "--stack-depth", "8"], check=True)
    show = subprocess.run([coprof_bin("coptrace"), "show", regs],
                          capture_output=True, text=True, check=True).stdout
    assert "fifo depth 1024, " in show
    assert ", call stacks of 8 frames\n" in show
    plain = str(tmp_path / "plain")
    subprocess.run([coprof_bin("coptrace"), "create", plain, "--slots", "2",
                    "--fifo-depth", "1024"], check=True)
    # The area is appended: two slots of 1024 records of 1 + 8 words.
    assert os.path.getsize(regs) - os.path.getsize(plain) == 2 * 1024 * 9 * 4


def test_help_reads_like_a_manual(coprof_bin):
    proc = subprocess.run([coprof_bin("coptrace"), "--help"],
                          capture_output=True, text=True)
    assert proc.returncode == 0
    assert proc.stdout.startswith("usage: coptrace create FILE")
    assert "captures=A dropped=B" in proc.stdout
    assert "instructions=C outside_ls=D" in proc.stdout
    assert max(len(line) for line in proc.stdout.splitlines()) <= 79
