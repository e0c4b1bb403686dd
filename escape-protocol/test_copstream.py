"""Tests of coprof_stream.py, of the copstream command line, and of the C
and Python halves against each other.

The C decoder's own suite is test-copstream.c; here the point is that the
two decoders print the same lines for the same bytes -- sound streams and
hundreds of corrupted ones -- that both encoders write the same bytes, and
that copstream behaves as its --help says.
"""

import hashlib
import os
import random
import struct
import subprocess

import pytest

import coprof_stream as cs
import fuzz_seeds

HERE = os.path.dirname(os.path.abspath(__file__))


def session(polls=6, per_poll=5):
    return b"".join(fuzz_seeds.session(polls, per_poll))


def run(coprof_bin, *args, stdin=None):
    return subprocess.run([coprof_bin("copstream"), *args], input=stdin,
                          capture_output=True, timeout=60)


def c_dump(coprof_bin, path, *options):
    result = run(coprof_bin, "dump", *options, str(path))
    assert result.returncode == 0, result.stderr
    return result.stdout.decode().splitlines()


# ---- Python alone ------------------------------------------------------------

def test_every_record_round_trips():
    records = [
        ("start", fuzz_seeds.START),
        ("image", dict(fuzz_seeds.IDENTITY, path=b"/x y\\\xff")),
        ("context", dict(fuzz_seeds.IDENTITY, slot=3, pid=2**32 - 1, tid=1,
                         context_id=2**64 - 1, object_id=0x7fff0000,
                         image_offset=4096, cycle=12)),
        ("overlay", dict(slot=3, region=1, guard=2, cycle=13, placed=1)),
        ("overlay", dict(slot=3, region=0, guard=0, cycle=13)),
        ("callstack", dict(slot=3, depth=4, frames=[(0x238, 0),
                                                    (0x3fffc, 0xFFFF)])),
        ("reasons", dict(slot=3, stalls=tuple(range(16)) + (3,))),
        ("transfer", dict(slot=3, known=1, tag=31, issuer=0x3fffc)),
        ("transfer", dict(slot=3, known=0, tag=0, issuer=0)),
        ("lost", dict(slot=3, cause=2, count=5, cycle=14)),
        ("time", dict(slot=3, cycle=15, time_ns=16)),
        ("release", dict(slot=3, cycle=17)),
        ("stop", dict(time_ns=18, samples=1, lost=5)),
    ]
    data = b"".join(cs.encode_record(name, **fields) for name, fields
                    in records[:5])
    data += cs.encode_sample(3, 0x3FFFC)
    data += b"".join(cs.encode_record(name, **fields) for name, fields
                     in records[5:])
    events, stats = cs.decode(data)
    assert stats.errors == 0
    decoded = [e for e in events if isinstance(e, cs.Record)]
    assert [(r.name, r.fields) for r in decoded] == records
    assert [e for e in events if isinstance(e, cs.Sample)] == \
        [cs.Sample(events[5].offset, 3, 0x3FFFC)]
    assert 8 * stats.samples + stats.record_bytes == len(data)


def test_a_1_0_reader_takes_the_flags_word_as_extra(monkeypatch):
    """A reader that knows OVERLAY's 4 words of 1.0 (the layout without
    placed) reads a 1.1 OVERLAY whole, the flags word as an extra word."""
    monkeypatch.setitem(cs.LAYOUTS, cs.OVERLAY, cs.LAYOUTS[cs.OVERLAY][:4])
    data = cs.encode_raw(cs.OVERLAY, [0, 2, 3, 4, cs.OVERLAY_PLACED])
    events, stats = cs.decode(data)
    (record,) = [e for e in events if isinstance(e, cs.Record)]
    assert stats.errors_by_kind[cs.SHORT_RECORD] == 0
    assert record.fields == dict(slot=0, region=2, guard=3, cycle=4)
    assert record.extra == (cs.OVERLAY_PLACED,)


