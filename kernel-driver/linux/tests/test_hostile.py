"""copdrv.ko against a hostile register file.

The register file is memory a host process writes while the module runs,
so the module must treat it as untrusted input.  A guest records a session
through the module (guest.Session, as `coprof record --driver=linux`
does) on a file with a call-stack area (coptrace create --stack-depth)
while this process, on the host, writes everything the module reads:
header, slot blocks, context blocks (guard_count, guard offsets), the
FIFOs, their cause words, the stack records, the overlay event rings and
the mailboxes.  The guest runs with panic_on_warn=1 and oops=panic, so a
WARN or an oops ends it at once.

The phases, each driven to a condition the host can see:

  probe    the module must show it read the hostile values: a BIND in
           slot 2's mailbox is acked; three FIFO entries on slot 2 with
           cause words and stack records of all ones, and an overlay
           event of region 2^32-1, are drained (fifo_tail and event_tail
           reach their heads) and the stream has a CALLSTACK of depth
           2^32-1 cut to the file's 8 frames; a head-tail gap larger than
           the FIFO on slot 0 raises fifo_errors in debugfs; a message
           of an unknown op on slot 1 is acked and said in dmesg.
  storm    MUTATIONS seeded writes (random.Random(SEED)) of boundary values
           (0, 1, the maximum, 2^31, offsets past the end of the file) and
           random ones over all those areas; every BATCH writes, the
           module must show it still runs: two more polls in its stats,
           a drained entry on every slot and a garbage message acked.
  hold     each header geometry field held at hostile values, each value
           until the module has polled and scanned the mailboxes with it.
  probe    again after all that: fifo_errors rises, the entries drain, the
           unknown op is acked.  A module that stopped scanning fails here.

Afterwards the session must stop, the module unload, dmesg hold no
BUG/Oops/WARNING/KASAN line, and the stream pass `copstream check` with no
error and end with STOP.  What this does not catch (no KASAN guest kernel
in Debian): reads in bounds of the wrong object, and races the writes
happen to miss (kernel-driver/linux/README.md, "Hostile register file").
"""

import ctypes
import os
import random
import struct
import subprocess
import sys
import threading
import time

from module_fixtures import (REGS, bind_message, copdrv_ko,  # noqa: F401
                             message_body, register_file)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                ".."))
import guest as guest_module  # noqa: E402

SEED = 27
MUTATIONS = 3000
BATCH = 250
STACK_DEPTH = 8
FIFO_DEPTH = 1024
DEADLINE_S = 30             # for any one condition awaited
UNKNOWN_OP = 0x7777
ALL_ONES = 0xFFFFFFFF

# The register file's layout, read from the header the module compiles.
Header = REGS.struct("trace_regs_header")
Slot = REGS.struct("trace_regs_slot")
Event = REGS.struct("trace_ovl_event")
SLOT_BYTES = Slot.fifo.offset       # a slot block before its FIFO
EVENT_BYTES = ctypes.sizeof(Event)
EVENT_DEPTH = REGS.defines["TRACE_EVENT_DEPTH"]
LINE = REGS.defines["TRACE_LINE_SIZE"]
MAILBOX_GUARDS = REGS.defines["TRACE_MAX_GUARDS"]
WORD = 4                            # a cause word, a stack record's word
FORMATS = {2: "<H", 4: "<I", 8: "<Q"}


def fields(struct_name, names):
    """{name: (offset, width)} of fields of an abi/trace-regs.h structure:
    an array of words (the mailbox's guards) is mutated a word at a time,
    a wider field (the path) in its first 8 bytes."""
    cls = REGS.struct(struct_name)
    types = dict(cls._fields_)
    out = {}
    for name in names:
        field, kind = getattr(cls, name), types[name]
        width = min(field.size, 8)
        if issubclass(kind, ctypes.Array) and ctypes.sizeof(kind._type_) > 1:
            width = ctypes.sizeof(kind._type_)
        out[name] = (field.offset, width)
    return out


# The fields mutated: of the header, of a slot block, a context block, a
# mailbox and an overlay event (each from its block's start).
HEADER = fields("trace_regs_header", (
    "version", "header_size", "file_size", "n_slots", "n_contexts",
    "fifo_depth", "slot_stride", "slots_offset", "context_stride",
    "contexts_offset", "ls_base", "ls_size", "doorbell", "mailbox_offset",
    "mailbox_stride", "stack_offset", "stack_depth"))
