"""Per-instruction and per-source-line annotation of a session's samples,
like opannotate and `perf annotate` (`copreport annotate`).

The exact samples are summed by (image, overlay, file offset) in SQLite
(Session.samples(by_context=False)); each offset is placed in its
function by the symbolizer (symbols.py), so overlay functions that share
local-store addresses are separate functions with their own bytes.  A
function's instructions come from the SDK's RISC-V binutils
(`riscv64-unknown-elf-objdump -d -j SECTION --start-address
--stop-address` on the image's bytes: the session's cached copy, or a
private temporary copy of an image embedded in a host executable), each
at its address and file offset, with its samples and their percent of
the function's.  Source lines come from the image's DWARF line table
(pyelftools): for a function, the line program of the compilation unit
whose DW_TAG_subprogram has its name and start address, only its
sequences that cover the function (overlays share addresses, and so do
their sequences).  An image without .debug_line, or a function no
compilation unit describes (libc's, assembly without -g), is annotated
without source and says why (Function.no_source).

annotate() gives the AnnotatedFunctions (hottest first); by_source()
sums them per source line for --source.  The writers are text, CSV and
JSON; in text every instruction is one line starting with its sample
count, then its percent, its address and its file offset.
"""

import bisect
import collections
import csv
import json
import os
import re
import subprocess
import tempfile

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

from . import profile, safefile, stalls
from .symbols import printable

OBJDUMP = "riscv64-unknown-elf-objdump"
ORDERS = ("samples", "address")
FORMATS = ("text", "csv", "json")

Instruction = collections.namedtuple(
    "Instruction", "address offset raw text samples source_file source_line "
    "stall inlined", defaults=(None, None))

# An instruction of inlined code: the inlined function and the line of the
# sampled function's own code that called it (_Lines.inlined_at()).
Inlined = collections.namedtuple("Inlined", "function call_file call_line")

# Where DWARF places an instruction: its line-table (file, line), and
# the Inlined call when it is inlined code (else None).
Place = collections.namedtuple("Place", "file line inlined")


class AnnotateError(Exception):
    """An annotation that cannot be made; str() is one line."""


class AnnotatedFunction:
    """A function of an image with its instructions' samples."""

    def __init__(self, image, function, overlay):
        self.image = image          # profile.ImageInfo
        self.function = function    # symbols.Function
        self.overlay = overlay      # overlay number, 0 for resident
        self.counts = {}            # file offset -> samples
        self.stalls = None          # file offset -> stalls.Breakdown, of
        #                             a session with reasons
        self.instructions = []
        self.source = None          # its source file, when DWARF says
        self.no_source = None       # why there is no source

    @property
    def name(self):
        return self.function.name

    @property
    def section(self):
        return self.function.section

    @property
    def samples(self):
        return sum(self.counts.values())

    @property
    def overlay_label(self):
        return self.section if self.overlay else ""

    def stall_at(self, off):
        """The samples at a file offset by reason: a Breakdown (empty
        where it has none), or None when the session has no reasons."""
        if self.stalls is None:
            return None
        return self.stalls.get(off) or stalls.Breakdown()

    @property
    def stall(self):
        """The function's samples by reason, or None."""
        if self.stalls is None:
            return None
        b = stalls.Breakdown()
        for x in self.stalls.values():
            b.merge(x)
        return b


# --- disassembly ------------------------------------------------------

_INSN = re.compile(r"^\s*([0-9a-f]+):\s+((?:[0-9a-f]{2,8} ?)+)\s*\t(.*)$")


def _disassemble(path, section, start, end):
    """[(address, raw hex, text)] of section's code in [start, end)."""
    try:
        p = subprocess.run(
            [OBJDUMP, "-d", "-w", "-j", section,
             "--start-address=0x%x" % start, "--stop-address=0x%x" % end,
             path], capture_output=True, timeout=60)
    except FileNotFoundError:
        raise AnnotateError("%s: not found (the RISC-V binutils of the SDK,"
                            " Debian's binutils-riscv64-unknown-elf)"
                            % OBJDUMP)
    except subprocess.TimeoutExpired:
        raise AnnotateError("%s: %s took more than 60 s" % (OBJDUMP, path))
    # the image's names are bytes: decoded and escaped (printable())
    if p.returncode != 0:
        why = (p.stderr.decode("utf-8", "replace").strip().splitlines() or
               ["exit %d" % p.returncode])
        raise AnnotateError("%s: %s" % (path, printable(why[0])))
    out = []
    for line in p.stdout.decode("utf-8", "replace").splitlines():
        m = _INSN.match(line)
        if m:
            out.append((int(m.group(1), 16), m.group(2).strip(),
                        printable(" ".join(m.group(3).split()))))
    return out