def test_overlay_of_1_1_and_of_1_0():
    """1.1's OVERLAY has the flags word (dump: placed=); the 1.0 form
    without it reads without the field; a later version's words after it
    are extra; fewer than 4 words are short."""
    placed = cs.encode_record("overlay", slot=0, region=2, guard=3, cycle=4,
                              placed=cs.OVERLAY_PLACED)
    old = cs.encode_record("overlay", slot=0, region=2, guard=3, cycle=4)
    later = cs.encode_record("overlay", slot=0, region=2, guard=3, cycle=4,
                             placed=1, extra=[7])
    short = cs.encode_raw(cs.OVERLAY, [0, 2, 3])
    assert len(placed) == 16 + 5 * 8 and len(old) == 16 + 4 * 8
    records = [e for e in cs.decode(placed + old + later + short)[0]
               if isinstance(e, cs.Record) or
               isinstance(e, cs.Error) and e.name == "short-record"]
    assert [str(r).split(" ", 1)[1] for r in records] == [
        "overlay slot=0 region=2 guard=3 cycle=4 placed=1",
        "overlay slot=0 region=2 guard=3 cycle=4",
        "overlay slot=0 region=2 guard=3 cycle=4 placed=1 extra=0x7",
        "error short-record code=3"]


def test_encoder_refuses_bad_fields():
    for change in (dict(slots=0), dict(slots=257), dict(lfsr_value=0),
                   dict(ls_size=6), dict(version=2 << 16), dict(clock_hz=0)):
        with pytest.raises(ValueError):
            cs.encode_record("start", **dict(fuzz_seeds.START, **change))
    with pytest.raises(ValueError):
        cs.encode_record("image", path=b"a\0b", **fuzz_seeds.IDENTITY)
    with pytest.raises(ValueError):
        cs.encode_record("overlay", slot=0, region=2**32, guard=0, cycle=0)
    with pytest.raises(ValueError):
        cs.encode_record("time", slot=0, cycle=0)
    for frames, depth in (([(2, 0)], 1), ([(4, 0x10000)], 1), ([(4, 0)], 0),
                          ([(4, 0)] * (cs.MAX_FRAMES + 1), 100)):
        with pytest.raises(ValueError):
            cs.encode_record("callstack", slot=0, depth=depth, frames=frames)
    for stalls in ((), (16,), (-1,), (0,) * (cs.MAX_REASONS + 1)):
        with pytest.raises(ValueError):
            cs.encode_record("reasons", slot=0, stalls=stalls)
    for known, tag, issuer in ((2, 0, 0), (1, 32, 0), (1, 0, 2), (0, 1, 0),
                               (0, 0, 4)):
        with pytest.raises(ValueError):
            cs.encode_record("transfer", slot=0, known=known, tag=tag,
                             issuer=issuer)
    with pytest.raises(ValueError):
        cs.encode_sample(0, 2)
    with pytest.raises(ValueError):
        cs.encode_raw(1, [0] * (cs.MAX_PAYLOAD + 1))


def test_reasons_pack_16_a_word_unused_bits_zero():
    """REASONS: stall i in bits 4 * (i % 16) of word i // 16 after slot
    and count, the unused bits of the last word zero; 16 stalls take one
    word, 17 two, MAX_REASONS fill a record."""
    one = cs.encode_record("reasons", slot=2, stalls="0123456789abcdef")
    two = cs.encode_record("reasons", slot=2, stalls="0123456789abcdef3")
    full = cs.encode_record("reasons", slot=2, stalls=[1] * cs.MAX_REASONS)
    assert len(one) == 16 + 8 * 3 and len(two) == 16 + 8 * 4
    assert len(full) == 16 + 8 * cs.MAX_PAYLOAD
    assert one[16:] == struct.pack("<QQQ", 2, 16, 0xFEDCBA9876543210)
    assert two[16:] == struct.pack("<QQQQ", 2, 17, 0xFEDCBA9876543210, 3)
    assert len(cs.encode_record("transfer", slot=0, known=1, tag=1,
                                issuer=4)) == 16 + 8 * 4


# A REASONS of 3 stalls with a 4th in the unused bits, one whose count
# needs more words than it has, one of no stalls, one past the limit, and
# sound ones (the last with a later version's extra word).
BAD_REASONS = [
    (cs.encode_raw(cs.REASONS, [0, 3, 0x4321]), "bad-field"),
    (cs.encode_raw(cs.REASONS, [0, 17, 0]), "short-record"),
    (cs.encode_raw(cs.REASONS, [0, 0]), "bad-field"),
    (cs.encode_raw(cs.REASONS, [0, cs.MAX_REASONS + 1] + [0] * 1022),
     "bad-field"),
    (cs.encode_raw(cs.REASONS, [0, 1 << 32, 0]), "bad-field"),
    (cs.encode_raw(cs.REASONS, [9, 1, 1]), "bad-field"),       # slot
    (cs.encode_raw(cs.TRANSFER, [0, 1, 32, 0]), "bad-field"),  # tag
    (cs.encode_raw(cs.TRANSFER, [0, 0, 0, 4]), "bad-field"),   # no transfer
    (cs.encode_raw(cs.TRANSFER, [0, 1, 3]), "short-record"),
    (cs.encode_raw(cs.REASONS, [0, 3, 0x321]), None),
    (cs.encode_raw(cs.REASONS, [0, 1, 0x1, 7]), None),
]


