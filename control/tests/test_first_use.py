"""What a user hits at once with coprof record and copcontrol (issue 31):
a missing parent of -o, a ^C before the command runs, the progress line
and the command's output, coprof record --top, a rate too slow, settings
saved and said."""

import os
import signal
import subprocess

from control_support import key, on_a_terminal, one_error_line, session, \
    wait_for


def test_missing_parent_is_not_made(cenv, tmp_path):
    out = tmp_path / "nonexistent" / "a" / "b"
    result = cenv.coprof("record", "-o", str(out), "--", "true")
    line = one_error_line(result, "coprof", 1)
    # the first missing component is named (common/safe-file.h's rule)
    assert line == "coprof: %s: %s: no such directory (a missing parent " \
        "is not created)" % (out, tmp_path / "nonexistent")
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


def test_no_progress_line_on_the_command_terminal(cenv, tmp_path):
    """When the command's output goes to the terminal coprof's progress
    would be drawn on, there is none while it runs (as perf record): the
    command writes after 2.5 s, when a line a second would have come
    twice, and its output is a line of its own."""
    status, text = on_a_terminal(cenv, [
        "record", "-o", str(tmp_path / "p"), "--", "sh", "-c",
        "sleep 2.5; echo PROGRAM-OUTPUT"])
    assert status == 0, text
    assert "coprof: recording:" not in text, text
    assert text.startswith("PROGRAM-OUTPUT\r\ncoprof: SPU_CYCLES:"), text


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


def test_record_top_draws_on_the_terminal(cenv, tmp_path, build_dir):
    """coprof record --top: coprof top's screen on the terminal while the
    command runs (the command waits on a gate the test opens once the
    screen is drawn), the command's output in DIR/command.log and not on
    the screen, the terminal given back (curses leaves its alternate
    screen) before the summary, which names the log."""
    out, gate = tmp_path / "top", tmp_path / "gate"
    knob = [os.path.join(build_dir, "tests", "cop-host"),
            os.path.join(build_dir, "tests", "report", "knob.elf")]

    def open_gate(text, process):
        if "coprof top: %s" % out in text and not gate.exists():
            gate.write_text("")
    status, text = on_a_terminal(cenv, [
        "record", "--top", "-o", str(out), "--", "sh", "-c",
        "echo CMD-OUT; echo CMD-ERR >&2; while [ ! -e %s ]; do sleep "
        "0.05; done; exec %s %s" % (gate, knob[0], knob[1])], open_gate)
    assert status == 0, text
    screen = text.index("coprof top: %s" % out)
    assert "samples/s" in text[screen:]
    assert "CMD-OUT" not in text and "CMD-ERR" not in text, text
    log = (out / "command.log").read_text()
    assert log.startswith("CMD-OUT\nCMD-ERR\n") and "knob rounds=" in log
    assert os.stat(str(out / "command.log")).st_mode & 0o777 == 0o600
    left = text.index("\x1b[?1049l", screen)    # rmcup: the screen back
    summary = text.index("coprof: session %s\r\n" % out)
    assert left < summary, text
    assert "coprof: sh's output: %s/command.log\r\n" % out in text
    assert "Traceback" not in text, text


def test_record_top_interrupted(cenv, tmp_path):
    """A ^C (SIGINT to the terminal's process group) while --top draws
    stops the command, not top's clean exit: coprof exits 130 with a
    complete session and the terminal given back."""
    out = tmp_path / "int"
    sent = []

    def interrupt(text, process):
        if "coprof top: %s" % out in text and not sent:
            sent.append(True)
            os.killpg(process.pid, signal.SIGINT)
    status, text = on_a_terminal(cenv, [
        "record", "--top", "-o", str(out), "--", "sleep", "300"], interrupt)
    assert sent and status == 130, text
    assert "\x1b[?1049l" in text[text.index("coprof top:"):], text
    assert "Traceback" not in text, text
    with session(out) as db:
        assert key(db, "stream.complete") == 1


def test_record_top_needs_a_terminal(cenv, tmp_path):
    result = cenv.coprof("record", "--top", "-o", str(tmp_path / "t"), "--",
                         "true")
    line = one_error_line(result, "coprof", 2)
    assert "--top" in line and "not a terminal" in line, line
    assert not (tmp_path / "t").exists()
