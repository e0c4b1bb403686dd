"""Views of a session while it is recorded: `copreport serve-pprof` (Go's
net/http/pprof profile endpoint; copcontrol --serve-pprof runs it) and
`copreport top` (coprof top: a live view in a terminal).

Both read the session as a report does (read-only, one read transaction
per look) and take differences: coprofd commits a flush once a second,
so what was sampled between two looks is the later look's counts less
the earlier's.  snapshot() is one look: the exact samples by (context,
image, file offset, overlay) and by (context, timeline bucket), the
samples, losses and stall time of the stream, the bindings, whether the
session is live and when its last flush was (last_flush_realtime_ns).  A sample's function comes from the
image's symbolizer (profile.load_images_and_contexts), as in a report.

serve-pprof: GET /debug/pprof/profile?seconds=N (default 30, as Go's)
looks, waits N seconds, looks again and answers the difference as a
gzipped profile.proto (export.pprof_message(): a Mapping per image,
Locations with lines), with time_nanos and duration_nanos of the span,
Content-Type application/octet-stream, like net/http/pprof; so
`go tool pprof http://HOST:PORT/debug/pprof/profile?seconds=5` reads it,
and Parca and Grafana Alloy (for Pyroscope) can scrape it (their
configurations: control/README.md).  /debug/pprof/ lists it.  A
ThreadingHTTPServer on the address the user gives (loopback unless they
say otherwise).

top: every second (--interval) a look; the screen (curses) shows the
samples a second, losses and stall time of the interval and in total,
and the top functions over the last interval and since the start, by
function, context, slot or image (keys f, c, s, i; q quits).  By slot,
each timeline bucket of a context's samples goes to the slot it was
bound to then (timeline.slot_at), so a context that moved is split
between its slots; a session without a sample timeline charges a
context's samples to all its slots at once ("slots 0,3").  When a look
comes later than two intervals after the one before (this viewer fell
behind), the screen says BEHIND and by how much instead of silently
showing a longer interval as one.  When the session says it is live but
coprofd has not flushed it for more than STALE_FLUSHES flush intervals
(coprofd's, 1 s, or --interval when longer: the session does not record
coprofd's), the screen says STALE and since when: coprofd is stuck or
its flushes fail, and the figures are as of that flush.  A SIGTERM ends
it as q does, the terminal restored (coprof record --top sends one when
its command has ended).
"""

import collections
import gzip
import http.server
import io
import socketserver
import time
import urllib.parse

from . import export, profile, timeline
from . import session as session_mod

FLUSH_S = 1.0           # coprofd's flush interval (its default)
STALE_FLUSHES = 3       # STALE after this many flush intervals without one

Look = collections.namedtuple(
    "Look", "time wall counts buckets samples lost stall_ns state "
            "flush_ns images contexts bindings slots")
Look.__doc__ = """One look at a session: time (CLOCK_MONOTONIC s when
taken), wall (CLOCK_REALTIME s then), counts {(context, image, offset,
overlay): samples}, buckets {(context, bucket_start_ns): samples} (the
sample timeline; empty without one), samples (stream.samples), lost
(every LOST capture), stall_ns, state ("live", "complete" or
"incomplete"), flush_ns (last_flush_realtime_ns, None before the first
flush), images and contexts (profile's), bindings (timeline.bindings_of
of the timed ones), slots {context: [every slot it was bound to]}."""

_Bound = collections.namedtuple("_Bound", "context start_ns slot")


def snapshot(directory, monotonic=time.monotonic, realtime=time.time):
    """A Look at the session in directory (SessionError when it is not
    one); monotonic and realtime are the clocks read."""
    s = session_mod.Session.open(directory)
    try:
        s.check()
        images, contexts = profile.load_images_and_contexts(s)
        counts = {}
        for ctx, img, off, ovl, n in s.samples(by_context=True):
            counts[(ctx, img, off, ovl)] = n
        buckets = {}
        if s.int_key("timeline.bucket_ns", 0):
            for ctx, bucket, n in s.bucket_totals():
                buckets[(ctx, bucket)] = n
        lost = sum(r[2] for r in s.lost_by_cause()
                   if r[1] != profile.OUTSIDE)     # no loss: no context's
        stall = sum(r[3] or 0 for r in s.stalls())
        timed, slots = [], collections.defaultdict(list)
        for b in s.bindings():
            if b["slot"] not in slots[b["context"]]:
                slots[b["context"]].append(b["slot"])
            if b["start_time_ns"] is not None:
                timed.append(_Bound(b["context"], b["start_time_ns"],
                                    b["slot"]))
        return Look(monotonic(), realtime(), counts, buckets,
                    s.int_key("stream.samples", 0), lost, stall,
                    s.coprocessor_end()[0],
                    s.int_key("last_flush_realtime_ns", None),
                    images, contexts, timeline.bindings_of(timed),
                    dict(slots))
    finally:
        s.close()


