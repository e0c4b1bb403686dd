"""copovl and the overlay/ library against an independent reader (pyelftools).

The Oracle below knows a test image only through pyelftools: its resident
load segments, its overlay sections (the sections of its PF_OVERLAY
segments), which region each overlay belongs to (the buf field of its
_ovly_table entry, after checking that the entry agrees with its section),
and its symbols.  From those alone it predicts what `copovl resolve` prints
for each LS address under each guard state, and the tests compare every
field for every byte address of every segment and overlay, and for every
word of the local store.
"""

import os
import struct
import subprocess

import pytest
from elftools.elf.elffile import ELFFile

LS_BASE = 0x80000000
LS_SIZE = 0x40000
PF_OVERLAY = 0x08000000
SHF_ALLOC = 0x2
SHF_EXECINSTR = 0x4

# Guard states: region 1 first; a short list leaves later regions unknown.
GUARD_STATES = [
    [],
    [0, 0, 0],
    [1, 4, 0],
    [2, 5, 0],
    [3, 4, 0],
    [3, 5, 9],
    [2],
    [4, 1, 0],
    [7, 0xFFFFFFFF, 3],
]


class Oracle:
    """What copovl should print, derived from the ELF file by pyelftools."""

    def __init__(self, path):
        with open(path, "rb") as f:
            elf = ELFFile(f)
            self.resident = []
            overlay_segments = []
            for segment in elf.iter_segments():
                if segment["p_type"] != "PT_LOAD":
                    continue
                if segment["p_flags"] & PF_OVERLAY:
                    overlay_segments.append(segment)
                else:
                    self.resident.append(dict(segment.header))
            sections = [s for s in elf.iter_sections()
                        if s["sh_flags"] & SHF_ALLOC
                        and s["sh_type"] != "SHT_NOBITS" and s["sh_size"]]
            self.sections = [(s.name, s["sh_offset"], s["sh_size"])
                             for s in sections]
            self.overlay_sections = [s for s in sections
                                     if any(seg.section_in_segment(s)
                                            for seg in overlay_segments)]
            self.symbols = self._read_symbols(elf)
            self.table = self._read_overlay_table(elf)
            self.overlays = self._match_overlays()

    def _read_symbols(self, elf):
        symtab = elf.get_section_by_name(".symtab")
        symbols = []
        for symbol in symtab.iter_symbols() if symtab else []:
            kind = symbol["st_info"]["type"]
            index = symbol["st_shndx"]
            if (kind not in ("STT_FUNC", "STT_NOTYPE")
                    or not isinstance(index, int) or index == 0
                    or not symbol.name or symbol.name[0] == "$"
                    or symbol.name.startswith(".L")):
                continue
            section = elf.get_section(index)
            if (section["sh_flags"] & (SHF_ALLOC | SHF_EXECINSTR)
                    != SHF_ALLOC | SHF_EXECINSTR):
                continue
            start = (section["sh_offset"] + symbol["st_value"]
                     - section["sh_addr"])
            symbols.append((start, symbol["st_size"], kind, symbol.name,
                            section["sh_offset"] + section["sh_size"]))
        return symbols

    def _read_overlay_table(self, elf):
        symtab = elf.get_section_by_name(".symtab")

        def value(name):
            found = symtab.get_symbol_by_name(name) if symtab else None
            return found[0]["st_value"] if found else None

        start, end = value("_ovly_table"), value("_ovly_table_end")
        buf, buf_end = value("_ovly_buf_table"), value("_ovly_buf_table_end")
        if start is None:
            self.regions = 0
            self.guard_table = None
            return []
        self.regions = (buf_end - buf) // 4
        self.guard_table = buf - LS_BASE
        data = [s for s in elf.iter_sections()
                if s["sh_flags"] & SHF_ALLOC and s["sh_type"] != "SHT_NOBITS"
                and s["sh_addr"] <= start < s["sh_addr"] + s["sh_size"]][0]
        raw = data.data()[start - data["sh_addr"]:end - data["sh_addr"]]
        return [struct.unpack_from("<4I", raw, i)
                for i in range(0, len(raw), 16)]

    def _match_overlays(self):
        """Index -> (region, section): each table entry must describe
        exactly one overlay section, by address, size and file offset."""
        overlays = {}
        for index, (vma, size, file_off, buf) in enumerate(self.table, 1):
            matches = [s for s in self.overlay_sections
                       if (s["sh_addr"], s["sh_size"], s["sh_offset"])
                       == (vma, size, file_off)]
            assert len(matches) == 1, "overlay %d has no single section" % index
            overlays[index] = (buf, matches[0])
        return overlays

    def section_at(self, offset):
        for name, start, size in self.sections:
            if start <= offset < start + size:
                return name
        return "-"

    def symbol_at(self, offset):
        for start, size, kind, name, _ in self.symbols:
            if kind == "STT_FUNC" and size and start <= offset < start + size:
                return "%s+0x%x" % (name, offset - start)
        labels = [s for s in self.symbols if s[1] == 0 and s[0] <= offset < s[4]]
        for start, _, _, name, _ in sorted(labels, reverse=True):
            if not any(start < other[0] <= offset for other in self.symbols):
                return "%s+0x%x" % (name, offset - start)
            break
        return "-"

    def region_of(self, ls):
        for index, (region, section) in self.overlays.items():
            first = min(s["sh_addr"] for r, s in self.overlays.values()
                        if r == region) - LS_BASE
            last = max(s["sh_addr"] + s["sh_size"]
                       for r, s in self.overlays.values()
                       if r == region) - LS_BASE
            if first <= ls < last:
                return region
        return 0

    def mapped(self, ls, offset, region, overlay):
        return ("mapped", {"file_offset": "0x%x" % offset,
                           "vaddr": "0x%08x" % (ls + LS_BASE),
                           "region": str(region), "overlay": str(overlay),
                           "section": self.section_at(offset),
                           "symbol": self.symbol_at(offset)})

    def unmapped(self, ls, reason, region=0, guard=None):
        fields = {"reason": reason, "vaddr": "0x%08x" % ((ls + LS_BASE)
                                                        & 0xFFFFFFFF)}
        if region:
            fields["region"] = str(region)
        if guard is not None:
            fields["guard"] = str(guard)
        return ("unmapped", fields)

    def in_region(self, ls, region, guards):
        if len(guards) < region:
            return self.unmapped(ls, "guard-unknown", region)
        guard = guards[region - 1]
        if guard == 0:
            return self.unmapped(ls, "region-empty", region, guard)
        if guard not in self.overlays or self.overlays[guard][0] != region:
            return self.unmapped(ls, "guard-invalid", region, guard)
        section = self.overlays[guard][1]
        delta = ls + LS_BASE - section["sh_addr"]
        if not 0 <= delta < section["sh_size"]:
            return self.unmapped(ls, "outside-overlay", region, guard)
        return self.mapped(ls, section["sh_offset"] + delta, region, guard)

    def resolve(self, ls, guards):
        if ls >= LS_SIZE:
            return self.unmapped(ls, "outside-ls")
        region = self.region_of(ls)
        if region:
            return self.in_region(ls, region, guards)
        vaddr = ls + LS_BASE
        for s in self.resident:
            if s["p_vaddr"] <= vaddr < s["p_vaddr"] + s["p_filesz"]:
                return self.mapped(ls, s["p_offset"] + vaddr - s["p_vaddr"],
                                   0, 0)
            if s["p_vaddr"] <= vaddr < s["p_vaddr"] + s["p_memsz"]:
                return self.unmapped(ls, "no-file-bytes")
        return self.unmapped(ls, "no-segment")

    def footprint(self):
        """The LS bytes the image's segments and overlays occupy."""
        ends = [s["p_vaddr"] + s["p_memsz"] - LS_BASE for s in self.resident
                if s["p_vaddr"] < LS_BASE + LS_SIZE]
        ends += [s["sh_addr"] + s["sh_size"] - LS_BASE
                 for _, s in self.overlays.values()]
        return max(ends)


