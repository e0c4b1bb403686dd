"""The session's timeline as Chrome trace event JSON, which Perfetto
(ui.perfetto.dev) and chrome://tracing open.

Three processes, each a group of tracks:

- "slots" (pid 1): a track per slot (tid slot + 1), with a complete event
  ("ph": "X") per binding of a context to the slot, from the bindings
  table's start_time_ns to end_time_ns (a binding still open ends at the
  stream's STOP); consecutive bindings of a slot are clipped so that they
  never overlap.  The scheduler events of the event log (sched_events)
  that name a slot are instant events ("ph": "i") on its track.
- "contexts" (pid 2): a track per context (tid = coprofd's context number),
  with function slices drawn from the samples themselves: the session
  keeps each exact sample's time to its bucket (sample_timeline,
  `timeline.bucket_ns`, coprofd --timeline-ms, coprof record
  --timeline-ms), so each bucket of a context is cut into one slice per
  function it sampled there, each as wide as its share of the bucket's
  samples (every function that was sampled shows, not only the most
  sampled one), in the order of the functions' offsets; a slice that
  meets a slice of the same function (the next bucket's first) merges
  with it.  Slices lie only where the context was bound: a bucket is cut
  to its overlap with the context's bindings (the share of each piece by
  its length).  Within a bucket the order of the slices is the
  functions' (address order), not the order they ran in, which the
  session does not keep: the view is true to the bucket, not below it.
  A context with samples but no timed binding (no TIME record placed
  it) gets no slices, since it cannot be placed inside one;
  otherData.unplaced_samples counts such samples.  `copreport timeline
  --bucket-ms` sums the session's buckets into wider ones;
  otherData.bucket_ns says the width used and otherData.function_slices
  how slices are made.
  With more than GROUP_CONTEXTS contexts (a session of thousands of
  short contexts, where a track each would not load), or when asked, the
  tracks are grouped instead: a track per (slot, image), tid in order of
  first use, each slice on the track of the slot its context was bound to
  then, the context in its args; slices on a track are clipped so that
  they never overlap (contexts that followed each other within a bucket).
  otherData.context_tracks says which ("context" or "slot-image").
- "scheduler" (pid 3): scheduler events that name no slot (create, load,
  run, exit of a context not on a slot, ...), instant events on one track.
- "host threads" (pid 4), when the session holds the host side
  (coprof-host): a track per host thread (tid = the Linux thread id,
  named "comm tid (role)": the host program's; copsim's and its QEMUs'
  only when asked, host_threads="all"), with a complete event per state
  from the Linux scheduler's events, named "running", "runnable" or
  "blocked" (cat "host-state", args: the CPU), and the host CPU samples
  as instant events named by their symbol (cat "host-sample", args: the
  ELF file, the inlined function).  Adjacent states shorter than
  host_merge_ns merge into the slice before them, and the time before
  the raw events the session holds (a ring that wrapped) is a slice per
  bucket of host_thread_times, buckets of one state merged: such a slice
  is named by the state that held most of it, its args giving each
  state's ns (running_ns, runnable_ns, blocked_ns).

Long work says where it is on standard error, a line per step once it
has taken more than a second (Progress).

Every time is CLOCK_MONOTONIC: "ts" and "dur" are microseconds (floats)
from CLOCK_MONOTONIC nanoseconds, so the trace lines up with other traces
on that clock (perf record -k CLOCK_MONOTONIC).  Metadata events
("ph": "M") name the processes and tracks.
"""

import bisect
import collections
import os
import re
import sys
import time

from . import host as host_mod, profile, stalls

PID_SLOTS, PID_CONTEXTS, PID_SCHED, PID_HOST = 1, 2, 3, 4
GROUP_CONTEXTS = 100    # more contexts than this: tracks per slot and image
TRACKS = ("auto", "context", "slot-image")
FUNCTION_SLICES = ("each bucket_ns bucket of a context cut into a slice per "
                   "function sampled in it, as wide as its share of the "
                   "bucket's samples, inside the context's bindings; "
                   "slices of one function that meet merged; within a "
                   "bucket the slices are in the functions' address order, "
                   "not in time order: the view is true to the bucket, not "
                   "within it; a context with no timed binding gets no "
                   "slices (its samples: unplaced_samples)")

