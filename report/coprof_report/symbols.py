"""ELF symbolizer by file offset, on pyelftools.

coprof keys every sample by its position in the image file (its file
offset), not by its address: overlays that share a local-store address
(VMA) sit in different sections at different file offsets, so a symbolizer
by file offset keeps them apart with no knowledge of the overlay state.
The same code serves host programs, whose creation-stack frames are
"MODULE+0xFILE_OFFSET".

    sym = Symbolizer(path)                 # an ELF file
    sym = Symbolizer(path, base=0x3040)    # an ELF image embedded at 0x3040
    sym = Symbolizer(path, base, data)     # from bytes already read (checked)
    f = sym.function_at(file_offset)       # a Function, or None
    f.name, f.offset (file offset of its start), f.size, f.section, f.vaddr
    sym.describe(file_offset)              # "name+0x1c", or "[section+0x..]"

Rules, those of overlay/'s ovl_symbol_at(): the file offset falls in the
SHF_ALLOC section (not SHT_NOBITS) whose file bytes hold it; its address is
sh_addr + (offset - sh_offset); the function is a symbol of that section
(code sections, SHF_EXECINSTR, only) covering the address, STT_FUNC first,
then STT_NOTYPE labels; a sized symbol covers [value, value + size), a
zero-sized one up to the next symbol or its section's end; of several at
one start a sized one, then GLOBAL over WEAK over LOCAL, then the smaller
name.  Names starting with "$" (mapping symbols) or ".L" are ignored.  Each
file is parsed once (symbolizer()); lookups are binary searches.
"""

import bisect
import collections
import hashlib
import io
import os
import re

from elftools.common.exceptions import ELFError
from elftools.elf.constants import SH_FLAGS
from elftools.elf.elffile import ELFFile

from . import safefile

