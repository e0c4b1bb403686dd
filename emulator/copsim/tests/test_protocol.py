"""copsim's socket protocol spoken directly (abi/copsim-protocol.h read
as ctypes structures by abi/cheader.py): each request's checks, and malformed or out-of-order messages
answered with one clear error while copsim goes on serving."""

import array
import ctypes
import errno
import os
import re
import socket
import sys
import threading

from copsim_harness import sched_events, wait_for

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(SOURCE, "abi"))

import cheader  # noqa: E402

# The messages, read from the header copsim compiles (abi/cheader.py).
PROTOCOL = cheader.load("copsim-protocol.h")
VERSION = PROTOCOL.defines["COPSIM_PROTOCOL_VERSION"]
INFO, CREATE, LOAD, RUN, DESTROY = (
    PROTOCOL.defines["COPSIM_" + name]
    for name in ("INFO", "CREATE", "LOAD", "RUN", "DESTROY"))
REPLY = PROTOCOL.defines["COPSIM_REPLY"]
Header = PROTOCOL.struct("copsim_header")
Status = PROTOCOL.struct("copsim_status")
InfoReply = PROTOCOL.struct("copsim_info_reply")
CreateRequest = PROTOCOL.struct("copsim_create_request")
CreateReply = PROTOCOL.struct("copsim_create_reply")
LoadRequest = PROTOCOL.struct("copsim_load_request")
LoadReply = PROTOCOL.struct("copsim_load_reply")
RunRequest = PROTOCOL.struct("copsim_run_request")
RunReply = PROTOCOL.struct("copsim_run_reply")


def run_request(*argv):
    """A RUN request for the arguments (bytes), from this thread."""
    args = b"".join(arg + b"\0" for arg in argv)
    request = RunRequest(tid=threading.get_native_id(), argc=len(argv),
                         args_size=len(args))
    ctypes.memmove(ctypes.addressof(request) + RunRequest.args.offset, args,
                   len(args))
    return request


