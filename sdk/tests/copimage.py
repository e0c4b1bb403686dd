"""Reading coprocessor images and RAM files in tests, independently of the
C loader: pyelftools for the ELF side, plain file reads for the RAM.

The numbers are those of docs/coprocessor-abi.md; the tests that use them
check that the C side keeps to that contract.
"""

import os
import struct
import subprocess

import pytest
from elftools.elf.elffile import ELFFile

LS_BASE = 0x80000000
LS_SIZE = 0x40000
RAM_BASE = 0x80000000
RAM_SIZE = 16 << 20
BOOT_BASE = 0x80040000
IMAGE_BASE = 0x80100000
DATA_BASE = 0x80800000
DATA_SIZE = 0x600000
PF_OVERLAY = 1 << 27


class OverlayEntry:
    """One _ovly_table entry, with the section and segment it names."""

    def __init__(self, index, vma, size, file_off, buf):
        self.index, self.vma, self.size = index, vma, size
        self.file_off, self.buf = file_off, buf
        self.section = None
        self.segment = None

    @property
    def name(self):
        """The overlay's name: its section .overlay.NAME without prefix."""
        return self.section.name[len(".overlay."):]


class Image:
    """A coprocessor ELF image read with pyelftools."""

    def __init__(self, path):
        self.path = path
        with open(path, "rb") as f:
            self.data = f.read()
        with open(path, "rb") as f:
            elf = ELFFile(f)
            self.entry = elf.header.e_entry
            self.segments = [s.header for s in elf.iter_segments()
                             if s.header.p_type == "PT_LOAD"]
            self.sections = [s for s in elf.iter_sections()]
            self.symbols = {sym.name: sym.entry.st_value
                            for sym in elf.get_section_by_name(".symtab")
                            .iter_symbols() if sym.name}
            self.notes = [note for seg in elf.iter_segments()
                          if seg.header.p_type == "PT_NOTE"
                          for note in seg.iter_notes()]
        self.overlays = self._read_overlay_table()

    def file_offset(self, addr):
        """The file offset of a resident address."""
        for seg in self.segments:
            if seg.p_flags & PF_OVERLAY:
                continue
            if seg.p_vaddr <= addr < seg.p_vaddr + seg.p_filesz:
                return seg.p_offset + addr - seg.p_vaddr
        raise KeyError("0x%08x is not in a resident segment" % addr)

    def words(self, start_symbol, end_symbol):
        start, end = self.symbols[start_symbol], self.symbols[end_symbol]
        at = self.file_offset(start) if end > start else 0
        return list(struct.unpack_from("<%dI" % ((end - start) // 4),
                                       self.data, at))

    def _read_overlay_table(self):
        words = self.words("_ovly_table", "_ovly_table_end")
        entries = []
        for i in range(0, len(words), 4):
            entry = OverlayEntry(i // 4 + 1, *words[i:i + 4])
            for section in self.sections:
                if section.name.startswith(".overlay.") and \
                        section.header.sh_offset == entry.file_off:
                    entry.section = section
            for seg in self.segments:
                if seg.p_offset == entry.file_off and seg.p_flags & PF_OVERLAY:
                    entry.segment = seg
            entries.append(entry)
        return entries

    def overlay(self, name):
        return next(e for e in self.overlays if e.name == name)

    @property
    def guard_words_addr(self):
        return self.symbols["_ovly_buf_table"]

    @property
    def region_count(self):
        return (self.symbols["_ovly_buf_table_end"] -
                self.symbols["_ovly_buf_table"]) // 4

    @property
    def name_note(self):
        """The COPNAME note's name (type 1; pyelftools reads type 1 as
        NT_GNU_ABI_TAG whatever the owner, so the raw bytes are used)."""
        names = [n.n_descdata for n in self.notes
                 if n.n_name == "COPNAME" and n.n_type in (1, "NT_GNU_ABI_TAG")]
        return names[0].rstrip(b"\0").decode() if names else None


def read_ram(ram_file, addr, size):
    """size bytes at guest address addr of a RAM file."""
    assert RAM_BASE <= addr and addr + size <= RAM_BASE + RAM_SIZE
    with open(ram_file, "rb") as f:
        f.seek(addr - RAM_BASE)
        return f.read(size)


def read_words(ram_file, addr, count):
    return list(struct.unpack("<%dI" % count, read_ram(ram_file, addr, 4 * count)))


def guard_words(image, ram_file):
    """The guard words of image's regions, read from a RAM file."""
    return read_words(ram_file, image.guard_words_addr, image.region_count)


def cop_run(cop_run_path, image, *args, ram_file=None, options=(), timeout=60):
    """Runs cop-run and returns the CompletedProcess (text output)."""
    command = [cop_run_path] + list(options)
    if ram_file:
        command += ["--ram-file", ram_file]
    command += [image] + [str(a) for a in args]
    return subprocess.run(command, capture_output=True, text=True,
                          timeout=timeout)


def image_path(build_dir, *parts):
    path = os.path.join(build_dir, *parts)
    assert os.path.exists(path), "%s is not built: run make" % path
    return path


@pytest.fixture(scope="session")
def run(coprof_bin):
    """A fixture: run(IMAGE, *ARGS, ram_file=None, options=()) runs cop-run.
    The conftests of the folders whose tests use it import it."""
    def run_image(image, *args, **kwargs):
        return cop_run(coprof_bin("cop-run"), image, *args, **kwargs)
    return run_image
