"""coprof record on host-pipeline and on commands that fail: the exit
status passed on, the summary, a complete session with its contexts,
samples and scheduler events, events.coplog kept, the previous session
moved to DIR.old, ^C forwarded; and every bad input."""

import os
import re
import signal
import subprocess
import time

import pytest

from control_support import (context_totals, count, end, key, on_a_terminal,
                             one_error_line, session, table_samples)


def assert_complete(path):
    with session(path) as db:
        assert key(db, "stream.complete") == 1
        assert end(db) == ("complete", "")
        samples = key(db, "stream.samples")
        assert samples == table_samples(db) == context_totals(db)
        return samples, count(db, "contexts"), count(db, "sched_events")


def test_record_host_pipeline(cenv, tmp_path):
    out = tmp_path / "rec"
    host = os.path.join(cenv.build, "examples", "host-pipeline")
    args = ["record", "--event=SPU_CYCLES:10000", "-o", str(out), "--",
            host, "--contexts", "4", "--threads", "2", "--frames", "1"]
    result = cenv.coprof(*args)
    assert result.returncode == 0, result.stderr
    assert "4 ok, 0 failed" in result.stdout
    summary = re.search(r"^coprof: samples=(\d+) lost=(\d+).* contexts=(\d+)"
                        r" images=\d+ sched_events=(\d+)$", result.stderr,
                        re.M)
    assert summary, result.stderr
    assert re.search(r" lost=\d+ \(fifo-overflow=\d+ buffer-full=\d+ "
                     r"no-context=\d+\) outside-ls=\d+ ", result.stderr)
    assert "coprof: session %s" % out in result.stderr
    assert "call stacks" not in result.stderr
    assert "SPU_CYCLES:10000" in result.stderr
    samples, contexts, sched = assert_complete(out)
    assert samples > 0 and contexts == 4 and sched > 0
    assert int(summary.group(1)) == samples
    assert int(summary.group(3)) == 4
    assert int(summary.group(4)) == sched
    assert (out / "events.coplog").exists()
    with session(out) as db:
        kinds = {k for (k,) in db.execute("SELECT DISTINCT kind FROM "
                                          "sched_events")}
        assert {"create", "bind", "unbind", "exit"} <= kinds
        assert key(db, "stream.lfsr_count") == 10000
    # Again: the first session moves to DIR.old.
    result = cenv.coprof(*args)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "rec.old" / "session.db").exists()
    assert_complete(tmp_path / "rec.old")
    assert_complete(out)


def test_record_call_graph(cenv, tmp_path):
    """--call-graph: every sample with its stack, said in the summary; the
    summary has no such line without it (test_record_host_pipeline)."""
    out = tmp_path / "rec"
    host = os.path.join(cenv.build, "examples", "host-pipeline")
    result = cenv.coprof("record", "--call-graph=4",
                         "--event=SPU_CYCLES:10000", "-o", str(out), "--",
                         host, "--contexts", "2", "--frames", "1")
    assert result.returncode == 0, result.stderr
    samples, contexts, _ = assert_complete(out)
    line = re.search(r"^coprof: call stacks: (\d+) samples with their "
                     r"stack \(copreport callgraph\)$", result.stderr, re.M)
    assert line and int(line.group(1)) == samples > 0, result.stderr
    with session(out) as db:
        assert db.execute("SELECT SUM(count) FROM stacks").fetchone()[0] \
            == samples
        depths = {len(f.split()) for (f,) in db.execute(
            "SELECT frames FROM stacks")}
        assert max(depths) <= 1 + 4 + 1     # the sample, 4 frames, "..."


def text_key(db, name):
    row = db.execute("SELECT value FROM session WHERE key = ?",
                     (name,)).fetchone()
    return None if row is None else str(row[0])


