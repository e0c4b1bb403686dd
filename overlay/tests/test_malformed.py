"""Hand-corrupted variants of the overlay test image.

Each case changes a few bytes of overlays.elf (found with pyelftools) so that
one thing is wrong, and checks that `copovl info` refuses it with exit
status 1 and exactly one line on stderr, "copovl: PATH: reason", naming the
reason.  The same variants embedded in a container must name the container
and the offset.  The reasons are those of the one validator every tool
shares (common/image.c, which overlay/ runs first), so cop-embed, cop-run
and copsim refuse each variant for the same reason.
"""

import shutil
import struct
import subprocess

import pytest
from elftools.elf.elffile import ELFFile

EHDR = {"e_type": (16, "<H"), "e_machine": (18, "<H"), "e_phoff": (28, "<I"),
        "e_shoff": (32, "<I"), "e_phnum": (44, "<H"), "e_shnum": (48, "<H"),
        "e_shstrndx": (50, "<H")}
PHDR = {"p_offset": 4, "p_vaddr": 8, "p_filesz": 16, "p_memsz": 20,
        "p_flags": 24}
SHDR = {"sh_name": 0, "sh_offset": 16, "sh_size": 20, "sh_entsize": 36}
SYM = {"st_name": 0, "st_value": 4}
OVERLAY_ENTRY = {"vma": 0, "size": 4, "file_off": 8, "buf": 12}


class Image:
    """The bytes of a test image, with the positions of its fields."""

    def __init__(self, path):
        with open(path, "rb") as f:
            self.data = bytearray(f.read())
        with open(path, "rb") as f:
            elf = ELFFile(f)
            self.header = dict(elf.header)
            self.sections = {s.name: (i, dict(s.header))
                             for i, s in enumerate(elf.iter_sections())}
            self.segments = [dict(s.header) for s in elf.iter_segments()]
            symtab = elf.get_section_by_name(".symtab")
            self.symbols = {s.name: i for i, s in
                            enumerate(symtab.iter_symbols()) if s.name}
            self.symbol_values = {s.name: s["st_value"]
                                  for s in symtab.iter_symbols()}

    def put(self, offset, fmt, value):
        struct.pack_into(fmt, self.data, offset, value)

    def get(self, offset, fmt):
        return struct.unpack_from(fmt, self.data, offset)[0]

    def set_header(self, field, value):
        offset, fmt = EHDR[field]
        self.put(offset, fmt, value)

    def set_segment(self, index, field, value):
        self.put(self.header["e_phoff"] + 32 * index + PHDR[field], "<I",
                 value)

    def load_segment(self, flags_mask, flags):
        """Index of the first PT_LOAD whose p_flags & mask == flags."""
        for i, s in enumerate(self.segments):
            if s["p_type"] == "PT_LOAD" and s["p_flags"] & flags_mask == flags:
                return i
        raise KeyError(flags)

    def set_section(self, name, field, value):
        index = self.sections[name][0]
        self.put(self.header["e_shoff"] + 40 * index + SHDR[field], "<I",
                 value)

    def symbol_field(self, name, field):
        symtab = self.sections[".symtab"][1]
        return symtab["sh_offset"] + 16 * self.symbols[name] + SYM[field]

    def set_symbol(self, name, field, value):
        self.put(self.symbol_field(name, field), "<I", value)

    def rename_symbol(self, name, new_name):
        assert len(new_name) == len(name)
        strtab = self.sections[".strtab"][1]
        at = strtab["sh_offset"] + self.get(self.symbol_field(name, "st_name"),
                                            "<I")
        assert self.data[at:at + len(name)] == name.encode()
        self.data[at:at + len(name)] = new_name.encode()

    def set_overlay(self, index, field, value):
        data = self.sections[".data"][1]
        table = (data["sh_offset"] + self.symbol_values["_ovly_table"]
                 - data["sh_addr"])
        self.put(table + 16 * (index - 1) + OVERLAY_ENTRY[field], "<I", value)

    def move_overlay(self, index, vma):
        """Moves overlay index, its table entry and its segment, to vma."""
        file_off = self.overlay(index, "file_off")
        segment = [i for i, s in enumerate(self.segments)
                   if s["p_type"] == "PT_LOAD" and s["p_offset"] == file_off]
        self.set_segment(segment[0], "p_vaddr", vma)
        self.set_overlay(index, "vma", vma)

    def overlay(self, index, field):
        data = self.sections[".data"][1]
        table = (data["sh_offset"] + self.symbol_values["_ovly_table"]
                 - data["sh_addr"])
        return self.get(table + 16 * (index - 1) + OVERLAY_ENTRY[field], "<I")


