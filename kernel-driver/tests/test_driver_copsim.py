"""The driver hosted in copsim: `copsim --event=SPU_CYCLES:N --stream-out
FILE -- COMMAND` on libcop host programs (cop-host, from copsim's tests),
and the control interface on copsim's socket (abi/copdrv-control.h, read as
ctypes structures by abi/cheader.py).  Every stream is checked against the writer rules
(copdrv-rules), for conservation against the trace unit's counters, and
against the reference mode's capture sequence.
"""

import array
import ctypes
import errno
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile

import pytest

from driver_fixtures import example, test_bin  # noqa: F401 (fixtures)
from stream_check import SOURCE, Stream, expected_samples, reference_trace

sys.path.insert(0, os.path.join(SOURCE, "abi"))

import cheader  # noqa: E402

FIFO_DEPTH = 65536      # deep enough that a loaded machine drops nothing


def check_rules(test_bin, path):
    result = subprocess.run([test_bin("copdrv-rules"), str(path)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def slot_counters(stderr):
    """copsim's per-slot lines: {slot: {captures, dropped, outside, ...}}."""
    counters = {}
    for line in stderr.splitlines():
        match = re.match(r"copsim: slot (\d+): (.*)", line)
        if match:
            counters[int(match.group(1))] = {
                k: int(v) for k, v in re.findall(r"(\w+)=(\d+)",
                                                 match.group(2))}
    return counters


def host_contexts(stdout):
    """cop-host's lines: {context id: {instructions, status, ...}}."""
    contexts = {}
    for line in stdout.splitlines():
        if line.startswith("context="):
            fields = dict(re.findall(r"(\w+)=(\S*)", line))
            contexts[int(fields["context"])] = fields
    return contexts


def assert_conservation(counters, stream):
    assert counters
    for slot, c in counters.items():
        assert c["captures"] == stream.slot_samples[slot] + stream.lost(slot)
        assert c["dropped"] == stream.lost(slot, 1)
        assert c["outside"] == stream.lost(slot, 4)
    assert stream.errors == [] and stream.orphans == 0


def run_one_command(coprof_bin, tmp_path, options, command,
                    fifo_depth=FIFO_DEPTH):
    stream_path = tmp_path / "stream"
    result = subprocess.run(
        [coprof_bin("copsim"), "--fifo-depth", str(fifo_depth),
         "--stream-out", str(stream_path)] + options + ["--"] + command,
        capture_output=True, text=True, timeout=120)
    return result, stream_path


@pytest.mark.parametrize("event", ["SPU_CYCLES", "SPU_INSTRUCTIONS"])
@pytest.mark.parametrize("dither", [None, 12345])
def test_one_command_matches_reference(coprof_bin, test_bin, example,
                                       tmp_path, dither, event):
    """One context on its own: the stream is the reference capture
    sequence of cop-run counting the same event, sample for sample, and
    conservation holds; with --dither=SEED the dithered sequence of
    cop-run --dither SEED, and the START record carries the seed and the
    event."""
    image = example("overlays")
    seed = ["--no-dither"] if dither is None else ["--dither=%d" % dither]
    result, path = run_one_command(
        coprof_bin, tmp_path, ["--event=%s:997" % event] + seed,
        [test_bin("cop-host"), image, "5"])
    assert result.returncode == 0, result.stderr
    check_rules(test_bin, path)
    stream = Stream(path.read_bytes())
    assert_conservation(slot_counters(result.stderr), stream)
    context, = host_contexts(result.stdout)
    want, counters = reference_trace(coprof_bin("cop-run"), image, [5], 997,
                                     dither=dither, event=event)
    assert stream.samples[context] == want
    assert stream.start["lfsr_count"] == 997
    assert stream.start["event"] == (event == "SPU_INSTRUCTIONS")
    assert stream.start["dither"] == (dither is not None)
    assert stream.start["dither_seed"] == (dither or 0)
    assert stream.start["fifo_full"] == 1       # stall, the default
    regions = {o["region"] for o in stream.overlays[context]}
    assert regions == {0, 1}


# A looping context on the slot first, then two programs that end: the
# loop is on the slot or waiting whenever they are, so they are sliced.
SLICING_SCRIPT = """
host=$1
"$host" embedded loop & loop=$!
sleep 0.5
"$host" "$2" 1 & first=$!
"$host" "$3" 1 & second=$!
wait $first; a=$?
wait $second; b=$?
kill $loop; wait $loop
exit $((a | b))
"""


# A FIFO too deep to fill; and an 8-entry one that is full most of the
# time, so that the emulators stall and copsim's preemptions hold
# contexts that are stalled (its nominal clock lowered to 10 MHz, for the
# minimum-rate rule to take N = 1009 with such a FIFO).
@pytest.mark.parametrize("fifo_depth,options", [
    (FIFO_DEPTH, []), (8, ["--clock", "10MHz"])], ids=["deep", "stalling"])
def test_one_command_time_slicing(coprof_bin, test_bin, example, tmp_path,
                                  fifo_depth, options):
    """Three contexts share one slot in slices of 50,000 cycles, the slot's
    LFSR running on across switches (the loop is always switched out and
    back; a program may end in its first slice): each program that ends
    gets exactly
    the captures its slices and its every-instruction reference trace say;
    the loop (killed at the end) gets one per multiple of N in its
    slices.  With a FIFO that fills, the emulators stall (the default
    policy) and nothing is lost, holds included."""
    every = 1009
    images = [example("overlays"), example("pipeline")]
    result, path = run_one_command(
        coprof_bin, tmp_path,
        ["--event=SPU_INSTRUCTIONS:%d" % every, "--no-dither", "--slots", "1",
         "--slice", "50000"] + options,
        ["sh", "-c", SLICING_SCRIPT, "sh", test_bin("cop-host")] + images,
        fifo_depth=fifo_depth)
    assert result.returncode == 0, result.stderr
    slot, = slot_counters(result.stderr).values()
    assert slot["dropped"] == 0
    if fifo_depth == 8:
        assert slot["stalls"] > 0, result.stderr
    check_rules(test_bin, path)
    stream = Stream(path.read_bytes())
    assert_conservation(slot_counters(result.stderr), stream)
    contexts = host_contexts(result.stdout)
    assert sorted(c["path"] for c in contexts.values()) == sorted(images)
    outside_total = 0
    for context, fields in contexts.items():
        trace, counters = reference_trace(coprof_bin("cop-run"),
                                          fields["path"], [1], 1)
        # A program may end within one slice: copsim checks the slice
        # from its scheduler thread, which a loaded machine can starve
        # for longer than a slice.  The loop below is always sliced.
        slices = stream.slices[context]
        assert sum(end - begin for begin, end in slices) == \
            int(fields["instructions"]) == counters["instructions"]
        want, outside = expected_samples(slices, every, trace,
                                         counters["outside_ls"])
        assert stream.samples[context] == want
        outside_total += outside
    loop, = set(stream.slices) - set(contexts)
    # The loop never ends: it was preempted for the programs and came back.
    assert len(stream.slices[loop]) > 1
    captures = sum(end // every - begin // every
                   for begin, end in stream.slices[loop])
    assert len(stream.samples[loop]) + stream.lost(0, 4) - outside_total \
        == captures


def test_one_command_errors(coprof_bin, tmp_path):
    copsim = coprof_bin("copsim")
    result = subprocess.run([copsim, "--event=SPU_CYCLES:0", "--stream-out",
                             str(tmp_path / "s"), "--", "true"],
                            capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stderr.startswith("copsim: --event: 'SPU_CYCLES:0'")
    result = subprocess.run([copsim, "--event=SPU_CYCLES:10", "--", "true"],
                            capture_output=True, text=True)
    assert result.returncode == 2
    result, _ = run_one_command(coprof_bin, tmp_path,
                                ["--event=SPU_CYCLES:1000"],
                                ["/nonexistent/command"])
    assert result.returncode == 127
    result = subprocess.run([copsim, "--event=SPU_CYCLES:1000",
                             "--stream-out", "/nonexistent/dir/s", "--",
                             "true"],
                            capture_output=True, text=True)
    assert result.returncode == 125
    assert "/nonexistent/dir/s" in result.stderr


def test_one_command_refused_rate_keeps_the_stream_file(coprof_bin,
                                                        tmp_path):
    """A rate the driver refuses is one line and status 125 before
    anything is made: an earlier stream at --stream-out stays whole (it
    was truncated, and copsim then crashed in its driver's stop hook)."""
    stream = tmp_path / "s"
    stream.write_bytes(b"an earlier recording")
    result = subprocess.run([coprof_bin("copsim"), "--event=SPU_CYCLES:1",
                             "--stream-out", str(stream), "--", "true"],
                            capture_output=True, text=True)
    assert result.returncode == 125, result.stderr
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("copsim: kernel driver: SPU_CYCLES:1: "
                                    "outside 157..16777215")
    assert stream.read_bytes() == b"an earlier recording"


def test_one_command_follows_tmpdir(coprof_bin, tmp_path):
    """The private copsim's socket directory is made in $TMPDIR (a missing
    one is named in the error), and removed at the end.  TMPDIR is short,
    as the socket's path must fit in it."""
    short = tempfile.mkdtemp(prefix="cr-", dir="/tmp")
    tmp = os.path.join(short, "tmp")
    command = [coprof_bin("copsim"), "--event=SPU_CYCLES:1000",
               "--stream-out", str(tmp_path / "s"), "--", "true"]
    try:
        missing = subprocess.run(command, env=dict(os.environ, TMPDIR=tmp),
                                 capture_output=True, text=True, timeout=120)
        os.mkdir(tmp)
        result = subprocess.run(command, env=dict(os.environ, TMPDIR=tmp),
                                capture_output=True, text=True, timeout=120)
        left = os.listdir(tmp)
    finally:
        shutil.rmtree(short)
    assert missing.returncode == 125
    assert re.fullmatch(r"copsim: %s/copsim-run-XXXXXX: No such file or "
                        r"directory\n" % re.escape(tmp), missing.stderr)
    assert result.returncode == 0, result.stderr
    assert left == []


# ---- The control interface ---------------------------------------------------

# The messages, read from the header copsim compiles (abi/cheader.py).
CONTROL = cheader.load("copdrv-control.h")
VERSION = CONTROL.defines["COPSIM_PROTOCOL_VERSION"]
SET, GET, START, STOP, STATS = (
    CONTROL.defines["COPDRV_CONTROL_" + name]
    for name in ("SET", "GET", "START", "STOP", "STATS"))
REPLY = CONTROL.defines["COPSIM_REPLY"]
Header = CONTROL.struct("copsim_header")
Params = CONTROL.struct("copdrv_control_params")
ParamsV1 = CONTROL.struct("copdrv_control_params_v1")
SetRequestV1 = CONTROL.struct("copdrv_control_set_v1")
SetRequest = CONTROL.struct("copdrv_control_set")
BareRequest = CONTROL.struct("copdrv_control_request")
Reply = CONTROL.struct("copdrv_control_reply")
StatsReply = CONTROL.struct("copdrv_control_stats")
# The parameters' second form: the full form's first bytes, up to
# dither_seed (no event), as an older sender sends them.
SET_V2_SIZE = (ctypes.sizeof(Header)
               + CONTROL.defines["COPDRV_CONTROL_PARAMS_V2_SIZE"])


class Control:
    """A connection to copsim's socket speaking the driver's requests."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock.connect(path)

    def request(self, message, type_, reply_type=Reply, size=None):
        """Sends message (its first size bytes, if given); the reply and
        the descriptors it carried."""
        size = ctypes.sizeof(message) if size is None else size
        message.header = Header(VERSION, type_, size)
        self.sock.sendmsg([bytes(message)[:size]])
        data, ancillary, _, _ = self.sock.recvmsg(16384, socket.CMSG_SPACE(8))
        fds = []
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds += array.array("i", payload[:len(payload) // 4 * 4])
        assert len(data) == ctypes.sizeof(reply_type)
        reply = reply_type.from_buffer_copy(data)
        assert reply.header.type == type_ | REPLY
        return reply, fds

    def set(self, value, count, poll_ns, buffer_bytes=0, **sampling):
        params = Params(lfsr_value=value, lfsr_count=count,
                        poll_interval_ns=poll_ns, buffer_bytes=buffer_bytes,
                        **sampling)
        return self.request(SetRequest(params=params), SET)[0]

    def simple(self, type_, reply_type=Reply):
        return self.request(BareRequest(), type_, reply_type)

    def close(self):
        self.sock.close()


@pytest.fixture
def daemon(coprof_bin):
    """A copsim daemon of the test's own, with one slot."""
    directory = tempfile.mkdtemp(prefix="cd-", dir="/tmp")
    sock = os.path.join(directory, "copsim.sock")
    read_end, write_end = os.pipe()
    process = subprocess.Popen(
        [coprof_bin("copsim"), "--socket", sock, "--slots", "1",
         "--fifo-depth", str(FIFO_DEPTH), "--ready-fd", str(write_end)],
        pass_fds=(write_end,), stderr=subprocess.PIPE, text=True)
    os.close(write_end)
    with os.fdopen(read_end) as ready:
        assert ready.readline() == "ready\n"
    yield sock
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr
    shutil.rmtree(directory, ignore_errors=True)


def lfsr_value(coprof_bin, count):
    result = subprocess.run([coprof_bin("coplfsr"), str(count)],
                            capture_output=True, text=True, check=True)
    return int(result.stdout.split()[0], 0)


def test_control_interface(coprof_bin, test_bin, example, daemon, tmp_path):
    """SET, GET, START (the stream's descriptor comes back), a host program
    runs, STOP, STATS: the stream is whole and what STATS says."""
    control = Control(daemon)
    count = 997
    value = lfsr_value(coprof_bin, count)

    reply, _ = control.simple(GET)
    assert reply.status.error == 0 and reply.running == 0
    assert reply.slots == 1 and reply.fifo_depth == FIFO_DEPTH
    reply, _ = control.simple(START)
    assert reply.status.error == errno.EINVAL
    assert reply.status.message == b"kernel driver: no LFSR value set"
    reply = control.set(value ^ 1, count, 200000)
    assert reply.status.error == errno.EINVAL
    assert b"is not the value" in reply.status.message
    reply = control.set(value, count, 1000)
    assert reply.status.error == errno.EINVAL
    reply = control.set(value, count, 200000, fifo_full=2)
    assert reply.status.error == errno.EINVAL
    assert b"FIFO-full policy 2" in reply.status.message
    reply = control.set(value, count, 200000, watermark=FIFO_DEPTH)
    assert reply.status.error == errno.EINVAL
    assert b"watermark" in reply.status.message
    reply = control.set(lfsr_value(coprof_bin, 5), 5, 200000)
    assert reply.status.error == errno.EINVAL
    assert reply.status.message.startswith(b"kernel driver: SPU_CYCLES:5: "
                                           b"outside ")
    # The first form of the parameters: drop, no dither.
    old = SetRequestV1(params=ParamsV1(lfsr_value=value, lfsr_count=count,
                                       poll_interval_ns=200000))
    reply, _ = control.request(old, SET)
    assert reply.status.error == 0 and reply.params.fifo_full == 0
    assert reply.params.dither == 0
    # The second form (no event): SPU_CYCLES.
    second = SetRequest(params=Params(lfsr_value=value, lfsr_count=count,
                                      poll_interval_ns=200000, dither=1))
    reply, _ = control.request(second, SET, size=SET_V2_SIZE)
    assert reply.status.error == 0 and reply.params.dither == 1
    assert reply.params.event == 0
    reply = control.set(value, count, 200000, event=2)
    assert reply.status.error == errno.EINVAL
    assert b"event 2 is not 0" in reply.status.message
    reply = control.set(value, count, 200000, fifo_full=1, dither=1,
                        dither_seed=2 ** 64 - 1, watermark=100, event=1)
    assert reply.status.error == 0 and reply.params.lfsr_count == count
    assert (reply.params.fifo_full, reply.params.dither,
            reply.params.dither_seed, reply.params.watermark,
            reply.params.event) == (1, 1, 2 ** 64 - 1, 100, 1)

    reply, fds = control.simple(START)
    assert reply.status.error == 0 and reply.running == 1
    assert len(fds) == 1
    stream_file = os.fdopen(fds[0], "rb")
    assert control.set(value, count, 200000).status.error == errno.EBUSY
    assert control.simple(START)[0].status.error == errno.EBUSY

    env = dict(os.environ, COPSIM_SOCKET=daemon)
    host = subprocess.run([test_bin("cop-host"), example("kernels"), "1"],
                          env=env, capture_output=True, text=True,
                          timeout=60)
    assert host.returncode == 0, host.stderr
    reply, _ = control.simple(STOP)
    assert reply.status.error == 0 and reply.running == 0
    assert control.simple(STOP)[0].status.error == errno.EALREADY

    data = stream_file.read()
    stream_file.close()
    path = tmp_path / "stream"
    path.write_bytes(data)
    check_rules(test_bin, path)
    stream = Stream(data)
    stats, _ = control.simple(STATS, StatsReply)
    assert stats.status.error == 0 and stats.ended == 1
    assert stats.samples == stream.stats.samples > 0
    assert sum(stats.lost_by_cause) == stream.stats.lost
    assert stats.bytes_written == stats.bytes_read == len(data)
    assert stats.polls > 0
    assert stats.stalls == sum(stats.slot_stalls)
    assert stats.stall_ns == sum(stats.slot_stall_ns)
    assert (stream.start["fifo_full"], stream.start["dither"],
            stream.start["dither_seed"], stream.start["watermark"],
            stream.start["event"]) == (1, 1, 2 ** 64 - 1, 100, 1)
    context, = host_contexts(host.stdout)
    want, _ = reference_trace(coprof_bin("cop-run"), example("kernels"), [1],
                              count, dither=2 ** 64 - 1)
    assert stream.samples[context] == want
    control.close()
