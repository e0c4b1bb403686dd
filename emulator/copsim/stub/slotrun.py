#!/usr/bin/python3
"""slotrun — run several coprocessor contexts on ONE long-lived
qemu-system-riscv32 through the resident slot stub, time-sliced.

This is the stand-alone prototype and test bed of copsim's slot model
(copsim --context-model=slot; emulator/copsim/README.md, "Slots as
long-lived emulators"): a slot is one emulator, a context is
saved state (its local store and boot block in a staging area of the
slot's RAM, its registers in a save area, its image and data windows in
its area of main memory, a file every slot maps), and the stub
(slot-stub.S) switches them at timer interrupts with guest stores and
fence.i, so that QEMU drops stale translations.  The trace-unit plugin
does not count the stub's instructions, so each context's instructions
(and --exact-counts, kept per context) are its own.

slotrun lays the stub, its control block (abi/slot-stub.h) and every context
into a new guest RAM file and main-memory file, runs QEMU under `coptrace
run` (the trace unit attached, the hart started at the stub), passes the
consoles (one UART for all contexts) to its stdout, and prints one line
per context and the slot's switch statistics on stderr; or it feeds
contexts through several slots while they run (--slots, --repeat).
Standard library and pyelftools only.
"""

import argparse
import collections
import mmap
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

from elftools.elf.elffile import ELFFile

HERE = os.path.dirname(os.path.abspath(__file__))
ABI = os.path.join(HERE, "..", "..", "..", "abi")
sys.path.insert(0, ABI)

import cheader  # noqa: E402
TIMER_HZ = 10_000_000           # the virt machine's CLINT timebase


def read_layout(path=os.path.join(ABI, "slot-stub.h")):
    """The #defines of abi/slot-stub.h, as a dict."""
    return cheader.Header(path).defines


L = read_layout()


class SlotError(Exception):
    pass


def ram_offset(address):
    return address - L["SLOT_LS_BASE"]


# The coprocessor ABI (abi/cop-abi.h, docs/coprocessor-abi.md).
COP = cheader.load("cop-abi.h", ABI)
BootBlock = COP.struct("cop_boot_block")
COP_BOOT_MAGIC = COP.defines["COP_BOOT_MAGIC"]
COP_IMAGE_BASE = COP.defines["COP_IMAGE_BASE"]
BOOT = ram_offset(COP.defines["COP_BOOT_BASE"])   # the boot block in `swap`

# The runtime's functions that write the test device (sdk/runtime/exit.c):
# cop_exit, and the two that end with it inlined.


