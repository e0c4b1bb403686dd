"""What `coprof record` tells a user who gave it the wrong thing: a
coprocessor image instead of a host program (refused before anything is
touched, saying to use cop-run or cop-embed and libcop), a program that
runs no coprocessor context (recorded, with a line saying so), and
`--list-events`, which the rate errors point to."""

import os
import re

from control_support import one_error_line


def test_coprocessor_image_refused(cenv, build_dir, tmp_path):
    image = os.path.join(build_dir, "examples", "kernels.elf")
    out = tmp_path / "coprof_data"
    result = cenv.coprof("record", "-o", str(out), "--", image)
    line = one_error_line(result, "coprof", 126)
    assert line.startswith("coprof: %s: a coprocessor image, not a host "
                           "program" % image)
    assert "cop-run" in line and "cop-embed" in line and "libcop" in line
    assert not out.exists()


def test_coprocessor_image_found_in_path(cenv, build_dir, tmp_path):
    cenv.env["PATH"] = os.path.join(build_dir, "examples") + ":" + \
        cenv.env["PATH"]
    result = cenv.coprof("record", "-o", str(tmp_path / "d"), "kernels.elf")
    assert "a coprocessor image, not a host program" in \
        one_error_line(result, "coprof", 126)


def test_program_without_libcop(cenv, tmp_path):
    out = tmp_path / "coprof_data"
    result = cenv.coprof("record", "-o", str(out), "--", "/bin/true")
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    (summary,) = [ln for ln in lines if ln.startswith("coprof: samples=")]
    assert re.search(r" contexts=0 ", summary), result.stderr
    assert lines[-2] == "coprof: session %s" % out
    assert lines[-1].startswith("coprof: /bin/true ran no coprocessor "
                                "context: ")
    assert "libcop" in lines[-1] and "cop-run" in lines[-1]


def test_host_program_gets_no_hint(cenv, build_dir, tmp_path):
    program = os.path.join(build_dir, "examples", "host-pipeline")
    result = cenv.coprof("record", "-o", str(tmp_path / "d"), "--",
                         program, "--contexts", "1", "--threads", "1",
                         "--frames", "1")
    assert result.returncode == 0, result.stderr
    assert "ran no coprocessor context" not in result.stderr
    assert result.stderr.splitlines()[-1].startswith("coprof: session ")


def test_list_events(cenv):
    result = cenv.coprof("record", "--list-events")
    assert result.returncode == 0, result.stderr
    assert "copsim's defaults" in result.stdout
    assert re.search(r"SPU_CYCLES:N .* N in 157\.\.16777215", result.stdout)
    assert re.search(r"SPU_INSTRUCTIONS:N .* N in 157\.\.16777215",
                     result.stdout)
    assert "Host CPU events" in result.stdout or "libpfm4" in result.stdout


def test_unknown_event_points_to_list_events(cenv):
    result = cenv.coprof("record", "--event=FOO:10", "--", "/bin/true")
    line = one_error_line(result, "coprof", 2)
    assert "--list-events" in line
    listed = cenv.coprof("record", "--list-events")
    assert listed.returncode == 0
