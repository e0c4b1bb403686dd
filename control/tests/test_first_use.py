"""What a user hits at once with coprof record and copcontrol (issue 31):
a missing parent of -o, a ^C before the command runs, the progress line
and the command's output, a rate too slow, settings saved and said."""

import os
import pty
import re
import signal
import subprocess

from control_support import key, one_error_line, session, wait_for


def test_missing_parent_is_not_made(cenv, tmp_path):
    out = tmp_path / "nonexistent" / "a" / "b"
    result = cenv.coprof("record", "-o", str(out), "--", "true")
    line = one_error_line(result, "coprof", 1)
    assert line == "coprof: %s: parent directory %s does not exist" % (
        out, out.parent)
    assert not (tmp_path / "nonexistent").exists()


def test_interrupt_before_the_command_runs(cenv, tmp_path):
    """A SIGINT while copsim boots (the session directory made, the
    command not started) stops the recording: the command never runs,
    coprof exits 130 and the session is complete."""
    out = tmp_path / "early"
    marker = tmp_path / "ran"
    process = subprocess.Popen(
        [cenv.coprof_path, "record", "-o", str(out), "--", "sh", "-c",
         "sleep 3; touch %s" % marker], env=cenv.env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: out.is_dir(), "the session directory")
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr
    assert not marker.exists(), stderr
    with session(out) as db:
        assert key(db, "stream.complete") == 1


def test_progress_line_ends_before_the_command_writes(cenv, tmp_path):
    """On a terminal the command's output starts a line of its own: the
    command writes only once a progress line was seen (a gate file)."""
    gate = tmp_path / "gate"
    master, slave = pty.openpty()
    process = subprocess.Popen(
        [cenv.coprof_path, "record", "-o", str(tmp_path / "p"), "--", "sh",
         "-c", "while [ ! -e %s ]; do sleep 0.05; done; echo PROGRAM-OUTPUT"
         % gate], env=cenv.env, stdout=slave, stderr=slave)
    os.close(slave)
    output = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        output += chunk
        if b"coprof: recording:" in output and not gate.exists():
            gate.write_text("")
    process.wait(timeout=60)
    os.close(master)
    text = output.decode()
    assert process.returncode == 0, text
    assert "\r\nPROGRAM-OUTPUT\r\n" in text, text
    for m in re.finditer(r"coprof: recording: [^\r\n]*", text):
        assert text[m.end():m.end() + 2] == "\r\n", text


def test_too_slow_a_rate_says_so(cenv, tmp_path):
    result = cenv.coprof("record", "--frequency=1Hz", "-o",
                         str(tmp_path / "s"), "--", "true")
    line = one_error_line(result, "coprof", 2)
    assert "--frequency=1Hz" in line and "too slow" in line, line
    assert "faster rate fills" not in line, line


def test_settings_saved_are_said(cenv, tmp_path):
    """Settings alone, a relative --session-dir: one line naming the
    saved file and the absolute directory."""
    (tmp_path / "here").mkdir()
    result = cenv.copcontrol("--session-dir=relative/dir",
                             cwd=str(tmp_path / "here"))
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        "copcontrol: settings saved in %s for later actions; session "
        "directory %s\n" % (cenv.state_file("copcontrol.conf"),
                            tmp_path / "here" / "relative" / "dir"))


def test_timeline_bucket_chosen(cenv, tmp_path):
    """coprof record --timeline-ms: the session's sample buckets."""
    out = tmp_path / "t"
    result = cenv.coprof("record", "--timeline-ms=2", "-o", str(out), "--",
                         "true")
    assert result.returncode == 0, result.stderr
    with session(out) as db:
        assert key(db, "timeline.bucket_ns") == 2000000
    result = cenv.coprof("record", "--timeline-ms=0", "-o", str(out), "--",
                         "true")
    assert "--timeline-ms=0" in one_error_line(result, "coprof", 2)
