"""copreport's command line: the profile (default), `timeline` and
`callgraph`.

Every error is one line "copreport: THING: reason" on stderr, never a
traceback: exit status 2 for bad usage (options, their values, filters
naming nothing in the session), 1 for runtime errors (no session, a
session that cannot be read or is damaged, an output file that cannot be
written).  Per-image problems are warning lines, "copreport: warning:
...", and the report goes on.
"""

import argparse
import contextlib
import os
import sys

from . import annotate, archive, callgraph, diff, export, html, output
from . import host as host_mod, profile, safefile, stalls, timeline
from . import session as session_mod

# The name in usage and messages: coprof runs copreport for `coprof top`
# and `coprof archive` and says so in COPREPORT_PROG.
PROG = os.environ.get("COPREPORT_PROG") or "copreport"

REPORT_DESCRIPTION = """\
Report where the coprocessors spent their cycles, per symbol, from a coprof
session (the directory `coprof record`, copcontrol or coprofd wrote), the
way opreport does for CPUs.

A header says how the session was sampled: the capture period, whether
the period was dithered (and its seed), what the trace unit did with a
full FIFO (stall: the coprocessor waited, nothing lost; drop: captures
lost) and how long it stalled, in total and per slot.

Each row gives the samples, their share of the group's samples with its
95% Wilson score interval (the shares p0 with |k/n - p0| <= 1.96
sqrt(p0(1-p0)/n); unlike p +- 1.96 SE it is right for small counts and
never leaves 0-100%), the image (its short name and the file it lives in,
with the offset of an image embedded in a host executable: pipeline
(host-pipeline@0x1a800)), the overlay and the symbol.  The interval covers
sampling noise only: not aliasing (a fixed period in step with a loop
samples the same instructions every time; the dither prevents it), and
not losses.

Overlay functions sharing an address are distinct rows, named with their
overlay's section.  Samples the daemon could not place exactly are rows of
their own: [ambiguous region R: f|g] (taken while the overlay region was
swapped; the candidates are named, the count never split), [unmapped
REASON], [orphan] (no context on the slot).  With --separate=context each
context gets a header: pid/tid, image, and the host call site that created
it.  Each group's footer gives the captures it lost, by cause, and their
share of its captures (samples + lost); losses fall on the fastest code,
so a group that lost more than 1% is flagged: its shares may be biased.
The report's footer gives the totals, the lost samples by cause and by
image, a WARNING line per group (and, unseparated, per image) that lost
more than 1%, and the ambiguous total."""

REPORT_EPILOG = """\
files:
  DIR/session.db      the session database (docs/session-format.md),
                      opened read-only; a session being recorded may be read
  DIR/images/         the session's copies of the coprocessor images, which
                      symbols are read from
  default DIR         ./coprof_data (coprof record's) if it exists, else
                      $XDG_DATA_HOME/coprof/current (copcontrol's; default
                      ~/.local/share/coprof/current)

session:
  A damaged session (a count stored as text, a negative count, a bad
  format_version, ...) is refused with one line naming what is wrong.  A
  cached image that is not the image's bytes, or a missing one beside a
  rebuilt host binary, is a warning line on stderr; that image's samples
  are then shown from the original file or without symbols.  The header
  says whether the session is complete, live (as of its last flush) or
  incomplete, and why.

exit status:
  0  the report was written
  1  no session, an unreadable or damaged session or archive, sessions
     sampled at different periods (-d A -d B), or an output that cannot
     be written
  2  bad usage: an unknown option or --separate, a bad --threshold, an
     --image or --context that names nothing in the session, an empty -o

examples:
  copreport                              the session in ./coprof_data
  copreport -d DIR --separate=context    one section per context
  copreport -d A -d B                    two sessions summed
  copreport -d run.coprof.tar.gz         a session from its archive
  copreport --image overlays --threshold 1
  copreport --format json --separate=none > profile.json
  copreport timeline -o trace.json --png timeline.png

see also: copreport SUBCOMMAND --help (timeline, callgraph, annotate,
          export, diff, html, archive); report/README.md"""

