"""overlay/ on the SDK's overlays example (build/examples/overlays.elf).

The same independent oracle as test_copovl.py checks every byte of the
example's segments and overlays; a run under cop-run checks that the guard
word addresses copovl gives are where the overlay manager writes (the words
read from the RAM file name an overlay of their own region); and the image
embedded with cop-embed in a host executable reads the same from its offset
there, its size derived from its headers.
"""

import os
import subprocess

import pytest
from test_copovl import (GUARD_STATES, LS_BASE, Oracle, compare, resolve_all,
                         symbol_file_offset)


@pytest.fixture(scope="module")
def example(build_dir):
    path = os.path.join(build_dir, "examples", "overlays.elf")
    if not os.path.exists(path):
        pytest.fail("%s is not built: run make" % path)
    return path


def parse_info(text):
    """copovl info -> (regions {index: guard LS address},
    overlays {index: (region, section)})."""
    regions, overlays = {}, {}
    for line in text.splitlines():
        kind, index, *fields = line.split()
        fields = dict(f.split("=", 1) for f in fields)
        if kind == "region":
            regions[int(index)] = int(fields["guard"], 16)
        elif kind == "overlay":
            overlays[int(index)] = (int(fields["region"]), fields["section"])
    return regions, overlays


def test_example_structure(copovl, example):
    result = copovl("info", example)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0].endswith(" name=overlays")
    regions, overlays = parse_info(result.stdout)
    assert len(regions) >= 2 and len(overlays) >= 3
    oracle = Oracle(example)
    assert {i: (r, s.name) for i, (r, s) in oracle.overlays.items()} \
        == overlays
    assert regions == {r + 1: oracle.guard_table + 4 * r
                       for r in range(oracle.regions)}


@pytest.mark.parametrize("guards", GUARD_STATES,
                         ids=lambda g: "guards=" + ",".join(map(str, g)))
def test_example_every_byte(copovl, example, guards):
    oracle = Oracle(example)
    addresses = list(range(0, oracle.footprint() + 0x40))
    compare(oracle, resolve_all(copovl, example, addresses, guards), guards)


def test_guard_words_after_a_run(copovl, coprof_bin, example, tmp_path):
    ram = tmp_path / "ram"
    run = subprocess.run([coprof_bin("cop-run"), "--ram-file", str(ram),
                          example], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    regions, overlays = parse_info(copovl("info", example).stdout)

    # The RAM file starts at LS address 0: read each region's guard word.
    with open(ram, "rb") as f:
        guards = []
        for region in sorted(regions):
            f.seek(regions[region])
            guards.append(int.from_bytes(f.read(4), "little"))
    for region, guard in enumerate(guards, 1):
        assert guard in overlays, "region %d guard %d" % (region, guard)
        assert overlays[guard][0] == region

    oracle = Oracle(example)
    starts = {r: min(s["sh_addr"] for rr, s in oracle.overlays.values()
                     if rr == r) - LS_BASE for r in regions}
    resolved = resolve_all(copovl, example, sorted(starts.values()), guards)
    for region, start in starts.items():
        status, fields = resolved[start]
        assert status == "mapped"
        assert fields["overlay"] == str(guards[region - 1])
        assert fields["section"] == overlays[guards[region - 1]][1]


HOST_PROGRAM = r"""
#include <stdint.h>

struct handle {
    uint32_t handle_size, image_size;
    const void *elf_image;
    const char *name;
};

extern const struct handle overlays_program;

int main(void)
{
    return ((const unsigned char *)overlays_program.elf_image)[0] == 0x7f
           ? 0 : 1;
}
"""


def test_example_embedded_with_cop_embed(copovl, coprof_bin, example,
                                         tmp_path):
    obj = tmp_path / "overlays.o"
    subprocess.run([coprof_bin("cop-embed"), example, "overlays_program",
                    str(obj)], check=True)
    source = tmp_path / "host.c"
    source.write_text(HOST_PROGRAM)
    host = tmp_path / "host"
    subprocess.run(["gcc", "-O1", "-o", str(host), str(source), str(obj)],
                   check=True)
    assert subprocess.run([str(host)]).returncode == 0
    offset = symbol_file_offset(host, "overlays_program.elf_image")

    alone = copovl("info", example)
    embedded = copovl("info", "--offset", offset, host)
    assert embedded.returncode == 0, embedded.stderr
    assert "size=%d " % os.path.getsize(example) in \
        embedded.stdout.splitlines()[0]
    assert embedded.stdout.splitlines()[1:] == alone.stdout.splitlines()[1:]
    addresses = list(range(0, 0x400, 4))
    assert resolve_all(copovl, host, addresses, [1, 4], "--offset", offset) \
        == resolve_all(copovl, example, addresses, [1, 4])