def test_record_dither_and_fifo_policy(cenv, tmp_path):
    """Dither on with a drawn seed and FIFO stall by default, both in the
    summary and the session; --no-dither, --dither-seed and --fifo-full
    reach the driver; the summary line keeps its form."""
    host = os.path.join(cenv.build, "examples", "host-pipeline")
    work = [host, "--contexts", "2", "--threads", "1", "--frames", "1"]
    runs = {
        "default": [],
        "seeded": ["--dither-seed=987654321"],
        "fixed": ["--no-dither", "--fifo-full=drop"],
    }
    for name, flags in runs.items():
        out = tmp_path / name
        result = cenv.coprof("record", "--event=SPU_CYCLES:10000", "-o",
                             str(out), *flags, "--", *work)
        assert result.returncode == 0, result.stderr
        assert re.search(r"^coprof: samples=\d+ lost=\d+ \(fifo-overflow=\d+"
                         r" buffer-full=\d+ no-context=\d+\) outside-ls=\d+"
                         r" contexts=2 images=\d+ sched_events=\d+$",
                         result.stderr, re.M), result.stderr
        line = re.search(r"^coprof: sampling: (.*)$", result.stderr, re.M)
        assert line, result.stderr
        with session(out) as db:
            dither = text_key(db, "sampling.dither")
            seed = text_key(db, "sampling.dither_seed")
            fifo = text_key(db, "sampling.fifo_full")
        if name == "fixed":
            assert (dither, fifo) == ("off", "drop")
            assert line.group(1) == "dither off, FIFO full: drop"
            continue
        assert (dither, fifo) == ("on", "stall")
        assert int(seed) > 0
        if name == "seeded":
            assert seed == "987654321"
        assert line.group(1).startswith(
            "dither on (seed %s), FIFO full: stall, stalled " % seed)
        assert "slots' run time)" in line.group(1)


def test_private_directory_removed(cenv, tmp_path):
    """copsim's private directory (under TMPDIR) is gone at the end."""
    tmpdir = os.path.join(cenv.state, "tmp")
    os.mkdir(tmpdir)
    cenv.env["TMPDIR"] = tmpdir
    result = cenv.coprof("record", "-o", str(tmp_path / "t"), "--", "sh",
                         "-c", "test -S \"$COPSIM_SOCKET\" && "
                         "echo \"$COPSIM_SOCKET\"")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(tmpdir + "/coprof-record-")
    assert os.listdir(tmpdir) == []


def test_record_exit_status(cenv, tmp_path):
    host = os.path.join(cenv.build, "examples", "host-pipeline")
    script = "%s --contexts 2 --threads 1 --frames 1 && exit 3" % host
    out = tmp_path / "fails"
    result = cenv.coprof("record", "-o", str(out), "--event=SPU_CYCLES:10000",
                         "--", "sh", "-c", script)
    assert result.returncode == 3, result.stderr
    samples, contexts, _ = assert_complete(out)
    assert samples > 0 and contexts == 2

    result = cenv.coprof("record", "--quiet", "-o", str(tmp_path / "k"),
                         "--", "sh", "-c", "kill -TERM $$")
    assert result.returncode == 128 + signal.SIGTERM
    assert result.stderr == ""
    assert_complete(tmp_path / "k")


def test_a_command_that_cannot_run_is_refused_first(cenv, tmp_path):
    """A command that is not there or cannot run is refused before the
    previous session is touched: two typos lose nothing."""
    out = tmp_path / "kept"
    result = cenv.coprof("record", "-o", str(out), "--", "true")
    assert result.returncode == 0, result.stderr
    before = sorted(os.listdir(out))
    plain = tmp_path / "plain-file"
    plain.write_text("not a program\n")
    for command, status, reason in (
            ("/nonexistent/host", 127, "/nonexistent/host: No such file or "
             "directory"),
            ("no-such-command-xyz", 127, "no-such-command-xyz: not found in "
             "PATH"),
            (str(plain), 126, "%s: Permission denied" % plain),
            (str(tmp_path), 126, "%s: Permission denied" % tmp_path)):
        for _ in range(2):
            result = cenv.coprof("record", "-o", str(out), "--", command)
            assert one_error_line(result, "coprof", status) == \
                "coprof: " + reason
        assert sorted(os.listdir(out)) == before
        assert not (tmp_path / "kept.old").exists()
    assert_complete(out)