TIMELINE_DESCRIPTION = """\
Write the session's timeline as Chrome trace event JSON, which Perfetto
(ui.perfetto.dev) and chrome://tracing open: a track per slot with the
contexts bound to it over time, a track per context with the functions it
ran (per time bucket the function with the most samples, consecutive
buckets merged) -- with more than 100 contexts a track per slot and
image instead, the context an argument of each slice (--tracks) --
and the scheduler's events from the event log as instant
events, all on CLOCK_MONOTONIC (ts in microseconds); with the host side
(coprof-host) a track per thread of the host program with its states
(running, runnable, blocked; adjacent short ones merged, --host-merge-us)
and host samples -- copsim's and its QEMUs' threads with
--host-threads=all.  --png also draws slot occupancy and the top
functions over time.  Long work prints a progress line a second on
standard error."""

TIMELINE_EPILOG = """\
files:
  DIR/session.db      bindings, sample_timeline, sched_events (read-only)
  DIR/images/         the coprocessor images, for function names
  default DIR         ./coprof_data, else $XDG_DATA_HOME/coprof/current

exit status:
  0  written; 1  no, unreadable or damaged session, unwritable output;
  2  bad usage

examples:
  copreport timeline -o trace.json
  copreport timeline -d DIR -o trace.json --png timeline.png
  copreport timeline --tracks=context -o trace.json   # one per context"""


CALLGRAPH_DESCRIPTION = """\
Print the call graph of a session recorded with --call-graph (coprof
record --call-graph, copcontrol --call-graph), like perf report -g caller
and gprof's call graph: per function its inclusive samples (those whose
call stack holds it, once per stack however deep it recurses) and its self
samples (those taken in it), each with its share of all the samples with
call stacks and its 95% Wilson score interval; then per function its
callers and its callees, each edge with the samples whose stack has the
callee right inside the caller.

The stacks come from the trace unit's shadow stack (docs/trace-unit.md,
"Call stacks"): exact, without frame pointers; a tail call leaves no
frame, so a tail-called function's caller is the one it returns to.
Overlay functions sharing an address are apart, each caller named with the
overlay it was called from.  Functions are ordered by inclusive samples."""

CALLGRAPH_EPILOG = """\
files:
  DIR/session.db      the stacks table (docs/session-format.md), read-only
  DIR/images/         the coprocessor images, for function names
  default DIR         ./coprof_data, else $XDG_DATA_HOME/coprof/current

exit status:
  0  written; 1  no, unreadable or damaged session, a session without
  call stacks, an unwritable output; 2  bad usage

examples:
  copreport callgraph
  copreport callgraph -d DIR --threshold 2
  copreport callgraph --context 3 --format json -o graph.json"""


class UsageError(Exception):
    pass


class Parser(argparse.ArgumentParser):
    def error(self, message):
        if message.startswith("argument "):
            thing, _, reason = message[len("argument "):].partition(": ")
            thing = thing.split("/")[-1]
            message = "%s: %s" % (thing, reason)
        elif message.startswith("unrecognized arguments: "):
            message = "%s: unrecognized argument" % \
                message[len("unrecognized arguments: "):]
        elif message.startswith("the following arguments are required: "):
            things = message.split(": ", 1)[1]
            message = "%s: required" % ", ".join(
                t.split("/")[-1] for t in things.split(", "))
        raise UsageError(message)


def _threshold(text):
    t = text.strip()
    if t.endswith("%"):
        t = t[:-1]
    try:
        v = float(t)
    except ValueError:
        raise argparse.ArgumentTypeError("not a percentage: %r" % text)
    if not (0.0 <= v <= 100.0) or v != v:
        raise argparse.ArgumentTypeError("%r is not between 0 and 100" % text)
    return v


def _file_name(text):
    """An output file name: not empty (that would be standard output)."""
    if not text:
        raise argparse.ArgumentTypeError("an empty file name")
    return text


def _non_negative(text):
    """A whole number, 0 or more."""
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError("%r is not a whole number >= 0"
                                          % text)
    return n
def _bucket_ms(text):
    try:
        v = float(text)
    except ValueError:
        v = -1
    if not (v > 0) or v > 3.6e6:
        raise argparse.ArgumentTypeError("%r is not a width in ms" % text)
    return int(round(v * 1e6))