class _ImageFile:
    """An image's bytes as a file objdump and pyelftools can open: the
    bytes read (and checked: a regular file, bounded, safefile.py) from
    the session's cached copy or the file it was found in, copied to a
    private temporary file (0600, removed by close()), so that objdump
    never opens a name the session gave (a FIFO there would hang it)."""

    def __init__(self, image):
        self.path = None
        self._temp = None
        if not image.file:
            return
        data = image.read_bytes()
        if data is None:
            return
        fd, self._temp = tempfile.mkstemp(prefix="copreport-", suffix=".elf")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        self.path = self._temp

    def close(self):
        if self._temp:
            os.unlink(self._temp)
            self._temp = None


# --- DWARF lines ------------------------------------------------------

def _attr_text(die, name):
    a = die.attributes.get(name)
    if a is None:
        return None
    return printable(a.value) if isinstance(a.value, (bytes, str)) \
        else a.value


class _Lines:
    """An image's DWARF: per compilation unit its subprograms (name,
    start address) and its line sequences."""

    def __init__(self, path):
        self.reason = None
        self.units = []             # [(subprograms {(name, low)}, seqs,
        #                             inlined calls {(name, low): [...]})]
        try:
            with open(path, "rb") as f:
                elf = ELFFile(f)
                if elf.get_section_by_name(".debug_line") is None:
                    self.reason = ("the image has no debug information (no "
                                   ".debug_line: built without -g, or "
                                   "stripped)")
                    return
                self._load(elf.get_dwarf_info())
        except (OSError, ELFError, ValueError, KeyError, IndexError,
                AttributeError, TypeError) as e:
            self.reason = "its debug information cannot be read (%s)" % e

    def _load(self, dwarf):
        for cu in dwarf.iter_CUs():
            top = cu.get_top_DIE()
            comp_dir = _attr_text(top, "DW_AT_comp_dir") or ""
            lp = dwarf.line_program_for_CU(cu)
            if lp is None:
                continue
            file_name = _file_names(lp, comp_dir)
            subs, inlines = set(), {}
            for die in cu.iter_DIEs():
                if die.tag == "DW_TAG_subprogram" and \
                        "DW_AT_low_pc" in die.attributes:
                    name = _attr_text(die, "DW_AT_name")
                    if name:
                        key = (name, die.attributes["DW_AT_low_pc"].value)
                        subs.add(key)
                        inlines[key] = list(_inlined_calls(
                            dwarf, cu, die, file_name))
            self.units.append((subs, self._sequences(lp, file_name),
                               inlines))

    @staticmethod
    def _sequences(lp, file_name):
        """[[(address, file, line)]]: each sequence's rows."""
        seqs, cur = [], []
        for entry in lp.get_entries():
            st = entry.state
            if st is None:
                continue
            cur.append((st.address, file_name(st.file), st.line))
            if st.end_sequence:
                seqs.append(cur)
                cur = []
        return seqs

    def for_function(self, name, start):
        """(lookup, None): lookup(address) is the (file, line) of an
        address of the function named name starting at start; or (None,
        why there is none)."""
        if self.reason:
            return None, self.reason
        for subs, seqs, _ in self.units:
            if (name, start) not in subs:
                continue
            for seq in seqs:
                if seq and seq[0][0] <= start < seq[-1][0]:
                    return _SequenceLookup(seq), None
        return None, ("no compilation unit of the image describes %s "
                      "(a library or assembly function built without -g)"
                      % name)


    def inlined_at(self, name, start, address):
        """The Inlined call of the function named name (starting at
        start) whose code holds address: the outermost, so its call line
        is in the function's own code (stream.c:77 for cop.h's
        cop_dma_get inlined there, however deep cop.h inlines its own
        helpers); None for the function's own instructions."""
        for subs, _, inlines in self.units:
            if (name, start) not in subs:
                continue
            for ranges, inlined in inlines[(name, start)]:
                if any(low <= address < high for low, high in ranges):
                    return inlined
        return None