class Image:
    """A context's starting state, built once and placed as often as
    wanted: `swap`, its local store and boot block (SLOT_SWAP_SIZE bytes
    from 0x80000000); `window`, its image window's bytes; `entry`;
    `handler`, its own trap entry (0: none); `boot_block`, whether it has
    one (whose windows then move to the context's main-memory area).

    A test guest (no boot block, exit by ecall) is its PT_LOAD segments.
    An SDK image is what the project's loader makes of it: cop-run lays it
    out in a RAM file (without running it) with its arguments, unmodified:
    the stub runs it in user mode, emulates crt0's `csrw mtvec` and the
    trap entry's CSR reads, and ends it at its store to the test device
    (slot-stub.S), so it executes what it executes under cop-run."""

    def __init__(self, path, args=(), cop_run="cop-run"):
        self.path = path
        self.args = list(args)
        self.window = b""
        self.handler = 0
        self.boot_block = False
        try:
            f = open(path, "rb")
        except OSError as e:
            raise SlotError("%s: cannot read: %s" % (path, e.strerror))
        with f:
            try:
                elf = ELFFile(f)
                machine, elfclass = elf["e_machine"], elf.elfclass
                self.entry = elf["e_entry"]
                symbols = self._symbols(elf)
            except Exception as e:
                raise SlotError("%s: not an ELF file (%s)" % (path, e))
            if machine != "EM_RISCV" or elfclass != 32:
                raise SlotError("%s: not a 32-bit RISC-V image" % path)
            if "__cop_trap_entry" in symbols:
                self._from_loader(cop_run)
            else:
                self._from_segments(elf)

    @staticmethod
    def _symbols(elf):
        table = elf.get_section_by_name(".symtab")
        if not table:
            return {}
        return {sym.name: (sym["st_value"], sym["st_size"])
                for sym in table.iter_symbols() if sym.name}

    def _from_segments(self, elf):
        swap = bytearray(L["SLOT_SWAP_SIZE"])
        for seg in elf.iter_segments():
            if seg["p_type"] != "PT_LOAD" or not seg["p_filesz"]:
                continue
            start, end = seg["p_vaddr"], seg["p_vaddr"] + seg["p_memsz"]
            if start < L["SLOT_LS_BASE"] or \
                    end > L["SLOT_LS_BASE"] + L["SLOT_LS_SIZE"]:
                raise SlotError("%s: segment at 0x%08x..0x%08x outside "
                                "the local store" % (self.path, start, end))
            data = seg.data()
            swap[ram_offset(start):ram_offset(start) + len(data)] = data
        self.swap = bytes(swap)

    def _from_loader(self, cop_run):
        with tempfile.TemporaryDirectory(prefix="slotrun-") as work:
            ram = os.path.join(work, "ram")
            done = subprocess.run([cop_run, "--ram-file", ram, "--qemu",
                                   "/bin/true", self.path] + self.args,
                                  capture_output=True, text=True,
                                  stdin=subprocess.DEVNULL)
            try:
                with open(ram, "rb") as f:
                    swap = bytearray(f.read(L["SLOT_SWAP_SIZE"]))
                    f.seek(ram_offset(COP_IMAGE_BASE))
                    image = f.read(L["SLOT_MAIN_DATA"])
            except OSError:
                raise SlotError("%s: the loader laid out nothing: %s" % (
                    self.path, done.stderr.strip()))
        boot = BootBlock.from_buffer_copy(swap, BOOT)
        size = boot.image_size
        if boot.magic != COP_BOOT_MAGIC:
            raise SlotError("%s: the loader wrote no boot block: %s" % (
                self.path, done.stderr.strip()))
        if size > L["SLOT_MAIN_DATA"]:
            raise SlotError("%s: %d bytes: a slot's main memory keeps images "
                            "of at most %d" % (self.path, size,
                                              L["SLOT_MAIN_DATA"]))
        self.swap = bytes(swap)
        self.window = image[:size]
        self.boot_block = True


def place_stub(ram, path):
    """Writes the stub's segments at their addresses."""
    with open(path, "rb") as f:
        try:
            elf = ELFFile(f)
            segments = [s for s in elf.iter_segments()
                        if s["p_type"] == "PT_LOAD" and s["p_filesz"]]
        except Exception as e:
            raise SlotError("%s: not an ELF file (%s)" % (path, e))
        for seg in segments:
            start, end = seg["p_vaddr"], seg["p_vaddr"] + seg["p_memsz"]
            if start < L["SLOT_STUB_BASE"] or \
                    end > L["SLOT_STUB_BASE"] + L["SLOT_STUB_SIZE"]:
                raise SlotError("%s: segment at 0x%08x..0x%08x outside the "
                                "stub's place" % (path, start, end))
            ram[ram_offset(start):ram_offset(end)] = seg.data().ljust(
                end - start, b"\0")


