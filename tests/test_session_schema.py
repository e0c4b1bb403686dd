"""One session schema (abi/session-schema.sql) and one set of session
file names (abi/session-dir.h): the C writers and copreport both take them
from abi/, so one edit changes both.

The main test builds both sides from a changed copy of the schema: coprofd's
store (daemon/store.c, compiled here against the header generated from the
copy) creates a session, and copreport's package, with the copy beside it,
reads it.  A column given another type and kind in the copy is then of the
new type in the C writer's table, and the reader checks it under the new
kind.  A column renamed in the copy is caught on both sides: the store's
statements still name the old column, so the store built from the copy
refuses to open (a rename is the schema's edit and the INSERT's), and
copreport with the copy refuses a session that lacks the new column.

The same is done with a copy of abi/session-dir.h whose names differ: the
store creates the files under the new names and copreport reads them
there.  The session table's keys are declared with their kinds in the
schema (-- @key): every key the C writers name, and every key of a
session coprofd records, is declared, and copreport checks the integer
ones.
"""

import ast
import os
import re
import shutil
import sqlite3
import subprocess
import sys

import pytest

SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(SOURCE, "abi"))
sys.path.insert(0, os.path.join(SOURCE, "escape-protocol"))
sys.path.insert(0, os.path.join(SOURCE, "daemon", "tests"))

import cheader  # noqa: E402
import coprofd_support  # noqa: E402
import session_schema  # noqa: E402

PYTHON = "/usr/bin/python3"

# Writes an empty session into argv[1] with coprofd's store: its tables
# and the keys a reader needs.
STORE_MAIN = r"""
#include "daemon/store.h"
#include <stdio.h>

int main(int argc, char **argv)
{
    GError *error = NULL;
    struct store *store = store_open(argv[1], false, &error);

    if (!store) {
        fprintf(stderr, "%s\n", error->message);
        return 1;
    }
    if (store_begin(store, &error) != 0 ||
        store_put_meta_int(store, "format_version",
                           store_format_version()) != 0 ||
        store_put_meta_int(store, "stream.complete", 1) != 0 ||
        store_put_meta_text(store, "end_state", "complete") != 0 ||
        store_commit(store, &error) != 0) {
        fprintf(stderr, "%s\n", error ? error->message : "store failed");
        return 1;
    }
    store_close(store);
    return 0;
}
"""


def pkg_flags(*packages):
    out = subprocess.run(["pkg-config", "--cflags", "--libs"] +
                         list(packages), capture_output=True, text=True,
                         check=True).stdout
    return out.split()


def sanitizer_flags(library):
    """The flags a program linked with library needs: those of make
    check-sanitize's build (mk/build.mk SAN_FLAGS) when its objects call
    the sanitizers' runtime, else none."""
    undefined = subprocess.run(["nm", "-u", library], capture_output=True,
                               text=True, check=True).stdout
    if "__asan_" in undefined or "__ubsan_" in undefined:
        return ["-fsanitize=address,undefined", "-fno-sanitize-recover=all",
                "-fno-omit-frame-pointer"]
    return []


