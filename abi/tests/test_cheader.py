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

HEADERS = ("copsim-protocol.h", "copdrv-control.h")


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
