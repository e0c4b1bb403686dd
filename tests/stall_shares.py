"""Sampled stall reasons against the exact counts, through the whole path.

A program runs on a slot of copsim (`copsim --event=SPU_CYCLES:N
--stream-out S --exact-counts DIR -- COMMAND`), `coprofd --replay S`
makes the session, and its `sample_stalls` rows are compared with the
exact cycles of `counts=` (tests/exact_counts.py), per (function, stall
reason): each sampled share must lie within 3.5 sigma of the exact share,
sigma the binomial one of that many samples (plus one sample's worth for
shares near zero).  `burners()` keeps two CPU burners running beside it,
so the same must hold on a busy machine.

Standard library and pyelftools only (/usr/bin/python3).
"""

import bisect
import contextlib
import glob
import io
import math
import os
import sqlite3
import subprocess

from elftools.elf.elffile import ELFFile

import exact_counts

SIGMAS = 3.5
# An SPU_CYCLES rate copsim accepts with its default FIFO depth.
EVERY = 157


@contextlib.contextmanager
def burners(count=2):
    """`count` shell loops burning a CPU each while the block runs."""
    procs = []
    try:
        for _ in range(count):
            procs.append(subprocess.Popen(["sh", "-c", "while :; do :; done"]))
        yield procs
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def record(build_dir, command, tmp_path, every=EVERY, event="SPU_CYCLES",
           env=None):
    """Runs command on one slot of copsim with the stall policy (no
    capture lost however busy the machine), replays its stream into a
    session; returns (the session's database, the counts files)."""
    stream = tmp_path / "stream"
    counts = tmp_path / "counts"
    counts.mkdir()
    proc = subprocess.run(
        [os.path.join(build_dir, "bin", "copsim"),
         "--event=%s:%d" % (event, every), "--fifo-full=stall",
         "--dither=7", "--stream-out", str(stream), "--slots", "1",
         "--context-model=slot", "--exact-counts", str(counts), "--"]
        + list(command), capture_output=True, text=True, timeout=600,
        env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    session = tmp_path / "session"
    done = subprocess.run(
        [os.path.join(build_dir, "bin", "coprofd"), "--replay", str(stream),
         "--session-dir", str(session)], capture_output=True, text=True,
        timeout=600)
    assert done.returncode == 0, done.stderr
    db = sqlite3.connect(str(session / "session.db"))
    return db, sorted(glob.glob(str(counts / "*.counts")))


def functions(image_path, elf_offset=0):
    """A function lookup: (sorted start offsets, names) of the text
    symbols of the image (at elf_offset in its file), by offset in the
    image, as a session's file_offset (a symbol's range runs to the
    next)."""
    with open(image_path, "rb") as f:
        f.seek(elf_offset)
        elf = ELFFile(io.BytesIO(f.read()))
        segments = [(s["p_vaddr"], s["p_filesz"], s["p_offset"])
                    for s in elf.iter_segments()
                    if s["p_type"] == "PT_LOAD" and s["p_flags"] & 1]
        found = {}
        for sym in elf.get_section_by_name(".symtab").iter_symbols():
            if sym["st_info"]["type"] not in ("STT_FUNC", "STT_NOTYPE") \
                    or not sym.name or sym.name[0] in ".$":
                continue
            for vaddr, size, offset in segments:
                if vaddr <= sym["st_value"] < vaddr + size:
                    found.setdefault(offset + sym["st_value"] - vaddr,
                                     sym.name)
    starts = sorted(found)
    return starts, [found[s] for s in starts]


def function_of(lookup, offset):
    starts, names = lookup
    i = bisect.bisect_right(starts, offset) - 1
    return names[i] if i >= 0 else None


def by_function(counts, lookup):
    """{(function, stall): n} from {(file offset, stall): n}."""
    out = {}
    for (offset, stall), n in counts.items():
        key = (function_of(lookup, offset), stall)
        out[key] = out.get(key, 0) + n
    return out


def exact_by_function(counts_path, image_path):
    """{(function, stall): cycles} of the exact counts of a run of the
    image at image_path (cop-run --exact-counts)."""
    return by_function(
        exact_counts.cycles_by_file_offset_and_stall(counts_path, image_path,
                                                     0),
        functions(image_path))


def sampled(db):
    """{(file offset, stall): samples} of the session (one context)."""
    return {(offset, stall): n for offset, stall, n in db.execute(
        "SELECT file_offset, stall, SUM(count) FROM sample_stalls"
        " GROUP BY file_offset, stall")}


def compare(db, counts_files, image_path):
    """Asserts every (function, stall) share of the session's samples is
    within SIGMAS of the exact share; returns (sampled, exact) by
    (function, stall).  The session's one image is image_path's file (at
    the offset the session gives: an image embedded in a host program)."""
    [(path, elf_offset)] = db.execute("SELECT path, image_offset FROM"
                                      " images").fetchall()
    assert path == image_path
    lookup = functions(image_path, elf_offset)
    exact = {}
    for path in counts_files:
        for (offset, stall), n in \
                exact_counts.cycles_by_file_offset_and_stall(
                    path, image_path, elf_offset).items():
            key = (offset - elf_offset, stall)
            exact[key] = exact.get(key, 0) + n
    got, want = by_function(sampled(db), lookup), by_function(exact, lookup)
    n, total = sum(got.values()), sum(want.values())
    assert n > 100 and total > 0
    samples = db.execute("SELECT SUM(count) FROM samples").fetchone()[0]
    assert n == samples             # sample_stalls holds every exact one
    for key in set(got) | set(want):
        p, share = want.get(key, 0) / total, got.get(key, 0) / n
        bound = SIGMAS * math.sqrt(p * (1 - p) / n) + 1 / n
        assert abs(share - p) <= bound, (
            "%s %s: sampled %.4f of %d, exact %.4f (bound %.4f)"
            % (key[0], exact_counts.REASONS[key[1]], share, n, p, bound))
    return got, want
