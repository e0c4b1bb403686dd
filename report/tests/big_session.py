#!/usr/bin/python3
"""Make a big session: many short contexts, recorded by coprofd.

A stream of N contexts of overlay/'s test image is written with
escape-protocol's Python encoder -- each context bound on a slot in turn,
its first guard read, a few poll groups of samples spread over the
image's functions, a trailing group, RELEASE and END (stream 1.3) -- and
replayed into DIR by `coprofd --replay`.  The counts are a function of
the context number, so a session of N contexts is always the same.

Used by report/tests/test_big_session.py (a few thousand contexts) and by
bench/report (100,000), which times copreport on it.
"""

import argparse
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [os.path.join(SOURCE, "escape-protocol"),
                os.path.join(SOURCE, "daemon", "tests")]

import coprofd_support as support  # noqa: E402

SLOTS = 8
GROUPS = 3              # poll groups with a TIME per context


def write_stream(out, image, contexts):
    """The stream of `contexts` short contexts into the binary file out."""
    layout = support.layout_of_overlay_test_image(image)
    ident = support.identity(image)
    addresses = [a for a in layout.addresses if a < 0x800]
    w = support.Writer()
    w.start(slots=SLOTS)
    w.image(image, ident)
    time_ns = 10**6
    for number in range(1, contexts + 1):
        slot = number % SLOTS
        w.context(slot, number, ident, pid=100 + number % 7)
        w.overlay(slot, 0, 1 + number % 3)
        w.overlay(slot, 1, 4 + number % 2)
        w.overlay(slot, 2, 0)
        for group in range(GROUPS):
            for i in range(4):
                address = addresses[(number + group * 5 + i * 3) %
                                    len(addresses)]
                w.sample(slot, address, 1 + (number + i) % 4)
            time_ns += 3000
            w.time(slot, 1000 * (group + 1), time_ns)
        w.sample(slot, addresses[number % len(addresses)], 2)
        w.release(slot, 5000)
        w.record("end", slot=slot, context_id=number, cycle=5000)
        if number % 1000 == 0:
            out.write(w.bytes())
            w.parts = []
    w.stop()
    out.write(w.bytes())


def make_session(directory, contexts, image=None, coprofd=None):
    """Records a session of `contexts` contexts into directory."""
    build = os.environ.get("COPROF_BUILD", os.path.join(SOURCE, "build"))
    image = image or os.path.join(build, "tests", "overlay", "overlays.elf")
    coprofd = coprofd or os.path.join(build, "bin", "coprofd")
    with tempfile.NamedTemporaryFile(suffix=".stream") as stream:
        write_stream(stream, image, contexts)
        stream.flush()
        subprocess.run([coprofd, "--replay", stream.name, "--session-dir",
                        directory, "--quiet", "--overwrite"], check=True,
                       stdout=subprocess.DEVNULL)


def main():
    parser = argparse.ArgumentParser(
        description="Record a session of many short contexts of overlay/'s "
                    "test image into DIR with coprofd --replay.")
    parser.add_argument("directory", metavar="DIR",
                        help="the session directory (replaced)")
    parser.add_argument("--contexts", type=int, default=100000,
                        help="contexts (default: %(default)s)")
    args = parser.parse_args()
    make_session(args.directory, args.contexts)


if __name__ == "__main__":
    main()