def _session_arg(p, several=False):
    if several:
        p.add_argument("-d", "--session-dir", metavar="DIR", dest="dirs",
                       action="append", default=[],
                       help="the session directory or archive (default "
                            "./coprof_data, else "
                            "$XDG_DATA_HOME/coprof/current); repeated: "
                            "the sessions summed, their contexts apart")
        return
    p.add_argument("-d", "--session-dir", metavar="DIR", dest="dir",
                   help="the session directory or archive (default "
                        "./coprof_data, else $XDG_DATA_HOME/coprof/current)")


def _selection_args(p, hidden, what):
    """--threshold (hiding `hidden`), --image and --context (keeping the
    `what` of them)."""
    p.add_argument("-t", "--threshold", type=_threshold, default=0.0,
                   metavar="PERCENT",
                   help="leave out %s (0-100, default 0)" % hidden)
    p.add_argument("-i", "--image", action="append", default=[],
                   metavar="NAME",
                   help="only %s of this image: its short name, its file, "
                        "or its number (repeatable)" % what)
    p.add_argument("-c", "--context", action="append", default=[],
                   metavar="N",
                   help="only %s of this context: coprofd's number N, "
                        "pid:PID or tid:TID (repeatable)" % what)


def report_parser():
    p = Parser(prog=PROG, description=REPORT_DESCRIPTION,
               epilog=REPORT_EPILOG,
               usage="%(prog)s [-d DIR]... [OPTIONS]\n"
                     "       %(prog)s timeline [-d DIR] [-o FILE.json] "
                     "[--png FILE] [--bucket-ms MS]\n"
                     "       %(prog)s callgraph [-d DIR] [OPTIONS]\n"
                     "       %(prog)s annotate [-d DIR] [SYMBOL...]\n"
                     "       %(prog)s export [-d DIR]... --format FMT "
                     "-o FILE\n"
                     "       %(prog)s diff OLD NEW\n"
                     "       %(prog)s html [-d DIR] -o FILE.html\n"
                     "       %(prog)s archive [-d DIR] [-o FILE]",
               formatter_class=argparse.RawDescriptionHelpFormatter)
    _session_arg(p, several=True)
    p.add_argument("-s", "--separate", default="none", metavar="HOW",
                   choices=profile.SEPARATIONS,
                   help="group rows by context, slot, image or none "
                        "(default none)")
    _selection_args(p, "rows under PERCENT of their group", "samples")
    p.add_argument("--side", default="all", choices=profile.SIDES,
                   metavar="SIDE",
                   help="cop: the coprocessors' samples; host: the host "
                        "program's CPU samples (coprof record "
                        "--host-event), by ELF file and symbol; all: both, "
                        "apart (default all; several sessions: cop)")
    p.add_argument("--by", default="symbol", choices=output.BYS,
                   metavar="WHAT",
                   help="symbol: a row per symbol, with its wait share and "
                        "top wait; reason: a row per symbol and stall reason "
                        "(issue, dependency, branch, dma_wait, mailbox_wait, "
                        "memory) (default symbol)")
    _format_output_args(p, output.FORMATS)
    return p


def _subparser(name, description, epilog):
    """The Parser of `copreport NAME`."""
    return Parser(prog=PROG + " " + name, description=description,
                  epilog=epilog,
                  formatter_class=argparse.RawDescriptionHelpFormatter)


def timeline_parser():
    p = _subparser("timeline", TIMELINE_DESCRIPTION, TIMELINE_EPILOG)
    _session_arg(p)
    p.add_argument("-o", "--output", metavar="FILE.json", type=_file_name,
                   help="the Chrome trace event JSON to write (needed "
                        "unless --png is given)")
    p.add_argument("--png", metavar="FILE", type=_file_name,
                   help="draw slot occupancy and the top functions over "
                        "time to FILE (PNG)")
    p.add_argument("--bucket-ms", type=_bucket_ms, default=0, metavar="MS",
                   help="sum the session's sample buckets (its "
                        "timeline.bucket_ns, coprof record --timeline-ms) "
                        "into MS-wide ones, a multiple of them (default: "
                        "the session's)")
    p.add_argument("--tracks", default="auto", choices=timeline.TRACKS,
                   help="the contexts' function slices: a track per "
                        "context, a track per slot and image with the "
                        "context as an argument of each slice (for "
                        "thousands of contexts), or auto: grouped above "
                        "%d contexts (default: %%(default)s)"
                   % timeline.GROUP_CONTEXTS)
    p.add_argument("--host-threads", default="command",
                   choices=("command", "all"),
                   help="the host threads with a track: the host program's "
                        "(default), or also copsim's and its QEMUs' (the "
                        "emulator's machinery; recorded only with coprof "
                        "record --host-sched=all)")
    p.add_argument("--host-merge-us", metavar="US", type=_non_negative,
                   default=host_mod.MERGE_NS // 1000,
                   help="host thread states shorter than US microseconds "
                        "merge into the slice before them, named by the "
                        "state that held most of it, each state's ns in "
                        "its args (default: %(default)s; 0: every state)")
    return p


