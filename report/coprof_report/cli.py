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
import os
import sys

from . import (callgraph, output, profile, session as session_mod,
               timeline)

PROG = "copreport"

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
  1  no session, an unreadable or damaged session, or an output that
     cannot be written
  2  bad usage: an unknown option or --separate, a bad --threshold, an
     --image or --context that names nothing in the session, an empty -o

examples:
  copreport                              the session in ./coprof_data
  copreport -d DIR --separate=context    one section per context
  copreport --image overlays --threshold 1
  copreport --format json --separate=none > profile.json
  copreport timeline -o trace.json --png timeline.png

see also: copreport timeline --help; copreport callgraph --help;
report/README.md"""

TIMELINE_DESCRIPTION = """\
Write the session's timeline as Chrome trace event JSON, which Perfetto
(ui.perfetto.dev) and chrome://tracing open: a track per slot with the
contexts bound to it over time, a track per context with the functions it
ran (per time bucket the function with the most samples, consecutive
buckets merged) -- with more than 100 contexts a track per slot and
image instead, the context an argument of each slice (--tracks) --
and the scheduler's events from the event log as instant
events, all on CLOCK_MONOTONIC (ts in microseconds).  --png also draws
slot occupancy and the top functions over time."""

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


def _session_arg(p):
    p.add_argument("-d", "--session-dir", metavar="DIR", dest="dir",
                   help="the session directory (default ./coprof_data, "
                        "else $XDG_DATA_HOME/coprof/current)")


def _selection_args(p, hidden, what, formats):
    """--threshold (hiding `hidden`), --image and --context (keeping the
    `what` of them), --format (one of formats) and -o."""
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
    p.add_argument("-f", "--format", default="text", choices=formats,
                   metavar="FMT", help="%s or %s (default text)"
                   % (", ".join(formats[:-1]), formats[-1]))
    p.add_argument("-o", "--output", metavar="FILE", type=_file_name,
                   help="write to FILE instead of standard output")


def report_parser():
    p = Parser(prog=PROG, description=REPORT_DESCRIPTION,
               epilog=REPORT_EPILOG,
               usage="%(prog)s [-d DIR] [OPTIONS]\n"
                     "       %(prog)s timeline [-d DIR] -o FILE.json "
                     "[--png FILE]\n"
                     "       %(prog)s callgraph [-d DIR] [OPTIONS]",
               formatter_class=argparse.RawDescriptionHelpFormatter)
    _session_arg(p)
    p.add_argument("-s", "--separate", default="none", metavar="HOW",
                   choices=profile.SEPARATIONS,
                   help="group rows by context, slot, image or none "
                        "(default none)")
    _selection_args(p, "rows under PERCENT of their group", "samples",
                    output.FORMATS)
    return p


def timeline_parser():
    p = Parser(prog=PROG + " timeline", description=TIMELINE_DESCRIPTION,
               epilog=TIMELINE_EPILOG,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    _session_arg(p)
    p.add_argument("-o", "--output", metavar="FILE.json", required=True,
                   type=_file_name,
                   help="the Chrome trace event JSON to write")
    p.add_argument("--png", metavar="FILE", type=_file_name,
                   help="also draw slot occupancy and the top functions "
                        "over time to FILE (PNG)")
    p.add_argument("--tracks", default="auto", choices=timeline.TRACKS,
                   help="the contexts' function slices: a track per "
                        "context, a track per slot and image with the "
                        "context as an argument of each slice (for "
                        "thousands of contexts), or auto: grouped above "
                        "%d contexts (default: %%(default)s)"
                   % timeline.GROUP_CONTEXTS)
    return p


def callgraph_parser():
    p = Parser(prog=PROG + " callgraph", description=CALLGRAPH_DESCRIPTION,
               epilog=CALLGRAPH_EPILOG,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    _session_arg(p)
    _selection_args(p, "functions under PERCENT inclusive", "stacks",
                    ("text", "json"))
    return p


class RuntimeFailure(Exception):
    pass


def _open_session(d):
    if d is None:
        d = session_mod.default_dir()
        if d is None:
            raise RuntimeFailure(
                "coprof_data: no session here, and none in "
                "$XDG_DATA_HOME/coprof/current (give -d DIR)")
    return session_mod.Session.open(d)


def _open_output(path):
    try:
        return open(path, "w", encoding="utf-8")
    except OSError as e:
        raise RuntimeFailure("%s: %s" % (path, e.strerror or e))


def _check_writable(path):
    """Fail early (before the work) when path cannot be written."""
    d = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise RuntimeFailure("%s: Is a directory" % path)
    if not os.path.isdir(d):
        raise RuntimeFailure("%s: No such file or directory" % path)
    if not os.access(d, os.W_OK) or (os.path.exists(path) and
                                     not os.access(path, os.W_OK)):
        raise RuntimeFailure("%s: Permission denied" % path)


def _warn(session):
    """The session's per-image warnings, one line each on stderr."""
    for w in session.warnings:
        sys.stderr.write("%s: warning: %s\n" % (PROG, w))


def _report_with(args, build, write):
    """Opens the session, build(session) (a filter naming nothing is bad
    usage), warns, then write(result, out, session_dir) to -o or standard
    output."""
    if args.output is not None:
        _check_writable(args.output)
    s = _open_session(args.dir)
    try:
        try:
            result = build(s)
        except profile.FilterError as e:
            raise UsageError(str(e))
        _warn(s)
        if args.output is not None:
            with _open_output(args.output) as f:
                write(result, f, s.dir)
        else:
            write(result, sys.stdout, s.dir)
            sys.stdout.flush()
    finally:
        s.close()


def run_report(args):
    _report_with(args, lambda s: profile.build(s, args.separate, args.image,
                                               args.context, args.threshold),
                 output.WRITERS[args.format])


def run_timeline(args):
    import json
    _check_writable(args.output)
    if args.png is not None:
        _check_writable(args.png)
    s = _open_session(args.dir)
    try:
        tl = timeline.build(s)
        _warn(s)
        trace = timeline.trace_events(tl, args.tracks)
        with _open_output(args.output) as f:
            json.dump(trace, f)
            f.write("\n")
        if args.png is not None:
            try:
                from . import plot
            except ImportError as e:
                raise RuntimeFailure("%s: needs Debian's python3-matplotlib "
                                     "(%s)" % (args.png, e))
            try:
                plot.write_png(tl, args.png, "slot occupancy: %s" % s.dir)
            except OSError as e:
                raise RuntimeFailure("%s: %s" % (args.png,
                                                 e.strerror or e))
    finally:
        s.close()


def run_callgraph(args):
    def build(s):
        try:
            return callgraph.build(s, args.context, args.image)
        except callgraph.NoStacks as e:
            raise RuntimeFailure(str(e))

    def write(graph, out, session_dir):
        callgraph.WRITERS[args.format](graph, out, session_dir,
                                       args.threshold)
    _report_with(args, build, write)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv and argv[0] == "timeline":
            args = timeline_parser().parse_args(argv[1:])
            run_timeline(args)
        elif argv and argv[0] == "callgraph":
            args = callgraph_parser().parse_args(argv[1:])
            run_callgraph(args)
        else:
            args = report_parser().parse_args(argv)
            run_report(args)
    except UsageError as e:
        sys.stderr.write("%s: %s\n" % (PROG, e))
        return 2
    except (RuntimeFailure, session_mod.SessionError) as e:
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