def not_elf(image):
    image.data[:] = b"#!/bin/sh\necho hello\n" * 8


def elf64(image):
    image.data[4] = 2


def big_endian(image):
    image.data[5] = 2


def other_machine(image):
    image.set_header("e_machine", 62)


def shared_object(image):
    image.set_header("e_type", 3)


def truncated(image):
    del image.data[len(image.data) // 2:]


def no_program_headers(image):
    image.set_header("e_phnum", 0)


def unaligned_header_table(image):
    image.set_header("e_phoff", image.header["e_phoff"] + 2)


def too_many_sections(image):
    image.set_header("e_shnum", 0xFF00)


def section_name_table_out_of_range(image):
    image.set_header("e_shstrndx", 200)


def segment_past_end(image):
    image.set_segment(image.load_segment(0x08000001, 1), "p_offset",
                      0x7FFF0000)


def file_bigger_than_memory(image):
    text = image.load_segment(0x08000001, 1)
    image.set_segment(text, "p_filesz", image.segments[text]["p_memsz"] + 4)


def segment_wraps(image):
    text = image.load_segment(0x08000001, 1)
    image.set_segment(text, "p_vaddr", 0xFFFFFFF0)


def section_past_end(image):
    image.set_section(".ovl1_b", "sh_offset", 0x7FFFFF00)


def section_name_invalid(image):
    image.set_section(".text", "sh_name", 0xFFFFF)


def symbol_entry_size(image):
    image.set_section(".symtab", "sh_entsize", 24)


def symbol_name_invalid(image):
    image.set_symbol("main", "st_name", 0xFFFFFF)


def buf_not_a_region(image):
    image.set_overlay(2, "buf", 9)


def buf_zero(image):
    image.set_overlay(1, "buf", 0)


def overlay_outside_ls(image):
    image.set_overlay(3, "vma", 0x90000000)


def overlay_past_local_store_end(image):
    image.set_overlay(3, "vma", 0x8003FFF0)


def overlay_file_past_end(image):
    image.set_overlay(4, "file_off", len(image.data) - 8)


def overlay_over_resident_code(image):
    image.move_overlay(1, 0x80000000)


def regions_overlap(image):
    image.move_overlay(4, image.overlay(1, "vma"))


def entry_disagrees_with_segment(image):
    image.set_overlay(2, "size", image.overlay(2, "size") - 4)


def two_entries_one_segment(image):
    for field in OVERLAY_ENTRY:
        image.set_overlay(2, field, image.overlay(1, field))


def segment_without_entry(image):
    image.set_symbol("_ovly_table_end", "st_value",
                     image.symbol_values["_ovly_table_end"] - 16)


def bad_name_note(image):
    at = image.data.index(b"ovl-test.1\0")
    image.data[at + 3] = ord("!")


def unterminated_name_note(image):
    at = image.data.index(b"ovl-test.1\0")
    image.data[at:at + 12] = b"x" * 12


def table_end_missing(image):
    image.rename_symbol("_ovly_table_end", "_ovly_table_enD")


def guard_table_end_missing(image):
    image.rename_symbol("_ovly_buf_table_end", "_ovly_buf_table_enD")


def guard_table_missing(image):
    image.rename_symbol("_ovly_buf_table", "_ovly_buf_tablX")
    image.rename_symbol("_ovly_buf_table_end", "_ovly_buf_table_enD")


def table_not_whole_entries(image):
    image.set_symbol("_ovly_table_end", "st_value",
                     image.symbol_values["_ovly_table_end"] + 4)


def table_end_before_start(image):
    image.set_symbol("_ovly_table_end", "st_value",
                     image.symbol_values["_ovly_table"] - 16)


def table_in_bss(image):
    bss = image.sections[".bss"][1]["sh_addr"]
    image.set_symbol("_ovly_table", "st_value", bss)
    image.set_symbol("_ovly_table_end", "st_value", bss + 80)


def guard_table_outside_ls(image):
    image.set_symbol("_ovly_buf_table", "st_value", 0x80100000)
    image.set_symbol("_ovly_buf_table_end", "st_value", 0x8010000C)


def guard_table_unaligned(image):
    image.set_symbol("_ovly_buf_table", "st_value",
                     image.symbol_values["_ovly_buf_table"] + 2)
    image.set_symbol("_ovly_buf_table_end", "st_value",
                     image.symbol_values["_ovly_buf_table_end"] + 2)


CASES = [
    (not_elf, "not an ELF file"),
    (elf64, "not a 32-bit ELF file"),
    (big_endian, "not a little-endian ELF file"),
    (other_machine, "not a RISC-V image (e_machine 62)"),
    (shared_object, "not an executable (e_type 3)"),
    (truncated, "extends past the end of the"),
    (no_program_headers, "no program headers"),
    (unaligned_header_table, "not 4-byte aligned"),
    (too_many_sections, "extends past the end of the"),
    (section_name_table_out_of_range,
     "bad section-name string table index 200"),
    (segment_past_end, "(offset 0x7fff0000"),
    (file_bigger_than_memory, "more file bytes"),
    (segment_wraps, "is outside the local store"),
    (section_past_end, "(offset 0x7fffff00"),
    (section_name_invalid, "has no valid name"),
    (symbol_entry_size, "malformed symbol table"),
    (symbol_name_invalid, "has no valid name"),
    (buf_not_a_region,
     "_ovly_table entry 2 names region 9, but _ovly_buf_table has 3"),
    (buf_zero, "_ovly_table entry 1 names region 0"),
    (overlay_outside_ls, "_ovly_table entry 3 {vma 0x90000000"),
    (overlay_past_local_store_end, "_ovly_table entry 3 {vma 0x8003fff0"),
    (overlay_file_past_end,
     lambda image: "file_off 0x%x} matches no overlay segment"
     % (len(image.data) - 8)),
    (overlay_over_resident_code, "overlaps"),
    (regions_overlap, "overlay region 1"),
    (entry_disagrees_with_segment, "_ovly_table entry 2 {vma"),
    (two_entries_one_segment,
     "_ovly_table entry 2 describes the same segment as another entry"),
    (segment_without_entry, "_ovly_table has 4 entries for 5 overlay segments"),
    (bad_name_note, "the COPNAME note does not hold a name"),
    (unterminated_name_note, "the COPNAME note does not hold a name"),
    (table_end_missing,
     "symbols _ovly_table and _ovly_table_end do not delimit"),
    (guard_table_end_missing,
     "symbols _ovly_buf_table and _ovly_buf_table_end do not delimit"),
    (guard_table_missing, "but _ovly_buf_table has 0"),
    (table_not_whole_entries, "do not delimit a table of 16-byte entries"),
    (table_end_before_start, "do not delimit a table of 16-byte entries"),
    (table_in_bss, "is not in the file part of a resident segment"),
    (guard_table_outside_ls, "_ovly_buf_table (0x80100000"),
    (guard_table_unaligned, "it must start as 0"),
]


def assert_refused(result, label, reason):
    assert result.returncode == 1, result.stdout
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("copovl: %s: " % label), result.stderr
    assert reason in result.stderr, result.stderr


@pytest.mark.parametrize("corrupt,reason", CASES,
                         ids=[c[0].__name__ for c in CASES])
def test_refused_with_reason(copovl, overlay_image, tmp_path, corrupt,
                             reason):
    image = Image(overlay_image("overlays.elf"))
    corrupt(image)
    if callable(reason):
        reason = reason(image)
    path = tmp_path / (corrupt.__name__ + ".elf")
    path.write_bytes(image.data)
    assert_refused(copovl("info", path), path, reason)

    container = tmp_path / (corrupt.__name__ + ".host")
    container.write_bytes(b"\x90" * 4096 + image.data + b"\0" * 64)
    assert_refused(copovl("info", "--offset", 4096, container),
                   "%s@0x1000" % container, reason.split(" (")[0])


def test_stripped_image(copovl, overlay_image, tmp_path):
    stripped = tmp_path / "stripped.elf"
    shutil.copy(overlay_image("overlays.elf"), stripped)
    subprocess.run(["riscv64-unknown-elf-objcopy", "--strip-all",
                    str(stripped)], check=True)
    assert_refused(copovl("info", stripped), stripped,
                   "5 overlay segments but no symbol table to find "
                   "_ovly_table in")

    # Without overlays, a stripped image still resolves its resident code.
    plain = tmp_path / "plain.elf"
    shutil.copy(overlay_image("plain.elf"), plain)
    subprocess.run(["riscv64-unknown-elf-objcopy", "--strip-all", str(plain)],
                   check=True)
    result = copovl("resolve", plain, "0x10")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[1:3] == ["mapped", "file_offset=0x1010"]
    assert result.stdout.split()[-1] == "symbol=-"


def extended_numbering(image):
    """The same image with ELF extended numbering: e_shnum, e_shstrndx and
    e_phnum moved into section header 0, as for very large files."""
    shdr0 = image.header["e_shoff"]
    image.put(shdr0 + 20, "<I", image.header["e_shnum"])        # sh_size
    image.put(shdr0 + 24, "<I", image.header["e_shstrndx"])     # sh_link
    image.put(shdr0 + 28, "<I", image.header["e_phnum"])        # sh_info
    image.set_header("e_shnum", 0)
    image.set_header("e_shstrndx", 0xFFFF)                      # SHN_XINDEX
    image.set_header("e_phnum", 0xFFFF)                         # PN_XNUM


def test_extended_numbering_is_read(copovl, overlay_image, tmp_path):
    path = overlay_image("overlays.elf")
    image = Image(path)
    extended_numbering(image)
    variant = tmp_path / "extended.elf"
    variant.write_bytes(image.data)
    container = tmp_path / "extended.host"
    container.write_bytes(b"\0" * 256 + image.data + b"\xff" * 100)

    expected = copovl("info", path).stdout.splitlines()[1:]
    for args in (["info", variant], ["info", "--offset", 256, container]):
        result = copovl(*args)
        assert result.returncode == 0, result.stderr
        first = result.stdout.splitlines()[0]
        assert "size=%d " % len(image.data) in first
        assert result.stdout.splitlines()[1:] == expected


def test_image_without_name_note(copovl, overlay_image, tmp_path):
    nameless = tmp_path / "nameless.elf"
    shutil.copy(overlay_image("plain.elf"), nameless)
    subprocess.run(["riscv64-unknown-elf-objcopy", "--remove-section",
                    ".note.cop_name", str(nameless)], check=True)
    result = copovl("info", nameless)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0].endswith(" name=-")


def test_missing_and_unreadable(copovl, tmp_path):
    missing = tmp_path / "missing.elf"
    assert_refused(copovl("info", missing), missing, "cannot open: No such")
    assert_refused(copovl("info", tmp_path), tmp_path, "not a regular file")
    empty = tmp_path / "empty.elf"
    empty.write_bytes(b"")
    assert_refused(copovl("info", empty), empty, "empty file")
    short = tmp_path / "short.elf"
    short.write_bytes(b"\x7fELF\x01\x01\x01")
    assert_refused(copovl("info", short), short, "too small for an ELF header")
    assert_refused(copovl("info", "--offset", 100, short), "%s@0x64" % short,
                   "offset 0x64 is not inside the file (7 bytes)")