Binding = collections.namedtuple(
    "Binding", "slot context start_ns end_ns end_reason label")
Slice = collections.namedtuple(
    "Slice", "context start_ns end_ns function samples bucket_samples buckets")


_MONO = re.compile(r"\bmono=(\d+)")


class Progress:
    """Lines "copreport: timeline: STEP" on standard error, once the work
    has taken more than after_s seconds (COPREPORT_PROGRESS_AFTER_S, 1 by
    default)."""

    def __init__(self, out=None, after_s=None):
        self.out = out or sys.stderr
        if after_s is None:
            after_s = float(os.environ.get("COPREPORT_PROGRESS_AFTER_S", 1))
        self.after_s = after_s
        self.started = time.monotonic()

    def step(self, what):
        if time.monotonic() - self.started >= self.after_s:
            self.out.write("copreport: timeline: %s\n" % what)
            self.out.flush()


def event_time_ns(row):
    """When a SCHED event happened: its message's mono= field (copsim's
    CLOCK_MONOTONIC at the event), else the log record's time."""
    m = _MONO.search(row["message"] or "")
    return int(m.group(1)) if m else row["time_ns"]


def _us(ns):
    return ns / 1000.0


class Timeline:
    """What the trace and the plot show, on CLOCK_MONOTONIC ns."""

    def __init__(self):
        self.bindings = []          # [Binding], per slot in time order
        self.slices = []            # [Slice], per context in time order
        self.unplaced_samples = 0   # of contexts with no timed binding
        self.buckets = {}           # {(bucket_start, "image:function"): n}
        self.sched = []             # sched_events rows
        self.contexts = {}          # {id: ContextInfo}
        self.context_ids = {}       # {copsim's id: the session's id}
        self.start_ns = None
        self.stop_ns = None
        self.bucket_ns = 0          # the width used
        self.session_bucket_ns = 0  # the session's timeline.bucket_ns
        self.slots = 0
        self.end_state = None       # Session.end(): complete, live, ...
        self.end_reason = ""
        self.host = None            # host.HostSide
        self.host_states = {}       # {tid: [host.Interval]}
        self.host_samples = []      # [(time_ns, tid, symbol, file, inlined)]
        self.stalls_recorded = False    # the session has stall_timeline
        self.stall_buckets = {}     # {(slot, bucket_start): Breakdown}


def context_label(c):
    image = c.image.short_name if c.image else "?"
    return "context %d %s (pid %s tid %s)" % (c.id, image, c.pid, c.tid)


