"""The host side of a session: the Linux scheduler's events of the host
threads and the host CPU samples that coprof-host stored beside the
coprocessor samples (docs/session-format.md, "The host side").

From the scheduler's events, each thread's states over time:

- running: from a sched_switch that switched it in to the next that
  switched it out;
- runnable: switched out while still runnable (preempted: prev_state R),
  or woken (sched_wakeup, sched_wakeup_new), until switched in: the time
  it waited in a run queue;
- blocked: switched out in any other state (S sleeping, D waiting for
  I/O, ...), until woken.

Before a thread's first event its state is inferred back to the start of
the recording (a thread first seen switched out was running, one first
woken was blocked), unless that event is its creation; the last state
lasts until the recording's end or the thread's exit (prev_state X or Z).

coprof-host applies these rules itself as it records and stores their
sums (hostprof/aggregate.c): per thread and time bucket
(host_thread_times) and per context over its life (host_context_times).
The reports read those; only the timeline reads the raw events, which the
session holds for the recording's last minutes (a ring: host.raw_from_ns
on), and shows the time before them from the buckets.

The host profile: one row per (ELF file, symbol), like opreport's rows,
with the same 95% Wilson interval as the coprocessor's rows
(profile.interval).
"""

import collections
import os

from .profile import Share, interval

STATES = ("running", "runnable", "blocked")
EMULATOR_ROLES = ("copsim", "qemu")
MERGE_NS = 100000       # the timeline's slices shorter than this merge

Interval = collections.namedtuple("Interval", "start_ns end_ns state cpu")
# A timeline slice: ns None for one interval, else {state: ns} of the
# slices (or bucket) it stands for.
Slice = collections.namedtuple("Slice", "start_ns end_ns state cpu ns")


class HostRow(Share):
    """Host samples of one (file, symbol)."""

    __slots__ = ("file", "build_id", "symbol", "samples", "inlined",
                 "share")

    def __init__(self, file, build_id, symbol):
        self.file = file
        self.build_id = build_id
        self.symbol = symbol            # None: no symbol covers them
        self.samples = 0
        self.inlined = {}               # inlined function -> samples
        self.share = (0.0, 0.0, 0.0)

    @property
    def name(self):
        return self.symbol or "[no symbol in %s]" % os.path.basename(
            self.file)


