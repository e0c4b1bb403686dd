"""abi/cheader.py: the structures it reads from abi/'s headers are the C
compiler's, field for field, and a header it cannot read is one error
naming the line."""

import ctypes
import os
import subprocess
import sys

import pytest

ABI = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE = os.path.dirname(ABI)
sys.path.insert(0, ABI)

import cheader  # noqa: E402

HEADERS = ("copsim-protocol.h", "copdrv-control.h", "trace-regs.h")


def c_layout(tmp_path, header, structs):
    """{struct: (size, {field: offset})} as gcc lays them out."""
    lines = ['#include "abi/%s"' % header, "#include <stddef.h>",
             "#include <stdio.h>", "int main(void)", "{"]
    for name, fields in structs.items():
        lines.append('    printf("%s sizeof() %%zu\\n", sizeof(struct %s));'
                     % (name, name))
        for field in fields:
            lines.append('    printf("%s %s %%zu\\n", offsetof(struct %s, '
                         '%s));' % (name, field, name, field))
    lines += ["    return 0;", "}"]
    src = tmp_path / "layout.c"
    src.write_text("\n".join(lines) + "\n")
    exe = tmp_path / "layout"
    subprocess.run(["gcc", "-I" + SOURCE, str(src), "-o", str(exe)],
                   check=True)
    out = {}
    for line in subprocess.run([str(exe)], capture_output=True, text=True,
                               check=True).stdout.splitlines():
        name, field, value = line.split()
        size, offsets = out.setdefault(name, (None, {}))
        if field == "sizeof()":
            out[name] = (int(value), offsets)
        else:
            offsets[field] = int(value)
    return out


@pytest.mark.parametrize("header", HEADERS)
def test_structures_are_the_compilers(tmp_path, header):
    h = cheader.load(header)
    structs = {name: [f for f, _ in h.struct(name)._fields_]
               for name in h.struct_names()}
    assert structs
    want = c_layout(tmp_path, header, structs)
    for name, fields in structs.items():
        cls = h.struct(name)
        assert ctypes.sizeof(cls) == want[name][0], name
        for field in fields:
            assert getattr(cls, field).offset == want[name][1][field], (
                name, field)


def test_defines():
    h = cheader.load("copdrv-control.h")
    assert h.defines["COPSIM_REPLY"] == 0x8000
    assert h.defines["COPDRV_BUFFER_MAX"] == 1 << 30
    assert h.defines["COPDRV_CONTROL_PARAMS_V1_SIZE"] == ctypes.sizeof(
        h.struct("copdrv_control_params_v1"))
    assert cheader.load("state-dir.h").defines["COPROF_SESSION_MARK"] == \
        "coprofd.pid"


def test_unreadable_member_names_the_line(tmp_path):
    (tmp_path / "bad.h").write_text("#define N 4\n\nstruct bad {\n"
                                    "    float x[N];\n};\n")
    h = cheader.load("bad.h", str(tmp_path))
    with pytest.raises(cheader.HeaderError) as e:
        h.struct("bad")
    assert str(e.value) == "%s:3: member x: type float is not fixed-width" \
        % (tmp_path / "bad.h")


def test_trace_regs_is_read_as_user_space_compiles_it():
    """trace-regs.h: its kernel branch, accessors (function-like macros)
    and pointer constant are skipped; its integers and layouts are read."""
    h = cheader.load("trace-regs.h")
    assert h.defines["TRACE_REGS_VERSION"] >= 5
    assert h.defines["TRACE_REGS_MAGIC"] == "COPTRACE"
    assert h.defines["TRACE_MAX_FIFO_DEPTH"] == 1 << 24
    for skipped in ("TRACE_NULL", "trace_load_once", "static_assert",
                    "TRACE_STACK_FRAME"):
        assert skipped not in h.defines
    assert h.struct("trace_regs_slot").fifo.offset == 256
    assert ctypes.sizeof(h.struct("trace_regs_mailbox")) == 1024


def test_branches_and_skipped_defines(tmp_path):
    """#ifdef/#ifndef/#else take the user-space branch; a function-like
    macro, a NULL-ish value and a C name alias are skipped, and using a
    skipped name is an error naming its line."""
    (tmp_path / "h.h").write_text(
        "#ifndef H_H\n#define H_H\n"
        "#ifdef __KERNEL__\n#define WIDTH 8\n#define P NULL\n"
        "#else\n#define WIDTH 4\n#define P ((void *)0)\n#endif\n"
        "#define F(x) ((x) + 1)\n#define assert_ _Static_assert\n"
        "#define LONG (WIDTH \\\n    << 2)\n"
        "struct s {\n    uint32_t a[WIDTH];\n    uint16_t tail[];\n};\n"
        "#endif\n")
    h = cheader.load("h.h", str(tmp_path))
    assert h.defines["WIDTH"] == 4 and h.defines["LONG"] == 16
    assert "P" not in h.defines and "F" not in h.defines
    assert "assert_" not in h.defines
    s = h.struct("s")
    assert ctypes.sizeof(s) == 16 and s.tail.offset == 16
    (tmp_path / "bad.h").write_text("#define P ((void *)0)\n"
                                    "#define N (P + 1)\n")
    with pytest.raises(cheader.HeaderError) as e:
        cheader.load("bad.h", str(tmp_path))
    assert str(e.value) == "%s:2: P is not an integer #define" % (
        tmp_path / "bad.h")


@pytest.mark.parametrize("text,line,words", [
    ("#if 1\n#define A 1\n#endif\n", 1,
     "cannot read #if 1 (only #ifdef and #ifndef)"),
    ("#ifdef A\n#define A 1\n", 1, "#ifdef without #endif"),
    ("#define A 1\n#endif\n", 2, "#endif without #ifdef"),
    ("#define A 0x1G\n", 1, "0x1G is not an integer"),
    ("struct s {\n    uint8_t a[];\n    uint8_t b;\n};\n", 1,
     "member a: an array without a length that is not the last member"),
])
def test_unreadable_directive_names_the_line(tmp_path, text, line, words):
    (tmp_path / "bad.h").write_text(text)
    with pytest.raises(cheader.HeaderError) as e:
        cheader.load("bad.h", str(tmp_path)).struct("s")
    assert str(e.value) == "%s:%d: %s" % (tmp_path / "bad.h", line, words)
