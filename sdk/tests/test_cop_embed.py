"""cop-embed: the object it writes, linked into host programs (PIE, not
PIE, and a shared library) that check the handle against the image file."""

import os
import subprocess

import pytest
from elftools.elf.elffile import ELFFile


HOST_PROGRAM = r"""
#include "sdk/cop-handle.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const cop_program_handle_t probe_handle;

int main(int argc, char **argv)
{
    static unsigned char file[8 << 20];
    FILE *f = fopen(argv[1], "rb");
    size_t n = fread(file, 1, sizeof(file), f);
    const cop_program_handle_t *h = &probe_handle;

    printf("handle_size=%u image_size=%u file_size=%zu aligned=%d same=%d "
           "name=%s\n", h->handle_size, h->image_size, n,
           (uintptr_t)h->elf_image % COP_IMAGE_ALIGN == 0,
           n == h->image_size && memcmp(file, h->elf_image, n) == 0, h->name);
    return 0;
}
"""


def embed(coprof_bin, image, name, out):
    return subprocess.run([coprof_bin("cop-embed"), image, name, out],
                          capture_output=True, text=True)


def source_dir():
    return os.environ.get("COPROF_SOURCE", os.path.dirname(os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))))


@pytest.fixture(scope="module")
def embedded(coprof_bin, test_image, tmp_path_factory):
    work = tmp_path_factory.mktemp("embed")
    obj = str(work / "probe.o")
    result = embed(coprof_bin, test_image("runtime-probe"), "probe_handle", obj)
    assert result.returncode == 0, result.stderr
    (work / "host.c").write_text(HOST_PROGRAM)
    return work, obj


@pytest.mark.parametrize("flags", [["-pie", "-fPIE"], ["-no-pie"], ["-static"]])
def test_host_program_reads_the_image(embedded, test_image, flags):
    work, obj = embedded
    program = str(work / ("host" + "".join(flags)))
    subprocess.run(["gcc"] + flags + ["-I", source_dir(), str(work / "host.c"),
                                      obj, "-o", program], check=True)
    image = test_image("runtime-probe")
    result = subprocess.run([program, image], capture_output=True, text=True,
                            check=True)
    size = os.path.getsize(image)
    assert result.stdout == ("handle_size=24 image_size=%d file_size=%d "
                             "aligned=1 same=1 name=runtime-probe\n"
                             % (size, size))


def test_shared_library(embedded, test_image):
    work, obj = embedded
    library = str(work / "libprobe.so")
    program = str(work / "host-shared")
    subprocess.run(["gcc", "-shared", obj, "-o", library], check=True)
    subprocess.run(["gcc", "-I", source_dir(), str(work / "host.c"), library,
                    "-Wl,-rpath," + str(work), "-o", program], check=True)
    result = subprocess.run([program, test_image("runtime-probe")],
                            capture_output=True, text=True, check=True)
    assert "aligned=1 same=1 name=runtime-probe" in result.stdout


def test_object_layout(embedded, test_image):
    _, obj = embedded
    with open(obj, "rb") as f:
        elf = ELFFile(f)
        assert elf.header.e_machine == "EM_X86_64"
        assert elf.header.e_type == "ET_REL"
        image_section = elf.get_section_by_name(".rodata.cop_image")
        assert image_section.header.sh_addralign == 128
        assert image_section.header.sh_flags == 2          # SHF_ALLOC only
        size = os.path.getsize(test_image("runtime-probe"))
        with open(test_image("runtime-probe"), "rb") as image:
            assert image_section.data()[:size] == image.read()
        assert image_section.data()[size:] == b"runtime-probe\0"
        handle = elf.get_section_by_name(".data.rel.ro")
        assert handle.header.sh_size == 24
        symbols = {s.name: s for s in elf.get_section_by_name(".symtab")
                   .iter_symbols()}
        assert symbols["probe_handle"]["st_info"]["bind"] == "STB_GLOBAL"
        assert symbols["probe_handle"]["st_size"] == 24
        assert elf.get_section_by_name(".note.GNU-stack") is not None


def test_name_falls_back_to_handle_name(coprof_bin, test_image, tmp_path):
    with open(test_image("runtime-probe"), "rb") as f:
        data = f.read()
    assert data.count(b"COPNAME\0") == 1
    unnamed = tmp_path / "unnamed.elf"
    unnamed.write_bytes(data.replace(b"COPNAME\0", b"NOTNAME\0"))
    obj = str(tmp_path / "unnamed.o")
    assert embed(coprof_bin, str(unnamed), "other_handle", obj).returncode == 0
    with open(obj, "rb") as f:
        section = ELFFile(f).get_section_by_name(".rodata.cop_image")
        assert section.data()[len(data):] == b"other_handle\0"


@pytest.mark.parametrize("name, message", [
    ("9lives", "9lives: not a C identifier"),
    ("has-dash", "has-dash: not a C identifier"),
])
def test_bad_handle_name(coprof_bin, test_image, tmp_path, name, message):
    result = embed(coprof_bin, test_image("runtime-probe"), name,
                   str(tmp_path / "x.o"))
    assert result.returncode == 2
    assert result.stderr.startswith("cop-embed: " + message)


def test_bad_image(coprof_bin, tmp_path):
    result = embed(coprof_bin, "/bin/sh", "h", str(tmp_path / "x.o"))
    assert result.returncode == 1
    assert result.stderr == "cop-embed: /bin/sh: not a 32-bit ELF file " \
        "(coprocessor images are ELF32 RISC-V)\n"
    assert not (tmp_path / "x.o").exists()


def test_unwritable_output(coprof_bin, test_image):
    result = embed(coprof_bin, test_image("runtime-probe"), "h",
                   "/nonexistent/dir/x.o")
    assert result.returncode == 1
    assert result.stderr == \
        "cop-embed: /nonexistent/dir/x.o: /nonexistent: no such directory " \
        "(a missing parent is not created)\n"
