"""The C headers of abi/ read from Python, at run time.

Python tests and tools that speak a contract of abi/ (copsim's socket
messages, the driver's control messages, the slot stub's layout, the
trace unit's register file) read it from the header that the C programs
compile, never from a copy:

    proto = cheader.load("copdrv-control.h")
    Reply = proto.struct("copdrv_control_reply")    # a ctypes.Structure
    proto.defines["COPDRV_CONTROL_GET"]             # 0x101

A header is read with the abi/ headers it includes ("abi/NAME.h"), as a
user-space C compiler sees it: #ifdef NAME and #ifndef NAME take the
branch of the names defined so far, and __KERNEL__ is never defined, so
the kernel's branch of trace-regs.h (its accessors) is skipped; #if with
an expression is an error.  What is read is what abi/'s headers are made
of, and anything else is an error naming the header and the line:

- object-like #defines whose value is a number (C suffixes u, l, ull), a
  string or an expression of numbers and earlier names (+ - * / << >> |
  & ~ and parentheses), continued over lines with a backslash;
- structures of fixed-width integers (uint8_t ... int64_t, the kernel's
  u8 ... s64), char, other structures of the same headers, and arrays of
  them whose length is a number or a #define; a last member with no
  length (a flexible array, as trace_regs_slot's fifo[]) has length 0.

Structures are laid out by ctypes as the C compiler lays them out on the
machine (natural alignment), which the C side's fixed-width fields make
the same on every ABI coprof runs on.

Skipped, because they are neither a layout nor an integer: function-like
macros (#define NAME(args) ...: the accessors, TRACE_STACK_FRAME()),
pointer constants (a value that is NULL-like: an identifier that is no
#define, as NULL, or a cast to a pointer, as ((void *)0)) and an alias of
a C keyword (#define static_assert _Static_assert, an identifier too);
static inline functions and enums are not read.  A skipped name is not in
.defines, so using it in a value or an array length is an error naming
the line.
"""

import ctypes
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))

_TYPES = {
    "uint8_t": ctypes.c_uint8, "uint16_t": ctypes.c_uint16,
    "uint32_t": ctypes.c_uint32, "uint64_t": ctypes.c_uint64,
    "int8_t": ctypes.c_int8, "int16_t": ctypes.c_int16,
    "int32_t": ctypes.c_int32, "int64_t": ctypes.c_int64,
    "u8": ctypes.c_uint8, "u16": ctypes.c_uint16,
    "u32": ctypes.c_uint32, "u64": ctypes.c_uint64,
    "s8": ctypes.c_int8, "s16": ctypes.c_int16,
    "s32": ctypes.c_int32, "s64": ctypes.c_int64,
    "char": ctypes.c_char,
}


class HeaderError(Exception):
    """A header this module cannot read; str() is "FILE: reason"."""


def _strip_comments(text):
    """The text with its comments blanked, line breaks kept (so that line
    numbers stay right)."""
    def blank(m):
        return re.sub(r"[^\n]", " ", m.group(0))
    return re.sub(r"/\*.*?\*/|//[^\n]*", blank, text, flags=re.S)


def _number(token):
    """A C integer literal without its suffix, as Python source."""
    m = re.fullmatch(r"(0[xX][0-9a-fA-F]+|\d+)[uUlL]*", token)
    return str(int(m.group(1), 0)) if m else None