SLOT = fields("trace_regs_slot", (
    "bound_context", "cycles", "capture_count", "overflow_count",
    "outside_count", "lfsr_seq", "fifo_head", "event_head",
    "event_overflow", "fifo_tail", "event_tail", "stall_ns",
    "stall_count", "stalled"))
CONTEXT = fields("trace_regs_context", (
    "gate", "slot", "guard_ls_offset", "guard_count", "status"))
MAILBOX = fields("trace_regs_mailbox", (
    "seq", "op", "context", "slot", "context_id", "guard_ls_offset",
    "guard_count", "path_length", "image_inode", "ack", "guards", "path"))
EVENT = fields("trace_ovl_event", ("fifo_pos", "region", "guard",
                                   "reserved"))


def line_round(n):
    return (n + LINE - 1) // LINE * LINE


def boundary_values(width, file_size):
    top = (1 << (8 * width)) - 1
    return [0, 1, 2, top, top - 1, 1 << 31, (1 << 31) - 1, 0xFFFF,
            file_size, file_size + 1, file_size + 4096, 1 << 30]


class Mutator:
    """Seeded writes into the shared file through its own mapping, and
    reads of what the module wrote back (tails, acks)."""

    def __init__(self, path):
        # Unbuffered: a buffered read would answer from its own copy,
        # never seeing what the module stored since.
        self.f = open(path, "r+b", buffering=0)
        self.rng = random.Random(SEED)
        head = Header.from_buffer_copy(self.read(0, ctypes.sizeof(Header)))
        self.file_size = head.file_size
        self.n_slots, self.n_contexts = head.n_slots, head.n_contexts
        self.fifo_depth = head.fifo_depth
        self.slot_stride, self.slots_offset = (head.slot_stride,
                                               head.slots_offset)
        self.context_stride = head.context_stride
        self.contexts_offset = head.contexts_offset
        self.mailbox_offset = head.mailbox_offset
        self.mailbox_stride = head.mailbox_stride
        self.stack_offset, self.stack_depth = (head.stack_offset,
                                               head.stack_depth)
        # trace_slot_causes() and trace_slot_events(): line-rounded
        # arrays after the FIFO's fields
        self.causes_at = line_round(SLOT_BYTES + 2 * self.fifo_depth)
        self.events_at = line_round(self.causes_at +
                                    WORD * self.fifo_depth)
        self.record_words = 1 + self.stack_depth
        self.seqs = {self.mailbox(i) for i in range(self.n_slots)}
        self.writes = 0

    # ---- Places ----

    def slot(self, i):
        return self.slots_offset + i * self.slot_stride

    def context(self, i):
        return self.contexts_offset + i * self.context_stride

    def mailbox(self, i):
        return self.mailbox_offset + i * self.mailbox_stride

    def stack_record(self, slot, index):
        return (self.stack_offset
                + (slot * self.fifo_depth + index) * self.record_words * 4)

    # ---- Access ----

    def read(self, offset, n):
        return os.pread(self.f.fileno(), n, offset)

    def word(self, offset):
        return struct.unpack("<I", self.read(offset, 4))[0]

    def write(self, offset, width, value):
        value &= (1 << (8 * width)) - 1
        os.pwrite(self.f.fileno(), struct.pack(FORMATS[width], value), offset)
        self.writes += 1

    def value(self, width):
        if self.rng.random() < 0.7:
            return self.rng.choice(boundary_values(width, self.file_size))
        return self.rng.getrandbits(8 * width)

    # ---- The storm ----

    def target(self):
        """A field the module reads, chosen by the seeded generator:
        (offset, width)."""
        rng = self.rng
        area = rng.choice(("header", "slot", "slot", "context", "mailbox",
                           "mailbox", "fifo", "cause", "stack", "event"))
        slot = rng.randrange(self.n_slots)
        if area == "header":
            return HEADER[rng.choice(sorted(HEADER))]
        if area == "slot":
            offset, width = SLOT[rng.choice(sorted(SLOT))]
            return self.slot(slot) + offset, width
        if area == "context":
            offset, width = CONTEXT[rng.choice(sorted(CONTEXT))]
            return self.context(rng.randrange(self.n_contexts)) + offset, width
        if area == "mailbox":
            name = rng.choice(sorted(MAILBOX))
            offset, width = MAILBOX[name]
            if name == "guards":
                offset += width * rng.randrange(MAILBOX_GUARDS)
            return self.mailbox(slot) + offset, width
        index = rng.randrange(self.fifo_depth)
        if area == "fifo":
            return self.slot(slot) + SLOT_BYTES + 2 * index, 2
        if area == "cause":
            return self.slot(slot) + self.causes_at + WORD * index, WORD
        if area == "stack":
            word = rng.randrange(self.record_words)
            return self.stack_record(slot, index) + WORD * word, WORD
        offset, width = EVENT[rng.choice(sorted(EVENT))]
        return (self.slot(slot) + self.events_at
                + EVENT_BYTES * rng.randrange(EVENT_DEPTH) + offset, width)

    def one(self):
        """One seeded write; a write of a mailbox's seq moves it past the
        ack, so that the module acts on whatever the mailbox holds."""
        offset, width = self.target()
        if offset in self.seqs:
            self.write(offset, 4, self.word(offset) + 1)
            return
        self.write(offset, width, self.value(width))

    def close(self):
        self.f.close()