def test_reasons_and_transfer_refused_as_the_c_decoder_does():
    data = (cs.encode_record("start", **fuzz_seeds.START) +
            b"".join(record for record, _ in BAD_REASONS) +
            cs.encode_record("stop", time_ns=1, samples=0, lost=0))
    events, stats = cs.decode(data)
    errors = [e.name for e in events if isinstance(e, cs.Error)]
    assert errors == [kind for _, kind in BAD_REASONS if kind]
    records = [str(e).split(" ", 1)[1] for e in events
               if isinstance(e, cs.Record) and e.code == cs.REASONS]
    assert records == ["reasons slot=0 stalls=123",
                       "reasons slot=0 stalls=1 extra=0x7"]


def test_any_split_gives_the_same_events():
    data = session(20, 7)
    whole, _ = cs.decode(data)
    rand = random.Random(4)
    for _ in range(20):
        decoder = cs.Decoder()
        events, at = [], 0
        while at < len(data):
            n = rand.choice((1, 3, 8, 9, 17, 200, 5000))
            events += decoder.feed(data[at:at + n])
            at += n
        events += decoder.finish()
        assert events == whole


def test_truncation_keeps_every_whole_item():
    data = session(3, 3)
    whole, _ = cs.decode(data)
    for cut in range(len(data)):
        events, stats = cs.decode(data[:cut])
        items = [e for e in events if not isinstance(e, cs.Error)]
        assert items == whole[:len(items)]
        assert stats.errors >= 1
        assert isinstance(events[-1], cs.Error) and events[-1].name == \
            "no-stop"


def test_repeated_start_is_a_no_op():
    parts = fuzz_seeds.session()
    data = b"".join(parts[:3] + [parts[0]] + parts[3:])
    events, stats = cs.decode(data)
    assert stats.errors == 0 and stats.repeated_starts == 1
    assert [str(e).endswith(" repeat=1") for e in events].count(True) == 1


def test_image_hash(tmp_path):
    path = tmp_path / "image"
    path.write_bytes(b"coprocessor image" * 1000)
    digest = hashlib.sha256(path.read_bytes()).digest()
    assert cs.image_hash(str(path)) == int.from_bytes(digest[:8], "little")


# ---- C and Python side by side ----------------------------------------------