def build(session, host_threads="command", host_merge_ns=host_mod.MERGE_NS,
          progress=None, bucket_ns=0):
    """The Timeline of a session.  host_threads: "command" (the host
    program's threads) or "all" (also copsim's and its QEMUs');
    host_merge_ns: host states shorter than this merge; progress: a
    Progress; bucket_ns (a multiple of the session's timeline.bucket_ns),
    when given, sums its buckets into wider ones."""
    progress = progress or Progress(after_s=float("inf"))
    tl = Timeline()
    tl.start_ns = session.int_key("stream.start_time_ns", None)
    tl.stop_ns = session.int_key("stream.stop_time_ns", None)
    tl.bucket_ns = session.int_key("timeline.bucket_ns", 0)
    tl.slots = session.int_key("stream.slots", 0)
    tl.end_state, tl.end_reason = session.end()
    images, contexts = profile.load_images_and_contexts(session)
    tl.contexts = contexts
    tl.context_ids = {c.context_id: c.id for c in contexts.values()}

    # slots: bindings, clipped so that a slot's never overlap
    last_end = {}
    end_default = tl.stop_ns
    for b in session.bindings():
        start, end = b["start_time_ns"], b["end_time_ns"]
        if start is None:
            continue            # no TIME record ever placed it
        if end is None:
            end = end_default if end_default is not None else start
        slot = b["slot"]
        if slot in last_end and start < last_end[slot]:
            start = last_end[slot]
        if end < start:
            end = start
        last_end[slot] = end
        c = contexts.get(b["context"])
        tl.bindings.append(Binding(
            slot, b["context"], start, end, b["end_reason"],
            context_label(c) if c else "context %s" % b["context"]))

    # contexts: each bucket cut into its functions' shares, in bindings
    per_bucket = collections.defaultdict(dict)  # (ctx, bucket) -> {fn: n}
    names, order = {}, {}
    width = tl.session_bucket_ns = tl.bucket_ns
    if bucket_ns:
        width = tl.bucket_ns = bucket_ns
    for ctx, img, bucket, foff, count in session.sample_timeline():
        info = images.get(img)
        key = (img, foff)
        if key not in names:
            f = info.symbolizer.function_at(foff) \
                if info and info.symbolizer else None
            names[key] = f.name if f else "0x%x" % foff
        fn = names[key]
        order.setdefault(fn, (img, foff))
        if bucket_ns:
            bucket -= (bucket - (tl.start_ns or 0)) % bucket_ns
        d = per_bucket[(ctx, bucket)]
        d[fn] = d.get(fn, 0) + count
        # The plot's series: functions of one name in two images apart.
        series = "%s:%s" % (info.short_name if info else "?", fn)
        tl.buckets[(bucket, series)] = tl.buckets.get((bucket, series),
                                                      0) + count
    tl.slices = _function_slices(tl, per_bucket, order, width or 1)
    _stall_buckets(tl, session, bucket_ns)
    progress.step("%d slices of %d contexts read" % (len(tl.slices),
                                                     len(tl.contexts)))
    tl.sched = [r for r in session.sched_events() if in_session(tl, r)]
    tl.host = host_mod.HostSide(session)
    tids = tl.host.timeline_tids(host_threads == "all")
    progress.step("%d scheduler events read; the states of %d host "
                  "threads" % (len(tl.sched), len(tids)))
    tl.host_states = tl.host.timeline_slices(tids, host_merge_ns)
    shown = set(tids)
    tl.host_samples = [tuple(r) for r in tl.host.samples_in_time()
                       if r[1] in shown]
    progress.step("%d host state slices" % sum(
        len(v) for v in tl.host_states.values()))
    return tl


def _stall_buckets(tl, session, bucket_ns):
    """Each slot's samples by reason per bucket (stall_timeline), each
    context's bucket on the slot it was bound to then."""
    tl.stalls_recorded = stalls.recorded(session, "stall_timeline")
    if not tl.stalls_recorded:
        return
    bound = bindings_of(tl.bindings)
    for ctx, img, bucket, code, count in session.stall_timeline_of():
        if bucket_ns:
            bucket -= (bucket - (tl.start_ns or 0)) % bucket_ns
        slot = slot_at(bound, ctx, bucket)
        b = tl.stall_buckets.get((slot, bucket))
        if b is None:
            b = tl.stall_buckets[(slot, bucket)] = stalls.Breakdown()
        b.add(code, count)