ANNOTATE_DESCRIPTION = """\
Annotate functions instruction by instruction, like opannotate: each
function's disassembly (riscv64-unknown-elf-objdump on the image's bytes)
with every instruction's samples and their percent of the function's,
its address and its file offset in the image, and the function's source
lines from the image's DWARF.  Overlay functions that share local-store
addresses are annotated apart, each from its own bytes.  Without SYMBOL,
every function with samples, hottest first.  An image without debug
information is annotated without source, and the report says why.
--source gives the per-source-line view of whole files instead."""

ANNOTATE_EPILOG = """\
text output:
  a header per function (image, symbol, [overlay], samples, share of the
  session, source file), then one line per instruction:
     SAMPLES   PERCENT  ADDRESS   OFFSET    INSTRUCTION
  by samples (--order=samples, each with its FILE:LINE), or by address
  (--order=address) with the source line printed above the instructions
  it became.

exit status:
  0  written; 1  no, unreadable or damaged session, objdump missing or
  failing, unwritable output; 2  bad usage (a SYMBOL with no samples)

examples:
  copreport annotate stage_denoise
  copreport annotate --order=address crc16_bitwise blur_picture
  copreport annotate --source stages.c
  copreport annotate --format json > annotate.json"""

EXPORT_DESCRIPTION = """\
Export the session's samples for other viewers: pprof (profile.proto,
gzipped: go tool pprof, Parca, Pyroscope), callgrind (callgrind_annotate,
KCachegrind), folded stacks (flamegraph.pl, speedscope) or speedscope's
JSON (speedscope.app).  Each keeps the image, the overlay and the context
of every sample: pprof as sample labels (context, pid, tid, image,
overlay), a Mapping per image, a Location per instruction with its
source line; callgrind with the context as the outermost caller, ob= the
image, fl= the source file and costs on their lines; folded and
speedscope with the context as the first frame (speedscope: a profile per
context).  A session recorded with --call-graph exports its call stacks;
any other exports each sample's function alone, every sample once."""

EXPORT_EPILOG = """\
examples:
  copreport export --format pprof -o coprof.pb.gz
  go tool pprof -top coprof.pb.gz
  copreport export --format callgrind -o callgrind.out.coprof
  copreport export --format folded -o coprof.folded
  flamegraph.pl coprof.folded > flame.svg
  copreport export --format speedscope -o coprof.speedscope.json

exit status:
  0  written; 1  no, unreadable or damaged session, sessions sampled at
  different periods, unwritable output; 2  bad usage"""


def callgraph_parser():
    p = _subparser("callgraph", CALLGRAPH_DESCRIPTION, CALLGRAPH_EPILOG)
    _session_arg(p)
    _selection_args(p, "functions under PERCENT inclusive", "stacks")
    _format_output_args(p, tuple(callgraph.WRITERS))
    return p


def annotate_parser():
    p = _subparser("annotate", ANNOTATE_DESCRIPTION, ANNOTATE_EPILOG)
    _session_arg(p)
    p.add_argument("symbols", nargs="*", metavar="SYMBOL",
                   help="functions to annotate (default: every function "
                        "with samples)")
    p.add_argument("--order", choices=annotate.ORDERS, default="samples",
                   help="instructions hottest first (samples, the default)"
                        " or by address")
    p.add_argument("--source", metavar="FILE", nargs="?", const="",
                   help="per source line instead: every line of FILE (a "
                        "path or its end, e.g. stages.c), or of every "
                        "source file with samples when FILE is not given")
    p.add_argument("-i", "--image", action="append", default=[],
                   metavar="NAME", help="only functions of this image "
                   "(repeatable)")
    _format_output_args(p, annotate.FORMATS)
    return p


