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

import os
import random
import struct
import subprocess
import sys
import threading
import time

from module_fixtures import copdrv_ko, register_file  # noqa: F401

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                ".."))
import guest as guest_module  # noqa: E402

SEED = 27
MUTATIONS = 3000
HOLD_S = 0.05

# Header fields (emulator/trace-regs.h): offset, width.
HEADER = {"version": (8, 4), "header_size": (12, 4), "file_size": (16, 8),
          "n_slots": (24, 4), "n_contexts": (28, 4), "fifo_depth": (32, 4),
          "slot_stride": (36, 4), "slots_offset": (40, 4),
          "context_stride": (44, 4), "contexts_offset": (48, 4),
          "ls_base": (52, 4), "ls_size": (56, 4), "doorbell": (64, 4),
          "mailbox_offset": (68, 4), "mailbox_stride": (72, 4),
          "stack_offset": (80, 4), "stack_depth": (84, 4)}
# Slot block fields, from the block's start.
SLOT = {"bound_context": (4, 4), "cycles": (64, 8), "capture_count": (72, 8),
        "overflow_count": (80, 8), "outside_count": (88, 8),
        "lfsr_seq": (108, 4), "fifo_head": (112, 4), "event_head": (116, 4),
        "event_overflow": (120, 4), "fifo_tail": (128, 4),
        "event_tail": (132, 4), "stall_count": (200, 8), "stalled": (216, 4)}
# Mailbox fields, from the mailbox's start.
MAILBOX = {"seq": (0, 4), "op": (4, 4), "context": (8, 4), "slot": (12, 4),
           "guard_ls_offset": (48, 4), "guard_count": (52, 4),
           "path_length": (56, 4), "ack": (128, 4), "path": (448, 8)}


def boundary_values(width, file_size):
    top = (1 << (8 * width)) - 1
    return [0, 1, 2, top, top - 1, 1 << 31, (1 << 31) - 1, 0xFFFF,
            file_size, file_size + 1, file_size + 4096, 1 << 30]


class Mutator:
    """Seeded writes into the shared file through its own mapping."""

    def __init__(self, path):
        self.f = open(path, "r+b")
        self.rng = random.Random(SEED)
        head = self.read(0, 128)
        (self.file_size,) = struct.unpack_from("<Q", head, 16)
        (self.n_slots, _, _, self.slot_stride,
         self.slots_offset) = struct.unpack_from("<IIIII", head, 24)
        self.mailbox_offset, self.mailbox_stride = struct.unpack_from(
            "<II", head, 68)
        self.writes = 0

    def read(self, offset, n):
        self.f.seek(offset)
        return self.f.read(n)

    def write(self, offset, width, value):
        value &= (1 << (8 * width)) - 1
        self.f.seek(offset)
        self.f.write(struct.pack("<Q" if width == 8 else "<I", value))
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
                (seq,) = struct.unpack("<I", self.read(offset, 4))
                self.write(offset, 4, seq + 1)
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