def parse_resolved(output):
    """copovl resolve lines -> {ls: (status, {field: value})}."""
    result = {}
    for line in output.splitlines():
        ls, status, *fields = line.split()
        result[int(ls, 16)] = (status, dict(f.split("=", 1) for f in fields))
    return result


def resolve_all(copovl, image, addresses, guards, *extra):
    args = ["resolve", *extra]
    if guards:
        args += ["--guards", ",".join(str(g) for g in guards)]
    result = copovl(*args, image,
                    input="".join("0x%x\n" % a for a in addresses))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    resolved = parse_resolved(result.stdout)
    assert sorted(resolved) == sorted(set(addresses))
    return resolved


def compare(oracle, resolved, guards):
    wrong = [(hex(ls), got, oracle.resolve(ls, guards))
             for ls, got in sorted(resolved.items())
             if got != oracle.resolve(ls, guards)]
    assert wrong == [], "%d addresses differ, first: %s" % (len(wrong),
                                                             wrong[:3])


def test_table_agrees_with_sections(overlay_image):
    oracle = Oracle(overlay_image("overlays.elf"))
    assert len(oracle.overlays) == 5
    assert len(oracle.overlay_sections) == 5
    assert [region for region, _ in oracle.overlays.values()] == [1, 1, 1, 2, 2]
    assert oracle.regions == 3