def map_new_file(path, size):
    """Creates path (0600, never through a link, never an existing file),
    size bytes of zeros, and maps it shared."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                 0o600)
    try:
        os.ftruncate(fd, size)
        return mmap.mmap(fd, size)
    finally:
        os.close(fd)


class MainMemory:
    """Main memory: one file shared by every slot's emulator (ivshmem's BAR
    2, at SLOT_MAIN_BASE) and the controller, one SLOT_MAIN_AREA per
    context for its image and data windows."""

    def __init__(self, workdir):
        self.path = os.path.join(workdir, "main")
        self.map = map_new_file(self.path, L["SLOT_MAIN_SIZE"])
        self.free = list(range(L["SLOT_MAIN_SIZE"] // L["SLOT_MAIN_AREA"]))

    def take(self, window):
        """An area for a new context, its image window filled; its index."""
        if not self.free:
            raise SlotError("main memory full: %d contexts have windows" %
                            (L["SLOT_MAIN_SIZE"] // L["SLOT_MAIN_AREA"]))
        k = self.free.pop(0)
        at = k * L["SLOT_MAIN_AREA"]
        self.map[at:at + len(window)] = window
        return k

    def data(self, k, size):
        """The first size bytes of area k's data window."""
        at = k * L["SLOT_MAIN_AREA"] + L["SLOT_MAIN_DATA"]
        return self.map[at:at + size]

    def give_back(self, k):
        """Area k is free: its pages go (zero when read again)."""
        self.map.madvise(mmap.MADV_REMOVE, k * L["SLOT_MAIN_AREA"],
                         L["SLOT_MAIN_AREA"])
        self.free.append(k)


class Slot:
    """One slot: its guest RAM file (stub, control block, staging areas)
    mapped here, and the emulator running the stub under coptrace.  The
    entries are filled with add(), their ends collected with ended(); the
    emulator ends once close() was called and nothing is runnable."""

    def __init__(self, workdir, stub, entries, slice_ticks, main,
                 closed=False):
        if not 1 <= entries <= L["SLOT_MAX_CONTEXTS"]:
            raise SlotError("%d contexts: a slot stub holds 1 to %d" %
                            (entries, L["SLOT_MAX_CONTEXTS"]))
        self.path = os.path.join(workdir, "ram")
        self.ram = map_new_file(self.path, L["SLOT_RAM_SIZE"])
        self.entries = entries
        self.main = main
        self.owner = [None] * entries      # (image, tag, area) or None
        self.process = None
        place_stub(self.ram, stub)
        self._header(0, struct.pack("<6I", L["SLOT_MAGIC"], entries,
                                    0xffffffff, 0xffffffff, slice_ticks,
                                    1 if closed else 0))

    def _header(self, offset, data):
        at = ram_offset(L["SLOT_CTL_BASE"]) + offset
        self.ram[at:at + len(data)] = data

    def _area(self, i):
        return (ram_offset(L["SLOT_CTL_BASE"]) + L["SLOT_H_SIZE"] +
                i * L["SLOT_CTX_SIZE"])

    def free_entry(self):
        """An entry the controller owns and nobody waits on, or None."""
        for i, owner in enumerate(self.owner):
            if owner is None:
                return i
        return None

    def add(self, image, tag=None, preempt=False):
        """Makes image a runnable context in a free entry, its windows in a
        new main-memory area (with preempt, to be handed back after its
        first slice); returns the entry."""
        i = self.free_entry()
        if i is None:
            raise SlotError("slot full: all %d entries in use" % self.entries)
        area = self.main.take(image.window)
        swap = bytearray(image.swap)
        if image.boot_block:
            base = L["SLOT_MAIN_BASE"] + area * L["SLOT_MAIN_AREA"]
            boot = BootBlock.from_buffer(swap, BOOT)
            boot.image_addr = base
            boot.data_addr = base + L["SLOT_MAIN_DATA"]
            del boot            # swap is copied below, never resized
        staging = ram_offset(L["SLOT_STAGING"]) + i * L["SLOT_AREA_SIZE"]
        self.ram[staging:staging + L["SLOT_SWAP_SIZE"]] = swap
        at = self._area(i)
        self.ram[at:at + L["SLOT_CTX_SIZE"]] = bytes(L["SLOT_CTX_SIZE"])
        struct.pack_into("<3I", self.ram, at + L["SLOT_C_PC"], image.entry,
                         image.handler, 1 if preempt else 0)
        struct.pack_into("<I", self.ram, at + L["SLOT_C_STATE"],
                         L["SLOT_RUNNABLE"])   # last: now the stub's
        self.owner[i] = (image, tag, area)
        return i

    def result(self, i):
        """Context i's save area as a dict."""
        state, status, cause, tval, binds, pc = struct.unpack_from(
            "<6I", self.ram, self._area(i))
        return {"state": state, "status": status, "cause": cause,
                "tval": tval, "binds": binds, "pc": pc}

    def ended(self):
        """The contexts that ended, or were handed back, since the last
        call: a list of (entry, image, tag, result, main-memory area,
        saved); saved is None for an end, else the context's state (its
        staging and save areas) to resume() anywhere.  Their entries are
        free again; their areas are still theirs (MainMemory.give_back)."""
        done = []
        for i, owner in enumerate(self.owner):
            if owner is None:
                continue
            r = self.result(i)
            if r["state"] in (L["SLOT_EXITED"], L["SLOT_FAULTED"]):
                done.append((i, owner[0], owner[1], r, owner[2], None))
            elif r["state"] == L["SLOT_PREEMPTED"]:
                done.append((i, owner[0], owner[1], r, owner[2],
                             self._saved(i)))
            else:
                continue
            self.owner[i] = None
        return done

    def _saved(self, i):
        staging = ram_offset(L["SLOT_STAGING"]) + i * L["SLOT_AREA_SIZE"]
        return (bytes(self.ram[staging:staging + L["SLOT_SWAP_SIZE"]]),
                bytes(self.ram[self._area(i):self._area(i) +
                               L["SLOT_CTX_SIZE"]]))

    def preempt(self, i):
        """Asks the stub to hand entry i back (PREEMPTED, saved) at the end
        of the next slice it runs."""
        struct.pack_into("<I", self.ram, self._area(i) + L["SLOT_C_PREEMPT"],
                         1)

    def resume(self, image, tag, area, saved, preempt=False):
        """Makes a handed-back context runnable again in a free entry of
        this slot (any slot: its state is all in saved and its area);
        with preempt, to be handed back after one slice."""
        i = self.free_entry()
        if i is None:
            raise SlotError("slot full: all %d entries in use" % self.entries)
        swap, save = saved
        staging = ram_offset(L["SLOT_STAGING"]) + i * L["SLOT_AREA_SIZE"]
        self.ram[staging:staging + L["SLOT_SWAP_SIZE"]] = swap
        at = self._area(i)
        self.ram[at + 4:at + L["SLOT_CTX_SIZE"]] = save[4:]
        struct.pack_into("<I", self.ram, at + L["SLOT_C_PREEMPT"],
                         1 if preempt else 0)
        struct.pack_into("<I", self.ram, at + L["SLOT_C_STATE"],
                         L["SLOT_RUNNABLE"])   # last: now the stub's
        self.owner[i] = (image, tag, area)
        return i

    def header(self):
        _, _, _, _, _, closed, switches, ticks, interrupts = \
            struct.unpack_from("<9I", self.ram, ram_offset(L["SLOT_CTL_BASE"]))
        return {"switches": switches, "ticks": ticks,
                "interrupts": interrupts, "closed": closed}

    def start(self, command, **popen):
        """Runs command (coptrace run ... -- QEMU on this RAM)."""
        self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL,
                                        **popen)

    def close(self):
        """No more contexts: the stub ends QEMU once none is runnable."""
        self._header(L["SLOT_H_CLOSED"], struct.pack("<I", 1))