def export_parser():
    p = _subparser("export", EXPORT_DESCRIPTION, EXPORT_EPILOG)
    _session_arg(p, several=True)
    p.add_argument("-f", "--format", required=True, choices=export.FORMATS,
                   metavar="FMT",
                   help="pprof, callgrind, folded or speedscope")
    p.add_argument("-o", "--output", metavar="FILE", required=True,
                   type=_file_name, help="the file to write")
    return p


DIFF_DESCRIPTION = """\
Compare two sessions function by function, like perf diff: per symbol its
share of OLD's samples and of NEW's, the change in points, and whether
the change is beyond sampling noise -- a two-proportion z test per row,
significant when it passes Holm's correction over the whole table at 95%
(two runs of the same workload flag nothing 95 times in 100).  Images are
matched by identity (the content hash of their bytes), else by name (a
rebuilt program).  Rows come most significant first."""

DIFF_EPILOG = """\
examples:
  copreport diff before/coprof_data after/coprof_data
  copreport diff OLD NEW --format json | jq '.rows[] | select(.significant)'

exit status:
  0  written; 1  a session missing, unreadable or damaged, an unwritable
  output; 2  bad usage"""


def _format_output_args(p, formats):
    p.add_argument("-f", "--format", default="text", choices=formats,
                   metavar="FMT", help="%s or %s (default text)"
                   % (", ".join(formats[:-1]), formats[-1]))
    p.add_argument("-o", "--output", metavar="FILE", type=_file_name,
                   help="write to FILE instead of standard output")


def diff_parser():
    p = _subparser("diff", DIFF_DESCRIPTION, DIFF_EPILOG)
    p.add_argument("old", metavar="OLD",
                   help="the session before (a directory or an archive)")
    p.add_argument("new", metavar="NEW", help="the session after")
    _format_output_args(p, diff.FORMATS)
    return p


HTML_DESCRIPTION = """\
Write the report as one HTML page to explore in a browser opened from the
file system, without a server and without fetching anything (its style,
its script and the d3 and d3-flame-graph libraries are inside it).  Its
views, switched by the links at the top: the profile (every row with its
share, its 95% interval and a bar, each function linked to its
annotation); a table per context and per slot; a flame graph of the call
stacks (a session recorded with --call-graph; otherwise a line says there
are none); the timeline of copreport timeline, zoomable and pannable; and
each function's annotation, its source lines and instructions hottest
first (or in address order).  FILE is written 0600; when it is an existing
directory, the page is FILE/index.html.  Opened with the fragment
#selftest, the page checks its own views and says "pass" or "fail: WHY"
in its body's data-selftest attribute."""

HTML_EPILOG = """\
examples:
  copreport html -o report.html && chromium report.html
  copreport html -d DIR -o report.html --top 20

exit status:
  0  written; 1  no, unreadable or damaged session, FILE not writable,
  the JavaScript libraries missing (make deps); 2  bad usage"""

ARCHIVE_DESCRIPTION = """\
Write the session and the coprocessor images its report needs into one
file, like oparchive, for reading on another machine: `copreport -d FILE`
(and every subcommand's -d) reads the archive as it reads a session
directory, with the same numbers and names although the programs that
ran are not there.  The file is a gzipped tar of session/session.db and
session/images/; an image missing from the session's cache is taken from
the file the context ran when that still is the same file.  A live
session is archived as of its last flush.  `coprof archive` runs this."""

ARCHIVE_EPILOG = """\
examples:
  coprof archive -o run1.coprof.tar.gz
  copreport -d run1.coprof.tar.gz --separate=context

exit status:
  0  written; 1  no, unreadable or damaged session, an output that cannot
  be written; 2  bad usage"""

DEFAULT_ARCHIVE = "coprof_archive.tar.gz"


def html_parser():
    p = _subparser("html", HTML_DESCRIPTION, HTML_EPILOG)
    _session_arg(p)
    p.add_argument("-o", "--output", metavar="FILE.html", required=True,
                   type=_file_name, help="the page to write")
    p.add_argument("--top", type=int, default=None, metavar="N",
                   help="annotate only the N hottest functions (default: "
                   "every function with samples)")
    return p