def _taken(new, old):
    """{key: n} of the counts new grew by since old (all of new when old
    is None)."""
    if old is None:
        return dict(new)
    out = {}
    for k, n in new.items():
        d = n - old.get(k, 0)
        if d > 0:
            out[k] = d
    return out


def difference(new, old):
    """{key: samples} taken between two Looks (all of new's when old is
    None)."""
    return _taken(new.counts, old.counts if old is not None else None)


def _function(look, image_id, offset):
    info = look.images.get(image_id)
    f = info.symbolizer.function_at(offset) \
        if info is not None and info.symbolizer else None
    return info, f


def stacks(look, counts):
    """export.Stacks of counts (each sample its leaf frame)."""
    for (ctx, img, off, ovl), n in sorted(counts.items()):
        info, f = _function(look, img, off)
        name = f.name if f else "[no symbol]"
        overlay = f.section if f and ovl else ""
        yield export.Stack(look.contexts.get(ctx),
                           (export.Frame(info, overlay, name, off),), n)


def pprof_bytes(look, counts, start_s, seconds, period):
    """The gzipped profile.proto of counts."""
    sampling = collections.namedtuple("S", "period")(period)
    msg = export.pprof_message(stacks(look, counts), sampling,
                               time_nanos=int(start_s * 1e9),
                               duration_nanos=int(seconds * 1e9))
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as z:
        z.write(msg.SerializeToString())
    return buf.getvalue()


def _period(directory):
    s = session_mod.Session.open(directory)
    try:
        return s.int_key("stream.lfsr_count", 0)
    finally:
        s.close()


# --- serve-pprof --------------------------------------------------------

MAX_SECONDS = 3600
PROFILE_PATH = "/debug/pprof/profile"


class _Handler(http.server.BaseHTTPRequestHandler):
    server_version = "copreport-pprof"
    directory = None

    def log_message(self, format, *args):      # quiet, as a daemon
        pass

    def _reply(self, code, body, ctype="text/plain; charset=utf-8",
               extra=()):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Content-Type-Options", "nosniff")
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        if url.path in ("/debug/pprof", "/debug/pprof/"):
            self._reply(200, b"/debug/pprof/\n\nprofile: the coprocessors' "
                        b"samples of the next ?seconds=N (default 30)\n")
            return
        if url.path != PROFILE_PATH:
            self._reply(404, b"404 page not found\n")
            return
        q = urllib.parse.parse_qs(url.query)
        try:
            seconds = float(q.get("seconds", ["30"])[0])
        except ValueError:
            seconds = -1
        if not 0 < seconds <= MAX_SECONDS:
            self._reply(400, b"bad seconds: a number of seconds from 1 to "
                        b"3600\n", extra=(("X-Go-Pprof", "1"),))
            return
        try:
            before = snapshot(self.directory)
            time.sleep(seconds)
            after = snapshot(self.directory)
            body = pprof_bytes(after, difference(after, before),
                               time.time() - seconds, seconds,
                               _period(self.directory))
        except (session_mod.SessionError, export.ExportError) as e:
            self._reply(500, ("could not read the session: %s\n" % e)
                        .encode(), extra=(("X-Go-Pprof", "1"),))
            return
        self._reply(200, body, "application/octet-stream",
                    (("Content-Disposition",
                      'attachment; filename="profile"'),))


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def parse_listen(text):
    """(host, port) of HOST:PORT ([::1]:PORT for IPv6); ValueError."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or \
            not 0 <= int(port) <= 65535:
        raise ValueError("%r is not HOST:PORT" % text)
    return host.strip("[]"), int(port)


def serve_pprof(directory, listen, ready=None):
    """Serves directory's profiles on listen (host, port) until
    interrupted; ready(address) is told the address bound."""
    handler = type("Handler", (_Handler,), {"directory": directory})
    cls = _Server
    if ":" in listen[0]:
        import socket
        cls = type("Server6", (_Server,), {"address_family":
                                            socket.AF_INET6})
    server = cls(listen, handler)
    try:
        if ready:
            ready(server.server_address)
        server.serve_forever()
    finally:
        server.server_close()


# --- top ----------------------------------------------------------------

BY = {"f": "function", "c": "context", "s": "slot", "i": "image"}


def _by_slot(new, old):
    """Counter {"slot S": samples} taken between two Looks: each bucket of
    a context's samples on the slot it was bound to then; without a
    sample timeline, a context's samples on all its slots ("slots 0,3")."""
    out = collections.Counter()
    if not new.buckets:
        for (ctx, _, _, _), n in difference(new, old).items():
            slots = sorted(new.slots.get(ctx, ()))
            out["slot%s %s" % ("s" if len(slots) > 1 else "",
                               ",".join(map(str, slots)) or "?")] += n
        return out
    for (ctx, bucket), n in _taken(
            new.buckets, old.buckets if old is not None else None).items():
        slot = timeline.slot_at(new.bindings, ctx, bucket)
        out["slot %s" % ("?" if slot is None else slot)] += n
    return out


def _sorted_rows(counter):
    return sorted(((n, k) for k, n in counter.items()),
                  key=lambda x: (-x[0], x[1]))