class HostSide:
    """What a session holds of the host side, read on demand."""

    def __init__(self, session):
        self.session = session
        keys = session.keys
        self.present = session.has_table("host_threads")
        self.sched_state = keys.get("host.sched")   # None: no coprof-host
        self.samples_state = keys.get("host.samples")
        self.event = keys.get("host.event")
        self.period = session.int_key("host.period", None, 1)
        self.call_graph = keys.get("host.call_graph")
        self.samples_lost = session.int_key("host.samples_lost", 0, 0)
        self.sched_lost = session.int_key("host.sched_lost", 0, 0)
        self.start_ns = session.int_key("host.start_ns", None, 0)
        self.stop_ns = session.int_key("host.stop_ns", None, 0)
        self.sched_threads = keys.get("host.sched_threads")
        self.aggregated = self.present and \
            "host.sched_events" in keys and \
            session.has_table("host_context_times")
        self.raw_events = session.int_key("host.raw_events", 0, 0)
        self.raw_dropped = session.int_key("host.raw_dropped", 0, 0)
        self.raw_from_ns = session.int_key("host.raw_from_ns",
                                           self.start_ns, 0)
        self.bucket_ns = session.int_key("host.bucket_ns", None, 1)
        self.threads = {}
        self.sched_events = 0
        if self.present:
            for r in session.query("SELECT tid, pid, comm, role "
                                   "FROM host_threads ORDER BY tid"):
                self.threads[r["tid"]] = r
            if self.aggregated:
                self.sched_events = session.int_key("host.sched_events", 0,
                                                    0)
            else:       # an older coprof-host kept every event
                self.sched_events = self.raw_events = session.query(
                    "SELECT COUNT(*) FROM host_sched_events")[0][0]
        self._intervals = None

    @property
    def sched_recorded(self):
        return self.present and self.sched_state == "recorded"

    @property
    def samples_recorded(self):
        return self.present and self.samples_state == "recorded"

    def thread_name(self, tid):
        t = self.threads.get(tid)
        return t["comm"] if t is not None and t["comm"] else "?"

    # --- thread states ----------------------------------------------

    def intervals(self):
        """{tid: [Interval]} of every thread the events name, in time
        order."""
        if self._intervals is None:
            states = _states(self._events(), self.start_ns,
                             self.stop_ns) if self.sched_recorded else {}
            # the session's threads only (not those switched with them)
            self._intervals = {tid: spans for tid, spans in states.items()
                               if tid in self.threads}
        return self._intervals

    def _events(self):
        return self.session.iterate(
            "SELECT time_ns, cpu, kind, tid, prev_state, other_tid "
            "FROM host_sched_events ORDER BY time_ns, id")

    def timeline_tids(self, emulator=False):
        """The threads the timeline shows: the command's, and with
        emulator copsim's and its QEMUs' too."""
        return sorted(tid for tid, t in self.threads.items()
                      if emulator or t["role"] not in EMULATOR_ROLES)

    def timeline_slices(self, tids, merge_ns=MERGE_NS):
        """{tid: [Slice]} of threads tids in time order: from the raw
        events where the session holds them, before that (a ring that
        wrapped) a slice per bucket named by the state that held most of
        it; adjacent slices shorter than merge_ns merge into one named
        likewise, their times in ns."""
        if not self.sched_recorded or not tids:
            return {}
        edge = self.raw_from_ns if self.ring_wrapped else self.start_ns
        wanted = set(tids)
        out = collections.defaultdict(list)
        for tid, spans in _states(self._events_of(wanted), edge,
                                  self.stop_ns).items():
            if tid in wanted:
                out[tid].extend(Slice(max(iv.start_ns, edge), iv.end_ns,
                                      iv.state, iv.cpu, None)
                                for iv in spans if iv.end_ns > edge)
        if self.ring_wrapped and self.bucket_ns:
            for tid, spans in self._bucket_slices(wanted, edge,
                                                  out).items():
                out[tid][:0] = spans
        return {tid: _merged(spans, merge_ns) for tid, spans in out.items()}

    def _bucket_slices(self, wanted, edge, raw):
        """{tid: [Slice]}: a slice per bucket before edge; of the bucket
        edge falls in, what the raw slices after it do not account for."""
        width = self.bucket_ns
        out = collections.defaultdict(list)
        for tid, start, *ns in self.session.iterate(
                "SELECT tid, bucket_start_ns, running_ns, runnable_ns, "
                "blocked_ns FROM host_thread_times WHERE bucket_start_ns < ? "
                "ORDER BY tid, bucket_start_ns", (edge,)):
            if tid not in wanted:
                continue
            times = dict(zip(STATES, ns))
            end = start + sum(ns)
            if start + width > edge:        # the rest is raw
                for sl in raw.get(tid, ()):
                    lo, hi = max(sl.start_ns, edge), min(sl.end_ns,
                                                         start + width)
                    if hi > lo:
                        times[sl.state] = max(0, times[sl.state] - (hi - lo))
                start, end = edge - sum(times.values()), edge
            if end > start:
                out[tid].append(Slice(start, end,
                                      max(STATES, key=times.get), None,
                                      times))
        return out

    def _events_of(self, tids):
        """The raw events that move threads tids, in time order."""
        for row in self._events():
            if row[3] in tids or (row[2] == "switch" and row[5] in tids):
                yield row

    def state_times(self, tid, start_ns, end_ns):
        """{state: ns} of thread tid between start_ns and end_ns; None when
        the events never name it."""
        spans = self.intervals().get(tid)
        if spans is None:
            return None
        times = dict.fromkeys(STATES, 0)
        for iv in spans:
            lo, hi = max(iv.start_ns, start_ns), min(iv.end_ns, end_ns)
            if hi > lo and iv.state in times:
                times[iv.state] += hi - lo
        return times

    def context_times(self, contexts):
        """Sets every ContextInfo's host_times: its thread's state times
        during the context's life (its first to its last SCHED event in
        copsim's log), with life_ns; None when not known.  From
        coprof-host's sums (host_context_times); a session of an older
        coprof-host from its raw events."""
        if not self.sched_recorded:
            return
        if self.aggregated:
            rows = {r[0]: r for r in self.session.query(
                "SELECT context_id, tid, start_ns, end_ns, running_ns, "
                "runnable_ns, blocked_ns FROM host_context_times")}
            for c in contexts.values():
                r = rows.get(c.context_id)
                if r is not None and c.tid == r[1]:
                    c.host_times = dict(zip(STATES, r[4:]),
                                        life_ns=r[3] - r[2])
            return
        lives = context_lives(self.session)
        for c in contexts.values():
            life = lives.get(c.context_id)
            if life is None or c.tid is None:
                continue
            times = self.state_times(c.tid, life[0], life[1])
            if times is not None:
                times["life_ns"] = life[1] - life[0]
                c.host_times = times

    # --- samples ------------------------------------------------------

    def rows(self):
        """[HostRow] by samples, each with its share of all host samples,
        and the total."""
        if not self.samples_recorded:
            return [], 0
        rows = {}
        for file, build_id, symbol, inlined, count in self.session.query(
                "SELECT l.file, l.build_id, l.symbol, l.inlined, COUNT(*) "
                "FROM host_samples s JOIN host_locations l "
                "ON l.id = s.location GROUP BY s.location"):
            r = rows.get((file, symbol))
            if r is None:
                r = rows[(file, symbol)] = HostRow(file, build_id, symbol)
            r.samples += count
            if inlined:
                r.inlined[inlined] = r.inlined.get(inlined, 0) + count
        total = sum(r.samples for r in rows.values())
        for r in rows.values():
            r.share = interval(r.samples, total)
        return sorted(rows.values(),
                      key=lambda r: (-r.samples, r.name, r.file)), total

    def samples_in_time(self):
        """(time_ns, tid, symbol, file) of every host sample."""
        if not self.samples_recorded:
            return []
        return self.session.iterate(
            "SELECT s.time_ns, s.tid, l.symbol, l.file, l.inlined "
            "FROM host_samples s JOIN host_locations l "
            "ON l.id = s.location ORDER BY s.time_ns")

    @property
    def ring_wrapped(self):
        """Whether the raw events of the recording's start were let go."""
        return self.raw_dropped > 0

    def raw_detail(self):
        """"all kept", or "the last N, from S s into the recording: the
        ring let D go"."""
        if not self.ring_wrapped:
            return "all kept"
        return ("the last %d, from %.3f s into the recording: the ring let "
                "%d go" % (self.raw_events,
                           (self.raw_from_ns - (self.start_ns or 0)) / 1e9,
                           self.raw_dropped))

    def describe(self):
        """One line on how the host side was recorded."""
        parts = []
        if self.sched_state is None:
            return "host side: not recorded"
        if self.sched_recorded:
            whose = {"command": "the command's ",
                     "all": "the command's, copsim's and its QEMUs' "}.get(
                         self.sched_threads, "")
            parts.append("Linux scheduler events of %s%d threads (%d events, "
                         "%d lost; raw events: %s)" % (
                             whose, len(self.threads), self.sched_events,
                             self.sched_lost, self.raw_detail()))
        elif self.sched_state != "off":
            parts.append("Linux scheduler events %s" % self.sched_state)
        if self.samples_recorded:
            parts.append("samples on %s every %d%s, %d lost" % (
                self.event, self.period or 0,
                ", callchains" if self.call_graph == "fp" else "",
                self.samples_lost))
        elif self.samples_state not in (None, "off"):
            parts.append("samples %s" % self.samples_state)
        return "host side: " + ("; ".join(parts) if parts else "off")