@pytest.mark.parametrize("old_files", [
    {"events.coplog": "my notes\n", "thesis.tex": "chapter 1\n"},
    {"session.db": "not a database\n"},
    {"session.db": "not a database\n", "events.coplog": "x\n"},
])
def test_an_old_dir_that_is_not_a_session_is_kept(cenv, tmp_path, old_files):
    """DIR.old is replaced only when it is provably a coprof session and
    holds nothing else; otherwise coprof refuses and touches nothing."""
    out = tmp_path / "rec"
    result = cenv.coprof("record", "-o", str(out), "--", "true")
    assert result.returncode == 0, result.stderr
    old = tmp_path / "rec.old"
    old.mkdir()
    for name, text in old_files.items():
        (old / name).write_text(text)
    result = cenv.coprof("record", "-o", str(out), "--", "true")
    line = one_error_line(result, "coprof", 1)
    assert line == ("coprof: %s: is in the way of the previous session and "
                    "is not only a coprof session; move it away or remove "
                    "it" % old)
    assert {p.name: p.read_text() for p in old.iterdir()} == old_files
    assert_complete(out)


def test_an_old_session_with_other_files_is_kept(cenv, tmp_path):
    out = tmp_path / "rec"
    for _ in range(2):
        result = cenv.coprof("record", "-o", str(out), "--", "true")
        assert result.returncode == 0, result.stderr
    assert_complete(tmp_path / "rec.old")
    (tmp_path / "rec.old" / "notes.txt").write_text("mine\n")
    one_error_line(cenv.coprof("record", "-o", str(out), "--", "true"),
                   "coprof", 1)
    assert (tmp_path / "rec.old" / "notes.txt").read_text() == "mine\n"
    (tmp_path / "rec.old" / "notes.txt").unlink()
    result = cenv.coprof("record", "-o", str(out), "--", "true")
    assert result.returncode == 0, result.stderr
    assert_complete(tmp_path / "rec.old")


