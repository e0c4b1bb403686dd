"""The layers of the tree: which folder may use which (docs/architecture.md,
"Layers").

Every arrow between folders is read from the sources and checked against
ARROWS, the list of allowed ones with the reason for each:

- C: every #include "FOLDER/FILE" of a .c, .h or .S file (an include
  without a folder is the including file's own folder's);
- Python: every folder a file puts on sys.path or reads a file of
  (os.path.join(...) of string constants: from the tree's root, or from the
  file's own folder with ".."), and every ctypes.Structure, which would be
  a copy of a C layout: Python reads abi/'s headers through abi/cheader.py
  instead.

A layout is also copied without ctypes, as numbers: a test that writes a
register file at offset 68 copies trace_regs_header.mailbox_offset.  So a
Python file outside abi/ that handles a register file (it calls the
`register_file` fixture, runs `coptrace create`, or hands a file to copsim
or the plugin with `--regs` / `regs=`: handles_register_file()) takes
every position
it reads or writes from abi/trace-regs.h: the offset argument of
struct.unpack_from and struct.pack_into, of a ctypes class's from_buffer
and from_buffer_copy, and the argument of a .seek() hold no integer
literal but 0 and no module-level name bound to one (literal_offsets()).
The rule is syntactic, on the file's AST, so it gives the same answer on
every run; a position computed from cheader's structures (Header.version
.offset, header.mailbox_offset + slot * header.mailbox_stride) passes.

abi/ is at the bottom: the contracts between processes, including nothing
but itself.  Below the processes are the libraries (LIBRARIES), which
every process may use.  A process's folder uses abi/, the libraries and
its own folder; any other arrow must be in ARROWS with its reason.  Tests
of a folder (FOLDER/tests/) may also drive the programs they test through
the SDK and the shared test helpers (TEST_ARROWS).  bench/ and tests/ are
above everything: they measure and test the whole.

`COPROF_LAYERS_SOURCE=DIR pytest tests/test_layers.py` checks another
tree (an older commit's checkout).
"""

import ast
import os
import re

SOURCE = os.environ.get("COPROF_LAYERS_SOURCE") or os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))

# Every folder that owns code, longest first where one holds another.
FOLDERS = (
    "abi", "common", "lfsr", "escape-protocol", "eventlog", "overlay",
    "trace-unit",
    "emulator/copsim/stub", "emulator/copsim", "emulator",
    "kernel-driver/linux", "kernel-driver", "daemon", "hostprof",
    "control", "sdk/libcop", "sdk", "report", "examples", "bench", "tests",
)

# The libraries below the processes, each with what it may use.
LIBRARIES = {
    "abi": (),
    "common": ("abi",),
    "lfsr": ("abi", "common"),
    "escape-protocol": ("abi", "common"),
    "eventlog": ("abi", "common"),
    "overlay": ("abi", "common"),
    "trace-unit": ("abi", "common", "lfsr"),
}

# Folders above everything, which may use any folder.
TOP = ("bench", "tests")

# Arrows between processes' folders, or from a library to a process,
# allowed with a reason: (from, to: a folder or one file, reason).
ARROWS = (
    ("emulator/copsim", "kernel-driver",
     "copsim hosts the driver core (libcopdrv.a) as a kernel hosts its "
     "module: copsim-host.c is the glue, kernel-driver/copdrv.h its API"),
    ("kernel-driver/linux", "kernel-driver",
     "the Linux module is the portable core with a Linux shim"),
    ("sdk/libcop", "sdk", "libcop's public header is sdk/libcop.h"),
    ("control", "hostprof/samples.h",
     "copcontrol and coprof check --host-event with coprof-host's own "
     "encoder before they start anything, so a bad event fails at once"),
    ("report", "abi", "the session schema and its reader are abi/'s"),
    ("examples", "sdk", "the examples are programs built with the SDK"),
)

# What the tests of a folder (FOLDER/tests/, test-*.c, test_*.py) may use
# besides: paths (a file, or a folder and what is in it) with the reason.
TEST_ARROWS = (
    ("sdk/cop.h", "coprocessor programs built with the SDK"),
    ("sdk/libcop.h", "host programs linked with libcop"),
    ("sdk/tests", "the SDK's test programs as workloads"),
    ("examples", "the examples as workloads"),
    ("tests", "the shared test helpers (runner, exact counts, truth)"),
    ("emulator/tests/guest", "the trace unit's test guests"),
    ("daemon/tests", "coprofd's stream builders, to make test sessions"),
    ("report", "copreport's reading of a session as the truth a writer is "
     "checked against (coprof-host's aggregates equal its host states)"),
)


def folder_of(path):
    """The folder of FOLDERS that owns a path of the tree, or None."""
    for folder in FOLDERS:
        if path == folder or path.startswith(folder + "/"):
            return folder
    return None


def is_test(path, folder):
    """Whether a file of folder is one of its tests."""
    rest = path[len(folder) + 1:]
    return rest.startswith("tests/") or os.path.basename(rest).startswith(
        ("test-", "test_", "fuzz-", "fuzz_"))