def _file_names(lp, comp_dir):
    """file_name(index): the path of a file of a line program's table
    (DWARF 5 counts from 0, earlier versions from 1)."""
    v5 = lp.header["version"] >= 5
    files = lp.header["file_entry"]
    dirs = lp.header["include_directory"]

    def file_name(i):
        k = i if v5 else i - 1
        if not 0 <= k < len(files):
            return "?"
        e = files[k]
        name = printable(e.name)
        d = e.dir_index if v5 else e.dir_index - 1
        if not os.path.isabs(name) and 0 <= d < len(dirs) and \
                (v5 or e.dir_index > 0):
            name = os.path.join(printable(dirs[d]), name)
        if not os.path.isabs(name):
            name = os.path.join(comp_dir, name)
        return os.path.normpath(name)
    return file_name


def _inlined_calls(dwarf, cu, subprogram, file_name):
    """([(low, high)], Inlined) of each outermost DW_TAG_inlined_subroutine
    of a subprogram (lexical blocks looked through, inlined calls within
    an inlined call not: their call lines are in the inlined code)."""
    todo = list(subprogram.iter_children())
    while todo:
        die = todo.pop()
        if die.tag != "DW_TAG_inlined_subroutine":
            todo.extend(die.iter_children())
            continue
        attrs = die.attributes
        if "DW_AT_call_file" not in attrs or "DW_AT_call_line" not in attrs:
            continue
        ranges = _die_ranges(dwarf, cu, die)
        if ranges:
            yield ranges, Inlined(_inlined_name(die),
                                  file_name(attrs["DW_AT_call_file"].value),
                                  attrs["DW_AT_call_line"].value)


def _inlined_name(die):
    """The name of an inlined call's function (its abstract origin's)."""
    seen = 0
    while "DW_AT_name" not in die.attributes and seen < 8:
        origin = "DW_AT_abstract_origin" if "DW_AT_abstract_origin" in \
            die.attributes else "DW_AT_specification"
        if origin not in die.attributes:
            return "?"
        die = die.get_DIE_from_attribute(origin)
        seen += 1
    return _attr_text(die, "DW_AT_name") or "?"


def _die_ranges(dwarf, cu, die):
    """[(low, high)] of the addresses of a DIE: DW_AT_low_pc/high_pc
    (high an address, or a length in a constant form), or DW_AT_ranges
    (.debug_ranges or DWARF 5's .debug_rnglists, offset pairs from the
    unit's base address)."""
    attrs = die.attributes
    if "DW_AT_low_pc" in attrs and "DW_AT_high_pc" in attrs:
        low, high = attrs["DW_AT_low_pc"], attrs["DW_AT_high_pc"]
        end = high.value if high.form == "DW_FORM_addr" \
            else low.value + high.value
        return [(low.value, end)]
    if "DW_AT_ranges" not in attrs:
        return []
    lists = dwarf.range_lists()
    if lists is None:
        return []
    base = cu.get_top_DIE().attributes.get("DW_AT_low_pc")
    base = base.value if base is not None else 0
    out = []
    for entry in lists.get_range_list_at_offset(
            attrs["DW_AT_ranges"].value, cu=cu):
        if hasattr(entry, "base_address"):
            base = entry.base_address
        elif entry.is_absolute:
            out.append((entry.begin_offset, entry.end_offset))
        else:
            out.append((base + entry.begin_offset, base + entry.end_offset))
    return out


class _SequenceLookup:
    """(file, line) of an address in one line sequence: its last row at
    or before the address."""

    def __init__(self, seq):
        self.rows = seq
        self.starts = [r[0] for r in seq]

    def __call__(self, address):
        i = bisect.bisect_right(self.starts, address) - 1
        if i < 0 or i >= len(self.rows) - 1:   # the last row ends it
            return None, None
        return self.rows[i][1], self.rows[i][2]


# --- annotate -----------------------------------------------------------

def _functions(session, images):
    """{(image id, overlay, function offset): AnnotatedFunction} of every
    exact sample."""
    out = {}
    for _, img, off, ovl, count in session.samples(by_context=False):
        info = images.get(img)
        sym = info.symbolizer if info else None
        f = sym.function_at(off) if sym else None
        if f is None:
            continue
        key = (img, ovl, f.offset)
        a = out.get(key)
        if a is None:
            a = out[key] = AnnotatedFunction(info, f, ovl)
        a.counts[off] = a.counts.get(off, 0) + count
    if stalls.recorded(session):
        _add_stalls(session, out, images)
    return out