def rows_by(new, old, by):
    """[(samples, name)] taken between two Looks (since the start when old
    is None) grouped by "function", "context", "slot" or "image", most
    first."""
    if by == "slot":
        return _sorted_rows(_by_slot(new, old))
    out = collections.Counter()
    for (ctx, img, off, _), n in difference(new, old).items():
        info, f = _function(new, img, off)
        image = info.short_name if info else "?"
        if by == "function":
            key = "%s (%s)" % (f.name if f else "[no symbol]", image)
        elif by == "context":
            c = new.contexts.get(ctx)
            key = "context %d %s (pid %s tid %s)" % (
                ctx, image, c.pid if c else "?", c.tid if c else "?")
        else:
            key = image
        out[key] += n
    return _sorted_rows(out)


class Top:
    """The state of `copreport top`: the first look, the last, and what
    the screen says (lines())."""

    def __init__(self, directory, interval=1.0, monotonic=time.monotonic,
                 realtime=time.time):
        self.directory = directory
        self.interval = interval
        self.clocks = (monotonic, realtime)
        self.first = self.last = None
        self.prev = None
        self.by = "function"
        self.behind = 0.0

    def step(self):
        look = snapshot(self.directory, *self.clocks)
        if self.first is None:
            self.first = look
        self.prev, self.last = self.last, look
        late = look.time - self.prev.time if self.prev else 0
        self.behind = late - self.interval \
            if late > 2 * self.interval else 0.0
        return look

    def stale(self):
        """Seconds since the last look's session was flushed when it says
        it is live and that is more than STALE_FLUSHES flush intervals,
        else 0."""
        last = self.last
        if last.state != "live" or last.flush_ns is None:
            return 0.0
        age = last.wall - last.flush_ns / 1e9
        return age if age > STALE_FLUSHES * max(FLUSH_S, self.interval) \
            else 0.0

    def lines(self, width=100, height=40):
        last, prev = self.last, self.prev
        span = last.time - prev.time if prev else 0
        d_samples = last.samples - prev.samples if prev else 0
        d_lost = last.lost - prev.lost if prev else 0
        d_stall = last.stall_ns - prev.stall_ns if prev else 0
        rate = d_samples / span if span > 0 else 0
        out = ["coprof top: %s (%s)" % (self.directory, last.state),
               "samples/s %.0f   interval: %d samples, %d lost, stalled "
               "%.2f ms   total: %d samples, %d lost, stalled %.2f ms"
               % (rate, d_samples, d_lost, d_stall / 1e6, last.samples,
                  last.lost, last.stall_ns / 1e6)]
        if self.behind:
            out.append("BEHIND: this look came %.1f s late; the interval "
                       "column covers %.1f s" % (self.behind, span))
        stale = self.stale()
        if stale:
            out.append("STALE: the session says live but was last flushed "
                       "%.1f s ago (coprofd stuck?); figures as of then"
                       % stale)
        out.append("by %s (keys: f function, c context, s slot, "
                   "i image; q quits)" % self.by)
        out.append("")
        out.append("%10s %6s   %10s %6s   %s" % ("INTERVAL", "%", "TOTAL",
                                              "%", self.by.upper()))
        r_rows = dict((k, n) for n, k in rows_by(last, prev, self.by)) \
            if prev else {}
        t_rows = rows_by(last, None, self.by)
        r_sum = sum(r_rows.values()) or 1
        t_sum = sum(n for n, _ in t_rows) or 1
        order = sorted(t_rows, key=lambda x: (-r_rows.get(x[1], 0), -x[0],
                                              x[1]))
        for n, k in order[:max(height - len(out) - 1, 1)]:
            rn = r_rows.get(k, 0)
            out.append("%10d %5.1f%%   %10d %5.1f%%   %s" % (
                rn, 100.0 * rn / r_sum, n, 100.0 * n / t_sum, k))
        return [line[:width - 1] for line in out]


def run_top(directory, interval=1.0, once=False, out=None):
    """The live view: curses on a terminal; once (or without one), the
    lines of one interval printed to out."""
    import sys
    top = Top(directory, interval)
    top.step()
    if once or not sys.stdout.isatty():
        time.sleep(interval)
        top.step()
        (out or sys.stdout).write("\n".join(top.lines()) + "\n")
        return 0
    import curses
    import signal

    def leave(signum, frame):       # coprof record --top: CMD has ended
        raise SystemExit(0)
    signal.signal(signal.SIGTERM, leave)

    def loop(screen):
        curses.curs_set(0)
        screen.timeout(int(interval * 1000))
        while True:
            height, width = screen.getmaxyx()
            screen.erase()
            for y, line in enumerate(top.lines(width, height)[:height]):
                screen.addstr(y, 0, line)
            screen.refresh()
            key = screen.getch()
            if key in (ord("q"), ord("Q")):
                return
            if key >= 0 and chr(key) in BY:
                top.by = BY[chr(key)]
            top.step()
    curses.wrapper(loop)
    return 0
