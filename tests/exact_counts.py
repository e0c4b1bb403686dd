"""Reader of the trace unit's exact instruction counts (counts=FILE of the
plugin, `cop-run --exact-counts FILE`, `copsim --exact-counts DIR`).

The file format is in docs/trace-unit.md ("Exact counts").  This module
maps it onto the image that ran:

    counts_by_file_offset(counts_path, image_path, elf_offset=0)
        -> {file offset in image_path: instructions}

`elf_offset` is where the ELF header is inside image_path (a coprocessor
image embedded in a host executable by cop-embed); the returned offsets are
offsets in image_path itself, ready for a symbolizer that reads the image
at elf_offset.  A pc maps through the image's PT_LOAD segments: a resident
segment directly; in an overlay region (several PF_OVERLAY segments at one
address) through the overlay whose bytes equal the instruction bytes that
ran, the whole translated block deciding when one instruction is not
enough.  Code that matches no segment, or two overlays with identical
bytes, raises CountsError: the caller learns it could not be attributed,
never a silent guess.  Instructions outside the image's segments (QEMU's
reset code at 0x1000) are counted apart: see attribute().

Standard library and pyelftools only (/usr/bin/python3).
"""

import collections
import io

from elftools.elf.elffile import ELFFile

VERSION_LINE = "coprof-exact-counts 2"
VERSION_LINES = ("coprof-exact-counts 1", VERSION_LINE)
REASONS = ("issue", "dependency", "branch", "dma_wait", "mailbox_wait",
           "memory")
PF_OVERLAY = 0x08000000

Insn = collections.namedtuple("Insn", "pc data count " + " ".join(REASONS),
                              defaults=(0,) * len(REASONS))
Code = collections.namedtuple("Code", "pc hash insns")
Run = collections.namedtuple("Run", "context mode ls_base ls_size "
                                    "instructions codes cycles")
Attributed = collections.namedtuple("Attributed", "pc where file_offset count")


class CountsError(ValueError):
    """A counts file that is malformed, or code that cannot be attributed."""


def _fields(words, path, lineno):
    out = {}
    for word in words:
        key, sep, value = word.partition("=")
        if not sep:
            raise CountsError("%s:%d: expected key=value, got %r"
                              % (path, lineno, word))
        out[key] = value
    return out


def read_counts(path):
    """The runs of a counts file, in order: a list of Run, each with its
    codes (Code: pc of the block, hash, list of Insn(pc, bytes, count)).
    Raises CountsError on anything malformed or cut short."""
    runs = []
    run = code = None
    with open(path, encoding="ascii") as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for lineno, line in enumerate(lines, 1):
        words = line.split()
        where = "%s:%d" % (path, lineno)
        try:
            if line in VERSION_LINES:
                if run is not None:
                    raise CountsError("%s: run without its end line" % where)
                run = {"codes": [], "head": None}
            elif run is None:
                raise CountsError("%s: expected %r" % (where, VERSION_LINE))
            elif words[0] == "run" and run["head"] is None:
                run["head"] = _fields(words[1:], path, lineno)
            elif words[0] == "code" and len(words) == 4:
                code = Code(int(words[1], 16), int(words[3], 16), [])
                code_len = int(words[2])
                run["codes"].append((code, code_len))
            elif words[0] == "end":
                end = _fields(words[1:], path, lineno)
                runs.append(_finish_run(run, end, where))
                run = code = None
            elif len(words) in (3, 6, 9) and code is not None:
                code.insns.append(Insn(int(words[0], 16),
                                       bytes.fromhex(words[1]),
                                       *(int(w) for w in words[2:])))
            else:
                raise CountsError("%s: unexpected line %r" % (where, line))
        except (IndexError, ValueError) as e:
            if isinstance(e, CountsError):
                raise
            raise CountsError("%s: bad line %r (%s)" % (where, line, e))
    if run is not None:
        raise CountsError("%s: cut short (no end line)" % path)
    if not runs:
        raise CountsError("%s: no runs" % path)
    return runs


def _finish_run(run, end, where):
    head = run["head"]
    if head is None:
        raise CountsError("%s: run without its run line" % where)
    codes = []
    for code, n in run["codes"]:
        if len(code.insns) != n:
            raise CountsError("%s: code at 0x%x has %d of its %d instructions"
                              % (where, code.pc, len(code.insns), n))
        codes.append(code)
    total = sum(i.count for c in codes for i in c.insns)
    if total != int(end["instructions"]) or len(codes) != int(end["codes"]):
        raise CountsError("%s: end line says %s instructions in %s codes, the "
                          "run has %d in %d" % (where, end["instructions"],
                                                end["codes"], total,
                                                len(codes)))
    cycles = sum(getattr(i, reason) for reason in REASONS
                 for c in codes for i in c.insns)
    if "cycles" in end and cycles != int(end["cycles"]):
        raise CountsError("%s: end line says %s cycles, the run has %d"
                          % (where, end["cycles"], cycles))
    return Run(int(head["context"]), head["mode"], int(head["ls_base"], 16),
               int(head["ls_size"], 16), total, codes, cycles)


def cycles_by_pc(counts_path):
    """{pc: {reason: cycles}} over every run of a version-2 counts file
    (reasons: REASONS), the codes at one pc added up."""
    out = collections.defaultdict(lambda: dict.fromkeys(REASONS, 0))
    for run in read_counts(counts_path):
        for code in run.codes:
            for insn in code.insns:
                for reason in REASONS:
                    out[insn.pc][reason] += getattr(insn, reason)
    return dict(out)