def _add_stalls(session, functions, images):
    """Each function's instructions' samples by reason (sample_stalls)."""
    by_function = {}
    for a in functions.values():
        a.stalls = {}
        by_function[(a.image.id, a.function.offset)] = a
    for _, img, off, code, count in session.sample_stalls(by_context=False):
        info = images.get(img)
        sym = info.symbolizer if info else None
        f = sym.function_at(off) if sym else None
        a = by_function.get((img, f.offset)) if f else None
        if a is None or off not in a.counts:
            continue
        a.stalls.setdefault(off, stalls.Breakdown()).add(code, count)


def _fill(a, path, lines):
    """Disassembles a and places its samples and source lines."""
    f = a.function
    insns = _disassemble(path, f.section, f.vaddr, f.vaddr + f.size)
    lookup, a.no_source = lines.for_function(f.name, f.vaddr)
    for addr, raw, text in insns:
        off = f.offset + (addr - f.vaddr)
        src = lookup(addr) if lookup else (None, None)
        inlined = lines.inlined_at(f.name, f.vaddr, addr) \
            if src[0] is not None else None
        a.instructions.append(Instruction(addr, off, raw, text,
                                          a.counts.get(off, 0), *src,
                                          a.stall_at(off), inlined))
    files = collections.Counter(i.source_file for i in a.instructions
                                if i.source_file)
    a.source = files.most_common(1)[0][0] if files else None
    # samples at offsets objdump did not list (data in code): kept
    listed = {i.offset for i in a.instructions}
    for off, n in sorted(a.counts.items()):
        if off not in listed:
            a.instructions.append(Instruction(
                f.vaddr + (off - f.offset), off, "", "(not an instruction "
                "objdump lists)", n, None, None, a.stall_at(off)))
    a.instructions.sort(key=lambda i: i.offset)


def annotate(session, names=(), image_filter=(), top=None):
    """The AnnotatedFunctions of a session with exact samples (those named
    in names only, when given; the top hottest only, when given), hottest
    first.  profile.FilterError when a name or image matches none."""
    images, _ = profile.load_images_and_contexts(session)
    found = _functions(session, images)
    wanted = list(found.values())
    if image_filter:
        ids = profile._match_images(images, image_filter)
        wanted = [a for a in wanted if a.image.id in ids]
    if names:
        missing = [n for n in names if not any(a.name == n for a in wanted)]
        if missing:
            known = sorted({a.name for a in wanted})
            raise profile.FilterError(
                "%s: no function of that name has samples in the session "
                "(functions with samples: %s)"
                % (missing[0], ", ".join(known[:12]) +
                   (", ..." if len(known) > 12 else "") or "none"))
        wanted = [a for a in wanted if a.name in names]
    wanted.sort(key=lambda a: (-a.samples, a.name, a.overlay_label,
                               a.image.short_name))
    if top is not None:
        wanted = wanted[:top]
    by_image = collections.defaultdict(list)
    for a in wanted:
        by_image[a.image.id].append(a)
    for funcs in by_image.values():
        image = funcs[0].image
        handle = _ImageFile(image)
        try:
            if handle.path is None:
                for a in funcs:
                    a.no_source = "no copy of the image's bytes"
                continue
            lines = _Lines(handle.path)
            for a in funcs:
                _fill(a, handle.path, lines)
        finally:
            handle.close()
    return wanted


def places_at(image, offsets):
    """{file offset: Place} of the offsets of an image that its DWARF
    places (dma.py names instructions with it)."""
    out = {}
    sym = image.symbolizer
    if sym is None:
        return out
    handle = _ImageFile(image)
    try:
        if handle.path is None:
            return out
        lines = _Lines(handle.path)
        for off in offsets:
            f = sym.function_at(off)
            if f is None:
                continue
            lookup, _ = lines.for_function(f.name, f.vaddr)
            address = f.vaddr + (off - f.offset)
            where = lookup(address) if lookup else None
            if where and where[0] is not None:
                out[off] = Place(where[0], where[1], lines.inlined_at(
                    f.name, f.vaddr, address))
    finally:
        handle.close()
    return out