def qemu_command(qemu, ram_path, icount, main_path):
    """QEMU on the slot's RAM, the hart started at the stub.  With icount,
    guest time is the instruction count (1 ns each), so slices end at the
    same instructions in every run, however loaded the machine is."""
    extra = ["-icount", "shift=0"] if icount else []
    size = "%dM" % (L["SLOT_RAM_SIZE"] >> 20)
    return [qemu] + extra + ["-M", "virt,memory-backend=cop-ram", "-m", size,
            "-object", "memory-backend-file,id=cop-ram,size=" + size + ","
            "mem-path=%s,share=on" % ram_path.replace(",", ",,"),
            "-cpu", "rv32,c=off", "-bios", "none", "-nodefaults",
            "-no-reboot", "-display", "none",
            "-chardev", "stdio,signal=off,id=cop-console",
            "-serial", "chardev:cop-console",
            "-object", "memory-backend-file,id=cop-main,size=%dM,"
            "mem-path=%s,share=on" % (L["SLOT_MAIN_SIZE"] >> 20,
                                      main_path.replace(",", ",,")),
            "-device", "ivshmem-plain,memdev=cop-main",
            "-device", "loader,addr=0x%x,cpu-num=0" % L["SLOT_STUB_BASE"]]


def describe(i, path, c):
    name = os.path.basename(path)
    if c["state"] == L["SLOT_EXITED"]:
        return "context %d %s: exit status=%d binds=%d" % (
            i, name, c["status"], c["binds"])
    if c["state"] == L["SLOT_FAULTED"]:
        return ("context %d %s: fault status=%d mcause=%d pc=0x%08x "
                "mtval=0x%08x binds=%d" % (i, name, c["status"], c["cause"],
                                           c["pc"], c["tval"], c["binds"]))
    return "context %d %s: did not end (state %d)" % (i, name, c["state"])


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="slotrun",
        description="Run coprocessor contexts (SDK images, or test guests "
        "built with slot-crt0.S) time-sliced on one long-lived emulator "
        "through the resident slot stub, with the trace unit attached; or "
        "feed them through several slots while those run.",
        epilog="With one slot: the contexts' consoles on stdout (one UART: "
        "a switch in the middle of a line mixes lines), and on stderr "
        "coptrace's counters, one line per context ('context I NAME: exit "
        "status=S binds=B', or 'fault status=132 mcause=C pc=P mtval=V "
        "binds=B') and 'slot: switches=N switch_us=T interrupts=I' (local "
        "stores swapped, mean microseconds per swap as the stub measured "
        "it on the 10 MHz timer, timer interrupts taken). With --slots or "
        "--repeat: one line 'slots=N contexts=M wall=S exit:STATUS=COUNT "
        "... round_trip_ms median=X p95=Y switches=Z'. Exit status 0 when "
        "every context ended, 1 otherwise, 2 on bad input or a failed "
        "emulator.")
    p.add_argument("contexts", nargs="+", metavar="IMAGE[,ARG...]",
                   help="a context's ELF image and its arguments: a test "
                   "guest built with slot-crt0.S, or an SDK image (laid "
                   "out by cop-run's loader); give one several times to "
                   "run several contexts of it")
    p.add_argument("--stub", required=True, metavar="ELF",
                   help="the stub's ELF image (build/tests/slot/"
                   "slot-stub.elf)")
    p.add_argument("--coptrace", default="coptrace", metavar="PATH",
                   help="coptrace to run QEMU under (default: on PATH)")
    p.add_argument("--qemu", default="qemu-system-riscv32", metavar="PROG",
                   help="the QEMU program (default qemu-system-riscv32)")
    p.add_argument("--cop-run", metavar="PATH",
                   help="cop-run, whose loader lays out SDK "
                   "images (default: beside --coptrace, else on PATH)")
    p.add_argument("--slice-us", type=int, default=1000, metavar="T",
                   help="time slice in microseconds of the guest timer "
                   "(default 1000)")
    p.add_argument("--icount", action="store_true",
                   help="guest time counts instructions (QEMU -icount "
                   "shift=0, 1 ns each): a slice of T us is T*1000 "
                   "instructions (the stub's included), the same in every "
                   "run")
    p.add_argument("--sample-every", type=int, default=1000003, metavar="N",
                   help="trace unit: one capture every N instructions")
    p.add_argument("--reference", action="store_true",
                   help="the plugin's per-instruction reference mode")
    p.add_argument("--exact-counts", metavar="FILE",
                   help="count every instruction exactly into FILE, one run "
                   "per context (context= its entry); with --slots or "
                   "--repeat one file per slot, FILE.slotN")
    p.add_argument("--samples-out", metavar="FILE",
                   help="the captured local-store addresses")
    p.add_argument("--data-out", metavar="DIR",
                   help="write each context's data window as it ended to "
                   "DIR/context-I.data (up to its last non-zero byte)")
    p.add_argument("--slots", type=int, default=1, metavar="N",
                   help="feed the contexts through N slots (N emulators), "
                   "filling entries while they run")
    p.add_argument("--entries", type=int, default=4, metavar="K",
                   help="with --slots or --repeat: save areas per slot "
                   "(default 4)")
    p.add_argument("--repeat", type=int, default=1, metavar="R",
                   help="run the list of contexts R times over")
    p.add_argument("--migrate", action="store_true",
                   help="with --slots: have every context handed back after "
                   "each slice it runs and resumed on the next slot (its "
                   "saved state moved from one emulator to another)")
    args = p.parse_args(argv)
    if args.slice_us < 1:
        p.error("--slice-us: must be at least 1")
    if args.slots < 1 or args.repeat < 1:
        p.error("--slots and --repeat: must be at least 1")
    if not 1 <= args.entries <= L["SLOT_MAX_CONTEXTS"]:
        p.error("--entries: 1 to %d" % L["SLOT_MAX_CONTEXTS"])
    if not args.cop_run:
        beside = os.path.join(os.path.dirname(args.coptrace), "cop-run")
        args.cop_run = beside if os.path.dirname(args.coptrace) else "cop-run"
    return args


