"""One session schema (abi/session-schema.sql): the C writers' tables and
copreport's checks both come from it, so one edit changes both.

The main test builds both sides from a changed copy of the schema: coprofd's
store (daemon/store.c, compiled here against the header generated from the
copy) creates a session, and copreport's package, with the copy beside it,
reads it.  A column renamed and given another kind in the copy is then in
the C writer's table under its new name, and the reader checks it under its
new name and kind.
"""

import os
import shutil
import sqlite3
import subprocess
import sys

import pytest

SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(SOURCE, "abi"))

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


def build_store(build_dir, schema_path, work):
    """A program that creates a session with daemon/store.c built against
    the C header generated from schema_path."""
    gen = work / "gen"
    (gen / "abi").mkdir(parents=True)
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


def reader(build_dir, schema_path, work):
    """copreport's package with schema_path as its session-schema.sql."""
    pkg = work / "python" / "coprof_report"
    shutil.copytree(os.path.join(build_dir, "lib", "coprof", "python",
                                 "coprof_report"), str(pkg))
    shutil.copy(str(schema_path), str(pkg / "session-schema.sql"))
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


def changed_schema(tmp_path):
    """The schema with images.short_name an INTEGER of kind int? instead
    of TEXT of kind text?."""
    text = open(os.path.join(SOURCE, "abi", "session-schema.sql")).read()
    old = "    short_name TEXT,                    -- [text?]\n"
    assert old in text
    path = tmp_path / "session-schema.sql"
    path.write_text(text.replace(
        old, "    short_name INTEGER,                 -- [int?]\n"))
    return path


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
