"""copcontrol against a real copsim, coprofd and host-pipeline: the whole
cycle (init, start, status, dump, stop, reset, shutdown), saved settings,
--list-events, and every bad input: one line, the right exit status."""

import os
import re
import subprocess

import pytest

from control_support import (alive, context_totals, count, end, key,
                             one_error_line, running_with, session,
                             table_samples, wait_gone)

COUNT = 10000


def status_fields(result):
    assert result.returncode == 0, result.stderr
    return dict(re.findall(r"^([\w ]+):\s+(.*)$", result.stdout, re.M))


def lfsr_value(coprof_bin, n):
    out = subprocess.run([coprof_bin("coplfsr"), str(n)], check=True,
                         capture_output=True, text=True).stdout
    return int(out.split()[0], 0)


def test_full_cycle(cenv, coprof_bin, tmp_path, only_a_reset_capture):
    sdir = tmp_path / "s"
    result = cenv.copcontrol("--init")
    assert result.returncode == 0, result.stderr
    assert "serves on " + cenv.socket in result.stdout
    copsim = cenv.pid("copsim.pid")
    assert alive(copsim)
    result = cenv.copcontrol("--init")          # idempotent
    assert result.returncode == 0 and cenv.pid("copsim.pid") == copsim

    result = cenv.copcontrol("--start", "--event=SPU_CYCLES:%d" % COUNT,
                             "--session-dir=%s" % sdir)
    assert result.returncode == 0, result.stderr
    line = result.stdout.strip()
    assert "SPU_CYCLES:%d" % COUNT in line and str(sdir) in line
    assert "0x%06x" % lfsr_value(coprof_bin, COUNT) in line
    coprofd = cenv.pid("coprofd.pid")
    assert alive(coprofd)
    again = cenv.copcontrol("--start")
    one_error_line(again, "copcontrol", 1)

    host = cenv.host_pipeline()
    assert host.returncode == 0, host.stderr

    fields = status_fields(cenv.copcontrol("--status"))
    assert fields["running"] == "yes"
    assert "SPU_CYCLES:%d" % COUNT in fields["event"]
    assert "polled every" in fields["event"]
    assert int(fields["samples"]) > 0
    assert fields["coprofd"] == "pid %d" % coprofd
    assert fields["session"] == str(sdir)

    result = cenv.copcontrol("--dump")
    assert result.returncode == 0, result.stderr
    with session(sdir) as db:
        assert key(db, "flushes.dump") >= 1
        assert key(db, "stream.complete") == 0
        assert key(db, "stream.samples") > 0
        assert count(db, "contexts") == 4

    result = cenv.copcontrol("--stop")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("coprofd: %s: samples=" % sdir)
    assert wait_gone(coprofd)
    stats = status_fields(cenv.copcontrol("--status"))
    assert stats["running"] == "no"
    with session(sdir) as db:
        samples = key(db, "stream.samples")
        assert key(db, "stream.complete") == 1
        assert samples > 0
        assert samples == table_samples(db) == context_totals(db)
        assert samples == int(stats["samples"])
        assert samples == key(db, "stream.stop_samples")
        assert count(db, "contexts") == 4
        assert count(db, "sched_events") > 0
    one_error_line(cenv.copcontrol("--stop"), "copcontrol", 1)
    reset_capture_is_no_loss(cenv, sdir, only_a_reset_capture)

    # A second start moves the finished session aside.
    result = cenv.copcontrol("--start")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "s.old" / "session.db").exists()
    before = cenv.pid("coprofd.pid")
    with session(sdir) as db:
        created = key(db, "created_realtime_ns")
    result = cenv.copcontrol("--reset")
    assert result.returncode == 0, result.stderr
    assert status_fields(cenv.copcontrol("--status"))["running"] == "yes"
    # A new coprofd on a new session, not the old one left running.
    assert alive(cenv.pid("coprofd.pid"))
    assert cenv.pid("coprofd.pid") != before and not alive(before)
    with session(sdir) as db:
        assert key(db, "created_realtime_ns") > created

    result = cenv.copcontrol("--shutdown")
    assert result.returncode == 0, result.stderr
    assert wait_gone(copsim)
    assert not os.path.exists(cenv.socket)
    with session(sdir) as db:
        assert key(db, "stream.complete") == 1
    fields = status_fields(cenv.copcontrol("--status"))
    assert fields["copsim"] == "not running"
    result = cenv.copcontrol("--reset")        # nothing runs: data cleared
    assert result.returncode == 0, result.stderr
    assert not (sdir / "session.db").exists()