class Probe:
    """What the module shows of what it read: conditions on the file
    (tails, acks) and on its debugfs stats, each awaited."""

    def __init__(self, mutator, session):
        self.m = mutator
        self.session = session

    def stats(self):
        words = self.session.stats().split()
        return {words[i]: int(words[i + 1]) for i in range(0, len(words), 2)}

    def await_true(self, condition, what):
        deadline = time.monotonic() + DEADLINE_S
        while not condition():
            assert time.monotonic() < deadline, \
                "copdrv.ko did not %s within %d s" % (what, DEADLINE_S)
            time.sleep(0.001)

    def await_polls(self, n):
        """n more polls than now: no poll that began before returns
        after this (none then stores a tail it read earlier)."""
        target = self.stats()["polls"] + n
        self.await_true(lambda: self.stats()["polls"] >= target,
                        "poll %d more times" % n)

    def message(self, slot, op=None):
        """Posts the mailbox's message (with op, if given) and awaits its
        ack: one scan of the mailboxes ran since."""
        box = self.m.mailbox(slot)
        if op is not None:
            self.m.write(box + MAILBOX["op"][0], 4, op)
        seq = (self.m.word(box + MAILBOX["ack"][0]) + 1) & ALL_ONES
        self.m.write(box, 4, seq)
        self.await_true(lambda: self.m.word(box + MAILBOX["ack"][0]) == seq,
                        "ack message %d on slot %d" % (seq, slot))

    def entries(self, slot, n, field=0x40, cause=None, record=None):
        """Queues n entries behind the slot's tail (with the given cause
        word and stack record) and awaits their drain."""
        base = self.m.slot(slot)
        tail = self.m.word(base + SLOT["fifo_tail"][0])
        for i in range(n):
            at = (tail + i) % self.m.fifo_depth
            self.m.write(base + SLOT_BYTES + 2 * at, 2, field)
            if cause is not None:
                self.m.write(base + self.m.causes_at + WORD * at, WORD,
                             cause)
            for w, value in enumerate(record or ()):
                self.m.write(self.m.stack_record(slot, at) + WORD * w, WORD,
                             value)
        head = (tail + n) & ALL_ONES
        self.m.write(base + SLOT["fifo_head"][0], 4, head)
        self.await_true(
            lambda: self.m.word(base + SLOT["fifo_tail"][0]) == head,
            "drain slot %d to %d" % (slot, head))

    def event(self, slot, region):
        """Queues one overlay event placed at the slot's FIFO head, of
        region `region`, and awaits its drain."""
        base = self.m.slot(slot)
        tail = self.m.word(base + SLOT["event_tail"][0])
        at = base + self.m.events_at + EVENT_BYTES * (tail % EVENT_DEPTH)
        self.m.write(at + EVENT["fifo_pos"][0], 4,
                     self.m.word(base + SLOT["fifo_head"][0]))
        self.m.write(at + EVENT["region"][0], 4, region)
        self.m.write(at + EVENT["guard"][0], 4, ALL_ONES)
        self.m.write(base + SLOT["event_head"][0], 4, tail + 1)

    def fifo_error(self, slot):
        """A head-tail gap larger than the FIFO: fifo_errors must rise.
        Then the head is put back on the tail."""
        base = self.m.slot(slot)
        before = self.stats()["fifo_errors"]
        tail = self.m.word(base + SLOT["fifo_tail"][0])
        self.m.write(base + SLOT["fifo_head"][0], 4,
                     tail + 2 * self.m.fifo_depth + 1)
        self.await_true(lambda: self.stats()["fifo_errors"] > before,
                        "count the corrupt FIFO of slot %d" % slot)
        self.m.write(base + SLOT["fifo_head"][0], 4, tail)
        return before

    def sane(self):
        """After hostile writes: every slot's FIFO and event ring empty
        again, so that the next conditions can be seen."""
        self.await_polls(2)
        for slot in range(self.m.n_slots):
            base = self.m.slot(slot)
            self.m.write(base + SLOT["event_head"][0], 4,
                         self.m.word(base + SLOT["event_tail"][0]))
            self.m.write(base + SLOT["fifo_head"][0], 4,
                         self.m.word(base + SLOT["fifo_tail"][0]))

    def alive(self):
        """The module still drains every slot and reads the mailboxes."""
        for slot in range(self.m.n_slots):
            self.entries(slot, 1)
        self.message(1, UNKNOWN_OP)