# What never reaches a terminal raw: C0 and C1 controls and DEL.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def printable(text):
    """A name from an image (symbol, section, file) as every output shows
    it: bytes decoded as UTF-8 with U+FFFD for what is not (pyelftools
    does the same for the names it reads), and each control character
    (escape sequences, BEL, newlines) as \\xNN, so a name can neither
    drive the terminal nor break a line of text, CSV or folded output."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return _CONTROL.sub(lambda m: "\\x%02x" % ord(m.group()), text)

Function = collections.namedtuple(
    "Function", "name offset size section vaddr source")
Function.__doc__ = """A function: its name, the file offset of its start,
its size in bytes, its section's name, its address, and its source file's
name when the file says (STT_FILE or DWARF), else None."""

_BIND_RANK = {"STB_GLOBAL": 0, "STB_WEAK": 1, "STB_LOCAL": 2}


class SymbolError(Exception):
    """A file that cannot be symbolized; str() is "PATH: reason"."""


class _Section:
    __slots__ = ("name", "addr", "offset", "size", "tables")

    def __init__(self, name, addr, offset, size):
        self.name, self.addr, self.offset, self.size = name, addr, offset, size
        self.tables = []        # [(starts, entries)] FUNC first, then NOTYPE


class Symbolizer:
    """Functions of one ELF file (or image embedded at `base` in a file),
    looked up by file offset counted from the ELF header."""

    def __init__(self, path, base=0, data=None):
        self.path = path
        self.base = base
        self._cache = {}
        if data is None:
            try:
                data = safefile.read_input(path, follow=True)
            except safefile.SafeFileError as e:
                raise SymbolError(str(e))
        data = data[base:]
        try:
            self._load(ELFFile(io.BytesIO(data)))
        except (ELFError, ValueError, KeyError, IndexError, TypeError,
                AttributeError) as e:
            raise SymbolError("%s: not a readable ELF file (%s)" % (path, e))

    def _load(self, elf):
        self._sections = []
        by_index = {}
        for i, s in enumerate(elf.iter_sections()):
            if (s["sh_flags"] & SH_FLAGS.SHF_ALLOC) and \
                    s["sh_type"] != "SHT_NOBITS" and s["sh_size"] > 0:
                sec = _Section(printable(s.name), s["sh_addr"], s["sh_offset"],
                               s["sh_size"])
                self._sections.append(sec)
                if s["sh_flags"] & SH_FLAGS.SHF_EXECINSTR:
                    by_index[i] = sec       # functions: code sections only
        self._sections.sort(key=lambda s: s.offset)
        self._starts = [s.offset for s in self._sections]

        symtab = elf.get_section_by_name(".symtab") or \
            elf.get_section_by_name(".dynsym")
        raw = {}                # section -> {"FUNC": [...], "NOTYPE": [...]}
        if symtab is not None:
            source = None
            for sym in symtab.iter_symbols():
                kind = sym["st_info"]["type"]
                if kind == "STT_FILE":
                    source = printable(sym.name) or None
                    continue
                if kind not in ("STT_FUNC", "STT_NOTYPE"):
                    continue
                name = printable(sym.name)
                if not name or name.startswith("$") or name.startswith(".L"):
                    continue
                sec = by_index.get(sym["st_shndx"]) \
                    if isinstance(sym["st_shndx"], int) else None
                if sec is None:
                    continue
                bind = sym["st_info"]["bind"]
                src = source if bind == "STB_LOCAL" else None
                raw.setdefault(sec, {}).setdefault(kind, []).append(
                    (sym["st_value"], sym["st_size"], name,
                     _BIND_RANK.get(bind, 3), src))
        for sec, kinds in raw.items():
            everything = sorted({v for syms in kinds.values()
                                 for v, *_ in syms})
            end_of_section = sec.addr + sec.size
            for kind in ("STT_FUNC", "STT_NOTYPE"):
                syms = kinds.get(kind)
                if not syms:
                    continue
                # one entry per start: sized first, then bind, then name
                syms.sort(key=lambda t: (t[0], t[1] == 0, t[3], t[2]))
                entries, starts = [], []
                for value, size, name, _, src in syms:
                    if starts and starts[-1] == value:
                        continue
                    if size == 0:
                        j = bisect.bisect_right(everything, value)
                        end = everything[j] if j < len(everything) \
                            else end_of_section
                    else:
                        end = value + size
                    starts.append(value)
                    entries.append((value, end, name, src))
                sec.tables.append((starts, entries))

    def section_at(self, file_offset):
        """The allocated section whose file bytes hold file_offset, or None."""
        i = bisect.bisect_right(self._starts, file_offset) - 1
        while i >= 0:       # few sections: walk back past nested ones
            s = self._sections[i]
            if s.offset <= file_offset < s.offset + s.size:
                return s
            i -= 1
        return None

    def function_at(self, file_offset):
        """The Function covering file_offset (counted from the ELF header),
        or None when no symbol covers it."""
        try:
            return self._cache[file_offset]
        except KeyError:
            pass
        found = None
        sec = self.section_at(file_offset)
        if sec is not None:
            vaddr = sec.addr + (file_offset - sec.offset)
            for starts, entries in sec.tables:
                i = bisect.bisect_right(starts, vaddr) - 1
                # a sized symbol may be nested in an earlier, larger one
                for j in range(i, max(i - 8, -1), -1):
                    start, end, name, src = entries[j]
                    if start <= vaddr < end:
                        found = Function(name, sec.offset + (start - sec.addr),
                                         end - start, sec.name, start, src)
                        break
                if found:
                    break
        self._cache[file_offset] = found
        return found

    def describe(self, file_offset):
        """"name+0xN" for file_offset, "name" at a function's start, or
        "[SECTION+0xN]" / "[0xOFFSET]" when no symbol covers it."""
        f = self.function_at(file_offset)
        if f is not None:
            delta = file_offset - f.offset
            return f.name if delta == 0 else "%s+0x%x" % (f.name, delta)
        sec = self.section_at(file_offset)
        if sec is not None:
            return "[%s+0x%x]" % (sec.name, file_offset - sec.offset)
        return "[0x%x]" % file_offset


_symbolizers = {}


def symbolizer(path, base=0, data=None):
    """A shared Symbolizer for (path, base), or None when the file cannot be
    read as ELF (a report then shows raw offsets).  data: the file's bytes
    when the caller has read (and checked) them, which are used instead of
    reading path again; one Symbolizer per distinct bytes."""
    key = (os.path.abspath(path), base)
    if data is not None:
        key += (len(data), hashlib.sha256(data).digest())
    if key not in _symbolizers:
        try:
            _symbolizers[key] = Symbolizer(path, base, data)
        except SymbolError:
            _symbolizers[key] = None
    return _symbolizers[key]