def archive_parser():
    p = _subparser("archive", ARCHIVE_DESCRIPTION, ARCHIVE_EPILOG)
    _session_arg(p)
    p.add_argument("-o", "--output", metavar="FILE", default=DEFAULT_ARCHIVE,
                   type=_file_name,
                   help="the archive to write (default %(default)s)")
    return p


class RuntimeFailure(Exception):
    pass


def _open_session(d):
    """The session in directory d, or in the archive file d (archive.py),
    or the default one when d is None."""
    if d is None:
        d = session_mod.default_dir()
        if d is None:
            raise RuntimeFailure(
                "coprof_data: no session here, and none in "
                "$XDG_DATA_HOME/coprof/current (give -d DIR)")
    if os.path.isfile(d):
        try:
            return archive.open_archive(d)
        except archive.ArchiveError as e:
            raise RuntimeFailure(str(e))
    return session_mod.Session.open(d)


def _open_sessions(dirs):
    """The sessions of -d (repeatable), all opened or none."""
    sessions = []
    try:
        for d in dirs or [None]:
            sessions.append(_open_session(d))
    except BaseException:
        for s in sessions:
            s.close()
        raise
    return sessions


def _close(sessions):
    for s in sessions:
        s.close()


@contextlib.contextmanager
def _opened(dirs):
    """The sessions of dirs (None: the default one), closed at the end;
    their per-image warnings on stderr once the work read them; the
    subcommands' one-line failures as RuntimeFailure."""
    sessions = _open_sessions(dirs)
    try:
        try:
            yield sessions
        except (profile.MergeError, export.ExportError,
                annotate.AnnotateError, archive.ArchiveError,
                callgraph.NoStacks) as e:
            if isinstance(e, profile.MergeError):
                raise RuntimeFailure("%s: %s" % (_names(sessions), e))
            raise RuntimeFailure(str(e))
        for s in sessions:
            _warn(s)
    finally:
        _close(sessions)


def _names(sessions):
    return " + ".join(s.name for s in sessions)


def _open_output(path, mode="w"):
    """The output file a user named, by safefile's rule (no planted link
    followed, put in place when complete); a context manager."""
    try:
        return safefile.output(path, mode)
    except safefile.SafeFileError as e:
        raise RuntimeFailure(str(e))


def _check_writable(path):
    """Fail early (before the work) when path cannot be written."""
    try:
        safefile.check_output(path)
    except safefile.SafeFileError as e:
        raise RuntimeFailure(str(e))


def _warn(session):
    """The session's per-image warnings, one line each on stderr."""
    for w in session.warnings:
        sys.stderr.write("%s: warning: %s\n" % (PROG, w))


def _write(path, write):
    """write(f) to the file path, or to standard output when None."""
    if path is not None:
        with _open_output(path) as f:
            write(f)
    else:
        write(sys.stdout)
        sys.stdout.flush()


def run_report(args):
    if args.output is not None:
        _check_writable(args.output)
    sessions = _open_sessions(args.dirs)
    try:
        try:
            prof = profile.build_many(sessions, args.separate, args.image,
                                      args.context, args.threshold,
                                      args.side)
        except profile.FilterError as e:
            raise UsageError(str(e))
        except profile.MergeError as e:
            raise RuntimeFailure("%s: %s" % (_names(sessions), e))
        for s in sessions:
            _warn(s)
        prof.by = args.by
        if args.by == "reason" and not prof.stalls_recorded:
            sys.stderr.write("%s: %s: %s\n" % (PROG, _names(sessions),
                                                 stalls.NOT_RECORDED))
        writer = output.WRITERS[args.format]
        _write(args.output, lambda f: writer(prof, f, _names(sessions)))
    finally:
        _close(sessions)