def total_instructions(counts_path):
    """Instructions counted in the file, all runs together."""
    return sum(run.instructions for run in read_counts(counts_path))


class _Image:
    """The PT_LOAD segments of an image (at elf_offset in its file)."""

    def __init__(self, image_path, elf_offset):
        with open(image_path, "rb") as f:
            f.seek(elf_offset)
            self.data = f.read()
        self.elf_offset = elf_offset
        elf = ELFFile(io.BytesIO(self.data))
        self.resident, self.overlays = [], []
        sections = [(s.name, s["sh_offset"], s["sh_size"])
                    for s in elf.iter_sections() if s["sh_type"] != "SHT_NOBITS"]
        for seg in elf.iter_segments():
            if seg["p_type"] != "PT_LOAD" or not seg["p_filesz"]:
                continue
            entry = (seg["p_vaddr"], seg["p_filesz"], seg["p_offset"])
            if seg["p_flags"] & PF_OVERLAY:
                name = next((n for n, off, size in sections
                             if off == seg["p_offset"] and size), None)
                self.overlays.append(entry + (name or "overlay@0x%x"
                                              % seg["p_offset"],))
            else:
                self.resident.append(entry)

    def bytes_at(self, segment, pc, n):
        vaddr, size, offset = segment[:3]
        if not (vaddr <= pc and pc + n <= vaddr + size):
            return None
        start = offset + pc - vaddr
        return self.data[start:start + n]

    def contains(self, segment, pc):
        return segment[0] <= pc < segment[0] + segment[1]


def _attribute_code(image, code, where):
    """[(Insn, where, file offset or None)] for one code record."""
    out = []
    for insn in code.insns:
        resident = [s for s in image.resident if image.contains(s, insn.pc)]
        overlays = [s for s in image.overlays if image.contains(s, insn.pc)]
        if resident:
            seg = resident[0]
            if image.bytes_at(seg, insn.pc, len(insn.data)) != insn.data:
                raise CountsError("%s: the bytes that ran at 0x%x are not the "
                                  "image's" % (where, insn.pc))
            out.append((insn, "resident",
                        image.elf_offset + seg[2] + insn.pc - seg[0]))
        elif overlays:
            seg = _pick_overlay(image, code, insn, overlays, where)
            out.append((insn, seg[3],
                        image.elf_offset + seg[2] + insn.pc - seg[0]))
        else:
            out.append((insn, None, None))
    return out


def _pick_overlay(image, code, insn, overlays, where):
    """The overlay whose bytes ran at insn.pc: those equal at the pc, then
    those equal for every instruction of the block they cover."""
    same = [s for s in overlays
            if image.bytes_at(s, insn.pc, len(insn.data)) == insn.data]
    if len(same) > 1:
        same = [s for s in same
                if all(image.bytes_at(s, i.pc, len(i.data)) == i.data
                       for i in code.insns if image.contains(s, i.pc))]
    if not same:
        raise CountsError("%s: the bytes that ran at 0x%x match no overlay "
                          "of %s" % (where, insn.pc,
                                     ", ".join(s[3] for s in overlays)))
    if len(same) > 1:
        raise CountsError("%s: ambiguous: overlays %s have identical code at "
                          "0x%x (block 0x%x)" % (where,
                                                 ", ".join(s[3] for s in same),
                                                 insn.pc, code.pc))
    return same[0]


def attribute(counts_path, image_path, elf_offset=0):
    """Every counted instruction of every run: a list of Attributed(pc,
    where, file_offset, count), where `where` is "resident", the overlay's
    section name (".overlay.NAME"), or None for a pc outside the image's
    segments (file_offset None).  Raises CountsError."""
    image = _Image(image_path, elf_offset)
    out = []
    for run in read_counts(counts_path):
        for code in run.codes:
            for insn, where, offset in _attribute_code(image, code,
                                                       counts_path):
                out.append(Attributed(insn.pc, where, offset, insn.count))
    return out


def _in_image(counts_path, image_path, elf_offset):
    """(Insn, file offset) of every counted instruction in the image."""
    image = _Image(image_path, elf_offset)
    for run in read_counts(counts_path):
        for code in run.codes:
            for insn, _, offset in _attribute_code(image, code, counts_path):
                if offset is not None:
                    yield insn, offset


def counts_by_file_offset(counts_path, image_path, elf_offset=0,
                          cycles=False):
    """{file offset in image_path: instructions} (with cycles: the
    modelled cycles of every reason instead, version 2), every run summed;
    instructions outside the image are left out (attribute() has them).
    Raises CountsError on a malformed file or code it cannot attribute."""
    by_offset = collections.Counter()
    for insn, offset in _in_image(counts_path, image_path, elf_offset):
        by_offset[offset] += (sum(getattr(insn, r) for r in REASONS)
                              if cycles else insn.count)
    return dict(by_offset)


def cycles_by_file_offset_and_stall(counts_path, image_path, elf_offset=0):
    """{(file offset, stall): modelled cycles} of a version-2 file, stall
    the index of the reason in REASONS (enum trace_stall_reason's value, a
    session's `stall`), every run summed; outside the image left out."""
    out = collections.Counter()
    for insn, offset in _in_image(counts_path, image_path, elf_offset):
        for stall, reason in enumerate(REASONS):
            if getattr(insn, reason):
                out[(offset, stall)] += getattr(insn, reason)
    return dict(out)