def test_record_interrupted(cenv, tmp_path):
    """SIGINT to coprof goes to the command; the session is completed."""
    out = tmp_path / "int"
    ready = tmp_path / "trap-set"
    process = subprocess.Popen(
        [cenv.coprof_path, "record", "-o", str(out), "--", "sh", "-c",
         "trap 'exit 7' INT; touch %s; while :; do sleep 0.05; done" %
         ready], env=cenv.env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 7, stderr
    assert "coprof: session %s" % out in stderr
    assert_complete(out)


@pytest.mark.parametrize("args, status, text", [
    ([], 2, "no subcommand"),
    (["report"], 2, "report: unknown subcommand"),
    (["record"], 2, "record: no command given"),
    (["record", "--"], 2, "record: no command given"),
    (["record", "--event=SPU_CYCLES:0", "--", "true"], 2,
     "count 0 is outside 1..16777215"),
    (["record", "--event=SPU_CYCLES:16777216", "--", "true"], 2,
     "outside 1..16777215"),
    (["record", "--event=SPU_CYCLES:x", "--", "true"], 2, "not a number"),
    (["record", "--event=INSTRUCTIONS:5", "--", "true"], 2,
     "valid events are SPU_CYCLES:N and SPU_INSTRUCTIONS:N"),
    (["record", "--frequency=often", "--", "true"], 2,
     "not a positive frequency"),
    (["record", "--sample-period=-1ms", "--", "true"], 2,
     "not a positive time"),
    (["record", "--event=SPU_CYCLES:1000", "--sample-period=1ms", "--",
      "true"], 2, "give one rate"),
    (["record", "--bogus", "--", "true"], 2, "--bogus: unknown option"),
    (["record", "--slots=0", "--", "true"], 2, "--slots=0"),
    (["record", "--buffer-size=1", "--", "true"], 2, "64-bit words"),
    (["record", "-o"], 2, "-o: needs a value"),
    (["record", "--fifo-full=maybe", "--", "true"], 2,
     "--fifo-full=maybe: not a policy (stall or drop)"),
    (["record", "--fifo-full", "--", "true"], 2, "not a policy"),
    (["record", "--dither-seed=0", "--", "true"], 2,
     "--dither-seed=0: not a seed"),
    (["record", "--dither-seed=-3", "--", "true"], 2, "not a seed"),
    (["record", "--dither-seed=9223372036854775808", "--", "true"], 2,
     "not a seed"),
    (["record", "--no-dither", "--dither-seed=5", "--", "true"], 2,
     "a seed needs the dither"),
    (["record", "--dither-seed=5", "--no-dither", "--", "true"], 2,
     "a seed needs the dither"),
    (["record", "--call-graph=0", "--", "true"], 2,
     "--call-graph=0: not a depth from 1 to 64"),
    (["record", "--call-graph=65", "--", "true"], 2, "not a depth"),
    (["record", "--call-graph=x", "--", "true"], 2, "not a depth"),
])
def test_bad_usage(cenv, tmp_path, args, status, text):
    result = cenv.coprof(*args, cwd=str(tmp_path))
    assert text in one_error_line(result, "coprof", status)
    assert not (tmp_path / "coprof_data").exists()


def test_bad_rate_at_the_clock(cenv, tmp_path):
    """Refused once copsim's clock is known: nothing is left behind, and
    the previous session is back in its place."""
    out = tmp_path / "keep"
    result = cenv.coprof("record", "-o", str(out), "--", "true")
    assert result.returncode == 0, result.stderr
    for rate, says in (("--event=SPU_CYCLES:100", "--fifo-depth"),
                       ("--frequency=1GHz", "--fifo-depth"),
                       ("--sample-period=1s", "too slow")):
        result = cenv.coprof("record", rate, "-o", str(out), "--", "true")
        line = one_error_line(result, "coprof", 2)
        assert says in line
        assert (out / "session.db").exists()
        assert not (tmp_path / "keep.old").exists()
    result = cenv.coprof("record", "--event=SPU_CYCLES:100",
                         "--copsim-arg=--fifo-depth=65536", "-o", str(out),
                         "--", "true")
    assert result.returncode == 0, result.stderr


def test_output_not_writable(cenv, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = cenv.coprof("record", "-o", str(blocker / "sub"), "--", "true")
    assert "Not a directory" in one_error_line(result, "coprof", 1)
    result = cenv.coprof("record", "-o", str(blocker), "--", "true")
    one_error_line(result, "coprof", 1)
    assert blocker.read_text() == ""


def test_progress_on_a_terminal(cenv, tmp_path):
    """On a terminal that the command's output is not, the progress line
    is redrawn in place once a second: no update ends a line (the
    terminal does not scroll), and the last is erased before the
    summary."""
    status, text = on_a_terminal(cenv, ["record", "-o", str(tmp_path / "p"),
                                        "--", "sleep", "3.5"], stdout=False)
    assert status == 0, text
    updates = re.findall(r"\r\x1b\[Kcoprof: recording: \d+ samples/s, "
                         r"\d+ samples, \d+ lost", text)
    assert len(updates) >= 1, text
    assert not re.search(r"coprof: recording: [^\r\n]*\n", text), text
    # the summary starts where the erased line was
    assert re.search(r"lost\r\x1b\[Kcoprof: SPU_CYCLES:", text), text
    assert "coprof: session %s" % (tmp_path / "p") in text
