"""copdrv.ko against a hostile register file.

The register file is memory a host process writes while the module runs,
so the module must treat it as untrusted input.  A guest records a session
through the module (guest.Session, as `coprof record --driver=linux`
does) while this process, on the host, rewrites header, mailbox and slot
fields of the shared file a few thousand times with boundary values (0, 1,
the maximum, 2^31, offsets past the end of the file) and seeded random
ones; then it holds each header geometry field at a hostile value long
enough for every thread of the module to look at it.  The guest runs with
panic_on_warn=1 and oops=panic, so a WARN or an oops ends it at once.

Afterwards the session must stop, the module unload, dmesg hold no
BUG/Oops/WARNING/KASAN line, and the stream pass `copstream check` with no
error and end with STOP.

The mutator is seeded (random.Random(SEED)): the same writes in the same
order each run.  What the guest's threads see of them depends on timing;
the held phase does not: each value stays for HOLD_S, far longer than the
mailbox thread's period (200 us) and the poll interval (1 ms).
"""

import ctypes
import os
import random
import subprocess
import sys
import threading
import time

from module_fixtures import copdrv_ko, register_file  # noqa: F401

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                ".."))
import guest as guest_module  # noqa: E402

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(SOURCE, "abi"))

import cheader  # noqa: E402

SEED = 27
MUTATIONS = 3000
HOLD_S = 0.05

# The register file's layout, read from the header the module compiles.
REGS = cheader.load("trace-regs.h")
Header = REGS.struct("trace_regs_header")


def fields(struct_name, names):
    """{name: (offset, width)} of fields of an abi/trace-regs.h structure:
    a field wider than 8 bytes (the mailbox's path) is mutated in its
    first 8."""
    cls = REGS.struct(struct_name)
    return {name: (getattr(cls, name).offset,
                   min(getattr(cls, name).size, 8)) for name in names}


# The fields mutated: of the header, of a slot block (from the block's
# start) and of a mailbox (from the mailbox's start).
HEADER = fields("trace_regs_header", (
    "version", "header_size", "file_size", "n_slots", "n_contexts",
    "fifo_depth", "slot_stride", "slots_offset", "context_stride",
    "contexts_offset", "ls_base", "ls_size", "doorbell", "mailbox_offset",
    "mailbox_stride", "stack_offset", "stack_depth"))
SLOT = fields("trace_regs_slot", (
    "bound_context", "cycles", "capture_count", "overflow_count",
    "outside_count", "lfsr_seq", "fifo_head", "event_head",
    "event_overflow", "fifo_tail", "event_tail", "stall_count", "stalled"))
MAILBOX = fields("trace_regs_mailbox", (
    "seq", "op", "context", "slot", "guard_ls_offset", "guard_count",
    "path_length", "ack", "path"))


def boundary_values(width, file_size):
    top = (1 << (8 * width)) - 1
    return [0, 1, 2, top, top - 1, 1 << 31, (1 << 31) - 1, 0xFFFF,
            file_size, file_size + 1, file_size + 4096, 1 << 30]