def reset_capture_is_no_loss(cenv, sdir, only_a_reset_capture):
    """The session's only LOST record made a capture outside the local
    store (QEMU's reset code): the summary (session_describe, coprof's
    and --status's line) says lost=0 and counts it apart."""
    only_a_reset_capture(sdir)
    recorded = status_fields(cenv.copcontrol("--status"))["recorded"]
    assert re.match(r"samples=\d+ lost=0 \(fifo-overflow=0 buffer-full=0 "
                    r"no-context=0\) outside-ls=1 contexts=4 ", recorded), \
        recorded


def test_saved_settings(cenv, tmp_path):
    sdir = tmp_path / "saved"
    result = cenv.copcontrol("--frequency=20kHz", "--session-dir=%s" % sdir,
                             "--buffer-size=16384")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("copcontrol: settings saved in "), \
        result.stdout
    with open(cenv.state_file("copcontrol.conf")) as f:
        conf = f.read()
    assert "frequency=20kHz" in conf and "buffer-size=16384" in conf
    assert "session-dir=%s" % sdir in conf

    result = cenv.copcontrol("--start")
    assert result.returncode == 0, result.stderr
    assert "SPU_CYCLES:160000" in result.stdout     # 3.2 GHz / 20 kHz
    # the defaults: dither on with a seed drawn at start, FIFO stall
    seed = re.search(r", dither on \(seed (\d+)\), FIFO full: stall; ",
                     result.stdout)
    assert seed, result.stdout
    fields = status_fields(cenv.copcontrol("--status"))
    assert "buffer 131072 bytes" in fields["driver"]
    assert fields["sampling"] == "dither on (seed %s), FIFO full: stall" \
        % seed.group(1)
    assert re.match(r"stalled \d+\.\d\d ms in \d+ stalls?", fields["stalls"])
    assert fields["session"] == str(sdir)
    result = cenv.copcontrol("--stop")
    assert result.returncode == 0, result.stderr
    assert re.search(r"^copcontrol: sampling: dither on \(seed %s\), FIFO "
                     r"full: stall, stalled \d+\.\d\d ms in \d+ stalls? "
                     r"\(\d+\.\d\d%% of the 8 slots' run time\)$"
                     % seed.group(1), result.stdout, re.M), result.stdout
    with session(sdir) as db:
        assert key(db, "stream.lfsr_count") == 160000
        assert key(db, "stream.complete") == 1

    with session(sdir) as db:
        assert str(key(db, "sampling.dither_seed")) == seed.group(1)

    # --no-dither and --fifo-full saved like the rate, and used
    result = cenv.copcontrol("--no-dither", "--fifo-full=drop")
    assert result.returncode == 0, result.stderr
    with open(cenv.state_file("copcontrol.conf")) as f:
        conf = f.read()
    assert "dither=off" in conf and "fifo-full=drop" in conf
    assert "frequency=20kHz" in conf            # the rest kept
    result = cenv.copcontrol("--start")
    assert result.returncode == 0, result.stderr
    assert ", dither off, FIFO full: drop; " in result.stdout
    fields = status_fields(cenv.copcontrol("--status"))
    assert fields["sampling"] == "dither off, FIFO full: drop"
    result = cenv.copcontrol("--stop")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == \
        "copcontrol: sampling: dither off, FIFO full: drop"
    # a seed given is kept for the next starts; --dither back on
    result = cenv.copcontrol("--dither-seed=42", "--dither")
    assert result.returncode == 0, result.stderr
    result = cenv.copcontrol("--start")
    assert ", dither on (seed 42), FIFO full: drop; " in result.stdout
    assert cenv.copcontrol("--stop").returncode == 0

    # The default session directory, once none is saved.
    os.unlink(cenv.state_file("copcontrol.conf"))
    result = cenv.copcontrol("--start", "--event=SPU_CYCLES:50000")
    assert result.returncode == 0, result.stderr
    default = tmp_path / "data" / "coprof" / "current"
    assert str(default) in result.stdout
    assert (default / "session.db").exists()
    assert cenv.copcontrol("--stop").returncode == 0


PERF_TYPE_RAW = 4
EVENT_SOURCES = "/sys/bus/event_source/devices"


def kernel_core_pmus():
    """The kernel's CPU PMUs, as copcontrol decides (control/events.c):
    event sources of type PERF_TYPE_RAW (cpu, cpu_core, cpu_atom,
    armv8_*), not uncore ones such as rapl."""
    found = []
    for name in sorted(os.listdir(EVENT_SOURCES)) \
            if os.path.isdir(EVENT_SOURCES) else []:
        try:
            with open(os.path.join(EVENT_SOURCES, name, "type")) as f:
                if int(f.read()) == PERF_TYPE_RAW:
                    found.append(name)
        except (OSError, ValueError):
            continue
    return found