def run_timeline(args):
    import json
    if args.output is None and args.png is None:
        raise UsageError("-o/--output or --png: required (what to write)")
    if args.output is not None:
        _check_writable(args.output)
    if args.png is not None:
        _check_writable(args.png)
    s = _open_session(args.dir)
    try:
        width = s.int_key("timeline.bucket_ns", 0)
        if args.bucket_ms and (not width or args.bucket_ms % width):
            raise UsageError("--bucket-ms: %g ms is not a multiple of the "
                             "session's %g ms buckets"
                             % (args.bucket_ms / 1e6, width / 1e6))
        progress = timeline.Progress()
        tl = timeline.build(s, args.host_threads, args.host_merge_us * 1000,
                            progress, bucket_ns=args.bucket_ms)
        _warn(s)
        if args.output is not None:
            trace = timeline.trace_events(tl, args.tracks)
            progress.step("writing %d trace events"
                          % len(trace["traceEvents"]))
            with _open_output(args.output) as f:
                json.dump(trace, f)
                f.write("\n")
        if args.png is not None:
            try:
                from . import plot
            except ImportError as e:
                raise RuntimeFailure("%s: needs Debian's python3-matplotlib "
                                     "(%s)" % (args.png, e))
            with _open_output(args.png, "wb") as f:
                plot.write_png(tl, f, "timeline: %s" % s.name)
    finally:
        s.close()


def run_callgraph(args):
    if args.output is not None:
        _check_writable(args.output)
    with _opened([args.dir]) as (s,):
        try:
            graph = callgraph.build(s, args.context, args.image)
        except profile.FilterError as e:
            raise UsageError(str(e))
        writer = callgraph.WRITERS[args.format]
        _write(args.output, lambda f: writer(graph, f, s.name,
                                             args.threshold))


def run_annotate(args):
    if args.output is not None:
        _check_writable(args.output)
    with _opened([args.dir]) as (s,):
        try:
            funcs = annotate.annotate(s, args.symbols, args.image)
        except profile.FilterError as e:
            raise UsageError(str(e))
        total = annotate.session_samples(s)
        if args.source is not None:
            files = annotate.by_source(funcs, args.source or None)
            if args.source and not files:
                raise UsageError("%s: no sampled instruction comes from a "
                                 "source file of that name" % args.source)
            _write(args.output, lambda f: annotate.write_source(
                files, f, args.format, total, s.name))
            return
        writer = annotate.WRITERS[args.format]
        _write(args.output, lambda f: writer(funcs, f, total, args.order,
                                             s.name))


def run_export(args):
    _check_writable(args.output)
    with _opened(args.dirs) as sessions:
        try:
            export.export(sessions, args.format, args.output,
                          _names(sessions))
        except safefile.SafeFileError as e:
            raise RuntimeFailure(str(e))
        except OSError as e:
            raise RuntimeFailure("%s: %s" % (args.output, e.strerror or e))


def run_diff(args):
    if args.output is not None:
        _check_writable(args.output)
    with _opened([args.old, args.new]) as sessions:
        d = diff.build(*sessions)
        _write(args.output, lambda f: diff.WRITERS[args.format](d, f))


def run_html(args):
    if args.top is not None and args.top < 0:
        raise UsageError("--top: %d is not a number of functions" % args.top)
    if not os.path.isdir(args.output):
        _check_writable(args.output)
    with _opened([args.dir]) as (s,):
        try:
            page = html.write(s, args.output, args.top)
        except (html.HtmlError, safefile.SafeFileError) as e:
            raise RuntimeFailure(str(e))
        except OSError as e:
            raise RuntimeFailure("%s: %s" % (e.filename or args.output,
                                             e.strerror or e))
        sys.stderr.write("%s: wrote %s\n" % (PROG, page))


def run_archive(args):
    _check_writable(args.output)
    with _opened([args.dir]) as (s,):
        n = archive.write(s, args.output)
        sys.stderr.write("%s: archived %s with %d image%s in %s\n"
                         % (PROG, s.name, n, "" if n == 1 else "s",
                            args.output))


SERVE_DESCRIPTION = """\
Serve the profiles of a session being recorded the way Go's net/http/pprof
does: GET /debug/pprof/profile?seconds=N (default 30) answers, after N
seconds, the coprocessors' samples taken during them as a gzipped
profile.proto (the pprof export's: a Mapping per image, lines from
DWARF).  go tool pprof reads it; Parca and Grafana Alloy (for
Pyroscope) can scrape it (control/README.md).  copcontrol
--serve-pprof=HOST:PORT runs this on its session."""

