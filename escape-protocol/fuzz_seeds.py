#!/usr/bin/python3
"""Write the seed corpus of the copstream decoder's fuzz target.

Each seed is a small stream from coprof_stream's encoder: every record
type, a few polls of samples, and the shapes the decoder must survive
(repeated and conflicting starts, unknown codes, longer records of a later
minor version, a cut, garbage, runs of 0xFF).  Slot 1's samples carry
their call stacks (CALLSTACK, 1.4), some of them empty or truncated; slot
0's samples of each poll follow the REASONS (1.6) of their stalls, and a
TRANSFER (1.6) now and then.  `make check` and `make fuzz` start the fuzzer
from these.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import coprof_stream as cs  # noqa: E402

START = dict(version=cs.VERSION, slots=4, lfsr_value=0xFFFFFE, lfsr_count=1,
             clock_hz=10**9, fifo_depth=1024, ls_size=262144,
             poll_interval_ns=512, start_time_ns=1, fifo_full=cs.FIFO_STALL,
             dither=1, dither_seed=0xFEDCBA9876543210, watermark=512)
START_1_1 = {k: v for k, v in START.items()
             if k not in ("fifo_full", "dither", "dither_seed", "watermark")}
IDENTITY = dict(device=2049, inode=7, size=8192, hash=0x1122334455667788)


def context(slot, context_id):
    return cs.encode_record("context", slot=slot, pid=100, tid=101,
                            context_id=context_id, object_id=0x5000,
                            image_offset=0, cycle=0, **IDENTITY)


def callstack(slot, n):
    """A CALLSTACK of n frames (one in overlay 2), of depth n + n % 2."""
    frames = [(0x400 + 8 * k, 2 if k == 1 else 0) for k in range(n)]
    return cs.encode_record("callstack", slot=slot, depth=n + n % 2,
                            frames=frames)


def reasons(slot, poll, n):
    """A REASONS of n stalls, every 4-bit value in turn (6 to 15 are
    outside the trace unit's enum)."""
    return cs.encode_record("reasons", slot=slot,
                            stalls=[(3 * poll + i) % 16 for i in range(n)])


def transfer(slot, poll):
    """A TRANSFER: a known one on odd polls, none on even ones."""
    if poll % 2:
        return cs.encode_record("transfer", slot=slot,
                                known=cs.TRANSFER_KNOWN, tag=poll % 32,
                                issuer=0x400 + 4 * poll)
    return cs.encode_record("transfer", slot=slot, known=0, tag=0, issuer=0)


def session(polls=3, per_poll=4):
    """A sound stream: bytes, and the pieces for the mutated seeds."""
    out = [cs.encode_record("start", **START),
           cs.encode_record("image", path=b"/tmp/a.elf", **IDENTITY),
           context(0, 1), context(1, 2),
           cs.encode_record("overlay", slot=0, region=0, guard=1, cycle=0)]
    samples = lost = 0
    for poll in range(1, polls + 1):
        for slot in (0, 1):
            if slot == 0:
                out += [transfer(slot, poll), reasons(slot, poll, per_poll)]
            for i in range(per_poll):
                out.append(cs.encode_sample(slot, 4 * (poll * 37 + i)))
                if slot == 1:
                    out.append(callstack(slot, i))
            samples += per_poll
            out.append(cs.encode_record("time", slot=slot, cycle=poll * 100,
                                        time_ns=poll * 1000))
        out.append(cs.encode_record("lost", slot=0, cause=1, count=poll,
                                    cycle=poll * 100))
        lost += poll
    out += [cs.encode_record("release", slot=0, cycle=999),
            cs.encode_record("stop", time_ns=9999, samples=samples,
                             lost=lost)]
    return out


def seeds():
    whole = b"".join(session())
    yield "session", whole
    yield "long", b"".join(session(polls=20, per_poll=30))
    yield "cut", whole[:len(whole) // 2 + 3]
    yield "garbage", whole[:200] + bytes(range(37)) + whole[200:]
    yield "ones", whole[:96] + b"\xff" * 21 + whole[96:]
    parts = session()
    yield "repeat-start", b"".join(parts[:3] + [parts[0]] + parts[3:])
    conflict = dict(START, slots=8)
    yield "conflict", b"".join(parts[:3] +
                               [cs.encode_record("start", **conflict)] +
                               parts[3:])
    yield "unknown", b"".join(parts[:2] + [cs.encode_raw(99, [1, cs.ESCAPE]),
                                           cs.encode_raw(0)] + parts[2:])
    yield "extra", b"".join(parts[:2] + [cs.encode_record(
        "time", slot=0, cycle=1, time_ns=2, extra=[cs.ESCAPE, 5])] + parts[2:])
    placed = cs.encode_record("overlay", slot=0, region=1, guard=2, cycle=3,
                              placed=cs.OVERLAY_PLACED)
    old_form = cs.encode_record("overlay", slot=0, region=1, guard=0, cycle=3)
    yield "placed", b"".join(parts[:5] + [placed] + parts[5:7] + [old_form] +
                             parts[7:])
    yield "long-path", cs.encode_record("image", path=b"p" * 4000, **IDENTITY)
    stall = cs.encode_record("stall", slot=0, count=3, ns=12345, cycle=77)
    yield "stall", b"".join(parts[:6] + [stall] + parts[6:])
    end = cs.encode_record("end", slot=0, context_id=1, cycle=80)
    yield "end", b"".join(parts[:-1] + [end] + parts[-1:])
    yield "deep-stack", b"".join(parts[:4] + [cs.encode_sample(0, 8),
                                              callstack(0, cs.MAX_FRAMES)] +
                                 parts[4:])
    many = cs.MAX_REASONS // 16
    yield "many-reasons", b"".join(
        parts[:4] + [reasons(0, 1, many)] +
        [cs.encode_sample(0, 4 * (i % 64)) for i in range(many)] + parts[4:])
    yield "start-1-1", b"".join([cs.encode_record("start", **START_1_1)] +
                                parts[1:])


def main():
    parser = argparse.ArgumentParser(
        description="Write the seed corpus of the copstream fuzz target.")
    parser.add_argument("directory", help="where to write the seeds "
                        "(created if missing)")
    args = parser.parse_args()
    os.makedirs(args.directory, exist_ok=True)
    for name, data in seeds():
        with open(os.path.join(args.directory, "seed-" + name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