def emulator_failure(status, trace):
    """One line for an emulator that did not end with status 0."""
    said = [l for l in trace.strip().splitlines()
            if not l.startswith("captures=")]
    return "emulator ended with status %d%s" % (
        status, ": " + said[-1] if said else "")


def load_images(args):
    """Every distinct IMAGE[,ARG...] of the command line, as an Image."""
    images = {}
    for spec in args.contexts:
        if spec not in images:
            path, *arguments = spec.split(",")
            images[spec] = Image(path, arguments, args.cop_run)
    return images


def trace_command(args, ram, main, regs=None, context=0, counts_suffix=""):
    """coptrace run with the trace unit's options, then QEMU on ram (with
    several slots, each its own exact-counts file, FILE.slotN)."""
    cmd = [args.coptrace, "run", "--event", "SPU_INSTRUCTIONS",
           "--sample-every", str(args.sample_every)]
    if regs:
        cmd += ["--regs", regs, "--context", str(context),
                "--slot", str(context)]
    if args.reference:
        cmd.append("--reference")
    if args.exact_counts:     # one run per context (the plugin's ram=)
        cmd += ["--exact-counts", args.exact_counts + counts_suffix,
                "--ram", ram]
    if args.samples_out:
        cmd += ["--samples-out", args.samples_out]
    return cmd + ["--"] + qemu_command(args.qemu, ram, args.icount, main)