def _states(events, start_ns, stop_ns):
    """Each thread's states from the scheduler's events (the module's
    rules)."""
    current = {}            # tid -> [state, since, cpu]
    born = set()            # first seen created: no state before
    out = collections.defaultdict(list)

    def move(tid, t, state, cpu, before=None):
        cur = current.get(tid)
        if cur is None:
            if before is not None and tid not in born and \
                    start_ns is not None and t > start_ns:
                out[tid].append(Interval(start_ns, t, before, cpu))
        elif cur[0] == state:
            return
        elif cur[0] is not None:
            out[tid].append(Interval(cur[1], t, cur[0], cur[2]))
        current[tid] = [state, t, cpu]

    for t, cpu, kind, tid, prev_state, other in events:
        if kind == "switch":
            st = prev_state or "R"
            move(tid, t, None if st[0] in "XZ" else
                 "runnable" if st[0] == "R" else "blocked", cpu, "running")
            move(other, t, "running", cpu, "runnable")
        elif kind in ("wakeup", "wakeup_new"):
            cur = current.get(tid)
            if kind == "wakeup_new" and cur is None:
                born.add(tid)
            if cur is None or cur[0] != "running":
                move(tid, t, "runnable", cpu, "blocked")
        elif kind in ("fork", "newtask") and tid not in current:
            born.add(tid)
    end = stop_ns
    for tid, (state, since, cpu) in current.items():
        if state is not None and end is not None and end > since:
            out[tid].append(Interval(since, end, state, cpu))
    for spans in out.values():
        spans.sort()
    out.pop(0, None)        # the idle task
    return dict(out)