def allowed(path, target):
    """None if the file at path may use target (a path of the tree), else
    why not."""
    src, dst = folder_of(path), folder_of(target)
    if src is None or dst is None or src == dst or src in TOP:
        return None
    if dst in LIBRARIES.get(src, ()):
        return None
    if src not in LIBRARIES and dst in LIBRARIES:
        return None
    for frm, to, _ in ARROWS:
        if frm == src and (to == dst or to == target):
            return None
    if is_test(path, src) and any(target == to or target.startswith(to + "/")
                                  for to, _ in TEST_ARROWS):
        return None
    kind = "library" if src in LIBRARIES else "process"
    return "%s -> %s: %s %s uses %s, which is neither abi/, a library " \
        "below it nor an allowed arrow" % (path, target, kind, src, dst)


def tree_files(suffixes):
    for root, dirs, files in os.walk(SOURCE):
        rel = os.path.relpath(root, SOURCE)
        dirs[:] = [d for d in dirs if not d.startswith((".", "build"))
                   and d != "__pycache__"]
        for name in files:
            if name.endswith(suffixes):
                yield os.path.normpath(os.path.join(rel, name))


def c_arrows(path):
    """(line, target) of every #include "..." naming a folder."""
    with open(os.path.join(SOURCE, path), errors="replace") as f:
        for n, line in enumerate(f, 1):
            m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
            if m and "/" in m.group(1):
                yield n, m.group(1)


def _join_parts(node):
    """The parts of an os.path.join(...) call: strings, or None for a
    part that is not a string constant."""
    return [a.value if isinstance(a, ast.Constant) and
            isinstance(a.value, str) else None for a in node.args]


def python_arrows(path):
    """(line, target) of every tree path a Python file names through
    os.path.join of constants, and (line, None) for each ctypes.Structure
    it defines."""
    with open(os.path.join(SOURCE, path)) as f:
        tree = ast.parse(f.read(), path)
    here = os.path.dirname(path)
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for base in node.bases:
                if isinstance(base, ast.Attribute) and \
                        base.attr in ("Structure", "Union") and \
                        isinstance(base.value, ast.Name) and \
                        base.value.id == "ctypes":
                    yield node.lineno, None
        if not (isinstance(node, ast.Call) and
                isinstance(node.func, ast.Attribute) and
                node.func.attr == "join"):
            continue
        parts = _join_parts(node)
        if parts and parts[0] is None:
            parts = parts[1:]
        if not parts or None in parts:
            continue
        if parts[0] == "..":
            target = os.path.normpath(os.path.join(here, *parts))
        elif folder_of(parts[0]):
            target = os.path.normpath(os.path.join(*parts))
        else:
            continue
        if not target.startswith("..") and os.path.exists(
                os.path.join(SOURCE, target)):
            yield node.lineno, target



# Calls whose argument (by position, or by name) is a position in a file
# or a buffer: struct.unpack_from(fmt, buffer, offset),
# struct.pack_into(fmt, buffer, offset, ...), Class.from_buffer(b, offset),
# Class.from_buffer_copy(b, offset), f.seek(offset).
POSITION_ARGUMENTS = {"unpack_from": 2, "pack_into": 2, "from_buffer": 1,
                      "from_buffer_copy": 1, "seek": 0}