def run(args):
    """Runs the contexts on one slot; returns (coptrace's stderr, the
    slot's header, the contexts' results in the order given)."""
    images = load_images(args)
    workdir = tempfile.mkdtemp(prefix="slotrun-")
    try:
        main = MainMemory(workdir)
        slot = Slot(workdir, args.stub, len(args.contexts),
                    args.slice_us * TIMER_HZ // 1_000_000, main, closed=True)
        areas = [slot.owner[slot.add(images[spec])][2]
                 for spec in args.contexts]
        slot.start(trace_command(args, slot.path, main.path),
                   stderr=subprocess.PIPE, text=True)
        _, trace = slot.process.communicate()
        if slot.process.returncode != 0:
            raise SlotError(emulator_failure(slot.process.returncode, trace))
        if args.data_out:
            write_data_windows(args.data_out, main, areas)
        return (trace, slot.header(),
                [slot.result(i) for i in range(len(args.contexts))])
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def write_data_windows(directory, main, areas):
    """DIRECTORY/context-I.data: context I's data window as it ended, up to
    its last non-zero byte."""
    size = L["SLOT_MAIN_AREA"] - L["SLOT_MAIN_DATA"]
    for i, area in enumerate(areas):
        data = main.data(area, size).rstrip(b"\0")
        with open(os.path.join(directory, "context-%d.data" % i), "wb") as f:
            f.write(data)


def run_many(args, poll_s=0.0002):
    """Feeds the contexts (the images, --repeat times over) through
    --slots slots of --entries entries each while their emulators run:
    every slot one long-lived QEMU on one register file.  Returns
    (results in order given, round trips in seconds, wall seconds,
    headers of the slots)."""
    images = load_images(args)
    queue = collections.deque(enumerate(args.contexts * args.repeat))
    results = [None] * len(queue)
    trips = [None] * len(queue)
    added = {}
    workdir = tempfile.mkdtemp(prefix="slotrun-")
    slots = []
    try:
        regs = os.path.join(workdir, "regs")
        subprocess.run([args.coptrace, "create", regs, "--slots",
                        str(args.slots), "--contexts", str(args.slots)],
                       check=True, capture_output=True)
        main = MainMemory(workdir)
        for n in range(args.slots):
            os.mkdir(os.path.join(workdir, str(n)))
            slot = Slot(os.path.join(workdir, str(n)), args.stub,
                        args.entries, args.slice_us * TIMER_HZ // 1_000_000,
                        main)
            slot.start(trace_command(args, slot.path, main.path, regs, n,
                                     counts_suffix=".slot%d" % n),
                       stderr=subprocess.PIPE, text=True)
            slots.append(slot)
        start = time.monotonic()
        moving = collections.deque()     # handed back, to resume
        migrations = 0
        while queue or added:
            for n, slot in enumerate(slots):
                for _, image, k, result, area, saved in slot.ended():
                    if saved is not None:       # --migrate: to the next slot
                        moving.append(((n + 1) % len(slots), image, k, area,
                                       saved))
                        continue
                    results[k] = result
                    trips[k] = time.monotonic() - added.pop(k)
                    main.give_back(area)
            for _ in range(len(moving)):
                n, image, k, area, saved = moving.popleft()
                if slots[n].free_entry() is None:
                    moving.append((n, image, k, area, saved))
                    continue
                slots[n].resume(image, k, area, saved, preempt=True)
                migrations += 1
            for slot in slots:
                while queue and slot.free_entry() is not None:
                    k, path = queue.popleft()
                    added[k] = time.monotonic()
                    slot.add(images[path], k, preempt=args.migrate)
            time.sleep(poll_s)
        wall = time.monotonic() - start
        for slot in slots:
            slot.close()
        for slot in slots:
            _, trace = slot.process.communicate()
            if slot.process.returncode != 0:
                raise SlotError(emulator_failure(slot.process.returncode,
                                                 trace))
        return results, trips, wall, [s.header() for s in slots], migrations
    finally:
        for slot in slots:
            if slot.process and slot.process.poll() is None:
                slot.process.kill()
                slot.process.wait()
        shutil.rmtree(workdir, ignore_errors=True)


def main_many(args):
    results, trips, wall, headers, migrations = run_many(args)
    ends = collections.Counter(
        ("exit" if r["state"] == L["SLOT_EXITED"] else "fault", r["status"])
        for r in results)
    trips.sort()
    print("slots=%d contexts=%d wall=%.3fs %s round_trip_ms median=%.2f "
          "p95=%.2f switches=%d migrations=%d" % (
              args.slots, len(results), wall,
              " ".join("%s:%d=%d" % (e, st, n)
                       for (e, st), n in sorted(ends.items())),
              1e3 * trips[len(trips) // 2],
              1e3 * trips[min(len(trips) - 1, len(trips) * 95 // 100)],
              sum(h["switches"] for h in headers), migrations),
          file=sys.stderr)
    return 0


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        if args.slots > 1 or args.repeat > 1 or args.migrate:
            return main_many(args)
        trace, header, contexts = run(args)
    except (SlotError, OSError) as e:
        print("slotrun: %s" % e, file=sys.stderr)
        return 2
    sys.stderr.write(trace)
    for i, (spec, c) in enumerate(zip(args.contexts, contexts)):
        print(describe(i, spec.split(",")[0], c), file=sys.stderr)
    per_switch = (header["ticks"] * 1e6 / TIMER_HZ / header["switches"]
                  if header["switches"] else 0.0)
    print("slot: switches=%d switch_us=%.1f interrupts=%d" %
          (header["switches"], per_switch, header["interrupts"]),
          file=sys.stderr)
    ended = all(c["state"] in (L["SLOT_EXITED"], L["SLOT_FAULTED"])
                for c in contexts)
    return 0 if ended else 1


if __name__ == "__main__":
    sys.exit(main())
