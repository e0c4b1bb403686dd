"""coprof_stream -- the escape-coded sample stream of coprof, in Python.

The kernel driver writes a stream of 64-bit little-endian words: a word
that is not ESCAPE (all ones) is a sample, slot << 32 | local-store
address; ESCAPE starts a record, a header word (marker, check, length,
code) and `length` payload words.  escape-protocol/README.md is the
specification; this module is the Python twin of the C library there, for
tests and tools, standard library only.

Decoding is incremental and never trusts its input: Decoder.feed() takes
bytes in any split and returns the events they complete; Decoder.finish()
reports a truncated tail and a missing STOP.  The events, printed with
str(), are the lines `copstream dump` prints, byte for byte.

    >>> import coprof_stream as cs
    >>> data = cs.encode_record("stop", time_ns=1, samples=0, lost=0)
    >>> events, stats = cs.decode(data)
    >>> [str(e) for e in events]
    ['0 error no-start', '0 stop time_ns=1 samples=0 lost=0']

Encoding: encode_record(name_or_code, **fields), encode_sample(slot,
address), encode_raw(code, words).  image_hash(path) is the content hash
that IMAGE and CONTEXT records carry.
"""

import collections
import hashlib
import struct

__all__ = [
    "ESCAPE", "MARKER", "MAX_PAYLOAD", "MAX_SLOTS", "VERSION", "CODES",
    "CODE_NAMES", "CAUSES", "ERRORS", "Sample", "Record", "Error", "Resync",
    "Stats", "Decoder", "decode", "dump_lines", "check", "encode_record",
    "encode_raw", "encode_sample", "sample_word", "image_hash",
    "OVERLAY_PLACED",
]

# ---- Framing: fixed for every version -------------------------------------

ESCAPE = 0xFFFFFFFFFFFFFFFF
ESCAPE_BYTES = b"\xff" * 8
MARKER = 0xE5C0
MAX_PAYLOAD = 1024
WORD = 8
HEAD = 2 * WORD
MAX_SLOTS = 256
ADDRESS_ALIGN = 4
MASK64 = (1 << 64) - 1
CHECK_MULTIPLIER = 0x9E3779B97F4A7C15

# ---- Version 1.6 -------------------------------------------------------------

VERSION_MAJOR = 1
VERSION_MINOR = 6
VERSION = VERSION_MAJOR << 16 | VERSION_MINOR

CODES = {"start": 1, "context": 2, "overlay": 3, "lost": 4, "time": 5,
         "stop": 6, "image": 7, "release": 8, "stall": 9, "end": 10,
         "callstack": 11, "reasons": 12, "transfer": 13}
CODE_NAMES = {code: name for name, code in CODES.items()}
(START, CONTEXT, OVERLAY, LOST, TIME, STOP, IMAGE, RELEASE, STALL,
 END, CALLSTACK, REASONS, TRANSFER) = range(1, 14)

# REASONS (1.6): the stall reasons (4 bits each, 16 a word, the unused bits
# of the last word zero) of the slot's next sample words, 1 to MAX_REASONS.
# TRANSFER (1.6): with TRANSFER_KNOWN, the DMA transfer (tag below
# DMA_TAGS, issuer's address) the slot's DMA-wait samples wait on.
REASONS_PER_WORD = 16
MAX_REASONS = (MAX_PAYLOAD - 2) * REASONS_PER_WORD
TRANSFER_KNOWN = 0x1
DMA_TAGS = 32
STALL_ISSUE, STALL_DMA_WAIT = 0, 3

# CALLSTACK (1.4): at most this many frames, each (address, overlay).
MAX_FRAMES = 64

# START's fifo_full (1.2).
FIFO_DROP, FIFO_STALL = 0, 1

CAUSES = {1: "fifo-overflow", 2: "buffer-full", 3: "no-context",
          4: "outside-ls"}

# Error kinds, numbered as in copstream.h (index = kind).
ERRORS = (None, "bad-sample", "bad-header", "bad-check", "short-record",
          "bad-field", "bad-version", "start-conflict", "no-start", "orphan",
          "after-stop", "count-mismatch", "truncated", "no-stop")
