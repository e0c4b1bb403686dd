#!/usr/bin/python3
"""slotrun — run several coprocessor contexts on ONE long-lived
qemu-system-riscv32 through the resident slot stub, time-sliced.

This is the prototype of copsim's slot model (emulator/copsim/README.md,
"Slots as long-lived emulators"): a slot is one emulator, a context is
saved state (its 256 KiB local store in a staging area of the slot's RAM
and its registers in a save area), and the stub (slot-stub.S) switches
them at timer interrupts with guest stores and fence.i, so that QEMU drops
stale translations.  The trace-unit plugin does not count the stub's
instructions, so each context's instructions (and --exact-counts) are its
own.

slotrun lays the stub, its control block (slot-stub.h) and every context's
local store into a new guest RAM file, runs QEMU under `coptrace run` (the
trace unit attached, the hart started at the stub), passes the consoles
(one UART for all contexts) to its stdout, and prints one line per context
and the slot's switch statistics on stderr.  Standard library and
pyelftools only.
"""

import argparse
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

from elftools.elf.elffile import ELFFile

HERE = os.path.dirname(os.path.abspath(__file__))
RAM_SIZE = 16 << 20
TIMER_HZ = 10_000_000           # the virt machine's CLINT timebase


def read_layout(path=os.path.join(HERE, "slot-stub.h")):
    """The #define NAME VALUE lines of slot-stub.h, as a dict."""
    layout = {}
    with open(path) as f:
        for line in f:
            m = re.match(r"#define\s+(SLOT_\w+)\s+(0x[0-9a-fA-F]+|\d+)", line)
            if m:
                layout[m.group(1)] = int(m.group(2), 0)
    return layout


L = read_layout()


class SlotError(Exception):
    pass


def ram_offset(address):
    return address - L["SLOT_LS_BASE"]


def load_segments(ram, elf_path, delta, limit):
    """Writes the PT_LOAD segments of ELF file elf_path into the RAM file
    at their address minus LS_BASE plus delta; every byte must lie below
    limit (an address).  Returns the entry point."""
    with open(elf_path, "rb") as f:
        try:
            elf = ELFFile(f)
        except Exception as e:
            raise SlotError("%s: not an ELF file (%s)" % (elf_path, e))
        if elf["e_machine"] != "EM_RISCV" or elf.elfclass != 32:
            raise SlotError("%s: not a 32-bit RISC-V image" % elf_path)
        for seg in elf.iter_segments():
            if seg["p_type"] != "PT_LOAD" or not seg["p_filesz"]:
                continue
            start, end = seg["p_vaddr"], seg["p_vaddr"] + seg["p_memsz"]
            if start < L["SLOT_LS_BASE"] or end > limit:
                raise SlotError("%s: segment at 0x%08x..0x%08x outside its "
                                "place (below 0x%08x)" %
                                (elf_path, start, end, limit))
            ram.seek(ram_offset(start) + delta)
            ram.write(seg.data())
        return elf["e_entry"]


def lay_out(ram_path, stub, contexts, slice_ticks):
    """Creates the RAM file: stub, control block, staging areas."""
    if not 1 <= len(contexts) <= L["SLOT_MAX_CONTEXTS"]:
        raise SlotError("%d contexts: a slot stub holds 1 to %d" %
                        (len(contexts), L["SLOT_MAX_CONTEXTS"]))
    fd = os.open(ram_path, os.O_RDWR | os.O_CREAT | os.O_EXCL |
                 os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "r+b") as ram:
        ram.truncate(RAM_SIZE)
        load_segments(ram, stub, 0, L["SLOT_STUB_BASE"] + L["SLOT_STUB_SIZE"])
        ctl = ram_offset(L["SLOT_CTL_BASE"])
        ram.seek(ctl)
        ram.write(struct.pack("<6I", L["SLOT_MAGIC"], len(contexts),
                              0xffffffff, 0xffffffff, slice_ticks,
                              len(contexts)))
        for i, path in enumerate(contexts):
            delta = L["SLOT_STAGING"] - L["SLOT_LS_BASE"] + i * L["SLOT_LS_SIZE"]
            entry = load_segments(ram, path, delta,
                                  L["SLOT_LS_BASE"] + L["SLOT_LS_SIZE"])
            area = ctl + L["SLOT_H_SIZE"] + i * L["SLOT_CTX_SIZE"]
            ram.seek(area + L["SLOT_C_STATE"])
            ram.write(struct.pack("<I", L["SLOT_RUNNABLE"]))
            ram.seek(area + L["SLOT_C_PC"])
            ram.write(struct.pack("<I", entry))