def test_list_events(cenv):
    result = cenv.copcontrol("--list-events")
    assert result.returncode == 0, result.stderr
    assert re.search(r"SPU_CYCLES:N .*modelled cycles.* N in "
                     r"157\.\.16777215", result.stdout)
    assert re.search(r"SPU_INSTRUCTIONS:N .*retired instructions.* N in "
                     r"157\.\.16777215", result.stdout)
    pmu_events = re.findall(r"^\s+(\w+)::(\S+)", result.stdout, re.M)
    if kernel_core_pmus():
        # A host CPU PMU is exposed: libpfm4 must list its events.
        assert any(p not in ("perf", "perf_raw") for p, _ in pmu_events)
    elif os.path.isdir("/sys/bus/event_source/devices/software"):
        # perf events without a CPU PMU (this project's VMs, which may
        # still show uncore PMUs such as rapl): the generic ones, and a
        # line saying so.
        assert ("perf", "CYCLES") in pmu_events
        assert "no hardware CPU PMU" in result.stdout
    else:
        assert "libpfm4 knows no PMU on this host" in result.stdout


@pytest.mark.parametrize("args, status, text", [
    (["--event=SPU_CYCLES:0"], 2, "count 0 is outside 1..16777215"),
    (["--event=SPU_CYCLES:16777216"], 2, "outside 1..16777215"),
    (["--event=SPU_CYCLES:ten"], 2, "not a number; N is in 1..16777215"),
    (["--event=SPU_CYCLES"], 2, "no count"),
    (["--event=CPU_CYCLES:1000"], 2,
     "valid events are SPU_CYCLES:N and SPU_INSTRUCTIONS:N"),
    (["--frequency=fast"], 2, "not a positive frequency"),
    (["--frequency=0Hz"], 2, "not a positive frequency"),
    (["--sample-period=50"], 2, "not a positive time with a unit"),
    (["--event=SPU_CYCLES:1000", "--frequency=10kHz"], 2, "give one rate"),
    (["--buffer-size=10"], 2, "64-bit words in 8192..134217728"),
    (["--buffer-size=lots"], 2, "64-bit words"),
    (["--bogus"], 2, "--bogus: unknown option"),
    (["--event"], 2, "--event: needs a value"),
    (["--start", "--stop"], 2, "give one action"),
    (["stray"], 2, "stray: unexpected argument"),
    ([], 2, "no action"),
    (["--stop"], 1, "no session runs"),
    (["--dump"], 1, "--dump: no coprofd runs"),
    (["--fifo-full=never"], 2, "--fifo-full=never: not a policy"),
    (["--dither-seed=none"], 2, "--dither-seed=none: not a seed"),
    (["--no-dither", "--dither-seed=3"], 2, "a seed needs the dither"),
])
def test_bad_input(cenv, args, status, text):
    line = one_error_line(cenv.copcontrol(*args), "copcontrol", status)
    assert text in line
    assert not os.path.exists(cenv.state_file("copcontrol.conf"))


def test_bad_input_with_copsim(cenv, tmp_path):
    assert cenv.copcontrol("--init").returncode == 0
    cases = [
        (["--event=SPU_CYCLES:100"], "outside 157..16777215",
         "--fifo-depth"),
        (["--frequency=1GHz"], "outside 190.7 Hz..20.38 MHz",
         "--fifo-depth"),
        (["--sample-period=10s"], "outside 49.06 ns..5.243 ms",
         "too slow"),
    ]
    for args, text, hint in cases:
        # Saving checks against the running copsim, so does --start.
        assert text in one_error_line(cenv.copcontrol(*args), "copcontrol",
                                      2)
        line = one_error_line(cenv.copcontrol("--start", *args),
                              "copcontrol", 2)
        assert text in line and hint in line
    blocker = tmp_path / "file"
    blocker.write_text("")
    line = one_error_line(cenv.copcontrol(
        "--start", "--session-dir=%s/sub" % blocker), "copcontrol", 1)
    assert "Not a directory" in line
    fields = status_fields(cenv.copcontrol("--status"))
    assert fields["running"] == "no"
    assert fields["coprofd"] == "not running"
    # A copsim with a deeper FIFO accepts what the default one refused.
    assert cenv.copcontrol("--shutdown").returncode == 0
    result = cenv.copcontrol("--init", "--copsim-arg=--fifo-depth=65536")
    assert result.returncode == 0, result.stderr
    result = cenv.copcontrol("--start", "--event=SPU_CYCLES:100",
                             "--session-dir=%s" % (tmp_path / "deep"))
    assert result.returncode == 0, result.stderr
    assert cenv.copcontrol("--stop").returncode == 0


@pytest.mark.parametrize("rate", ["--event=SPU_CYCLES:10",
                                  "--frequency=1GHz"])