def _stall_events(tl):
    """A counter track per slot ("stall reasons slot N", on the slots
    process): at each bucket's start every reason's percent of the slot's
    samples in it, back to 0 at the bucket's end when no bucket follows."""
    ev = []
    by_slot = collections.defaultdict(list)
    for (slot, bucket), b in tl.stall_buckets.items():
        by_slot[slot].append((bucket, b))
    for slot, buckets in sorted(by_slot.items(),
                                key=lambda x: (x[0] is None, x[0] or 0)):
        name = "stall reasons %s" % ("slot %d" % slot if slot is not None
                                     else "no slot")
        buckets.sort(key=lambda x: x[0])
        tid = slot + 1 if slot is not None else 0   # the slot's track
        for i, (bucket, b) in enumerate(buckets):
            total = b.total
            ev.append({"ph": "C", "name": name, "cat": "stall",
                       "pid": PID_SLOTS, "tid": tid, "ts": _us(bucket),
                       "args": {r: round(100.0 * n / total, 3) if total
                                else 0.0 for r, n in b.to_json().items()}})
            end = bucket + (tl.bucket_ns or 1)
            if i + 1 == len(buckets) or buckets[i + 1][0] != end:
                ev.append({"ph": "C", "name": name, "cat": "stall",
                           "pid": PID_SLOTS, "tid": tid, "ts": _us(end),
                           "args": {r: 0.0 for r in b.to_json()}})
    return ev


def bindings_of(bindings):
    """{context: [(start_ns, slot)]} of bindings (objects with context,
    start_ns and slot: Binding, live's), each context's in time order:
    what slot_at() reads."""
    out = collections.defaultdict(list)
    for b in bindings:
        out[b.context].append((b.start_ns, b.slot))
    for spans in out.values():
        spans.sort()
    return out


def _bound_spans(tl):
    """{context: [(start_ns, end_ns)]} of its bindings, in time order."""
    spans = collections.defaultdict(list)
    for b in tl.bindings:
        if b.end_ns > b.start_ns:
            spans[b.context].append((b.start_ns, b.end_ns))
    for v in spans.values():
        v.sort()
    return spans


def _pieces(spans, start, end):
    """The parts of [start, end) inside spans; when none (a bucket whose
    samples came at a binding's very edge), the zero-length point of the
    nearest binding edge, so the samples stay inside a binding; none
    without spans (a context no binding places)."""
    out = [(max(s, start), min(e, end)) for s, e in spans
           if s < end and e > start]
    if out or not spans:
        return out
    edges = [x for span in spans for x in span]
    at = min(edges, key=lambda x: (abs(x - start), x))
    return [(at, at)]