SERVE_EPILOG = """\
examples:
  copreport serve-pprof --listen 127.0.0.1:6060
  go tool pprof -top http://127.0.0.1:6060/debug/pprof/profile?seconds=5

exit status:
  1  the address cannot be bound; 2  bad usage"""

TOP_DESCRIPTION = """\
A live view of a session being recorded (coprof top): once a second, the
samples a second, losses and stall time, and the top functions (or
contexts, slots, images: keys f, c, s, i) over the last interval and
since the start; it says BEHIND when a look came late, and STALE when
the session says live but coprofd has not flushed it for more than 3
flush intervals.  q quits.  Works
in any terminal (curses); without one, or with --once, one interval is
printed."""


def serve_parser():
    p = _subparser("serve-pprof", SERVE_DESCRIPTION, SERVE_EPILOG)
    _session_arg(p)
    p.add_argument("--listen", metavar="HOST:PORT", required=True,
                   help="the address to serve on (give a loopback one, "
                        "127.0.0.1:PORT, unless others may read it)")
    return p


def top_parser():
    p = _subparser("top", TOP_DESCRIPTION, None)
    _session_arg(p)
    p.add_argument("--interval", type=float, default=1.0, metavar="S",
                   help="seconds between looks (default 1)")
    p.add_argument("--once", action="store_true",
                   help="print one interval and exit")
    return p


def _live_dir(d):
    if d is None:
        d = session_mod.default_dir()
    if d is None:
        raise RuntimeFailure("coprof_data: no session here, and none in "
                             "$XDG_DATA_HOME/coprof/current (give -d DIR)")
    return d


def run_serve(args):
    from . import live
    try:
        address = live.parse_listen(args.listen)
    except ValueError as e:
        raise UsageError("--listen: %s" % e)
    d = _live_dir(args.dir)
    live.snapshot(d)        # a session, or one line now
    try:
        live.serve_pprof(d, address, lambda a: sys.stderr.write(
            "%s: serving %s on http://%s:%d/debug/pprof/profile\n"
            % (PROG, d, args.listen.rpartition(":")[0], a[1])))
    except OSError as e:
        raise RuntimeFailure("%s: %s" % (args.listen, e.strerror or e))


def run_top(args):
    from . import live
    if not args.interval > 0:
        raise UsageError("--interval: not a number of seconds")
    live.run_top(_live_dir(args.dir), args.interval, args.once)


SUBCOMMANDS = {
    "serve-pprof": (serve_parser, run_serve),
    "top": (top_parser, run_top),
    "html": (html_parser, run_html),
    "archive": (archive_parser, run_archive),
    "diff": (diff_parser, run_diff),
    "timeline": (timeline_parser, run_timeline),
    "callgraph": (callgraph_parser, run_callgraph),
    "annotate": (annotate_parser, run_annotate),
    "export": (export_parser, run_export),
}


def _subcommand_first(argv):
    """`copreport -d DIR SUBCOMMAND ...` as `copreport SUBCOMMAND ... -d
    DIR`: the session options given before a subcommand are its own."""
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-d", "--session-dir") and i + 1 < len(argv):
            i += 2
        elif a.startswith("--session-dir=") or \
                (a.startswith("-d") and len(a) > 2 and a[2] != "-"):
            i += 1
        else:
            break
    if 0 < i < len(argv) and argv[i] in SUBCOMMANDS:
        return [argv[i]] + argv[i + 1:] + argv[:i]
    return argv


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    argv = _subcommand_first(argv)
    try:
        if argv and argv[0] in SUBCOMMANDS:
            make_parser, run = SUBCOMMANDS[argv[0]]
            run(make_parser().parse_args(argv[1:]))
        else:
            args = report_parser().parse_args(argv)
            run_report(args)
    except UsageError as e:
        sys.stderr.write("%s: %s\n" % (PROG, e))
        return 2
    except (RuntimeFailure, session_mod.SessionError,
            safefile.SafeFileError) as e:
        sys.stderr.write("%s: %s\n" % (PROG, e))
        return 1
    except BrokenPipeError:
        # a reader that stopped (| head): no message, no traceback at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:
        sys.stderr.write("%s: interrupted\n" % PROG)
        return 130
    return 0