def test_a_rejected_start_leaves_nothing_running(cenv, tmp_path, rate):
    """A --start refused for its rate (checked against the clock of the
    copsim it started) stops that copsim and its QEMUs again: exit 2, one
    line, nothing of the state directory's left running."""
    line = one_error_line(cenv.copcontrol("--start", rate,
                                          "--session-dir=%s" %
                                          (tmp_path / "s")), "copcontrol", 2)
    assert "outside" in line
    assert running_with(cenv.state) == []
    assert not os.path.exists(cenv.state_file("copsim.pid"))
    assert not (tmp_path / "s").exists()


def test_a_rejected_start_keeps_a_running_copsim(cenv, tmp_path):
    """A copsim that served before the refused --start stays."""
    assert cenv.copcontrol("--init").returncode == 0
    copsim = cenv.pid("copsim.pid")
    one_error_line(cenv.copcontrol("--start", "--event=SPU_CYCLES:10"),
                   "copcontrol", 2)
    assert alive(copsim) and cenv.pid("copsim.pid") == copsim


def test_call_graph(cenv, coprof_bin, tmp_path):
    """--call-graph: refused on a copsim started without it (one line),
    and with it every sample of the session has its call stack."""
    sdir = tmp_path / "s"
    assert cenv.copcontrol("--init").returncode == 0
    line = one_error_line(cenv.copcontrol("--start", "--call-graph",
                                          "--session-dir=%s" % sdir),
                          "copcontrol", 1)
    assert "--call-graph: the copsim serving on %s was started without it" \
        % cenv.socket in line
    assert cenv.copcontrol("--shutdown").returncode == 0
    result = cenv.copcontrol("--init", "--call-graph=8")
    assert result.returncode == 0, result.stderr
    result = cenv.copcontrol("--start", "--call-graph",
                             "--event=SPU_CYCLES:%d" % COUNT,
                             "--session-dir=%s" % sdir)
    assert result.returncode == 0, result.stderr
    assert cenv.host_pipeline().returncode == 0
    assert cenv.copcontrol("--stop").returncode == 0
    with session(sdir) as db:
        samples = key(db, "stream.samples")
        assert samples > 0
        assert key(db, "stream.callstacks") == samples
        assert db.execute("SELECT SUM(count) FROM stacks").fetchone()[0] \
            == samples
    report = subprocess.run([coprof_bin("copreport"), "callgraph", "-d",
                             str(sdir)], capture_output=True, text=True)
    assert report.returncode == 0, report.stderr
    assert "samples with call stacks in 4 contexts" in report.stdout


def test_help_reads_like_a_manual(cenv):
    for result in (cenv.copcontrol("--help"), cenv.coprof("--help"),
                   cenv.coprof("record", "--help")):
        assert result.returncode == 0 and result.stderr == ""
        for section in ("SYNOPSIS", "OPTIONS", "FILES", "EXIT STATUS",
                        "EXAMPLES"):
            assert section in result.stdout
        assert "DIR.old" in result.stdout
        assert "64-bit words" in result.stdout
        # every option at the start of a line of its own
        for option in ("--no-dither", "--dither-seed=S",
                       "--fifo-full=stall|drop", "--buffer-size=N"):
            assert re.search(r"^    %s" % re.escape(option), result.stdout,
                             re.M), option
    assert re.search(r"^    --session-dir=DIR ", cenv.copcontrol(
        "--help").stdout, re.M)
    assert re.search(r"^    -o, --output=DIR ", cenv.coprof("--help").stdout,
                     re.M)


def test_stop_after_coprofd_died(cenv, tmp_path):
    """A coprofd killed mid-session: --dump and --status say so, --stop
    still stops the driver but fails saying coprofd died and what the
    session holds (also written into it), and the next --start works."""
    sdir = tmp_path / "died"
    result = cenv.copcontrol("--start", "--session-dir=%s" % sdir)
    assert result.returncode == 0, result.stderr
    coprofd = cenv.pid("coprofd.pid")
    os.kill(coprofd, 9)
    assert wait_gone(coprofd)
    one_error_line(cenv.copcontrol("--dump"), "copcontrol", 1)
    status = cenv.copcontrol("--status").stdout
    assert "coprofd:        pid %d ended without --stop" % coprofd in status
    assert "(incomplete: coprofd (pid %d) died" % coprofd in status
    result = cenv.copcontrol("--stop")
    line = one_error_line(result, "copcontrol", 1)
    assert line == ("copcontrol: session %s is incomplete: coprofd (pid %d) "
                    "died during the session; %s holds 0 samples, what its "
                    "last flush wrote" % (sdir, coprofd, sdir))
    assert result.stdout.startswith("copcontrol: %s holds samples=0 " % sdir)
    with session(sdir) as db:
        assert end(db) == ("incomplete", line.split(" is incomplete: ")[1])
    status = cenv.copcontrol("--status").stdout
    assert "running:        no" in status
    assert "coprofd:        not running" in status
    result = cenv.copcontrol("--start")
    assert result.returncode == 0, result.stderr
    assert cenv.copcontrol("--stop").returncode == 0