def _merged(spans, merge_ns):
    """Adjacent slices merged: one shorter than merge_ns into the slice
    before it, and buckets named by one state into one."""
    out = []
    for s in spans:
        prev = out[-1] if out else None
        if prev is not None and prev.end_ns == s.start_ns and (
                s.end_ns - s.start_ns < merge_ns or
                (prev.ns is not None and s.ns is not None and
                 prev.state == s.state)):
            times = dict(prev.ns or {prev.state: prev.end_ns -
                                     prev.start_ns})
            for k, v in (s.ns or {s.state: s.end_ns - s.start_ns}).items():
                times[k] = times.get(k, 0) + v
            out[-1] = Slice(prev.start_ns, s.end_ns,
                            max(STATES, key=lambda k: times.get(k, 0)),
                            prev.cpu, times)
        else:
            out.append(s)
    return out


def context_lives(session):
    """{copsim context id: (start_ns, end_ns)}: the span of the context's
    SCHED events (create .. exit) in copsim's log, else of its bindings."""
    from .timeline import event_time_ns
    lives = {}
    for r in session.sched_events():
        cid = r["context_id"]
        if cid is None:
            continue
        t = event_time_ns(r)
        lo, hi = lives.get(cid, (t, t))
        lives[cid] = (min(lo, t), max(hi, t))
    for r in session.query(
            "SELECT c.context_id, MIN(b.start_time_ns), MAX(b.end_time_ns) "
            "FROM bindings b JOIN contexts c ON c.id = b.context "
            "GROUP BY c.id"):
        if r[0] not in lives and r[1] is not None and r[2] is not None:
            lives[r[0]] = (r[1], r[2])
    return {cid: span for cid, span in lives.items() if span[1] > span[0]}


def times_text(times):
    """"on CPU 1.20 ms, runnable 0.30 ms, blocked 40.00 ms of its 41.50
    ms life"."""
    return ("on CPU %.2f ms, runnable %.2f ms, blocked %.2f ms during the "
            "context's life (%.2f ms)" % (
                times["running"] / 1e6, times["runnable"] / 1e6,
                times["blocked"] / 1e6, times["life_ns"] / 1e6))
