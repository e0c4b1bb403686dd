"""Overlays: the structure of linked images against their sections and
segments, calls that swap overlays under the caller, the guard words a run
leaves in the RAM file, and what the build refuses."""

import os
import subprocess
import textwrap

import pytest

import copimage


def overlay_images(build_dir):
    return [copimage.image_path(build_dir, "tests", "cop", "overlay-calls.elf"),
            copimage.image_path(build_dir, "examples", "overlays.elf")]


@pytest.fixture(scope="module")
def calls(test_image):
    return copimage.Image(test_image("overlay-calls"))


@pytest.fixture(params=["overlay-calls", "overlays"])
def image(request, build_dir):
    paths = dict(zip(["overlay-calls", "overlays"], overlay_images(build_dir)))
    return copimage.Image(paths[request.param])


def test_entries_agree_with_sections_and_segments(image):
    assert image.overlays
    for entry in image.overlays:
        section, segment = entry.section, entry.segment
        assert section is not None, "entry %d has no section" % entry.index
        assert segment is not None, "entry %d has no segment" % entry.index
        assert section.header.sh_addr == entry.vma
        assert section.header.sh_size == entry.size
        assert section.header.sh_offset == entry.file_off
        assert segment.p_vaddr == entry.vma
        assert segment.p_filesz == segment.p_memsz == entry.size
        assert segment.p_offset == entry.file_off
        assert segment.p_flags & copimage.PF_OVERLAY


def test_overlay_segments_and_entries_correspond(image):
    overlay_segments = [s for s in image.segments
                        if s.p_flags & copimage.PF_OVERLAY]
    assert len(overlay_segments) == len(image.overlays)
    assert sorted(s.p_offset for s in overlay_segments) == \
        sorted(e.file_off for e in image.overlays)
    sections = [s.name for s in image.sections
                if s.name.startswith(".overlay.")]
    assert sorted(sections) == sorted(e.section.name for e in image.overlays)


def test_buf_indexes_and_regions(image):
    regions = {}
    for entry in image.overlays:
        assert 1 <= entry.buf <= image.region_count
        regions.setdefault(entry.buf, []).append(entry)
    assert sorted(regions) == list(range(1, image.region_count + 1))
    spans = []
    for entries in regions.values():
        assert len({e.vma for e in entries}) == 1, "one address per region"
        spans.append((entries[0].vma,
                      entries[0].vma + max(e.size for e in entries)))
    resident = [(s.p_vaddr, s.p_vaddr + s.p_memsz) for s in image.segments
                if not s.p_flags & copimage.PF_OVERLAY]
    for i, (start, end) in enumerate(spans):
        assert copimage.LS_BASE <= start < end <= copimage.LS_BASE + \
            copimage.LS_SIZE
        for other_start, other_end in spans[i + 1:] + resident:
            assert end <= other_start or other_end <= start


def test_tables_are_resident_and_guards_start_empty(image):
    assert image.file_offset(image.symbols["_ovly_table"]) > 0
    assert image.words("_ovly_buf_table", "_ovly_buf_table_end") == \
        [0] * image.region_count


