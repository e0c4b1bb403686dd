"""The session schema (abi/session-schema.sql), read.

The one description of session.db's tables: the C writers are built from
it and copreport reads it at run time, so a schema change is one edit of
session-schema.sql.

As a module (copreport's coprof_report.session_schema is this file, beside
a copy of the .sql):

    schema = session_schema.load()
    schema.script("coprofd")     # the CREATE statements coprofd runs
    schema.columns()             # {table: ((column, kind), ...)}: checked
    schema.references()          # ((table, column, target table), ...)
    schema.optional_tables()     # tables a session may lack
    schema.keys                  # {session key: kind}, "NAME.*" a family
    schema.int_keys()            # {integer key: its least value or None}
    schema.application_id, schema.format_version

As a program, at build time, it writes the C header the writers include:

    session_schema.py c-header [--schema FILE] OUT.h

with SESSION_APPLICATION_ID, SESSION_FORMAT_VERSION and, per writer, its
CREATE statements as one string: SESSION_SCHEMA_COPROFD (daemon/store.c),
SESSION_SCHEMA_COPROF_HOST (hostprof/store.c).

A line the reader does not understand is an error naming the file and the
line (SchemaError), never a table silently left out.
"""

import argparse
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT = os.path.join(HERE, "session-schema.sql")

# What a column of each kind holds (docs/session-format.md); a reader
# refuses a session holding anything else there.
KINDS = {
    "count": "a count (>= 0)",
    "id": "a row id (>= 1)",
    "id?": "a row id (>= 1) or NULL",
    "uint": "an integer >= 0",
    "uint?": "an integer >= 0 or NULL",
    "int": "an integer",
    "int?": "an integer or NULL",
    "text": "text",
    "text?": "text or NULL",
}

# The kinds of the session table's keys (-- @key NAME KIND): what the
# value is, and for an integer its least valid value (None: any).  An
# integer may be stored as an integer or as its decimal text.
KEY_KINDS = {
    "int": ("an integer", None),
    "uint": ("an integer >= 0", 0),
    "count": ("a count (>= 0)", 0),
    "positive": ("an integer >= 1", 1),
    "text": ("text", None),
}

_CONSTRAINTS = ("PRIMARY", "UNIQUE", "FOREIGN", "CHECK", "CONSTRAINT")


class SchemaError(Exception):
    """A schema file that cannot be read; str() is "FILE:LINE: reason"."""


class Column:
    def __init__(self, name, definition, kind, target):
        self.name = name
        self.definition = definition        # "image INTEGER NOT NULL"
        self.kind = kind                    # a key of KINDS, or None
        self.target = target                # the table it names, or None


class Table:
    def __init__(self, name, writer, optional):
        self.name = name
        self.writer = writer
        self.optional = optional
        self.columns = []


