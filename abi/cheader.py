"""The C headers of abi/ read from Python, at run time.

Python tests and tools that speak a contract of abi/ (copsim's socket
messages, the driver's control messages, the slot stub's layout) read it
from the header that the C programs compile, never from a copy:

    proto = cheader.load("copdrv-control.h")
    Reply = proto.struct("copdrv_control_reply")    # a ctypes.Structure
    proto.defines["COPDRV_CONTROL_GET"]             # 0x101

A header is read with the abi/ headers it includes ("abi/NAME.h").  Only
what abi/'s headers are made of is understood, and anything else is an
error naming the header and the line: object-like #defines whose value is
a number (C suffixes u, l, ull), a string or an expression of numbers and
earlier names (+ - * / << >> | & ~ and parentheses); and structures of
fixed-width integers (uint8_t ... int64_t, the kernel's u8 ... s64), char,
other structures of the same headers, and arrays of them whose length is a
number or a #define.  Structures are laid out by ctypes as the C compiler
lays them out on the machine (natural alignment), which the C side's
fixed-width fields make the same on every ABI coprof runs on.
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
        self._bodies = {}           # struct name -> (body, line)
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
                text = _strip_comments(f.read())
        except OSError as e:
            raise HeaderError("%s: %s" % (path, e.strerror))
        for n, line in enumerate(text.splitlines(), 1):
            m = re.match(r'\s*#\s*include\s+"abi/([\w.-]+)"', line)
            if m:
                self._read(os.path.join(os.path.dirname(path), m.group(1)),
                           seen)
                continue
            m = re.match(r"\s*#\s*define\s+(\w+)\s+(.+?)\s*$", line)
            if m:
                self.defines[m.group(1)] = self._value(path, n, m.group(2))
        for m in re.finditer(r"\bstruct\s+(\w+)\s*\{(.*?)\}\s*;", text, re.S):
            line = text.count("\n", 0, m.start()) + 1
            self._bodies[m.group(1)] = (m.group(2), path, line)

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
            fields = [self._field(path, line, decl.strip())
                      for decl in body.split(";") if decl.strip()]
            self._structs[name] = type(name, (ctypes.Structure,),
                                       {"_fields_": fields})
        return self._structs[name]

    def _field(self, path, line, decl):
        """One member declaration as a ctypes (name, type) pair."""
        m = re.fullmatch(r"(struct\s+\w+|\w+)\s+(\w+)\s*(?:\[\s*(\w+)\s*\])?",
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
        if length is not None:
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
