"""Tests of the coplfsr command line: outputs and every error path."""

import subprocess

import pytest


def run(coprof_bin, *args):
    return subprocess.run([coprof_bin("coplfsr"), *args], capture_output=True,
                          text=True, timeout=30)


def first_token(result):
    return result.stdout.splitlines()[0].split()[0]


def test_value_for_count(coprof_bin):
    result = run(coprof_bin, "1")
    assert result.returncode == 0
    assert first_token(result) == "0xfffffe"
    assert first_token(run(coprof_bin, "16777215")) == "0xffffff"


def test_inverse_round_trip(coprof_bin):
    for n in ("1", "2", "65536", "50000", "16777214", "16777215"):
        value = first_token(run(coprof_bin, n))
        assert len(value) == 8
        back = run(coprof_bin, "--inverse", value)
        assert back.returncode == 0
        assert first_token(back) == n


def test_period(coprof_bin):
    result = run(coprof_bin, "--period", "50us", "--clock-hz", "1e9",
                 "--fifo-depth", "1024")
    assert result.returncode == 0
    fields = dict(f.split("=") for f in result.stdout.split())
    assert fields["count"] == "50000"
    assert fields["value"] == first_token(run(coprof_bin, "50000"))
    assert fields["poll_interval_ns"] == "25600000"
    assert float(fields["error_ppm"]) == 0.0


def test_frequency(coprof_bin):
    result = run(coprof_bin, "--frequency", "20kHz", "--clock-hz", "1GHz")
    assert result.returncode == 0
    assert "count=50000" in result.stdout.split()


@pytest.mark.parametrize("args, words", [
    (["0"], ["count 0", "1 to 16777215"]),
    (["16777216"], ["count 16777216", "1 to 16777215"]),
    (["abc"], ["'abc'", "not a number", "1 to 16777215"]),
    (["-5"], ["'-5'", "1 to 16777215"]),
    (["--inverse", "0"], ["value 0", "0x000001 to 0xffffff"]),
    (["--inverse", "0x1000000"], ["0x1000000", "0x000001 to 0xffffff"]),
    (["--inverse", "0xzz"], ["'0xzz'", "not a number"]),
    (["--period", "50", "--clock-hz", "1e9"], ["'50'", "us"]),
    (["--period", "1s", "--clock-hz", "1e9"], ["period 1s", "1 to 16777215 cycles"]),
    (["--period", "50us"], ["--clock-hz"]),
    (["--period", "50us", "--clock-hz", "x"], ["clock 'x'"]),
    (["--frequency", "10GHz", "--clock-hz", "1e9"], ["frequency 10GHz", "valid"]),
    (["--period", "50us", "--clock-hz", "1e9", "--fifo-depth", "0"],
     ["FIFO depth '0'", "out of range", "1 to"]),
    (["--period", "50us", "--clock-hz", "1e9", "--fifo-depth", "abc"],
     ["FIFO depth 'abc'", "not a number", "1 to"]),
])
def test_errors(coprof_bin, args, words):
    result = run(coprof_bin, *args)
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("coplfsr: ")
    for word in words:
        assert word in lines[0]


def test_usage_errors(coprof_bin):
    assert run(coprof_bin).returncode == 2
    assert run(coprof_bin, "1", "2").returncode == 2
    assert run(coprof_bin, "--bogus").returncode == 2
    help_text = run(coprof_bin, "--help")
    assert help_text.returncode == 0 and "usage: coplfsr" in help_text.stdout