class Mutator:
    """Seeded writes into the shared file through its own mapping."""

    def __init__(self, path):
        self.f = open(path, "r+b")
        self.rng = random.Random(SEED)
        head = Header.from_buffer_copy(self.read(0, ctypes.sizeof(Header)))
        self.file_size = head.file_size
        self.n_slots = head.n_slots
        self.slot_stride, self.slots_offset = head.slot_stride, \
            head.slots_offset
        self.mailbox_offset = head.mailbox_offset
        self.mailbox_stride = head.mailbox_stride
        self.writes = 0

    def read(self, offset, n):
        self.f.seek(offset)
        return self.f.read(n)

    def write(self, offset, width, value):
        value &= (1 << (8 * width)) - 1
        self.f.seek(offset)
        self.f.write(value.to_bytes(width, "little"))
        self.f.flush()
        self.writes += 1

    def value(self, width):
        if self.rng.random() < 0.7:
            return self.rng.choice(boundary_values(width, self.file_size))
        return self.rng.getrandbits(8 * width)

    def one(self):
        """One write: a header, slot or mailbox field, chosen and valued
        by the seeded generator."""
        area = self.rng.choice(("header", "slot", "slot", "mailbox",
                                "mailbox"))
        slot = self.rng.randrange(self.n_slots)
        if area == "header":
            name = self.rng.choice(sorted(HEADER))
            offset, width = HEADER[name]
        elif area == "slot":
            name = self.rng.choice(sorted(SLOT))
            offset, width = SLOT[name]
            offset += self.slots_offset + slot * self.slot_stride
        else:
            name = self.rng.choice(sorted(MAILBOX))
            offset, width = MAILBOX[name]
            offset += self.mailbox_offset + slot * self.mailbox_stride
            if name == "seq":
                # A message the module acts on: seq moves past ack.
                seq = int.from_bytes(self.read(offset, width), "little")
                self.write(offset, width, seq + 1)
                return
        self.write(offset, width, self.value(width))

    def hold_each_header_field(self):
        """Every geometry field of the header held at each boundary
        value for HOLD_S: whatever the module still reads from the file
        then sees it."""
        for name in ("n_slots", "mailbox_offset", "mailbox_stride",
                     "fifo_depth", "slot_stride", "slots_offset",
                     "stack_depth", "stack_offset", "file_size"):
            offset, width = HEADER[name]
            for value in (0xFFFF, 1 << 31, (1 << (8 * width)) - 1,
                          self.file_size + 4096):
                self.write(offset, width, value)
                time.sleep(HOLD_S)

    def close(self):
        self.f.close()


def drain(sock, out):
    """Reads the stream's host end until the guest closes it."""
    while True:
        data = sock.recv(1 << 16)
        if not data:
            return
        out.append(data)


def kernel_trouble(console):
    return [line for line in console.splitlines()
            if any(word in line for word in
                   ("BUG:", "Oops", "WARNING:", "KASAN", "Call Trace",
                    "Kernel panic"))]


def test_a_hostile_register_file_costs_no_oops(copdrv_ko, register_file,
                                               build_dir, tmp_path, capfd):
    regs = register_file("regs", "--slots", "4", "--fifo-depth", "1024")
    coplfsr = os.path.join(build_dir, "bin", "coplfsr")
    copstream = os.path.join(build_dir, "bin", "copstream")
    value = subprocess.run([coplfsr, "997"], capture_output=True, text=True,
                           check=True).stdout.split()[0]
    params = [("lfsr_value", value), ("lfsr_count", "997"),
              ("poll_interval_ns", "1000000"), ("clock_hz", "3200000000"),
              ("buffer_bytes", "65536")]
    session = guest_module.Session(copdrv_ko, regs, params,
                                   kernel_args="panic_on_warn=1 oops=panic")
    chunks, warnings, error = [], None, None
    try:
        session.start()
        reader = threading.Thread(target=drain,
                                  args=(session.stream, chunks))
        reader.start()
        mutator = Mutator(regs)
        for i in range(MUTATIONS):
            mutator.one()
            if i % 16 == 15:
                time.sleep(0.001)   # let the guest's threads run between
        mutator.hold_each_header_field()
        mutator.close()
        try:
            warnings = session.stop()
        except guest_module.GuestError as e:
            error = str(e)
        reader.join(60)
    finally:
        session.kill()
    console = capfd.readouterr().out
    assert error is None, "%s\n%s" % (error, console[-6000:])
    assert kernel_trouble(console) == [], console[-6000:]
    assert warnings == 0, console[-6000:]
    assert mutator.writes >= MUTATIONS
    stream = tmp_path / "stream"
    stream.write_bytes(b"".join(chunks))
    done = subprocess.run([copstream, "check", str(stream)],
                          capture_output=True, text=True)
    assert "errors=0" in done.stdout, done.stdout + done.stderr
    dump = subprocess.run([copstream, "dump", str(stream)],
                          capture_output=True, text=True).stdout
    assert dump.split("\n")[-2].split()[1:2] == ["stop"], dump[-2000:]
