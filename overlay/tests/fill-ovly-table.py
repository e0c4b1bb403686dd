#!/usr/bin/python3
"""Write each overlay's file offset into the _ovly_table of a linked image.

GNU ld cannot put a section's file offset into the output, so the test
linker script (overlay-test.ld) stores each overlay's load address (LMA) in
the file_off field of its _ovly_table entry.  This finds, for each entry, the
PF_OVERLAY load segment with that physical address and writes the segment's
file offset in its place, which is what the SPU linker wrote itself.  The
image is changed in place.
"""

import argparse
import struct
import sys

from elftools.elf.elffile import ELFFile

PF_OVERLAY = 0x08000000
ENTRY = struct.Struct("<4I")        # vma, size, file_off, buf


def symbol_value(elf, name):
    symbols = elf.get_section_by_name(".symtab").get_symbol_by_name(name)
    if not symbols:
        raise SystemExit("fill-ovly-table: no symbol %s" % name)
    return symbols[0]["st_value"]


def file_position(elf, vaddr):
    for segment in elf.iter_segments():
        if (segment["p_type"] == "PT_LOAD"
                and not segment["p_flags"] & PF_OVERLAY
                and segment["p_vaddr"] <= vaddr
                < segment["p_vaddr"] + segment["p_filesz"]):
            return segment["p_offset"] + vaddr - segment["p_vaddr"]
    raise SystemExit("fill-ovly-table: 0x%x is in no resident segment" % vaddr)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("image", help="the linked image, changed in place")
    args = parser.parse_args()

    with open(args.image, "r+b") as f:
        elf = ELFFile(f)
        start = symbol_value(elf, "_ovly_table")
        end = symbol_value(elf, "_ovly_table_end")
        table = file_position(elf, start)
        by_lma = {s["p_paddr"]: s["p_offset"] for s in elf.iter_segments()
                  if s["p_type"] == "PT_LOAD" and s["p_flags"] & PF_OVERLAY}
        patches = []
        for i in range((end - start) // ENTRY.size):
            f.seek(table + i * ENTRY.size)
            vma, size, lma, buf = ENTRY.unpack(f.read(ENTRY.size))
            if lma not in by_lma:
                sys.exit("fill-ovly-table: overlay %d: no PF_OVERLAY segment "
                         "loads at 0x%x" % (i + 1, lma))
            patches.append((table + i * ENTRY.size + 8, by_lma[lma]))
        for position, file_offset in patches:
            f.seek(position)
            f.write(struct.pack("<I", file_offset))


if __name__ == "__main__":
    main()