(BAD_SAMPLE, BAD_HEADER, BAD_CHECK, SHORT_RECORD, BAD_FIELD, BAD_VERSION,
 START_CONFLICT, NO_START, ORPHAN, AFTER_STOP, COUNT_MISMATCH, TRUNCATED,
 NO_STOP) = range(1, 14)

# Each record's payload words in order: (name, width in bits, text style).
# Styles: dec, hex, hex6, hex16, version, cause, path (IMAGE's path_length,
# written as path=BYTES), frames (CALLSTACK's frame count, written as
# frames=0xADDRESS[@OVERLAY],...; its value is a list of (address, overlay)),
# stalls (REASONS' count, written as stalls=HEXDIGITS, one a sample; its
# value is a tuple of the stalls, 0 to 15).
LAYOUTS = {
    START: (("version", 32, "version"), ("slots", 32, "dec"),
            ("lfsr_value", 32, "hex6"), ("lfsr_count", 32, "dec"),
            ("clock_hz", 64, "dec"), ("fifo_depth", 32, "dec"),
            ("ls_size", 64, "dec"), ("poll_interval_ns", 64, "dec"),
            ("start_time_ns", 64, "dec"), ("fifo_full", 32, "dec"),
            ("dither", 32, "dec"), ("dither_seed", 64, "dec"),
            ("watermark", 32, "dec"), ("event", 32, "dec")),
    CONTEXT: (("slot", 32, "dec"), ("pid", 32, "dec"), ("tid", 32, "dec"),
              ("context_id", 64, "dec"), ("object_id", 64, "hex"),
              ("device", 64, "dec"), ("inode", 64, "dec"),
              ("size", 64, "dec"), ("hash", 64, "hex16"),
              ("image_offset", 64, "dec"), ("cycle", 64, "dec")),
    OVERLAY: (("slot", 32, "dec"), ("region", 32, "dec"),
              ("guard", 32, "dec"), ("cycle", 64, "dec"),
              ("placed", 32, "dec")),
    LOST: (("slot", 32, "dec"), ("cause", 32, "cause"), ("count", 64, "dec"),
           ("cycle", 64, "dec")),
    TIME: (("slot", 32, "dec"), ("cycle", 64, "dec"), ("time_ns", 64, "dec")),
    STOP: (("time_ns", 64, "dec"), ("samples", 64, "dec"),
           ("lost", 64, "dec")),
    IMAGE: (("device", 64, "dec"), ("inode", 64, "dec"), ("size", 64, "dec"),
            ("hash", 64, "hex16"), ("path", 32, "path")),
    RELEASE: (("slot", 32, "dec"), ("cycle", 64, "dec")),
    STALL: (("slot", 32, "dec"), ("count", 64, "dec"), ("ns", 64, "dec"),
            ("cycle", 64, "dec")),
    END: (("slot", 32, "dec"), ("context_id", 64, "dec"),
          ("cycle", 64, "dec")),
    CALLSTACK: (("slot", 32, "dec"), ("depth", 32, "dec"),
                ("frames", 32, "frames")),
    REASONS: (("slot", 32, "dec"), ("stalls", 32, "stalls")),
    TRANSFER: (("slot", 32, "dec"), ("known", 32, "dec"), ("tag", 32, "dec"),
               ("issuer", 32, "hex")),
}
MAX_PATH = WORD * (MAX_PAYLOAD - len(LAYOUTS[IMAGE]))

# Fields a sound record must have, where a later minor version appended
# some (the 1.0 form); the others are absent from a decoded record's fields
# when its writer did not send them.  OVERLAY's placed (1.1) is the flags
# word: bit 0, OVERLAY_PLACED, says the change sits exactly at this point of
# the slot's sample sequence.  START's sampling words (1.2: fifo_full,
# dither, dither_seed, watermark) are absent from a 1.1 START, its event
# (1.5: EVENT_CYCLES or EVENT_INSTRUCTIONS) from a 1.4 one.
MIN_WORDS = {OVERLAY: 4, START: 9}
OVERLAY_PLACED = 0x1
EVENT_CYCLES, EVENT_INSTRUCTIONS = 0, 1


def min_words(code):
    return MIN_WORDS.get(code, len(LAYOUTS[code]))


# ---- Words and the check ---------------------------------------------------

def header_word(code, length, check_value):
    return MARKER << 48 | check_value << 32 | length << 16 | code