def corruptions(data, count, seed):
    """Damaged copies of data: cuts, bit flips, inserted garbage and runs
    of 0xFF, deleted bytes, swapped words."""
    rand = random.Random(seed)
    for i in range(count):
        d = bytearray(data)
        kind = i % 6
        at = rand.randrange(len(d))
        if kind == 0:
            d = d[:at]
        elif kind == 1:
            for _ in range(rand.randint(1, 4)):
                d[rand.randrange(len(d))] ^= 1 << rand.randrange(8)
        elif kind == 2:
            d[at:at] = bytes(rand.randrange(256)
                             for _ in range(rand.randint(1, 40)))
        elif kind == 3:
            d[at:at] = b"\xff" * rand.randint(1, 40)
        elif kind == 4:
            del d[at:at + rand.randint(1, 20)]
        else:
            w = 8 * rand.randrange(len(d) // 8 - 1)
            d[w:w + 16] = d[w + 8:w + 16] + d[w:w + 8]
        yield bytes(d)


def test_c_and_python_print_the_same_lines(coprof_bin, tmp_path):
    path = tmp_path / "stream"
    streams = [session(), b"", b"\xff" * 100, bytes(range(256)) * 4]
    streams += list(corruptions(session(), 240, seed=1))
    for n, data in enumerate(streams):
        path.write_bytes(data)
        expected = cs.dump_lines(data)
        assert c_dump(coprof_bin, path) == expected, "stream %d" % n


def test_c_and_python_refuse_the_same_reasons(coprof_bin, tmp_path):
    path = tmp_path / "stream"
    data = (cs.encode_record("start", **fuzz_seeds.START) +
            b"".join(record for record, _ in BAD_REASONS) +
            cs.encode_record("stop", time_ns=1, samples=0, lost=0))
    path.write_bytes(data)
    assert c_dump(coprof_bin, path) == cs.dump_lines(data)


def test_c_and_python_count_the_same(coprof_bin, tmp_path):
    path = tmp_path / "stream"
    for data in [session()] + list(corruptions(session(), 30, seed=2)):
        path.write_bytes(data)
        result = run(coprof_bin, "check", str(path))
        _, stats = cs.decode(data)
        assert result.stdout.decode().strip() == stats.summary()
        assert result.returncode == (1 if stats.errors else 0)


def test_c_encoder_writes_what_python_writes(coprof_bin, tmp_path):
    parts = fuzz_seeds.session()
    data = b"".join(parts[:2] + [cs.encode_raw(99, [1, cs.ESCAPE]),
                                 cs.encode_raw(0),
                                 cs.encode_record("time", slot=0, cycle=1,
                                                  time_ns=2, extra=[7, 8]),
                                 cs.encode_record("overlay", slot=0, region=1,
                                                  guard=2, cycle=3, placed=1),
                                 cs.encode_record("overlay", slot=0, region=1,
                                                  guard=2, cycle=3),
                                 parts[0]] + parts[2:])
    text = "\n".join(cs.dump_lines(data)) + "\n"
    result = run(coprof_bin, "encode", stdin=text.encode())
    assert result.returncode == 0, result.stderr
    assert result.stdout == data
    # Without the offsets, and with a comment, it is the same stream.
    bare = "# a comment\n\n" + "\n".join(
        line.split(" ", 1)[1] for line in text.splitlines()) + "\n"
    assert run(coprof_bin, "encode", stdin=bare.encode()).stdout == data


def test_dump_then_encode_repairs_a_damaged_stream(coprof_bin, tmp_path):
    data = bytearray(session())
    data[300:300] = b"garbage!"
    path = tmp_path / "damaged"
    path.write_bytes(bytes(data))
    text = run(coprof_bin, "dump", str(path)).stdout
    repaired = run(coprof_bin, "encode", stdin=text).stdout
    events, stats = cs.decode(repaired)
    kinds = {e.name for e in events if isinstance(e, cs.Error)}
    assert stats.resyncs == 0 and kinds <= {"count-mismatch", "orphan"}


# ---- The command line -----------------------------------------------------------

def test_check_prints_the_summary_and_errors(coprof_bin, tmp_path):
    path = tmp_path / "stream"
    path.write_bytes(session())
    result = run(coprof_bin, "check", str(path))
    assert result.returncode == 0
    assert result.stdout == b"samples=60 lost=21 contexts=2 errors=0\n"
    assert result.stderr == b""

    parts = fuzz_seeds.session(6, 5)
    broken = bytearray(parts[2])
    broken[-1] ^= 0x40                 # the CONTEXT of slot 0: bad check
    path.write_bytes(b"".join(parts[:2] + [bytes(broken)] + parts[3:]))
    result = run(coprof_bin, "check", str(path))
    assert result.returncode == 1
    errors = result.stderr.decode().splitlines()
    assert errors[0] == ("copstream: %s: offset %d: bad-check in a context "
                         "record" % (path, len(parts[0]) + len(parts[1])))
    # The bad check, then slot 0's OVERLAY and 30 samples are orphans.
    assert len(errors) == 21
    assert errors[-1] == "copstream: %s: 12 more errors not shown" % path
    assert result.stdout == b"samples=60 lost=21 contexts=1 errors=32\n"


def test_check_verbose_counts(coprof_bin, tmp_path):
    path = tmp_path / "stream"
    path.write_bytes(session())
    lines = run(coprof_bin, "check", "-v", str(path)).stdout.decode()
    fields = dict(line.split("=") for line in lines.split()
                  if "=" in line)
    assert fields["records.context"] == "2"
    assert fields["lost.fifo-overflow"] == "21"
    assert fields["errors.bad-check"] == "0"
    assert fields["skipped_bytes"] == "0"


def test_dump_without_samples_and_from_stdin(coprof_bin):
    data = session()
    result = run(coprof_bin, "dump", "--no-samples", "-", stdin=data)
    assert result.returncode == 0
    assert result.stdout.decode().splitlines() == cs.dump_lines(
        data, samples=False)


@pytest.mark.parametrize("args, message", [
    (["check", "/nonexistent/s"],
     "copstream: cannot open '/nonexistent/s': No such file or directory"),
    (["dump", "/"], "copstream: cannot read '/': Is a directory"),
    (["frob", "x"], "copstream: 'frob' is not a command: use dump, check "
                    "or encode (copstream --help)"),
])
def test_one_line_errors(coprof_bin, args, message):
    result = run(coprof_bin, *args)
    assert result.returncode == 2
    assert result.stderr.decode().splitlines() == [message]
    assert result.stdout == b""


def test_usage(coprof_bin):
    help_text = run(coprof_bin, "--help")
    assert help_text.returncode == 0
    for word in (b"dump", b"check", b"encode", b"Exit status"):
        assert word in help_text.stdout
    assert run(coprof_bin).returncode == 2
    assert run(coprof_bin, "check").returncode == 2
    assert run(coprof_bin, "dump", "a", "b").returncode == 2


@pytest.mark.parametrize("line, message", [
    ("frob x=1", "'frob' is not a record type"),
    ("time slot=0 cycle=1", "time needs the field time_ns"),
    ("time slot=0 cycle=1 time_ns=x", "time: time_ns 'x' is not a valid value"),
    ("time slot=0 cycle=1 time_ns=1 colour=red", "time has no field 'colour'"),
    ("overlay slot=0 region=4294967296 guard=0 cycle=0",
     "overlay: region '4294967296' is not a valid value"),
    ("lost slot=0 cause=1 count=0 cycle=0", "lost: a field is out of range"),
    ("sample slot=0 address=2", "sample: slot 0 or address 0x2 out of range"),
    ("image device=1 inode=1 size=1 hash=0 path=a\\q", "image: path"),
])
def test_encode_errors_name_the_line(coprof_bin, line, message):
    text = "# first\n%s\n" % line
    result = run(coprof_bin, "encode", stdin=text.encode())
    assert result.returncode == 2
    error = result.stderr.decode()
    assert error.startswith("copstream: standard input:2: ")
    assert message in error and error.count("\n") == 1


def test_encode_to_a_file(coprof_bin, tmp_path):
    text = tmp_path / "in.txt"
    text.write_text("stop time_ns=1 samples=0 lost=0\n")
    out = tmp_path / "out.bin"
    result = run(coprof_bin, "encode", "-o", str(out), str(text))
    assert result.returncode == 0
    assert out.read_bytes() == cs.encode_record("stop", time_ns=1, samples=0,
                                                lost=0)
    result = run(coprof_bin, "encode", "-o", "/nonexistent/out", str(text))
    assert result.returncode == 2
    assert b"cannot create /nonexistent/out: /nonexistent: no such " \
        b"directory" in result.stderr


# ---- The library is freestanding ----------------------------------------------

def test_library_objects_use_no_libc(build_dir):
    objects = [os.path.join(build_dir, "obj", "escape-protocol", name)
               for name in ("encode.o", "decode.o")]
    result = subprocess.run(["nm", "-u"] + objects, capture_output=True,
                            text=True, check=True)
    # make check-sanitize's objects also call the sanitizers' runtime.
    undefined = {line.split()[-1] for line in result.stdout.splitlines()
                 if line.strip() and not line.endswith(":")
                 and not line.split()[-1].startswith(("__asan_", "__ubsan_"))}
    assert undefined <= {"_GLOBAL_OFFSET_TABLE_", "copstream_check",
                         "copstream_fields_check", "copstream_layouts"}


def test_library_builds_freestanding(tmp_path):
    source = os.path.dirname(HERE)
    for name in ("encode.c", "decode.c"):
        subprocess.run(["gcc", "-std=gnu11", "-O2", "-ffreestanding",
                        "-fno-builtin", "-nostdlib", "-Wall", "-Wextra",
                        "-Werror", "-I", source, "-c",
                        os.path.join(HERE, name), "-o",
                        str(tmp_path / (name + ".o"))], check=True)


def test_start_event_1_5():
    """START's event (1.5) round-trips; a 1.4 START has none."""
    stop = cs.encode_record("stop", time_ns=1, samples=0, lost=0)
    new = cs.encode_record("start", **dict(fuzz_seeds.START,
                                           event=cs.EVENT_INSTRUCTIONS))
    old = cs.encode_record("start", **fuzz_seeds.START)
    assert len(new) == len(old) + 8
    assert cs.decode(new + stop)[0][0].fields["event"] == \
        cs.EVENT_INSTRUCTIONS
    assert "event" not in cs.decode(old + stop)[0][0].fields