def build_store(build_dir, schema_path, work, session_dir_h=None):
    """A program that creates a session with daemon/store.c built against
    the C header generated from schema_path (and session_dir_h, when given,
    as abi/session-dir.h)."""
    gen = work / "gen"
    (gen / "abi").mkdir(parents=True)
    if session_dir_h:
        shutil.copy(str(session_dir_h), str(gen / "abi" / "session-dir.h"))
    subprocess.run([PYTHON, os.path.join(SOURCE, "abi", "session_schema.py"),
                    "c-header", "--schema", str(schema_path),
                    str(gen / "abi" / "session-schema.h")], check=True)
    main = work / "store-main.c"
    main.write_text(STORE_MAIN)
    lib = os.path.join(build_dir, "lib")
    exe = work / "store-main"
    p = subprocess.run(
        ["gcc", "-std=gnu11", "-D_GNU_SOURCE", "-I" + str(gen),
         "-I" + SOURCE, str(main), os.path.join(SOURCE, "daemon", "store.c"),
         os.path.join(lib, "libcoprofd.a"), os.path.join(lib, "liboverlay.a"),
         os.path.join(lib, "libcoploader.a"),
         os.path.join(lib, "libcopstream.a"), os.path.join(lib, "libcoplog.a"),
         os.path.join(lib, "libcopsafe.a"), "-o", str(exe)] +
        sanitizer_flags(os.path.join(lib, "libcoprofd.a")) +
        pkg_flags("glib-2.0", "sqlite3", "libelf"),
        capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return exe


def reader(build_dir, schema_path, work, session_dir_h=None):
    """copreport's package with schema_path as its session-schema.sql (and
    session_dir_h, when given, as its session-dir.h)."""
    pkg = work / "python" / "coprof_report"
    shutil.copytree(os.path.join(build_dir, "lib", "coprof", "python",
                                 "coprof_report"), str(pkg))
    shutil.copy(str(schema_path), str(pkg / "session-schema.sql"))
    if session_dir_h:
        shutil.copy(str(session_dir_h), str(pkg / "session-dir.h"))
    return str(work / "python")


def read_session(python_dir, session):
    """What copreport's Session says of a session: "ok" or its error."""
    code = ("import sys\n"
            "from coprof_report.session import Session, SessionError\n"
            "try:\n"
            "    Session.open(sys.argv[1]).close()\n"
            "    print('ok')\n"
            "except SessionError as e:\n"
            "    print(e)\n")
    p = subprocess.run([PYTHON, "-c", code, str(session)],
                       env=dict(os.environ, PYTHONPATH=python_dir),
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


def changed_copy(tmp_path, name, old, new):
    """A copy of abi/NAME in tmp_path with the text old replaced by new."""
    text = open(os.path.join(SOURCE, "abi", name)).read()
    assert old in text
    path = tmp_path / name
    path.write_text(text.replace(old, new))
    return path


def changed_schema(tmp_path, change="kind"):
    """The schema with images.short_name an INTEGER of kind int? instead
    of TEXT of kind text? (change "kind"), or renamed nick ("rename")."""
    new = {"kind": "    short_name INTEGER,                 -- [int?]\n",
           "rename": "    nick TEXT,                          -- [text?]\n"}
    return changed_copy(tmp_path, "session-schema.sql",
                        "    short_name TEXT,                    -- [text?]\n",
                        new[change])


def column_type(db_path, table, column):
    db = sqlite3.connect(str(db_path))
    try:
        types = {row[1]: row[2] for row in
                 db.execute("PRAGMA table_info(%s)" % table)}
    finally:
        db.close()
    return types[column]


@pytest.mark.parametrize("change", [False, True])
def test_one_edit_changes_writer_and_reader(build_dir, tmp_path, change):
    """images.short_name is TEXT of kind text? in the schema: coprofd's
    store creates it TEXT and copreport reads a name there.  In a copy of
    the schema where it is an INTEGER of kind int?, the store built from
    the copy creates it INTEGER and copreport with the copy refuses the
    same name, as not an integer."""
    schema = changed_schema(tmp_path) if change else os.path.join(
        SOURCE, "abi", "session-schema.sql")
    store = build_store(build_dir, schema, tmp_path)
    python_dir = reader(build_dir, schema, tmp_path)

    session = tmp_path / "session"
    p = subprocess.run([str(store), str(session)], capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stderr
    assert column_type(session / "session.db", "images", "short_name") == (
        "INTEGER" if change else "TEXT")
    assert read_session(python_dir, session) == "ok"

    db = sqlite3.connect(str(session / "session.db"))
    db.execute("INSERT INTO images (id, image_offset, status, short_name) "
               "VALUES (1, 0, 'found', 'knob')")
    db.commit()
    db.close()
    message = read_session(python_dir, session)
    if change:
        assert message == "%s: images.short_name is 'knob', not an integer " \
            "or NULL" % (session / "session.db")
    else:
        assert message == "ok"


def test_a_renamed_column_is_caught(build_dir, tmp_path):
    """images.short_name renamed nick in a copy of the schema: the store
    built from the copy refuses to open, its INSERT naming the old column,
    and copreport with the copy refuses a session written with the old
    name, naming the new one."""
    renamed = changed_schema(tmp_path, "rename")
    work = tmp_path / "renamed"
    work.mkdir()
    store = build_store(build_dir, renamed, work)
    p = subprocess.run([str(store), str(tmp_path / "s1")],
                       capture_output=True, text=True)
    assert p.returncode == 1
    assert "cannot prepare a statement: table images has no column named " \
        "short_name" in p.stderr, p.stderr

    work = tmp_path / "original"
    work.mkdir()
    store = build_store(build_dir, os.path.join(SOURCE, "abi",
                                                "session-schema.sql"), work)
    session = tmp_path / "s2"
    p = subprocess.run([str(store), str(session)], capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stderr
    assert read_session(reader(build_dir, renamed, work), session) == \
        "%s: cannot read (no such column: nick)" % (session / "session.db")


NAMES = cheader.load("session-dir.h").defines
NAME_MACROS = ("SESSION_DB_NAME", "SESSION_CACHE_DIR", "SESSION_LOCK_NAME")


def c_strings(path):
    """The string literals of a C file, comments left out."""
    with open(path) as f:
        text = re.sub(r"/\*.*?\*/|//[^\n]*", " ", f.read(), flags=re.S)
    return re.findall(r'"((?:[^"\\\n]|\\.)*)"', text)


def test_session_file_names_come_from_abi():
    """session.db, images/ and .lock are spelled in abi/session-dir.h only:
    in no C source of daemon/, control/ or hostprof/ (their tests apart),
    nor in copreport's session.py and archive.py, which read the header."""
    names = {NAMES[m] for m in NAME_MACROS}
    found = []
    for folder in ("daemon", "control", "hostprof"):
        for name in sorted(os.listdir(os.path.join(SOURCE, folder))):
            path = os.path.join(SOURCE, folder, name)
            if name.endswith((".c", ".h")) and \
                    not name.startswith(("test-", "fuzz-")):
                found += ["%s/%s: %s" % (folder, name, s)
                          for s in c_strings(path) if s in names]
    for name in ("session.py", "archive.py"):
        path = os.path.join(SOURCE, "report", "coprof_report", name)
        with open(path) as f:
            tree = ast.parse(f.read())
        found += ["report/coprof_report/%s:%d: %s" % (name, n.lineno, n.value)
                  for n in ast.walk(tree) if isinstance(n, ast.Constant)
                  and n.value in names]
    assert not found, "\n".join(found)


def test_one_edit_renames_the_session_files(build_dir, tmp_path):
    """With a copy of abi/session-dir.h naming the files profile.sqlite,
    cache/ and .writer, the store built against it creates those, and
    copreport with the copy reads the session there (the one without it
    finds no session.db)."""
    header = tmp_path / "session-dir.h"
    text = open(os.path.join(SOURCE, "abi", "session-dir.h")).read()
    for macro, new in zip(NAME_MACROS, ("profile.sqlite", "cache",
                                        ".writer")):
        text, n = re.subn(r'(#define %s\s+)"[^"]*"' % macro,
                          r'\1"%s"' % new, text)
        assert n == 1, macro
    header.write_text(text)
    schema = os.path.join(SOURCE, "abi", "session-schema.sql")
    store = build_store(build_dir, schema, tmp_path, header)
    session = tmp_path / "session"
    p = subprocess.run([str(store), str(session)], capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stderr
    made = set(os.listdir(str(session)))
    assert {"profile.sqlite", "cache", ".writer"} <= made, made
    assert not made & {NAMES[m] for m in NAME_MACROS}, made
    assert read_session(reader(build_dir, schema, tmp_path, header),
                        session) == "ok"
    (tmp_path / "python").rename(tmp_path / "renamed")
    assert read_session(reader(build_dir, schema, tmp_path), session) == \
        "%s: not a coprof session (no session.db)" % session


# Where the C writers name the session keys they write: coprofd's
# store_put_meta_*(store, "KEY", ...) and a key built as "PREFIX." + a
# name (a family, PREFIX.*), coprof-host's write_key/write_number(w,
# "KEY", ...), and copcontrol's and coprof's key arrays ({"KEY", ...}).
# Each pattern's group is the text holding the key strings.
KEY_WRITES = (
    ("daemon", r'store_put_meta_(?:int|text)\(\s*[\w>.-]+,\s*("[^"]+")'),
    ("daemon", r'g_strconcat\(\s*("[\w.]+\.")'),
    ("hostprof", r'write_(?:key|number)\(\s*w,\s*("[^"]+")'),
    ("control", r'\bkeys?\[\]\s*=\s*\{([^}]*)\}'),
)


def c_written_keys():
    """{key: "folder/file"} of every session key the C writers name; a
    family as "PREFIX.*"."""
    keys = {}
    for folder, pattern in KEY_WRITES:
        for name in sorted(os.listdir(os.path.join(SOURCE, folder))):
            if not name.endswith(".c") or name.startswith(("test-",
                                                           "fuzz-")):
                continue
            with open(os.path.join(SOURCE, folder, name)) as f:
                text = f.read()
            for m in re.finditer(pattern, text):
                for key in re.findall(r'"([^"]+)"', m.group(1)):
                    key = key + "*" if key.endswith(".") else key
                    keys.setdefault(key, "%s/%s" % (folder, name))
    return keys


def test_written_keys_are_declared():
    """Every session key a C writer names is a -- @key of the schema."""
    schema = session_schema.load()
    keys = c_written_keys()
    # the search sees each writer: coprofd, coprof-host, copcontrol/coprof
    assert {"stream.samples", "flushes.*", "host.period", "driver",
            "host.end_state", "end_state"} <= set(keys), sorted(keys)
    undeclared = ["%s (%s)" % (key, where) for key, where in keys.items()
                  if key not in schema.keys]
    assert not undeclared, undeclared


def test_recorded_keys_are_declared(coprof_bin, tmp_path):
    """Every key of a session coprofd recorded (a short stream replayed)
    has a kind in the schema, flushes.end by its family."""
    w = coprofd_support.Writer()
    w.start(slots=2)
    w.sample(0, 0x100)
    w.stop()
    stream = tmp_path / "stream"
    stream.write_bytes(w.bytes())
    session = tmp_path / "session"
    p = subprocess.run([coprof_bin("coprofd"), "--replay", str(stream),
                        "--session-dir", str(session)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    db = sqlite3.connect(str(session / NAMES["SESSION_DB_NAME"]))
    try:
        keys = [k for (k,) in db.execute("SELECT key FROM session")]
    finally:
        db.close()
    schema = session_schema.load()
    assert "flushes.end" in keys and "stream.samples" in keys, keys
    assert [k for k in keys if schema.key_kind(k) is None] == []


@pytest.mark.parametrize("key,value,words", [
    ("stream.lfsr_value", "'x'", "stream.lfsr_value is 'x', not an "
                                 "integer >= 0"),
    ("flushes.timer", "-1", "flushes.timer is -1, not an integer >= 0"),
    ("host.period", "'0'", "host.period is '0', not an integer >= 1"),
])
def test_integer_keys_are_checked(build_dir, tmp_path, key, value, words):
    """copreport refuses an integer key of the schema (a family's too)
    holding another value, as its kind says."""
    schema = os.path.join(SOURCE, "abi", "session-schema.sql")
    store = build_store(build_dir, schema, tmp_path)
    session = tmp_path / "session"
    p = subprocess.run([str(store), str(session)], capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stderr
    db = sqlite3.connect(str(session / NAMES["SESSION_DB_NAME"]))
    db.execute("INSERT OR REPLACE INTO session (key, value) VALUES (?, %s)"
               % value, (key,))
    db.commit()
    db.close()
    assert read_session(reader(build_dir, schema, tmp_path), session) == \
        "%s: session key %s" % (session / "session.db", words)


def test_built_header_is_the_schema(build_dir):
    """The header the build's writers include is the schema's."""
    with open(os.path.join(build_dir, "gen", "abi",
                           "session-schema.h")) as f:
        built = f.read()
    assert built == session_schema.c_header(session_schema.load())


def test_reader_knows_every_kind():
    """copreport has a check for every kind the schema may give."""
    report = os.path.join(SOURCE, "report")
    sys.path.insert(0, report)
    try:
        from coprof_report import session
    finally:
        sys.path.remove(report)
    assert set(session.KINDS) == set(session_schema.KINDS)
    assert session.COLUMNS == session_schema.load().columns()
    assert session.INT_KEYS == session_schema.load().int_keys()


@pytest.mark.parametrize("line,words", [
    ("    path TEXT,                          -- [text?]\n",
     "images.path: [texts] is not a kind"),
    ("CREATE TABLE images (\n", "table images twice"),
])
def test_bad_schema_names_the_line(tmp_path, line, words):
    """A schema the reader cannot take is one error naming its line."""
    text = open(os.path.join(SOURCE, "abi", "session-schema.sql")).read()
    if "texts" in words:
        bad = text.replace(line, line.replace("[text?]", "[texts]"))
        number = text[:text.index(line)].count("\n") + 1
    else:
        bad = text.replace("CREATE TABLE regions (\n", line)
        number = text[:text.index("CREATE TABLE regions")].count("\n") + 1
    path = tmp_path / "bad.sql"
    path.write_text(bad)
    with pytest.raises(session_schema.SchemaError) as e:
        session_schema.load(str(path))
    assert str(e.value).startswith("%s:%d: " % (path, number))
    assert words in str(e.value)