def header_valid(header):
    return header >> 48 == MARKER and (header >> 16) & 0xFFFF <= MAX_PAYLOAD


def check(code, length, payload):
    """The 16-bit record check over code, length and the payload bytes."""
    h = code | length << 16
    for (word,) in struct.iter_unpack("<Q", payload[:WORD * length]):
        h = ((h ^ word) * CHECK_MULTIPLIER) & MASK64
    h ^= h >> 32
    h ^= h >> 16
    return h & 0xFFFF


def path_words(length):
    return (length + WORD - 1) // WORD


def reasons_words(count):
    """Payload words the stalls of `count` reasons take."""
    return (count + REASONS_PER_WORD - 1) // REASONS_PER_WORD


def stall_words(stalls):
    """The words of REASONS' stalls: stall i in bits 4 * (i % 16) of word
    i // 16, the unused bits zero."""
    words = [0] * reasons_words(len(stalls))
    for i, stall in enumerate(stalls):
        words[i // REASONS_PER_WORD] |= stall << 4 * (i % REASONS_PER_WORD)
    return words


def image_hash(path):
    """The content hash of a file: its SHA-256's first 8 bytes, LE."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return int.from_bytes(digest.digest()[:8], "little")


# ---- Field checks, shared by the encoder and the decoder -------------------

def fields_error(code, fields, slot_limit):
    """None when the fields of a known record are sound, else the kind."""
    if code == START:
        if fields["version"] >> 16 != VERSION_MAJOR:
            return BAD_VERSION
        value, count = fields["lfsr_value"], fields["lfsr_count"]
        ls_size = fields["ls_size"]
        if (not 1 <= fields["slots"] <= MAX_SLOTS or value > 0xFFFFFF or
                count > 0xFFFFFF or (value == 0) != (count == 0) or
                fields["clock_hz"] < 1 or fields["fifo_depth"] < 1 or
                not ADDRESS_ALIGN <= ls_size <= 1 << 32 or
                ls_size % ADDRESS_ALIGN):
            return BAD_FIELD
        return None
    if code == IMAGE:
        path = fields["path"]
        if not 1 <= len(path) <= MAX_PATH or 0 in path:
            return BAD_FIELD
        return None
    if code == CALLSTACK:
        frames = fields["frames"]
        if (len(frames) > MAX_FRAMES or len(frames) > fields["depth"] or
                any(not 0 <= a < 1 << 32 or a % ADDRESS_ALIGN or
                    not 0 <= o <= 0xFFFF for a, o in frames)):
            return BAD_FIELD
    if code == REASONS and not reasons_sound(fields["stalls"]):
        return BAD_FIELD
    if code == TRANSFER and not transfer_sound(fields):
        return BAD_FIELD
    if code in (LOST, STALL) and fields["count"] == 0:
        return BAD_FIELD
    if "slot" in fields and fields["slot"] >= slot_limit:
        return BAD_FIELD
    return None


def reasons_sound(stalls):
    """Whether REASONS' stalls are 1 to MAX_REASONS values of 4 bits."""
    return (1 <= len(stalls) <= MAX_REASONS and
            all(0 <= stall <= 0xF for stall in stalls))


def transfer_sound(fields):
    """Whether a TRANSFER's tag and issuer agree with its flags word."""
    flags, tag, issuer = fields["known"], fields["tag"], fields["issuer"]
    if flags & ~TRANSFER_KNOWN:
        return False
    if flags:
        return tag < DMA_TAGS and issuer % ADDRESS_ALIGN == 0
    return tag == 0 and issuer == 0


# ---- Encoder ---------------------------------------------------------------

def frame(code, words):
    """ESCAPE, header and payload of a record made of ready words."""
    if len(words) > MAX_PAYLOAD:
        raise ValueError("a record holds at most %d words" % MAX_PAYLOAD)
    payload = struct.pack("<%dQ" % len(words), *words)
    header = header_word(code, len(words), check(code, len(words), payload))
    return struct.pack("<QQ", ESCAPE, header) + payload


def encode_raw(code, words=()):
    """A record of any code from its payload words (unknown codes, tests)."""
    if not 0 <= code <= 0xFFFF:
        raise ValueError("code %r is not 0 to 65535" % (code,))
    return frame(code, list(words))


def record_words(code, fields):
    """The payload words of a known record, checking every field."""
    if code not in LAYOUTS:
        raise ValueError("code %r is not a known record" % (code,))
    layout = LAYOUTS[code]
    given = min_words(code)
    while given < len(layout) and layout[given][0] in fields:
        given += 1
    missing = [n for n, _, _ in layout[:min_words(code)] if n not in fields]
    unknown = set(fields) - {n for n, _, _ in layout[:given]}
    if missing or unknown:
        raise ValueError("%s: missing fields %s, unknown fields %s"
                         % (CODE_NAMES[code], missing, sorted(unknown)))
    words = []
    for name, width, style in layout[:given]:
        value = fields[name]
        if style in ("path", "frames", "stalls"):
            value = len(fields[name])
        if not 0 <= value < 1 << width:
            raise ValueError("%s: %s %r is not a %d-bit number"
                             % (CODE_NAMES[code], name, value, width))
        words.append(value)
    if fields_error(code, fields, MAX_SLOTS) is not None:
        raise ValueError("%s: a field is out of range: %r"
                         % (CODE_NAMES[code], fields))
    if code == IMAGE:
        path = fields["path"]
        padded = path + bytes(WORD * path_words(len(path)) - len(path))
        words.extend(w for (w,) in struct.iter_unpack("<Q", padded))
    if code == CALLSTACK:
        words.extend(overlay << 32 | address
                     for address, overlay in fields["frames"])
    if code == REASONS:
        words.extend(stall_words(fields["stalls"]))
    return words


def encode_record(code, extra=(), **fields):
    """A known record from its fields, by name ("start") or code.

    extra: words a later minor version appends (readers ignore them).
    IMAGE's path is bytes (a str is encoded as UTF-8); REASONS' stalls a
    sequence of numbers 0 to 15 or a string of hex digits as dumped.
    """
    code = CODES.get(code, code)
    if isinstance(fields.get("path"), str):
        fields["path"] = fields["path"].encode()
    if code == REASONS and isinstance(fields.get("stalls"), str):
        fields["stalls"] = tuple(int(d, 16) for d in fields["stalls"])
    elif code == REASONS and "stalls" in fields:
        fields["stalls"] = tuple(fields["stalls"])
    return frame(code, record_words(code, fields) + list(extra))


def sample_word(slot, address):
    if not (0 <= slot < MAX_SLOTS and 0 <= address < 1 << 32 and
            address % ADDRESS_ALIGN == 0):
        raise ValueError("sample slot %r address %r out of range"
                         % (slot, address))
    return slot << 32 | address


def encode_sample(slot, address):
    return struct.pack("<Q", sample_word(slot, address))


# ---- Events: str() is the copstream dump line ------------------------------

def _path_text(path):
    return "".join(chr(b) if 0x20 < b <= 0x7E and b != 0x5C else "\\x%02x" % b
                   for b in path)


def _words_text(words):
    return ",".join("0x%x" % w for w in words)


def _field_text(name, style, value):
    if style == "hex":
        return "0x%x" % value
    if style == "hex6":
        return "0x%06x" % value
    if style == "hex16":
        return "0x%016x" % value
    if style == "version":
        return "%d.%d" % (value >> 16, value & 0xFFFF)
    if style == "cause":
        return CAUSES.get(value, str(value))
    if style == "path":
        return _path_text(value)
    if style == "frames":
        return ",".join("0x%05x" % a + ("@%d" % o if o else "")
                        for a, o in value) or "-"
    if style == "stalls":
        return "".join("%x" % stall for stall in value)
    return str(value)


class Sample(collections.namedtuple("Sample", "offset slot address")):
    __slots__ = ()

    def __str__(self):
        return "%d sample slot=%d address=0x%05x" % self


class Record(collections.namedtuple(
        "Record", "offset code fields extra words repeat")):
    """fields: dict of a known record's fields (IMAGE's path as bytes);
    extra: words past them; words: an unknown record's payload."""
    __slots__ = ()

    @property
    def name(self):
        return CODE_NAMES.get(self.code, "unknown")

    def __str__(self):
        if self.code not in LAYOUTS:
            text = "%d unknown code=%d" % (self.offset, self.code)
            if self.words:
                text += " words=" + _words_text(self.words)
            return text
        parts = ["%d %s" % (self.offset, self.name)]
        parts += ["%s=%s" % (n, _field_text(n, style, self.fields[n]))
                  for n, _, style in LAYOUTS[self.code] if n in self.fields]
        if self.extra:
            parts.append("extra=" + _words_text(self.extra))
        if self.repeat:
            parts.append("repeat=1")
        return " ".join(parts)


class Error(collections.namedtuple("Error", "offset kind code")):
    __slots__ = ()

    @property
    def name(self):
        return ERRORS[self.kind]

    def __str__(self):
        text = "%d error %s" % (self.offset, self.name)
        return text + (" code=%d" % self.code if self.code else "")


class Resync(collections.namedtuple("Resync", "offset skipped")):
    __slots__ = ()

    def __str__(self):
        return "%d resync skipped=%d" % self


class Stats:
    """What a decoder counted; the same counters as struct copstream_stats."""

    def __init__(self):
        self.bytes = 0
        self.samples = 0
        self.records = collections.Counter()     # by code, known ones
        self.unknown_records = 0
        self.repeated_starts = 0
        self.lost = 0
        self.lost_by_cause = collections.Counter()   # 0: other causes
        self.errors = 0
        self.errors_by_kind = collections.Counter()
        self.record_bytes = 0
        self.skipped_bytes = 0
        self.resyncs = 0

    @property
    def contexts(self):
        return self.records[CONTEXT]

    def summary(self):
        """The line copstream check prints."""
        return "samples=%d lost=%d contexts=%d errors=%d" % (
            self.samples, self.lost, self.contexts, self.errors)


# ---- Decoder ---------------------------------------------------------------

class Decoder:
    """Incremental decoder: feed() bytes in any split, then finish().

    Both return the list of events (Sample, Record, Error, Resync) that the
    bytes so far complete; self.stats counts everything.  The same bytes
    give the same events as the C decoder, however they are split.
    """

    def __init__(self):
        self.stats = Stats()
        self._buffer = bytearray()      # bytes not consumed yet
        self._offset = 0                # stream offset of _buffer[0]
        self._hunting = False
        self._hunt_start = 0
        self._slot_limit = MAX_SLOTS
        self._ls_limit = 1 << 32
        self._bound = set()
        self._start = None
        self._stopped = False
        self._no_start_reported = False
        self._after_stop_reported = False
        self._finished = False
        self._events = []

    # Events and errors

    def _report(self, kind, offset, code=0):
        self.stats.errors += 1
        self.stats.errors_by_kind[kind] += 1
        self._events.append(Error(offset, kind, code))

    def _check_started(self, offset):
        if self._start is None and not self._no_start_reported:
            self._no_start_reported = True
            self._report(NO_START, offset)

    def _check_not_stopped(self, offset):
        if self._stopped and not self._after_stop_reported:
            self._after_stop_reported = True
            self._report(AFTER_STOP, offset)

    def _enter_hunt(self, offset):
        self._hunting = True
        self._hunt_start = offset

    # Samples

    def _sample(self, word, offset):
        """A word that is not ESCAPE; False when it sends us hunting."""
        slot, address = word >> 32, word & 0xFFFFFFFF
        if (slot >= self._slot_limit or address >= self._ls_limit or
                address % ADDRESS_ALIGN):
            self._report(BAD_SAMPLE, offset)
            self._enter_hunt(offset)
            return False
        if slot not in self._bound:
            self._check_started(offset)
            self._check_not_stopped(offset)
            self._report(ORPHAN, offset)
        self.stats.samples += 1
        self._events.append(Sample(offset, slot, address))
        return True

    def _samples(self, pos, end):
        """Takes the run of sample words from pos (before end); returns
        where it stopped: at ESCAPE, at end, or hunting.  Sound samples of
        bound slots take the inline path; other words go to _sample()."""
        slot_limit, ls_limit, bound = (self._slot_limit, self._ls_limit,
                                       self._bound)
        append = self._events.append
        offset = self._offset + pos
        inline = 0
        for (word,) in struct.iter_unpack("<Q", bytes(self._buffer[pos:end])):
            slot, address = word >> 32, word & 0xFFFFFFFF
            if (slot < slot_limit and address < ls_limit and
                    not address % ADDRESS_ALIGN and slot in bound):
                append(Sample(offset, slot, address))
                inline += 1
            elif word == ESCAPE or not self._sample(word, offset):
                self.stats.samples += inline
                return offset - self._offset
            offset += WORD
        self.stats.samples += inline
        return end

    # Records

    def _parse(self, code, words, payload):
        """(fields, extra) of a known record, or the error kind."""
        layout = LAYOUTS[code]
        if len(words) < min_words(code):
            return SHORT_RECORD
        fields = {}
        for (name, width, _), word in zip(layout, words):
            if width == 32 and word > 0xFFFFFFFF:
                return BAD_FIELD
            fields[name] = word
        known = len(fields)
        if code == IMAGE:
            length = fields["path"]
            if not 1 <= length <= MAX_PATH:
                return BAD_FIELD
            known += path_words(length)
            if len(words) < known:
                return SHORT_RECORD
            raw = payload[WORD * len(layout):WORD * known]
            if any(raw[length:]):
                return BAD_FIELD
            fields["path"] = bytes(raw[:length])
        if code == CALLSTACK:
            count = fields["frames"]
            if count > MAX_FRAMES:
                return BAD_FIELD
            known += count
            if len(words) < known:
                return SHORT_RECORD
            frame_words = words[len(layout):known]
            if any(w >> 48 for w in frame_words):
                return BAD_FIELD
            fields["frames"] = [(w & 0xFFFFFFFF, w >> 32)
                                for w in frame_words]
        if code == REASONS:
            parsed = self._stalls(fields["stalls"], words[len(layout):])
            if isinstance(parsed, int):
                return parsed
            fields["stalls"] = parsed
            known += reasons_words(len(parsed))
        kind = fields_error(code, fields, self._slot_limit)
        if kind is not None:
            return kind
        return fields, tuple(words[known:])

    @staticmethod
    def _stalls(count, words):
        """REASONS' stalls from the words after its fixed ones, or the
        error kind: the bits after the last stall must be zero."""
        if not 1 <= count <= MAX_REASONS:
            return BAD_FIELD
        needed = reasons_words(count)
        if len(words) < needed:
            return SHORT_RECORD
        stalls = tuple((words[i // REASONS_PER_WORD] >>
                        4 * (i % REASONS_PER_WORD)) & 0xF
                       for i in range(count))
        if stall_words(stalls) != list(words[:needed]):
            return BAD_FIELD
        return stalls

    def _apply(self, code, fields, offset):
        """The record's effect on the stream state; (deliver, repeat)."""
        if code != START:
            self._check_started(offset)
        self._check_not_stopped(offset)
        if code == START:
            if self._start is not None:
                if fields != self._start:
                    self._report(START_CONFLICT, offset, code)
                    return False, False
                self.stats.repeated_starts += 1
                return True, True
            self._start = fields
            self._slot_limit = fields["slots"]
            self._ls_limit = fields["ls_size"]
        elif code == CONTEXT:
            self._bound.add(fields["slot"])
        elif code == RELEASE:
            self._bound.discard(fields["slot"])
        elif code == OVERLAY and fields["slot"] not in self._bound:
            self._report(ORPHAN, offset, code)
        elif code == LOST:
            self.stats.lost += fields["count"]
            cause = fields["cause"] if fields["cause"] in CAUSES else 0
            self.stats.lost_by_cause[cause] += fields["count"]
        elif code == STOP:
            if (fields["samples"] != self.stats.samples or
                    fields["lost"] != self.stats.lost):
                self._report(COUNT_MISMATCH, offset, code)
            self._stopped = True
            self._bound.clear()
        return True, False

    def _record(self, code, payload, offset):
        """A well-framed record whose check matched."""
        count = len(payload) // WORD
        words = [w for (w,) in struct.iter_unpack("<Q", payload)]
        self.stats.record_bytes += HEAD + WORD * count
        if code not in LAYOUTS:
            self.stats.unknown_records += 1
            self._check_started(offset)
            self._check_not_stopped(offset)
            self._events.append(Record(offset, code, {}, (), tuple(words),
                                       False))
            return
        parsed = self._parse(code, words, payload)
        if isinstance(parsed, int):
            self._report(parsed, offset, code)
            return
        fields, extra = parsed
        deliver, repeat = self._apply(code, fields, offset)
        if deliver:
            self.stats.records[code] += 1
            self._events.append(Record(offset, code, fields, extra, (),
                                       repeat))

    def _framed_at(self, pos):
        """At an ESCAPE: (size, header) when the header is valid, None when
        not, or (size, None) when more bytes are needed to tell."""
        buf = self._buffer
        if len(buf) - pos < HEAD:
            return HEAD, None
        header = int.from_bytes(buf[pos + WORD:pos + HEAD], "little")
        if not header_valid(header):
            return None
        size = HEAD + WORD * ((header >> 16) & 0xFFFF)
        if len(buf) - pos < size:
            return size, None
        return size, header

    # The two modes

    def _sync(self, pos):
        """Decodes words from pos; returns the new pos (stops when hunting
        starts or more bytes are needed)."""
        buf = self._buffer
        end = len(buf) - (len(buf) - pos) % WORD
        while pos < end:
            pos = self._samples(pos, end)
            if self._hunting or pos == end:
                return pos
            offset = self._offset + pos
            framed = self._framed_at(pos)
            if framed is None:
                self._report(BAD_HEADER, offset)
                self._enter_hunt(offset)
                return pos
            size, header = framed
            if header is None:
                return pos
            code, length = header & 0xFFFF, (header >> 16) & 0xFFFF
            payload = bytes(buf[pos + HEAD:pos + size])
            if check(code, length, payload) != (header >> 32) & 0xFFFF:
                self._report(BAD_CHECK, offset, code)
                self._enter_hunt(offset)
                return pos
            self._record(code, payload, offset)
            pos += size
        return pos

    def _record_at(self, pos):
        """Whether a sound record starts at pos: True, False, or None when
        more bytes are needed to tell."""
        buf = self._buffer
        prefix = buf[pos:pos + WORD]
        if prefix.count(0xFF) != len(prefix):
            return False
        framed = self._framed_at(pos)
        if framed is None:
            return False
        size, header = framed
        if header is None:
            return None
        code, length = header & 0xFFFF, (header >> 16) & 0xFFFF
        payload = buf[pos + HEAD:pos + size]
        return check(code, length, payload) == (header >> 32) & 0xFFFF

    def _hunt(self, pos):
        """Skips to the next sound record (then SYNC) or to where more bytes
        are needed; returns the new pos."""
        buf = self._buffer
        while pos < len(buf):
            found = buf.find(ESCAPE_BYTES, pos)
            if found < 0:
                # A run of 0xFF at the very end may begin an ESCAPE.
                tail = len(buf) - len(buf[pos:].rstrip(b"\xff"))
                return max(pos, len(buf) - tail)
            verdict = self._record_at(found)
            if verdict is None:
                return found
            if verdict:
                at = self._offset + found
                skipped = at - self._hunt_start
                self.stats.skipped_bytes += skipped
                self.stats.resyncs += 1
                self._events.append(Resync(at, skipped))
                self._hunting = False
                return found
            pos = found + 1
        return pos

    def _run(self):
        pos = 0
        while True:
            before, hunting = pos, self._hunting
            pos = self._hunt(pos) if self._hunting else self._sync(pos)
            if pos == before and hunting == self._hunting:
                break
        del self._buffer[:pos]
        self._offset += pos

    # Interface

    def feed(self, data):
        """Decodes more bytes; returns the events they complete."""
        if self._finished:
            return []
        self.stats.bytes += len(data)
        self._buffer += data
        self._run()
        events, self._events = self._events, []
        return events

    def finish(self):
        """The end of the stream; returns the last events."""
        if self._finished:
            return []
        self._finished = True
        end = self._offset + len(self._buffer)
        if self._hunting:
            self.stats.skipped_bytes += end - self._hunt_start
        elif self._buffer:
            self._report(TRUNCATED, self._offset)
            self.stats.skipped_bytes += len(self._buffer)
        self._buffer.clear()
        self._offset = end
        self._check_started(end)
        if not self._stopped:
            self._report(NO_STOP, end)
        events, self._events = self._events, []
        return events


def decode(data):
    """(events, stats) of a whole stream."""
    decoder = Decoder()
    events = decoder.feed(data) + decoder.finish()
    return events, decoder.stats


def dump_lines(data, samples=True):
    """The lines `copstream dump` prints for a whole stream."""
    events, _ = decode(data)
    return [str(e) for e in events if samples or not isinstance(e, Sample)]
