"""benchlib — what the benchmarks under bench/ share.

Each benchmark is a standalone script that `make` installs into
build/bench/ beside this module (bench/module.mk) and imports it from
there (or from bench/ when run from the source tree).  parser() gives the
options every benchmark has: --build, the build folder it measures, and
with source=True --source, the tree it was built from; disk_bytes() what
a directory takes on disk.
"""

import argparse
import os


def parser(script, description, source=False):
    """An ArgumentParser for the benchmark `script` (its __file__) with
    --build (default: $COPROF_BUILD, else the folder holding build/bench/)
    and, with source, --source (default: $COPROF_SOURCE, else the build
    folder's parent)."""
    here = os.path.dirname(os.path.abspath(script))
    build = os.environ.get("COPROF_BUILD", os.path.dirname(here))
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--build", default=build,
                   help="the build folder (default: the one holding this "
                        "program, or $COPROF_BUILD)")
    if source:
        p.add_argument("--source", default=os.environ.get(
                           "COPROF_SOURCE",
                           os.path.dirname(os.path.abspath(build))),
                       help="the source tree (default: $COPROF_SOURCE, or "
                            "the build folder's parent)")
    return p


def disk_bytes(directory):
    """The blocks on disk of the files under directory (a sparse file
    counts what was written into it)."""
    total = 0
    for root, _, files in os.walk(directory):
        for name in files:
            total += os.lstat(os.path.join(root, name)).st_blocks * 512
    return total