class Client:
    def __init__(self, sim):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock.connect(sim.socket)

    def send(self, message, type_, fds=()):
        message.header = Header(VERSION, type_, ctypes.sizeof(message))
        self.send_bytes(bytes(message), fds)

    def send_bytes(self, data, fds=()):
        ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                      array.array("i", fds))] if fds else []
        self.sock.sendmsg([data], ancillary)

    def receive(self, reply_type=None):
        """The reply as bytes and the descriptors that came with it."""
        data, ancillary, _, _ = self.sock.recvmsg(
            16384, socket.CMSG_SPACE(8))
        fds = []
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds += array.array("i", payload[:len(payload) // 4 * 4])
        if reply_type is not None:
            assert len(data) == ctypes.sizeof(reply_type), len(data)
            return reply_type.from_buffer_copy(data), fds
        return data, fds

    def status(self):
        """(reply type, error, message) of a reply."""
        data, fds = self.receive()
        for fd in fds:
            os.close(fd)
        header = Header.from_buffer_copy(data)
        status = Status.from_buffer_copy(data, ctypes.sizeof(Header))
        return header.type, status.error, status.message.decode()

    def create(self, tid=None):
        request = CreateRequest(tid=tid or threading.get_native_id())
        self.send(request, CREATE)
        reply, fds = self.receive(CreateReply)
        assert reply.status.error == 0, reply.status.message
        return reply, fds

    def load(self, object_id, size):
        self.send(LoadRequest(tid=threading.get_native_id(),
                              object_id=object_id, image_size=size), LOAD)

    def close(self):
        self.sock.close()


def test_info_describes_copsim(copsim):
    sim = copsim("--slots", "5", "--slice", "12345", "--max-cycles", "99")
    client = Client(sim)
    client.send_bytes(bytes(Header(VERSION, INFO, 8)))
    reply, _ = client.receive(InfoReply)
    assert reply.status.error == 0
    assert (reply.pid, reply.n_slots, reply.slice_cycles, reply.max_cycles,
            reply.nominal_hz) == (sim.process.pid, 5, 12345, 99, 3200000000)
    assert reply.event_log_path.decode() == sim.log
    assert os.path.exists(reply.regs_path.decode())


def test_bad_requests_get_one_clear_error(copsim, build_dir):
    sim = copsim()
    client = Client(sim)
    pid = os.getpid()
    client.send_bytes(bytes(Header(VERSION, 77, 8)))
    assert client.status() == (77 | REPLY, errno.ENOSYS,
                               "unknown request type 77")
    client.send_bytes(bytes(Header(VERSION, 0x150, 8)))
    assert client.status() == (0x150 | REPLY, errno.ENOSYS, "kernel driver: "
                               "unknown request 336")
    client.send_bytes(bytes(Header(9, INFO, 8)))
    assert client.status()[1:] == (errno.EPROTO, "malformed message (wrong "
                                   "version or size)")
    client.send_bytes(bytes(Header(VERSION, CREATE, 12)) + b"\0" * 4)
    assert client.status() == (CREATE | REPLY, errno.EPROTO, "request type 2: "
                               "12 bytes, expected 272")
    client.load(0x1000, 100)
    assert client.status() == (LOAD | REPLY, errno.ENOENT,
                               "no context: send CREATE first")
    client.send(CreateRequest(tid=1), CREATE)
    assert client.status() == (CREATE | REPLY, errno.EPERM, "thread 1 is not "
                               "a thread of process %d" % pid)
    client.create()
    client.send(CreateRequest(tid=threading.get_native_id()), CREATE)
    assert client.status()[1:] == (errno.EBUSY, "this connection holds a "
                                   "context already")
    client.load(0x10, 4096)
    assert client.status() == (LOAD | REPLY, errno.EINVAL, "object-id 0x10 is "
                               "not mapped in process %d" % pid)
    garbage = ctypes.create_string_buffer(b"not an image" * 100)
    client.load(ctypes.addressof(garbage), 1200)
    kind, error, message = client.status()
    assert error == errno.EINVAL and message.endswith(": not an ELF file "
                                                      "(bad magic)")
    client.send(run_request(b"x"), RUN)
    assert client.status()[1:] == (errno.ENOEXEC, "no program loaded: send "
                                   "LOAD first")
    client.close()
    assert sim.alive()
    errors = [e["what"] for e in sched_events(build_dir, sim.log)
              if e["kind"] == "error"]
    assert "unknown request type 77" in errors and len(errors) >= 8


def test_run_carries_the_console_and_answers_busy_meanwhile(
        copsim, probe_image, build_dir):
    # The process model: CREATE's descriptor is then the context's own
    # 16 MiB RAM file (the slot model's is main memory, test_slot_model.py).
    sim = copsim("--context-model=process")
    client = Client(sim)
    reply, (ram,) = client.create()
    assert os.fstat(ram).st_size == 16 << 20
    assert (reply.data_offset, reply.data_size) == (0x800000, 0x600000)
    with open(probe_image, "rb") as f:
        image = ctypes.create_string_buffer(f.read())
    client.load(ctypes.addressof(image), len(image.raw) - 1)
    loaded, _ = client.receive(LoadReply)
    assert loaded.status.error == 0 and loaded.anonymous == 1
    assert loaded.name == b"copsim-probe"
    run = run_request(b"probe", b"data", b"4")
    client.send(run, RUN)
    assert client.status()[1:] == (errno.EINVAL, "RUN carries exactly one "
                                   "descriptor, the console's")
    # The data window is the RAM file's: what the host writes, the program
    # reads and changes.
    os.pwrite(ram, (7).to_bytes(4, "little") * 4, 0x800000)
    read_end, write_end = os.pipe()
    client.send(run, RUN, fds=[write_end])
    os.close(write_end)
    client.send_bytes(bytes(Header(VERSION, INFO, 8)))
    # The emulator takes far longer to start than this request to arrive.
    assert client.status() == (INFO | REPLY, errno.EBUSY, "the context is "
                               "running; wait for its run")
    done, _ = client.receive(RunReply)
    assert done.status.error == 0 and done.stop_reason == 1
    assert done.exit_status == 0 and done.binds == 1
    with os.fdopen(read_end) as console:
        assert console.read() == "data 4 sum=%08x\n" % (4 * 22)
    assert os.pread(ram, 16, 0x800000) == (22).to_bytes(4, "little") * 4
    # A context runs again, from a fresh local store, on the same data.
    null = os.open(os.devnull, os.O_WRONLY)
    client.send(run_request(b"probe", b"data", b"2"), RUN, fds=[null])
    os.close(null)
    again, _ = client.receive(RunReply)
    assert again.status.error == 0 and again.exit_status == 0
    assert again.binds == 1
    assert os.pread(ram, 16, 0x800000) == \
        (67).to_bytes(4, "little") * 2 + (22).to_bytes(4, "little") * 2
    os.close(ram)
    client.close()


def test_connection_closed_mid_run_reaps_the_context(copsim, probe_image,
                                                     build_dir):
    sim = copsim()
    client = Client(sim)
    client.create()
    with open(probe_image, "rb") as f:
        image = ctypes.create_string_buffer(f.read())
    client.load(ctypes.addressof(image), len(image.raw) - 1)
    client.receive(LoadReply)
    null = os.open(os.devnull, os.O_WRONLY)
    client.send(run_request(b"probe", b"loop"), RUN, fds=[null])
    os.close(null)

    def logged(kind):
        def seen():
            events = sched_events(build_dir, sim.log)
            return any(e["kind"] == kind for e in events) and events
        seen.__name__ = "a %s record" % kind
        return seen
    wait_for(logged("bind"))
    client.close()
    events = wait_for(logged("reap"))
    unbind = [e for e in events if e["kind"] == "unbind"]
    assert [e["reason"] for e in unbind] == ["reap"]


def test_exact_counts_of_a_context_that_runs_twice(copsim, probe_image,
                                                   tmp_path):
    """--exact-counts DIR: each run of a context appends its own run to
    DIR/context-ID.counts, whose total is the RUN reply's instructions."""
    counts_dir = tmp_path / "counts"
    counts_dir.mkdir()
    (counts_dir / "context-1.counts").write_text("left by an older copsim\n")
    sim = copsim("--exact-counts", str(counts_dir))
    client = Client(sim)
    created, (ram,) = client.create()
    os.close(ram)
    with open(probe_image, "rb") as f:
        image = ctypes.create_string_buffer(f.read())
    client.load(ctypes.addressof(image), len(image.raw) - 1)
    loaded, _ = client.receive(LoadReply)
    assert loaded.status.error == 0
    instructions = []
    for argv in ([b"probe", b"data", b"4"], [b"probe", b"data", b"2"]):
        null = os.open(os.devnull, os.O_WRONLY)
        client.send(run_request(*argv), RUN, fds=[null])
        os.close(null)
        done, _ = client.receive(RunReply)
        assert done.status.error == 0 and done.exit_status == 0
        instructions.append(done.instructions)
    client.close()
    path = counts_dir / ("context-%d.counts" % created.context_id)
    text = path.read_text()
    assert text.startswith("coprof-exact-counts 2\n")
    assert text.count("coprof-exact-counts 2\n") == 2
    totals = [int(n) for n in re.findall(r"^end instructions=(\d+) ", text,
                                         re.M)]
    assert totals == instructions and all(instructions)