def test_list_command_agrees(image, coprof_bin):
    result = subprocess.run([coprof_bin("cop-overlays"), "list", image.path],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[2].split() == [
        "ovly_buf_table", "0x%08x" % image.guard_words_addr, "ls_offset",
        "0x%05x" % (image.guard_words_addr - copimage.LS_BASE), "regions",
        str(image.region_count)]
    rows = [line.split() for line in lines[4:]]
    assert rows == [[str(e.index), str(e.buf), "0x%08x" % e.vma, str(e.size),
                     "0x%08x" % e.file_off, e.section.name]
                    for e in image.overlays]


def test_name_note(calls):
    assert calls.name_note == "overlay-calls"


@pytest.mark.parametrize("args, expected, last", [
    # left calls right in the same region: the return reloads left.
    (("chain", 5), "chain=104", ("left", None)),
    # right calls other in region 2.
    (("via", 4), "via=18", ("right", "other")),
    # other calls right through a pointer taken by resident code.
    (("pointer", 6), "pointer=19", ("right", "other")),
    # ten arguments (two on the stack) and a 64-bit result.
    (("wide",), "wide=36000000000910", ("left", None)),
    # left and right call each other 100 deep.
    (("recurse", 100), "recurse=100", ("left", None)),
])
def test_calls_across_overlays(run, calls, tmp_path, args, expected, last):
    ram = str(tmp_path / "ram")
    result = run(calls.path, *args, ram_file=ram)
    assert result.returncode == 0, result.stdout + result.stderr
    output = result.stdout.splitlines()
    assert output[0] == expected
    guards = copimage.guard_words(calls, ram)
    assert guards == [calls.overlay(name).index if name else 0
                      for name in last]
    assert output[1] == "guards=%d,%d" % tuple(guards)


def test_too_deep_nesting_is_fatal(run, calls):
    result = run(calls.path, "recurse", 300)
    assert result.returncode == 134
    assert result.stdout == "cop: overlay calls nested deeper than 256\n"


def test_overlay_bytes_in_local_store_after_run(run, calls, tmp_path):
    ram = str(tmp_path / "ram")
    assert run(calls.path, "via", 1, ram_file=ram).returncode == 0
    for name in ("right", "other"):
        entry = calls.overlay(name)
        assert copimage.read_ram(ram, entry.vma, entry.size) == \
            calls.data[entry.file_off:entry.file_off + entry.size]


SPECS_ERRORS = [
    (["1:a"], "expected REGION:NAME:OBJECTS"),
    (["0:a:x.o"], "with REGION from 1"),
    (["1:a-b:x.o"], "is not [A-Za-z0-9_]+"),
    (["1:a:x.o", "1:a:y.o"], "overlay name 'a' given twice"),
    (["2:a:x.o"], "region 1 has no overlay"),
]


@pytest.mark.parametrize("specs, message", SPECS_ERRORS)
def test_script_refuses_bad_specs(coprof_bin, tmp_path, specs, message):
    result = subprocess.run([coprof_bin("cop-overlays"), "script",
                             os.path.join(os.environ.get("COPROF_SOURCE", "."),
                                          "sdk", "cop.ld"),
                             str(tmp_path / "out.ld")] + specs,
                            capture_output=True, text=True)
    assert result.returncode == 2
    assert message in result.stderr
    assert result.stderr.count("\n") == 1


def test_script_needs_the_markers(coprof_bin, tmp_path):
    template = tmp_path / "plain.ld"
    template.write_text("SECTIONS { }\n")
    result = subprocess.run([coprof_bin("cop-overlays"), "script",
                             str(template), str(tmp_path / "out.ld"),
                             "1:a:x.o"], capture_output=True, text=True)
    assert result.returncode == 1
    assert "marker /* @overlay-phdrs@ */ found 0 times" in result.stderr
    assert not (tmp_path / "out.ld").exists()


# Building programs out of the tree with sdk/cop.mk.

MAKEFILE = """\
COP_BIN := {bin}
COP_OBJ := {work}/obj
COP_LIB := {work}/lib
COP_OUT := {work}/out
include {source}/sdk/cop.mk
{name}_SOURCES := main.c
{name}_OVERLAYS := 1:first 1:second 2:third
{name}_OVERLAY_first := first.c
{name}_OVERLAY_second := second.c
{name}_OVERLAY_third := third.c
$(eval $(call cop_program,{name}))
all: $({name}_IMAGE)
"""

SOURCES = {
    "main.c": """
        #include "sdk/cop.h"
        int first(int), second(int), third(int);
        int main(void) {
            cop_printf("%d %d %d\\n", first(1), second(2), third(3));
            return 0;
        }
    """,
    "first.c": "int first(int x) { return x + 100; }\n",
    "second.c": "int second(int x) { return x + 200; }\n",
    "third.c": "int third(int x) { return x + 300; }\n",
}


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("cop-mk")


def build(work, build_dir, name, sources=None, make_args=()):
    """Writes program NAME's sources and Makefile and runs make."""
    folder = work / name
    folder.mkdir(exist_ok=True)
    for file, text in dict(SOURCES, **(sources or {})).items():
        (folder / file).write_text(textwrap.dedent(text))
    source = os.environ.get("COPROF_SOURCE",
                            os.path.dirname(os.path.dirname(
                                os.path.dirname(os.path.abspath(__file__)))))
    (folder / "Makefile").write_text(MAKEFILE.format(
        bin=os.path.join(os.path.abspath(build_dir), "bin"), work=work,
        source=source, name=name))
    return subprocess.run(["make", "-s", "-C", str(folder)] + list(make_args),
                          capture_output=True, text=True, timeout=300)


def test_out_of_tree_program(work, build_dir, run):
    result = build(work, build_dir, "outside")
    assert result.returncode == 0, result.stderr
    image = copimage.Image(str(work / "out" / "outside.elf"))
    assert [(e.name, e.buf) for e in image.overlays] == \
        [("first", 1), ("second", 1), ("third", 2)]
    assert image.name_note == "outside"
    ran = run(image.path)
    assert ran.returncode == 0
    assert ran.stdout == "101 202 303\n"


def test_bare_make_builds_the_makefiles_first_target(work, build_dir):
    """cop.mk and cop_program define rules, but the default goal stays the
    Makefile's own first target (`all` above, defined after both)."""
    result = build(work, build_dir, "bare")
    assert result.returncode == 0, result.stderr
    assert (work / "out" / "bare.elf").is_file()


def test_outputs_default_to_the_directory_make_runs_in(work, build_dir):
    folder = work / "defaults"
    folder.mkdir()
    (folder / "main.c").write_text(textwrap.dedent(SOURCES["main.c"]))
    for name in ("first.c", "second.c", "third.c"):
        (folder / name).write_text(SOURCES[name])
    source = os.environ.get("COPROF_SOURCE",
                            os.path.dirname(os.path.dirname(
                                os.path.dirname(os.path.abspath(__file__)))))
    makefile = MAKEFILE.format(
        bin=os.path.join(os.path.abspath(build_dir), "bin"), work=work,
        source=source, name="plain")
    makefile = "\n".join(line for line in makefile.splitlines()
                         if not line.startswith(("COP_OBJ", "COP_LIB",
                                                 "COP_OUT")))
    (folder / "Makefile").write_text(makefile + "\n")
    result = subprocess.run(["make", "-s", "-C", str(folder)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert (folder / "build" / "plain.elf").is_file()
    assert (folder / "build" / "obj" / "plain" / "main.c.o").is_file()
    assert (folder / "build" / "lib" / "libcoprt.a").is_file()
    assert (folder / "build" / "lib" / "crt0.o").is_file()


def test_exported_data_is_refused(work, build_dir):
    result = build(work, build_dir, "exports", {
        "second.c": """
            int table[4] = {1, 2, 3, 4};
            int second(int x) { return x + table[x & 3]; }
        """})
    assert result.returncode != 0
    assert "exports data 'table', which would only exist while its overlay " \
        "is loaded" in result.stderr


@pytest.mark.parametrize("file", ["first.c", "main.c"])
def test_calling_around_a_stub_is_refused(work, build_dir, file):
    sources = {"first.c": """
        int __real_second(int);
        int first(int x) { return __real_second(x) + 100; }
    """, "main.c": """
        int __real_third(int);
        int main(void) { return __real_third(0); }
    """}
    result = build(work, build_dir, "around-" + file[:-2],
                   {file: sources[file]})
    assert result.returncode != 0
    called = {"first.c": "second", "main.c": "third"}[file]
    assert "%s.o: refers to __real_%s, which goes around the overlay call " \
        "stub: call %s" % (file, called, called) in result.stderr


@pytest.mark.parametrize("variable, value, package", [
    ("COP_CC", "riscv-gcc-that-is-not-installed", "gcc-riscv64-unknown-elf"),
    ("COP_PICOLIBC", "/nonexistent/picolibc", "picolibc-riscv64-unknown-elf"),
])
def test_missing_toolchain_names_the_package(work, build_dir, variable, value,
                                             package):
    result = build(work, build_dir, "notools", make_args=[
        "%s=%s" % (variable, value)])
    assert result.returncode != 0
    ours = [line for line in result.stderr.splitlines()
            if line.startswith("cop.mk:")]
    assert len(ours) == 1
    assert ours[0].endswith("install the Debian package %s" % package)