def _cut(pieces, shares):
    """[(fn, start, end)]: pieces (in time order) cut into consecutive
    parts of the given [(fn, n)] shares, each as long as its share."""
    total_len = sum(e - s for s, e in pieces)
    total = sum(n for _, n in shares)
    out, done, at = [], 0, 0
    bounds = []
    for fn, n in shares:
        done += n
        bounds.append((fn, at, total_len * done // total))
        at = bounds[-1][2]

    def position(offset):   # offset along the pieces -> time
        for s, e in pieces:
            if offset <= e - s:
                return s + offset
            offset -= e - s
        return pieces[-1][1]

    for fn, a, b in bounds:
        out.append((fn, position(a), position(b)))
    return out


def _function_slices(tl, per_bucket, order, width):
    """Every (context, bucket)'s functions as slices of their share of the
    bucket's bound time, merged across buckets where they meet."""
    spans = _bound_spans(tl)
    slices, last = [], {}
    for (ctx, bucket) in sorted(per_bucket):
        d = per_bucket[(ctx, bucket)]
        total = sum(d.values())
        shares = sorted(((fn, n) for fn, n in d.items() if n > 0),
                        key=lambda kv: order[kv[0]])
        if not shares:
            continue            # a bucket of no sample (count 0)
        pieces = _pieces(spans.get(ctx, ()), bucket, bucket + width)
        if not pieces:
            tl.unplaced_samples += total
            continue
        for fn, start, end in _cut(pieces, shares):
            s = last.get(ctx)
            if s is not None and s.function == fn and s.end_ns == start:
                slices[-1] = last[ctx] = s._replace(  # ctx's last
                        end_ns=end, samples=s.samples + d[fn],
                        bucket_samples=s.bucket_samples + total,
                        buckets=s.buckets + 1)
                continue
            last[ctx] = Slice(ctx, start, end, fn, d[fn], total, 1)
            slices.append(last[ctx])
    slices.sort(key=lambda x: (x.context, x.start_ns))
    return slices


def host_thread_label(tl, tid):
    """"host-pipeline 1234 (command)"."""
    t = tl.host.threads.get(tid)
    if t is None:
        return "thread %d" % tid
    return "%s %d (%s)" % (t["comm"] or "?", tid, t["role"])


def _host_events(tl, meta):
    """The host threads' tracks: states and samples."""
    tids = sorted(set(tl.host_states) | {s[1] for s in tl.host_samples})
    if not tids:
        return []
    ev = []
    meta(PID_HOST, 0, "process_name", "host threads", 4)
    for i, tid in enumerate(tids):
        meta(PID_HOST, tid, "thread_name", host_thread_label(tl, tid), i)
    for tid in tids:
        for iv in tl.host_states.get(tid, ()):
            args = {"state": iv.state, "cpu": iv.cpu}
            for state, ns in (iv.ns or {}).items():
                args[state + "_ns"] = ns
            ev.append({"ph": "X", "name": iv.state, "cat": "host-state",
                       "pid": PID_HOST, "tid": tid,
                       "ts": _us(iv.start_ns),
                       "dur": _us(iv.end_ns - iv.start_ns), "args": args})
    for time_ns, tid, symbol, file, inlined in tl.host_samples:
        args = {"file": file}
        if inlined:
            args["inlined"] = inlined
        ev.append({"ph": "i", "s": "t", "name": symbol or "[no symbol]",
                   "cat": "host-sample", "pid": PID_HOST, "tid": tid,
                   "ts": _us(time_ns), "args": args})
    return ev


def in_session(tl, row):
    """Whether a SCHED event belongs on the session's timeline: it names one
    of the session's contexts, or no context at all (copsim's start, stop,
    errors).  coprofd imports only the events from the session's START, but
    a session of an older coprofd may hold other sessions' events too."""
    return row["context_id"] is None or row["context_id"] in tl.context_ids


def slot_at(bindings, ctx, time_ns):
    """The slot context ctx was bound to at time_ns (the binding starting
    last before it; its first binding's slot before any), or None;
    bindings is bindings_of()'s."""
    spans = bindings.get(ctx)
    if not spans:
        return None
    at = bisect.bisect_right(spans, (time_ns, float("inf"))) - 1
    return spans[max(at, 0)][1]


def _grouped_slices(tl):
    """[(track name, slice, start_ns)]: every slice on the track of its
    (slot, image), clipped so that a track's slices never overlap."""
    bound = bindings_of(tl.bindings)
    out, last_end = [], {}
    for sl in sorted(tl.slices, key=lambda x: (x.start_ns, x.context)):
        c = tl.contexts.get(sl.context)
        slot = slot_at(bound, sl.context, sl.start_ns)
        image = c.image.short_name if c and c.image else "?"
        track = "%s %s" % ("slot %d" % slot if slot is not None
                           else "no slot", image)
        start = max(sl.start_ns, last_end.get(track, sl.start_ns))
        end = max(start, sl.end_ns)
        last_end[track] = end
        out.append((track, sl, start, end))
    return out


def trace_events(tl, tracks="auto"):
    """The Chrome trace JSON object of a Timeline.  tracks: "context" (a
    track per context), "slot-image" (grouped) or "auto" (grouped above
    GROUP_CONTEXTS contexts)."""
    if tracks not in TRACKS:
        raise ValueError(tracks)
    if tracks == "auto":
        tracks = "slot-image" if len(tl.contexts) > GROUP_CONTEXTS \
            else "context"
    ev = []

    def meta(pid, tid, name, value, sort=None):
        ev.append({"ph": "M", "ts": 0, "pid": pid, "tid": tid,
                   "name": name, "args": {"name": value}})
        if sort is not None:
            ev.append({"ph": "M", "ts": 0, "pid": pid, "tid": tid,
                       "name": name.replace("_name", "_sort_index"),
                       "args": {"sort_index": sort}})

    meta(PID_SLOTS, 0, "process_name", "slots", 1)
    meta(PID_CONTEXTS, 0, "process_name", "contexts", 2)
    meta(PID_SCHED, 0, "process_name", "scheduler", 3)
    slots = set(b.slot for b in tl.bindings)
    slots |= {r["slot"] for r in tl.sched
              if r["slot"] is not None and r["slot"] >= 0}
    for s in sorted(slots):
        meta(PID_SLOTS, s + 1, "thread_name", "slot %d" % s, s)
    if tracks == "context":
        for c in tl.contexts.values():
            meta(PID_CONTEXTS, c.id, "thread_name", context_label(c), c.id)
    meta(PID_SCHED, 1, "thread_name", "scheduler events", 0)

    for b in tl.bindings:
        c = tl.contexts.get(b.context)
        ev.append({"ph": "X", "name": b.label, "cat": "binding",
                   "pid": PID_SLOTS, "tid": b.slot + 1,
                   "ts": _us(b.start_ns), "dur": _us(b.end_ns - b.start_ns),
                   "args": {"context": b.context,
                            "context_id": c.context_id if c else None,
                            "pid": c.pid if c else None,
                            "tid": c.tid if c else None,
                            "image": c.image.short_name
                            if c and c.image else None,
                            "end_reason": b.end_reason}})
    if tracks == "context":
        for s in tl.slices:
            ev.append({"ph": "X", "name": s.function, "cat": "function",
                       "pid": PID_CONTEXTS, "tid": s.context,
                       "ts": _us(s.start_ns),
                       "dur": _us(s.end_ns - s.start_ns),
                       "args": {"samples": s.samples,
                                "bucket_samples": s.bucket_samples,
                                "buckets": s.buckets}})
    else:
        tids = {}
        for track, s, start, end in _grouped_slices(tl):
            tid = tids.get(track)
            if tid is None:
                tid = tids[track] = len(tids) + 1
                meta(PID_CONTEXTS, tid, "thread_name", track, tid)
            c = tl.contexts.get(s.context)
            ev.append({"ph": "X", "name": s.function, "cat": "function",
                       "pid": PID_CONTEXTS, "tid": tid,
                       "ts": _us(start), "dur": _us(end - start),
                       "args": {"context": s.context,
                                "context_id": c.context_id if c else None,
                                "pid": c.pid if c else None,
                                "tid": c.tid if c else None,
                                "samples": s.samples,
                                "bucket_samples": s.bucket_samples,
                                "buckets": s.buckets}})
    for r in tl.sched:
        on_slot = r["slot"] is not None and r["slot"] >= 0
        args = {"message": r["message"]}
        if r["context_id"] is not None:
            args["context"] = tl.context_ids[r["context_id"]]
        for k in ("context_id", "cycle", "host_pid", "host_tid"):
            if r[k] is not None:
                args[k] = r[k]
        ev.append({"ph": "i", "s": "t", "name": r["kind"] or "event",
                   "cat": "sched",
                   "pid": PID_SLOTS if on_slot else PID_SCHED,
                   "tid": r["slot"] + 1 if on_slot else 1,
                   "ts": _us(event_time_ns(r)), "args": args})
    ev.extend(_stall_events(tl))
    ev.extend(_host_events(tl, meta))
    return {"traceEvents": ev, "displayTimeUnit": "ms",
            "otherData": {"clock": "CLOCK_MONOTONIC",
                          "context_tracks": tracks,
                          "contexts": len(tl.contexts),
                          "end_state": tl.end_state,
                          "end_reason": tl.end_reason,
                          "ts_unit": "microseconds",
                          "bucket_ns": tl.bucket_ns,
                          "session_bucket_ns": tl.session_bucket_ns,
                          "function_slices": FUNCTION_SLICES,
                          "unplaced_samples": tl.unplaced_samples,
                          "stall_reasons": tl.stalls_recorded,
                          "start_time_ns": tl.start_ns,
                          "stop_time_ns": tl.stop_ns,
                          "host": tl.host.describe()}}
