#!/usr/bin/python3
"""Write seed inputs for coprofd's fuzz target (daemon/fuzz-session.c).

An input is two control bytes -- bit 0 of the first chooses the target's
sound prefix (START, the image, two bound contexts), the second where the
rest is split in two feeds -- and then stream bytes.  The seeds are random
runs of coprofd_support.Simulation (whole streams, no prefix; some with
the overlay watch on) and poll groups for the prefix's two slots with
overlay swaps (some placed among the samples), releases, lost samples,
END records (of a context, twice or of none, with samples after) and
the samples' call stacks (1.4 CALLSTACK records, some with frames in an
overlay, some deeper than their frames, some stray) and their stall
reasons (1.6 REASONS records before a slot's samples of a poll, some
with a reason outside the enum, some with fewer reasons than samples and
some with more -- the reasons-unread error -- and TRANSFER records naming
a DMA wait's tag and issuer, or none), and one stream of
64-bit extremes (offsets, sizes, cycles, times of 2^63 and more).
"""

import argparse
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [HERE, os.path.join(SOURCE, "escape-protocol")]

import coprofd_support as support  # noqa: E402


def reasons(rng, w, slot, n, image):
    """Maybe a TRANSFER, then maybe the REASONS of the slot's next n
    samples (sometimes one too few or too many)."""
    if rng.random() < 0.2:
        if rng.random() < 0.8:
            w.transfer(slot, tag=rng.randrange(32),
                       issuer=rng.choice(image.addresses))
        else:
            w.transfer(slot)
    if rng.random() < 0.6:
        count = max(1, n + rng.choice((0, 0, 0, 0, -1, 1)))
        w.reasons(slot, [rng.choice((0, 1, 2, 3, 3, 4, 5, 9, 15))
                         for _ in range(count)])


def prefixed_seed(rng, image):
    """Poll groups for slots 0 and 1 of the target's prefix."""
    w = support.Writer()
    for poll in range(rng.randrange(2, 8)):
        for slot in (0, 1):
            n = rng.randrange(0, 6)
            reasons(rng, w, slot, n, image)
            for _ in range(n):
                w.sample(slot, rng.choice(image.addresses))
                if rng.random() < 0.5:
                    frames = [(rng.choice(image.addresses) + 4,
                               rng.choice((0, 0, 1, 2, 4)))
                              for _ in range(rng.randrange(0, 5))]
                    w.callstack(slot, frames,
                                len(frames) + rng.choice((0, 0, 3)))
                if rng.random() < 0.1:
                    w.overlay(slot, rng.randrange(2),
                              rng.choice((0, 1, 2, 3)), placed=True)
            if rng.random() < 0.4:
                w.overlay(slot, 0, rng.choice((0, 1, 2, 3)))
            if rng.random() < 0.1:
                w.callstack(slot, [])       # stray: after no sample
            if rng.random() < 0.2:
                w.lost_samples(slot, rng.choice((1, 2, 3)), 1)
            w.time(slot, poll * 10, poll * 100)
    if rng.random() < 0.5:
        slot = rng.choice((0, 1))
        w.release(slot)
        if rng.random() < 0.7:      # 1.3: the prefix's contexts are 1, 2
            w.record("end", slot=slot, context_id=rng.choice((1, 2, 9)),
                     cycle=0)
            if rng.random() < 0.5:
                w.sample(slot, rng.choice(image.addresses))
    w.stop()
    return w.bytes()


def extremes_seed(ident_path):
    """A whole stream whose 64-bit fields are at their extremes: a CONTEXT
    with image offset and size of 2^63 and more, cycles, object id and a
    stall's ns of 2^64 - 1 (coprofd stores them clamped, never
    negative)."""
    w = support.Writer()
    w.start(slots=2)
    ident = dict(support.identity(ident_path), size=2**63)
    w.image(ident_path, ident)
    w.record("context", slot=0, pid=2**32 - 1, tid=2**32 - 1,
             context_id=2**64 - 1, object_id=2**64 - 1,
             image_offset=2**64 - 1, cycle=2**64 - 1, **ident)
    w.sample(0, 0x10, 3)
    w.stall(0, 2**32 - 1, 2**64 - 1)
    w.time(0, 2**64 - 1, 2**64 - 1)
    w.lost_samples(0, 1, 2**32 - 1, 2**64 - 1)
    w.stop(time_ns=2**64 - 1)
    return w.bytes()


def main():
    parser = argparse.ArgumentParser(
        description="Write seed inputs for coprofd's fuzz target into "
                    "CORPUS (created if needed).")
    parser.add_argument("corpus", metavar="CORPUS",
                        help="the corpus directory")
    parser.add_argument("--image", default=os.path.join(
        SOURCE, "build", "tests", "overlay", "overlays.elf"),
        help="the overlay test image the streams name (default: %(default)s)")
    args = parser.parse_args()
    os.makedirs(args.corpus, exist_ok=True)
    rng = random.Random(1)
    image = support.layout_of_overlay_test_image(args.image)
    seeds = []
    for seed in range(6):
        sim = support.Simulation(seed, [image], slots=2,
                                 contexts=3, steps=25,
                                 watch=("none", "half", "all")[seed % 3])
        seeds.append(bytes([0, rng.randrange(256)]) + sim.writer.bytes())
    for _ in range(6):
        seeds.append(bytes([1, rng.randrange(256)]) +
                     prefixed_seed(rng, image))
    seeds.append(bytes([0, 0]) + extremes_seed(args.image))
    for number, data in enumerate(seeds):
        with open(os.path.join(args.corpus, "seed-%02d" % number), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