class Header:
    """One abi/ header with those it includes: .defines (name -> int or
    str), .path, and struct(name) -> a ctypes.Structure subclass."""

    def __init__(self, path):
        self.path = path
        self.defines = {}
        self._macros = set()        # every name #defined, read or skipped
        self._bodies = {}           # struct name -> (body, path, line)
        self._structs = {}
        self._read(path, set())

    def _fail(self, path, line, reason):
        raise HeaderError("%s:%d: %s" % (path, line, reason))

    def _read(self, path, seen):
        if path in seen:
            return
        seen.add(path)
        try:
            with open(path) as f:
                lines = _strip_comments(f.read()).splitlines()
        except OSError as e:
            raise HeaderError("%s: %s" % (path, e.strerror))
        kept = []           # the lines a compiler sees, directives blanked
        branches = []       # [taken, line] of each open #ifdef / #ifndef
        i = 0
        while i < len(lines):
            n, line = i + 1, lines[i]
            if not re.match(r"\s*#", line):
                kept.append(line if all(b[0] for b in branches) else "")
                i += 1
                continue
            while line.endswith("\\") and i + 1 < len(lines):
                i += 1
                kept.append("")
                line = line[:-1] + " " + lines[i]
            kept.append("")
            i += 1
            self._directive(path, n, line.strip(), branches, seen)
        if branches:
            self._fail(path, branches[-1][1], "#ifdef without #endif")
        text = "\n".join(kept)
        for m in re.finditer(r"\bstruct\s+(\w+)\s*\{(.*?)\}\s*;", text, re.S):
            line = text.count("\n", 0, m.start()) + 1
            self._bodies[m.group(1)] = (m.group(2), path, line)

    def _directive(self, path, n, line, branches, seen):
        """One preprocessor line: a conditional moves branches, and in a
        branch taken an include is read and a #define recorded."""
        m = re.match(r"#\s*(ifdef|ifndef)\s+(\w+)\s*$", line)
        if m:
            defined = m.group(2) in self._macros
            branches.append([defined == (m.group(1) == "ifdef"), n])
            return
        if re.match(r"#\s*(if|elif)\b", line):
            self._fail(path, n, "cannot read %s (only #ifdef and #ifndef)"
                       % line)
        m = re.match(r"#\s*(else|endif)\b", line)
        if m:
            if not branches:
                self._fail(path, n, "#%s without #ifdef" % m.group(1))
            if m.group(1) == "else":
                branches[-1][0] = not branches[-1][0]
            else:
                branches.pop()
            return
        if not all(b[0] for b in branches):
            return
        m = re.match(r'#\s*include\s+"abi/([\w.-]+)"', line)
        if m:
            self._read(os.path.join(os.path.dirname(path), m.group(1)), seen)
            return
        m = re.match(r"#\s*undef\s+(\w+)", line)
        if m:
            self._macros.discard(m.group(1))
            self.defines.pop(m.group(1), None)
            return
        m = re.match(r"#\s*define\s+(\w+)(\(?)(.*)$", line)
        if not m:
            return
        name, function_like, value = m.group(1), m.group(2), m.group(3).strip()
        self._macros.add(name)
        if function_like or not value or self._not_a_value(value):
            return
        self.defines[name] = self._value(path, n, value)

    def _not_a_value(self, text):
        """Whether a #define's value is a pointer or an alias of a C name
        (NULL, ((void *)0), _Static_assert): no layout or integer."""
        if re.fullmatch(r"[A-Za-z_]\w*", text):
            return text not in self.defines
        return re.search(r"\(\s*(?:const\s+)?\w+\s*\*+\s*\)", text) is not None

    def _value(self, path, line, text):
        """A #define's value: a string, or an integer expression."""
        if re.fullmatch(r'"[^"\\]*"', text):
            return text[1:-1]
        out = []
        for token in re.findall(r"\w+|<<|>>|\S", text):
            if re.fullmatch(r"\d\w*", token):
                number = _number(token)
                if number is None:
                    self._fail(path, line, "%s is not an integer" % token)
                out.append(number)
            elif re.fullmatch(r"[A-Za-z_]\w*", token):
                value = self.defines.get(token)
                if not isinstance(value, int):
                    self._fail(path, line, "%s is not an integer #define"
                               % token)
                out.append(str(value))
            elif token in ("<<", ">>", "(", ")", "+", "-", "*", "/", "|",
                           "&", "~"):
                out.append("//" if token == "/" else token)
            else:
                self._fail(path, line, "cannot read #define value %s" % text)
        return eval(" ".join(out), {"__builtins__": {}})

    def struct_names(self):
        """The structures of the header and of those it includes."""
        return list(self._bodies)

    def struct(self, name):
        """struct NAME as a ctypes.Structure subclass of the same name."""
        if name not in self._structs:
            if name not in self._bodies:
                raise HeaderError("%s: no struct %s" % (self.path, name))
            body, path, line = self._bodies[name]
            decls = [d.strip() for d in body.split(";") if d.strip()]
            fields = [self._field(path, line, decl, i + 1 == len(decls))
                      for i, decl in enumerate(decls)]
            self._structs[name] = type(name, (ctypes.Structure,),
                                       {"_fields_": fields})
        return self._structs[name]

    def _field(self, path, line, decl, last):
        """One member declaration as a ctypes (name, type) pair; the last
        may be a flexible array (no length), which takes no room."""
        m = re.fullmatch(r"(struct\s+\w+|\w+)\s+(\w+)\s*(?:\[\s*(\w*)\s*\])?",
                         " ".join(decl.split()))
        if not m:
            self._fail(path, line, "cannot read member '%s'" % decl)
        type_name, name, length = m.groups()
        if type_name.startswith("struct "):
            ctype = self.struct(type_name.split()[1])
        elif type_name in _TYPES:
            ctype = _TYPES[type_name]
        else:
            self._fail(path, line, "member %s: type %s is not fixed-width"
                       % (name, type_name))
        if length == "":
            if not last:
                self._fail(path, line, "member %s: an array without a "
                           "length that is not the last member" % name)
            ctype = ctype * 0
        elif length is not None:
            count = _number(length)
            count = int(count) if count else self.defines.get(length)
            if not isinstance(count, int):
                self._fail(path, line, "member %s: length %s is not known"
                           % (name, length))
            ctype = ctype * count
        return name, ctype


def load(name, directory=HERE):
    """The header abi/NAME (e.g. "copsim-protocol.h")."""
    return Header(os.path.join(directory, name))