class Schema:
    """The parsed file: tables (in order), statements per writer."""

    def __init__(self, path):
        self.path = path
        self.application_id = None
        self.format_version = None
        self.tables = []
        self.statements = {}        # writer -> [SQL statement]
        self.keys = {}              # session key -> a kind of KEY_KINDS
        self._parse()

    # ---- reading ---------------------------------------------------------

    def _fail(self, line, reason):
        raise SchemaError("%s:%d: %s" % (self.path, line, reason))

    def _parse(self):
        try:
            with open(self.path) as f:
                lines = f.read().splitlines()
        except OSError as e:
            raise SchemaError("%s: %s" % (self.path, e.strerror))
        writer, statement, table, start = None, [], None, 0
        for n, raw in enumerate(lines, 1):
            code, _, comment = raw.partition("--")
            code, comment = code.strip(), comment.strip()
            if not code:
                writer = self._directive(n, comment, writer, statement)
                continue
            if writer is None:
                self._fail(n, "a statement before any -- @writer")
            if not statement:
                start = n
                table = self._begin(n, code, comment, writer)
            elif table is not None and not code.startswith(")"):
                self._column(n, table, code, comment)
            statement.append(code)
            if code.endswith(";"):
                self.statements[writer].append(self._joined(statement))
                statement, table = [], None
        if statement:
            self._fail(start, "statement without its ending ;")
        if self.application_id is None or self.format_version is None:
            self._fail(1, "no -- @application_id or -- @format_version")
        for t in self.tables:
            for c in t.columns:
                if c.target and c.target not in self.table_names():
                    self._fail(1, "%s.%s names table %s, which is not here"
                               % (t.name, c.name, c.target))

    def _directive(self, n, comment, writer, statement):
        """A comment line: @writer, @application_id, @format_version or
        prose.  Returns the writer from here on."""
        if statement and comment.startswith("@"):
            self._fail(n, "%s inside a statement" % comment.split()[0])
        m = re.match(r"@key\s+(\S+)\s+(\S+)\s*$", comment)
        if m:
            self._key(n, *m.groups())
            return writer
        m = re.match(r"@(\w+)\s+(\S+)\s*$", comment)
        if not m:
            return writer
        word, value = m.groups()
        if word == "writer":
            self.statements.setdefault(value, [])
            return value
        if word in ("application_id", "format_version"):
            try:
                setattr(self, word, int(value, 0))
            except ValueError:
                self._fail(n, "@%s %s is not a number" % (word, value))
            return writer
        self._fail(n, "unknown directive @%s" % word)

    def _key(self, n, name, kind):
        """-- @key NAME KIND: a key of the session table (NAME.* for a
        family of keys, as flushes.*)."""
        if not re.fullmatch(r"\w+(?:\.\w+)*(?:\.\*)?", name):
            self._fail(n, "@key %s is not a key name" % name)
        if kind not in KEY_KINDS:
            self._fail(n, "@key %s: %s is not a kind (%s)"
                       % (name, kind, ", ".join(KEY_KINDS)))
        if name in self.keys:
            self._fail(n, "@key %s twice" % name)
        self.keys[name] = kind

    def _begin(self, n, code, comment, writer):
        """The first line of a statement: a Table for CREATE TABLE."""
        m = re.match(r"CREATE TABLE (?:IF NOT EXISTS )?(\w+) \($", code)
        if not m:
            if not code.startswith(("CREATE INDEX", "CREATE VIEW")):
                self._fail(n, "expected CREATE TABLE, INDEX or VIEW")
            return None
        marks = re.findall(r"\[([^]]*)\]", comment)
        if marks not in ([], ["optional"]):
            self._fail(n, "a table's annotation is [optional], not %s"
                       % marks)
        if m.group(1) in self.table_names():
            self._fail(n, "table %s twice" % m.group(1))
        table = Table(m.group(1), writer, bool(marks))
        self.tables.append(table)
        return table

    def _column(self, n, table, code, comment):
        definition = code.rstrip(",").strip()
        name = definition.split()[0]
        mark = re.match(r"\[([^]]*)\]", comment)
        if name.upper() in _CONSTRAINTS:
            if mark:
                self._fail(n, "a constraint has no kind")
            return
        kind = target = None
        if mark:
            m = re.fullmatch(r"(\S+)(?:\s*->\s*(\w+))?", mark.group(1).strip())
            if not m or m.group(1) not in KINDS:
                self._fail(n, "%s.%s: [%s] is not a kind (%s)"
                           % (table.name, name, mark.group(1),
                              ", ".join(KINDS)))
            kind, target = m.groups()
        if any(c.name == name for c in table.columns):
            self._fail(n, "column %s.%s twice" % (table.name, name))
        table.columns.append(Column(name, definition, kind, target))

    @staticmethod
    def _joined(lines):
        """A statement's lines as one line of SQL."""
        text = " ".join(lines)
        text = re.sub(r"\(\s+", "(", text)
        text = re.sub(r"\s+\)", ")", text)
        return re.sub(r"\s+", " ", text)

    # ---- what readers use ------------------------------------------------

    def table_names(self):
        return [t.name for t in self.tables]

    def writers(self):
        return list(self.statements)

    def script(self, writer):
        """The CREATE statements of one writer, one a line."""
        if writer not in self.statements:
            raise SchemaError("%s: no writer %s" % (self.path, writer))
        return "".join(s + "\n" for s in self.statements[writer])

    def columns(self):
        """{table: ((column, kind), ...)} of every column with a kind, in
        the file's order."""
        return {t.name: tuple((c.name, c.kind) for c in t.columns if c.kind)
                for t in self.tables if any(c.kind for c in t.columns)}

    def references(self):
        """((table, column, target), ...): columns naming a row by id."""
        return tuple((t.name, c.name, c.target) for t in self.tables
                     for c in t.columns if c.target)

    def optional_tables(self):
        return tuple(t.name for t in self.tables if t.optional)

    def key_kind(self, key):
        """The kind of a session key: declared by its name, or by its
        family (NAME.*); None for a key the schema does not declare."""
        if key in self.keys:
            return self.keys[key]
        family = key.rpartition(".")[0] + ".*"
        return self.keys.get(family) if family != ".*" else None

    def int_keys(self):
        """{key: least valid value, None for any integer} of the integer
        keys, in the file's order ("NAME.*" for a family)."""
        return {key: KEY_KINDS[kind][1] for key, kind in self.keys.items()
                if kind != "text"}


def load(path=None):
    """The schema of path (default: session-schema.sql beside this file)."""
    return Schema(path or DEFAULT)


# ---- The C header ---------------------------------------------------------

def _c_string(sql_line):
    return '"%s\\n"' % sql_line.replace("\\", "\\\\").replace('"', '\\"')


def c_header(schema):
    """The text of session-schema.h for a schema."""
    out = ["/*",
           " * session-schema.h - generated from abi/session-schema.sql by",
           " * abi/session_schema.py at build time: edit the .sql, not this.",
           " */",
           "#ifndef COPROF_ABI_SESSION_SCHEMA_H",
           "#define COPROF_ABI_SESSION_SCHEMA_H",
           "",
           "#define SESSION_APPLICATION_ID 0x%08x" % schema.application_id,
           "#define SESSION_FORMAT_VERSION %d" % schema.format_version]
    for writer in schema.writers():
        macro = "SESSION_SCHEMA_" + re.sub(r"\W", "_", writer).upper()
        out += ["", "/* The tables %s creates. */" % writer,
                "#define %s \\" % macro]
        lines = schema.statements[writer]
        out += ["    %s%s" % (_c_string(s), " \\" if i + 1 < len(lines)
                                else "") for i, s in enumerate(lines)]
    out += ["", "#endif /* COPROF_ABI_SESSION_SCHEMA_H */", ""]
    return "\n".join(out)


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="session_schema.py",
        description="Write the C header of the session schema "
                    "(abi/session-schema.sql) for its writers.")
    parser.add_argument("what", choices=["c-header"],
                        help="what to write: c-header")
    parser.add_argument("out", help="the file to write")
    parser.add_argument("--schema", default=DEFAULT,
                        help="the schema file (default: %(default)s)")
    args = parser.parse_args(argv)
    try:
        text = c_header(load(args.schema))
    except SchemaError as e:
        print("session_schema.py: %s" % e, file=sys.stderr)
        return 1
    tmp = args.out + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