def by_source(functions, wanted_file=None):
    """{file: {line: samples}} of the functions' instructions (only the
    files whose path ends with wanted_file, when given)."""
    out = collections.defaultdict(lambda: collections.defaultdict(int))
    for a in functions:
        for i in a.instructions:
            if i.source_file is None:
                continue
            if wanted_file and not _same_file(i.source_file, wanted_file):
                continue
            out[i.source_file][i.source_line] += i.samples
    return out


def _same_file(path, wanted):
    path, wanted = os.path.normpath(path), os.path.normpath(wanted)
    return path == wanted or path.endswith(os.sep + wanted) or \
        os.path.abspath(wanted) == path


_source_cache = {}


def source_lines(path):
    """The lines of a source file, or None when it cannot be read."""
    if path not in _source_cache:
        try:
            data = safefile.read_input(path, follow=True)
            _source_cache[path] = data.decode("utf-8", "replace") \
                .splitlines()
        except safefile.SafeFileError:
            _source_cache[path] = None
    return _source_cache[path]


def _source_text(path, line):
    lines = source_lines(path) if path else None
    if lines and line and 0 < line <= len(lines):
        return printable(lines[line - 1].strip())
    return ""


def place_text(file, line, inlined=None):
    """"stream.c:40" of a source line; of inlined code the call in the
    function's own code first, "stream.c:77 (cop_dma_get, cop.h:90)"."""
    here = "%s:%d" % (os.path.basename(file), line)
    if inlined is None:
        return here
    return "%s:%d (%s, %s)" % (os.path.basename(inlined.call_file),
                               inlined.call_line, inlined.function, here)


def inlined_json(inlined):
    """The JSON of an Inlined call: {function, call_file, call_line}, or
    None."""
    if inlined is None:
        return None
    return {"function": inlined.function, "call_file": inlined.call_file,
            "call_line": inlined.call_line}


# --- output -------------------------------------------------------------

def _pct(k, n):
    return 100.0 * k / n if n else 0.0


def _header(a, total):
    s = "%s %s%s: %d samples, %.2f%% of the session's %d" % (
        a.image.label, a.name,
        " [%s]" % a.overlay_label if a.overlay_label else "",
        a.samples, _pct(a.samples, total), total)
    if a.source:
        s += ", source %s" % a.source
    return s


def write_text(functions, out, total, order="samples", session_dir=""):
    out.write("copreport annotate: %s, %d function%s, %s first\n" % (
        session_dir, len(functions), "" if len(functions) == 1 else "s",
        "hottest" if order == "samples" else "lowest address"))
    out.write("percent: of the function's samples\n")
    recorded = any(a.stalls is not None for a in functions)
    if functions and not recorded:
        out.write(stalls.NOT_RECORDED + "\n")
    elif recorded:
        out.write("reasons: after each instruction, \"| REASON SAMPLES "
                  "...\" (issue: executing; the others: waiting)\n")
    for a in functions:
        out.write("\n" + _header(a, total) + "\n")
        if a.no_source:
            out.write("  no source: %s\n" % a.no_source)
        if a.stall is not None and a.stall.total:
            out.write("  by reason: %s\n" % a.stall.tag())
        out.write("%8s %7s  %-8s  %-8s  %s\n" % (
            "samples", "%", "address", "offset", "instruction"))
        insns = a.instructions if order == "address" else sorted(
            a.instructions, key=lambda i: (-i.samples, i.offset))
        last = None
        for i in insns:
            where = (i.source_file, i.source_line, i.inlined)
            if order == "address" and i.source_file and where != last:
                out.write("%8s %7s  %s: %s\n" % (
                    "", "", place_text(*where),
                    _source_text(i.source_file, i.source_line)))
            last = where
            tail = "" if order == "address" or not i.source_file else \
                "    # " + place_text(i.source_file, i.source_line,
                                      i.inlined)
            if i.stall is not None and i.stall.total:
                tail += "    | " + i.stall.tag()
            out.write("%8d %6.2f%%  %08x  %08x  %s%s\n" % (
                i.samples, _pct(i.samples, a.samples), i.address, i.offset,
                i.text, tail))