def read_results(ram_path, count):
    """The control block after the run: (header dict, [context dicts])."""
    with open(ram_path, "rb") as ram:
        ram.seek(ram_offset(L["SLOT_CTL_BASE"]))
        block = ram.read(L["SLOT_CTL_SIZE"])
    words = struct.unpack_from("<9I", block)
    if words[0] != L["SLOT_MAGIC"]:
        raise SlotError("%s: no slot control block after the run" % ram_path)
    header = {"live": words[5], "switches": words[6], "ticks": words[7],
              "interrupts": words[8]}
    contexts = []
    for i in range(count):
        at = L["SLOT_H_SIZE"] + i * L["SLOT_CTX_SIZE"]
        state, status, cause, tval, binds, pc = struct.unpack_from(
            "<6I", block, at)
        contexts.append({"state": state, "status": status, "cause": cause,
                         "tval": tval, "binds": binds, "pc": pc})
    return header, contexts


def qemu_command(qemu, ram_path, icount):
    """QEMU on the slot's RAM, the hart started at the stub.  With icount,
    guest time is the instruction count (1 ns each), so slices end at the
    same instructions in every run, however loaded the machine is."""
    extra = ["-icount", "shift=0"] if icount else []
    return [qemu] + extra + ["-M", "virt,memory-backend=cop-ram", "-m", "16M",
            "-object", "memory-backend-file,id=cop-ram,size=16M,"
            "mem-path=%s,share=on" % ram_path.replace(",", ",,"),
            "-cpu", "rv32,c=off", "-bios", "none", "-nodefaults",
            "-no-reboot", "-display", "none",
            "-chardev", "stdio,signal=off,id=cop-console",
            "-serial", "chardev:cop-console",
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
        description="Run coprocessor contexts (test-guest ELF images built "
        "with slot-crt0.S) time-sliced on one emulator through the "
        "resident slot stub, with the trace unit attached.",
        epilog="Prints one line per context on stderr (exit status or "
        "fault, binds) and 'slot: switches=N switch_us=T interrupts=I' "
        "(local stores swapped, mean microseconds per swap as the stub "
        "measured it on the 10 MHz timer, timer interrupts taken). Exit "
        "status 0 when every context ended, 1 otherwise, 2 on bad input.")
    p.add_argument("contexts", nargs="+", metavar="IMAGE",
                   help="a context's ELF image; give one several times to "
                   "run several contexts of it")
    p.add_argument("--stub", required=True, help="the stub's ELF image "
                   "(build/tests/slot/slot-stub.elf)")
    p.add_argument("--coptrace", default="coptrace",
                   help="coptrace to run QEMU under (default: on PATH)")
    p.add_argument("--qemu", default="qemu-system-riscv32")
    p.add_argument("--slice-us", type=int, default=1000,
                   help="time slice in microseconds of the guest timer "
                   "(default 1000)")
    p.add_argument("--icount", action="store_true",
                   help="guest time counts instructions (QEMU -icount "
                   "shift=0, 1 ns each): a slice of T us is T*1000 "
                   "instructions (the stub's included), the same in every "
                   "run")
    p.add_argument("--sample-every", type=int, default=1000003,
                   help="trace unit: one capture every N instructions")
    p.add_argument("--reference", action="store_true",
                   help="the plugin's per-instruction reference mode")
    p.add_argument("--exact-counts", metavar="FILE",
                   help="count every instruction exactly into FILE")
    p.add_argument("--samples-out", metavar="FILE",
                   help="the captured local-store addresses")
    args = p.parse_args(argv)
    if args.slice_us < 1:
        p.error("--slice-us: must be at least 1")
    return args


def run(args):
    """Runs the slot; returns (coptrace's stderr, header, contexts)."""
    workdir = tempfile.mkdtemp(prefix="slotrun-")
    try:
        ram = os.path.join(workdir, "ram")
        lay_out(ram, args.stub, args.contexts,
                args.slice_us * TIMER_HZ // 1_000_000)
        cmd = [args.coptrace, "run", "--sample-every", str(args.sample_every)]
        if args.reference:
            cmd.append("--reference")
        if args.exact_counts:
            cmd += ["--exact-counts", args.exact_counts]
        if args.samples_out:
            cmd += ["--samples-out", args.samples_out]
        cmd += ["--"] + qemu_command(args.qemu, ram, args.icount)
        done = subprocess.run(cmd, stdin=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
        if done.returncode != 0:
            raise SlotError("emulator: %s" % (done.stderr.strip().splitlines()
                                              or ["exit status %d" %
                                                  done.returncode])[-1])
        header, contexts = read_results(ram, len(args.contexts))
        return done.stderr, header, contexts
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        trace, header, contexts = run(args)
    except (SlotError, OSError) as e:
        print("slotrun: %s" % e, file=sys.stderr)
        return 2
    sys.stderr.write(trace)
    for i, (path, c) in enumerate(zip(args.contexts, contexts)):
        print(describe(i, path, c), file=sys.stderr)
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