def test_info_matches_pyelftools(copovl, overlay_image):
    path = overlay_image("overlays.elf")
    oracle = Oracle(path)
    result = copovl("info", path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "image %s offset=0x0 size=%d name=ovl-test.1" % (
        path, os.path.getsize(path))

    segments = [l.split() for l in lines if l.startswith("segment ")]
    assert [(int(f[2][6:], 16), int(f[3][6:], 16), int(f[4][7:], 16),
             int(f[5][12:], 16)) for f in segments] == [
        (s["p_vaddr"], s["p_memsz"], s["p_filesz"], s["p_offset"])
        for s in oracle.resident]

    overlays = [l.split() for l in lines if l.startswith("overlay ")]
    assert len(overlays) == len(oracle.overlays)
    for fields in overlays:
        index = int(fields[1])
        region, section = oracle.overlays[index]
        assert fields[2:] == [
            "region=%d" % region, "vaddr=0x%08x" % section["sh_addr"],
            "size=0x%x" % section["sh_size"],
            "file_offset=0x%x" % section["sh_offset"],
            "section=%s" % section.name]

    regions = [l.split() for l in lines if l.startswith("region ")]
    assert [f[3] for f in regions] == [
        "guard=0x%05x" % (oracle.guard_table + 4 * r) for r in range(3)]


@pytest.mark.parametrize("guards", GUARD_STATES,
                         ids=lambda g: "guards=" + ",".join(map(str, g)))
def test_every_byte_of_every_segment_and_overlay(copovl, overlay_image,
                                                 guards):
    path = overlay_image("overlays.elf")
    oracle = Oracle(path)
    addresses = list(range(0, oracle.footprint() + 0x40))
    compare(oracle, resolve_all(copovl, path, addresses, guards), guards)


def test_every_word_of_the_local_store(copovl, overlay_image):
    path = overlay_image("overlays.elf")
    oracle = Oracle(path)
    guards = [3, 4, 0]
    addresses = list(range(0, LS_SIZE, 4)) + [
        LS_SIZE, LS_SIZE + 4, 0x100000, 0x7FFFFFFC, 0xFFFFFFFC, 0xFFFFFFFF]
    compare(oracle, resolve_all(copovl, path, addresses, guards), guards)


def test_plain_image(copovl, overlay_image):
    path = overlay_image("plain.elf")
    oracle = Oracle(path)
    assert oracle.overlays == {}
    addresses = list(range(0, oracle.footprint() + 0x40))
    for guards in ([], [1, 2]):
        compare(oracle, resolve_all(copovl, path, addresses, guards), guards)


def test_candidates(copovl, overlay_image):
    path = overlay_image("overlays.elf")
    oracle = Oracle(path)
    region_start = min(s["sh_addr"] for _, s in oracle.overlays.values())
    ls = region_start - LS_BASE
    result = copovl("candidates", path, hex(ls), "0x10", "0x800")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "0x%05x candidates=3" % ls
    for guard, line in zip((1, 2, 3), lines[1:4]):
        status, fields = parse_resolved(line.strip())[ls]
        assert (status, fields) == oracle.resolve(ls, [guard])
    assert lines[4] == "0x00010 candidates=1"
    assert lines[6] == "0x00800 candidates=0"


HOST_PROGRAM = r"""
extern const unsigned char coprocessor_image[], coprocessor_image_end[];

int main(void)
{
    return coprocessor_image[0] == 0x7f && coprocessor_image[1] == 'E' &&
           coprocessor_image_end - coprocessor_image == %d ? 0 : 1;
}

__asm__(".pushsection .rodata\n"
        ".balign 128\n"
        ".globl coprocessor_image\n"
        "coprocessor_image:\n"
        ".incbin \"%s\"\n"
        ".globl coprocessor_image_end\n"
        "coprocessor_image_end:\n"
        ".popsection\n");
"""


def symbol_file_offset(path, name):
    """Where the bytes of symbol name lie in the ELF file at path."""
    with open(path, "rb") as f:
        elf = ELFFile(f)
        symbol = elf.get_section_by_name(".symtab").get_symbol_by_name(
            name)[0]
        section = elf.get_section(symbol["st_shndx"])
        return section["sh_offset"] + symbol["st_value"] - section["sh_addr"]


def embed(image, tmp_path):
    """A host (x86-64) executable holding image in .rodata, as cop-embed
    makes them; returns its path and the image's file offset in it."""
    source = tmp_path / "host.c"
    host = tmp_path / "host"
    source.write_text(HOST_PROGRAM % (os.path.getsize(image), image))
    subprocess.run(["gcc", "-O1", "-o", str(host), str(source)], check=True)
    assert subprocess.run([str(host)]).returncode == 0
    return str(host), symbol_file_offset(host, "coprocessor_image")


def test_image_embedded_in_a_host_executable(copovl, overlay_image, tmp_path):
    path = overlay_image("overlays.elf")
    host, offset = embed(path, tmp_path)
    assert offset % 128 == 0 and offset > 0

    alone = copovl("info", path)
    embedded = copovl("info", "--offset", offset, host)
    assert embedded.returncode == 0, embedded.stderr
    assert embedded.stdout.splitlines()[0] == "image %s@0x%x offset=0x%x " \
        "size=%d name=ovl-test.1" % (host, offset, offset,
                                     os.path.getsize(path))
    assert embedded.stdout.splitlines()[1:] == alone.stdout.splitlines()[1:]

    sized = copovl("info", "--offset", offset, "--size",
                   os.path.getsize(path), host)
    assert sized.stdout == embedded.stdout

    addresses = list(range(0, 0x1200, 2))
    for guards in ([1, 5, 0], [2, 4, 0], [0, 0, 0]):
        assert resolve_all(copovl, host, addresses, guards,
                           "--offset", offset) == \
            resolve_all(copovl, path, addresses, guards)


def test_usage_errors(copovl, overlay_image):
    path = overlay_image("overlays.elf")
    cases = [
        (["frobnicate", path], "unknown command 'frobnicate'"),
        (["info"], "no IMAGE given"),
        (["info", path, "0x10"], "info takes no LS address"),
        (["resolve", "--offset", "ten", path, "0"], "offset 'ten'"),
        (["resolve", "--size", "0", path, "0"], "size '0'"),
        (["resolve", "--guards", "1,x", path, "0"], "guards '1,x'"),
        (["resolve", "--guards", "4294967296", path, "0"], "guards '"),
        (["resolve", path, "banana"], "LS address 'banana'"),
        (["resolve", path, "0x"], "LS address '0x'"),
        (["resolve", path, "12ab"], "LS address '12ab'"),
        (["resolve", path, "-4"], "LS address '-4'"),
        (["resolve", path, "0x100000000"], "LS address '0x100000000'"),
        (["candidates", path], "needs at least one LS address"),
    ]
    for args, message in cases:
        result = copovl(*args)
        assert result.returncode == 2, args
        assert result.stderr.count("\n") == 1, result.stderr
        assert result.stderr.startswith("copovl: ")
        assert message in result.stderr, (args, result.stderr)
    assert copovl("--help").returncode == 0
    assert "resolve" in copovl("--help").stdout