def _insn_json(i, a):
    return {"address": i.address, "file_offset": i.offset, "bytes": i.raw,
            "instruction": i.text, "samples": i.samples,
            "percent": round(_pct(i.samples, a.samples), 4),
            "source_file": i.source_file, "source_line": i.source_line,
            "inlined": inlined_json(i.inlined),
            "stall": i.stall.to_json() if i.stall is not None else None}


def to_json(functions, total, session_dir):
    return {"format": "copreport-annotate", "version": 1,
            "session": session_dir, "samples": total,
            "functions": [{
                "image": a.image.short_name, "image_id": a.image.id,
                "path": a.image.path, "image_offset": a.image.image_offset,
                "symbol": a.name, "overlay": a.overlay_label or None,
                "section": a.section, "file_offset": a.function.offset,
                "address": a.function.vaddr, "size": a.function.size,
                "samples": a.samples,
                "percent": round(_pct(a.samples, total), 4),
                "source": a.source, "no_source": a.no_source,
                "stall": a.stall.to_json() if a.stall is not None else None,
                "instructions": [_insn_json(i, a) for i in a.instructions]}
                for a in functions]}


def write_json(functions, out, total, order="samples", session_dir=""):
    json.dump(to_json(functions, total, session_dir), out, indent=1)
    out.write("\n")


CSV_FIELDS = ["image", "overlay", "symbol", "address", "file_offset",
              "samples", "percent", "instruction", "source_file",
              "source_line", "stall", "inlined_function", "call_file",
              "call_line"]


def write_csv(functions, out, total, order="samples", session_dir=""):
    w = csv.writer(out, lineterminator="\n")
    w.writerow(CSV_FIELDS)
    for a in functions:
        insns = a.instructions if order == "address" else sorted(
            a.instructions, key=lambda i: (-i.samples, i.offset))
        for i in insns:
            w.writerow([a.image.short_name, a.overlay_label, a.name,
                        "0x%x" % i.address, i.offset, i.samples,
                        "%.4f" % _pct(i.samples, a.samples), i.text,
                        i.source_file or "", i.source_line or "",
                        _stall_cell(i.stall)] +
                       (list(i.inlined) if i.inlined else ["", "", ""]))


def _stall_cell(b):
    """A CSV cell of a Breakdown: "issue=40;dma_wait=12", "" for none."""
    if b is None:
        return ""
    return ";".join("%s=%d" % (stalls.name(c), n) for c, n in b.items())


WRITERS = {"text": write_text, "csv": write_csv, "json": write_json}


def write_source(files, out, fmt, total, session_dir=""):
    """The --source view: every line of each file with its samples."""
    if fmt == "json":
        json.dump({"format": "copreport-annotate-source", "version": 1,
                   "session": session_dir, "samples": total,
                   "files": [{"file": path, "samples": sum(lines.values()),
                              "lines": _source_rows(path, lines, total)}
                             for path, lines in sorted(files.items())]},
                  out, indent=1)
        out.write("\n")
        return
    if fmt == "csv":
        w = csv.writer(out, lineterminator="\n")
        w.writerow(["file", "line", "samples", "percent", "text"])
        for path, lines in sorted(files.items()):
            for r in _source_rows(path, lines, total):
                w.writerow([path, r["line"], r["samples"],
                            "%.4f" % r["percent"], r["text"]])
        return
    out.write("copreport annotate --source: %s\n" % session_dir)
    out.write("percent: of the session's %d samples\n" % total)
    for path, lines in sorted(files.items()):
        out.write("\n%s: %d samples\n" % (path, sum(lines.values())))
        if source_lines(path) is None:
            out.write("  (the file cannot be read here: lines only)\n")
        for r in _source_rows(path, lines, total):
            count = "%8d %6.2f%%" % (r["samples"], r["percent"]) \
                if r["samples"] else "%8s %7s" % ("", "")
            out.write("%s %5d  %s\n" % (count, r["line"], r["text"]))


def _source_rows(path, lines, total):
    text = source_lines(path)
    numbers = range(1, len(text) + 1) if text else sorted(lines)
    return [{"line": n, "samples": lines.get(n, 0),
             "percent": round(_pct(lines.get(n, 0), total), 4),
             "text": text[n - 1] if text else ""} for n in numbers]


def session_samples(session):
    """Every sample of the session, of every kind (the percent base)."""
    return sum(r[3] for r in session.sample_totals()) + \
        sum(r[1] for r in session.orphans())