def handles_register_file(tree):
    """Whether a parsed Python file names a register file: it calls the
    linux tests' fixture register_file(), holds the strings "coptrace" and
    "create" (it runs `coptrace create`), or a string that hands one to
    copsim or the plugin ("--regs", "...regs=...")."""
    strings = [n.value for n in ast.walk(tree)
               if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    calls = [n.func.id for n in ast.walk(tree)
             if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
    return "register_file" in calls or \
        ("coptrace" in strings and "create" in strings) or \
        any(s == "--regs" or "regs=" in s for s in strings)


def _module_numbers(tree):
    """Names a module binds to numbers: integer literals or expressions of
    them and of such names (A = 8; A, B = 68, 76; C = A - 0x80000000)."""
    names = set()
    for node in tree.body:
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            pairs = [(target, node.value)]
            if isinstance(target, ast.Tuple) and \
                    isinstance(node.value, ast.Tuple):
                pairs = zip(target.elts, node.value.elts)
            for name, value in pairs:
                if isinstance(name, ast.Name) and _is_number(value, names):
                    names.add(name.id)
    return names


def _is_number(node, names=()):
    """Whether an expression is an integer literal, a name of names, or
    arithmetic of them."""
    if isinstance(node, ast.Constant):
        return type(node.value) is int
    if isinstance(node, ast.Name):
        return node.id in names
    if isinstance(node, ast.BinOp):
        return _is_number(node.left, names) and \
            _is_number(node.right, names)
    if isinstance(node, ast.UnaryOp):
        return _is_number(node.operand, names)
    return False


def literal_offsets(tree):
    """(line, what) of each position a file reads or writes that holds a
    literal: an integer other than 0, or a module name bound to one."""
    numbers = _module_numbers(tree)
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and
                isinstance(node.func, ast.Attribute) and
                node.func.attr in POSITION_ARGUMENTS):
            continue
        at = POSITION_ARGUMENTS[node.func.attr]
        args = node.args[at:at + 1] + [k.value for k in node.keywords
                                        if k.arg == "offset"]
        for arg in args:
            for part in ast.walk(arg):
                if isinstance(part, ast.Constant) and part.value != 0 and \
                        _is_number(part) or \
                        isinstance(part, ast.Name) and part.id in numbers:
                    yield node.lineno, "%s(%s)" % (node.func.attr,
                                                   ast.unparse(arg))
                    break


def layout_copies():
    """Every literal position in a Python file outside abi/ that handles a
    register file."""
    found = []
    for path in tree_files((".py",)):
        if folder_of(path) == "abi":
            continue
        with open(os.path.join(SOURCE, path)) as f:
            tree = ast.parse(f.read(), path)
        if not handles_register_file(tree):
            continue
        for n, what in literal_offsets(tree):
            found.append("%s:%d: %s: an abi/ layout copied as a number: "
                         "read it from abi/'s header with abi/cheader.py"
                         % (path, n, what))
    return found


def violations():
    found = []
    for path in tree_files((".c", ".h", ".S")):
        for n, target in c_arrows(path):
            why = allowed(path, target)
            if why:
                found.append("%s:%d: %s" % (path, n, why))
    for path in tree_files((".py",)):
        for n, target in python_arrows(path):
            if target is None:
                if folder_of(path) != "abi":
                    found.append("%s:%d: a ctypes copy of a C layout: read "
                                 "it from abi/ with abi/cheader.py"
                                 % (path, n))
                continue
            why = allowed(path, target)
            if why:
                found.append("%s:%d: %s" % (path, n, why))
    return found


def test_arrows_follow_the_layers():
    """No include or import crosses a layer except by an allowed arrow."""
    found = violations()
    assert not found, "\n".join(found)


def test_register_file_layouts_come_from_abi():
    """No Python file that handles a register file reads or writes it at
    a literal offset (a copy of abi/trace-regs.h's layout)."""
    found = layout_copies()
    assert not found, "\n".join(found)


def test_the_check_sees_a_literal_offset():
    """The check itself: literal positions in a file that names a register
    file are found, positions from cheader and other files are not."""
    def found(source):
        tree = ast.parse(source)
        if not handles_register_file(tree):
            return []
        return [what for _, what in literal_offsets(tree)]

    regs = 'regs = register_file("regs")\n'
    assert found(regs + 'struct.unpack_from("<I", data, 48)') == [
        "unpack_from(48)"]
    assert found(regs + 'OFF, ACK = 68, 128\nf.seek(box + ACK)\n') == [
        "seek(box + ACK)"]
    assert found(regs + 'BASE = 0x80040000\nAT = BASE - 0x80000000\n'
                 'struct.unpack_from("<4I", swap, AT)') == [
        "unpack_from(AT)"]
    assert found('run([coprof_bin("coptrace"), "create", r])\n'
                 'struct.pack_into("<II", d, offset=c + 8)') == [
        "pack_into(c + 8)"]
    assert found(regs + "H.from_buffer(data, 16)") == ["from_buffer(16)"]
    assert found(regs + "f.seek(0)\nf.seek(Header.version.offset)\n"
                 "f.seek(h.mailbox_offset + slot * h.mailbox_stride)") == []
    assert found('struct.unpack_from("<I", elf, 16)') == []


def test_abi_includes_only_itself():
    """abi/ is the bottom: its headers include only abi/ headers."""
    for path in tree_files((".h",)):
        if folder_of(path) == "abi":
            for n, target in c_arrows(path):
                assert target.startswith("abi/"), "%s:%d: %s" % (
                    path, n, target)


def test_every_folder_is_placed():
    """Every top-level folder with code is a folder of FOLDERS, so none
    escapes the check."""
    for name in sorted(os.listdir(SOURCE)):
        full = os.path.join(SOURCE, name)
        if not os.path.isdir(full) or name.startswith((".", "build")) \
                or name in ("mk", "docs"):
            continue
        assert folder_of(name), "%s/ is in no layer of FOLDERS" % name


def test_the_check_sees_a_crossing():
    """The check itself: an include of another process's implementation
    is refused, one of abi/ or of a library is not."""
    assert allowed("sdk/cop-run.c", "emulator/trace-unit.h")
    assert allowed("kernel-driver/core.c", "emulator/trace-regs.h")
    assert allowed("control/driver.h", "emulator/copsim/copdrv-control.h")
    assert allowed("emulator/trace-plugin.c",
                   "emulator/copsim/stub/slot-stub.h")
    assert allowed("report/tests/conftest.py", "daemon/store.c")
    assert allowed("lfsr/lfsr.c", "trace-unit/trace-unit.h")
    assert allowed("kernel-driver/core.c", "abi/trace-regs.h") is None
    assert allowed("sdk/cop-run.c", "trace-unit/trace-unit.h") is None