def post_bind(m, slot, context_id, path):
    """A well-formed BIND of context_id on slot (two guard words), all
    but its seq (Probe.message() posts it)."""
    message = bind_message(slot, slot, context_id, path,
                           guard_ls_offset=0x100, guards=(1, 2))
    for offset, data in message_body(message):
        os.pwrite(m.f.fileno(), data, m.mailbox(slot) + offset)


def hold_each_header_field(m, probe):
    """Every geometry field of the header held at each hostile value until
    the module polled (an entry drained) and scanned (a message acked)."""
    for name in ("n_slots", "mailbox_offset", "mailbox_stride",
                 "fifo_depth", "slot_stride", "slots_offset",
                 "stack_depth", "stack_offset", "file_size"):
        offset, width = HEADER[name]
        for value in (0xFFFF, 1 << 31, (1 << (8 * width)) - 1,
                      m.file_size + 4096):
            m.write(offset, width, value)
            probe.entries(3, 1)
            probe.message(3)


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


def hostile_session(probe, m):
    """The phases of the module docstring; fifo_errors before and after
    the storm."""
    post_bind(m, 2, 77, "/srv/images/hostile.elf")
    probe.message(2)
    probe.event(2, ALL_ONES)
    probe.entries(2, 3, cause=ALL_ONES,
                  record=[ALL_ONES] * m.record_words)
    probe.await_true(lambda: m.word(m.slot(2) + SLOT["event_tail"][0]) ==
                     m.word(m.slot(2) + SLOT["event_head"][0]),
                     "drain slot 2's overlay event")
    first = probe.fifo_error(0)
    probe.message(1, UNKNOWN_OP)

    for i in range(MUTATIONS):
        m.one()
        if i % BATCH == BATCH - 1:
            probe.sane()
            probe.alive()
    probe.sane()
    hold_each_header_field(m, probe)

    before = probe.fifo_error(0)
    probe.alive()
    return first, before


def test_a_hostile_register_file_costs_no_oops(copdrv_ko, register_file,
                                               build_dir, tmp_path, capfd):
    regs = register_file("regs", "--slots", "4", "--fifo-depth",
                         str(FIFO_DEPTH), "--stack-depth", str(STACK_DEPTH))
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
        assert mutator.stack_depth == STACK_DEPTH
        first, before = hostile_session(Probe(mutator, session), mutator)
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
    assert first == 0 and before > first
    assert mutator.writes >= MUTATIONS
    assert "slot 1: mailbox op %d unknown; ignored" % UNKNOWN_OP in console, \
        console[-6000:]
    stream = tmp_path / "stream"
    stream.write_bytes(b"".join(chunks))
    done = subprocess.run([copstream, "check", str(stream)],
                          capture_output=True, text=True)
    assert "errors=0" in done.stdout, done.stdout + done.stderr
    dump = subprocess.run([copstream, "dump", str(stream)],
                          capture_output=True, text=True).stdout
    assert dump.split("\n")[-2].split()[1:2] == ["stop"], dump[-2000:]
    assert "/srv/images/hostile.elf" in dump, dump[:4000]
    cut = "callstack slot=2 depth=%d frames=%s" % (
        ALL_ONES, ",".join(["0x3fffc@65535"] * STACK_DEPTH))
    assert cut in dump, "\n".join(
        line for line in dump.splitlines() if "callstack" in line)[:4000]
