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

The host profile: one row per (ELF file, symbol), like opreport's rows,
with the same 95% Wilson interval as the coprocessor's rows
(profile.interval).
"""

import collections
import os

from .profile import Share, interval

STATES = ("running", "runnable", "blocked")

Interval = collections.namedtuple("Interval", "start_ns end_ns state cpu")


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
        self.threads = {}
        self.sched_events = 0
        if self.present:
            for r in session.query("SELECT tid, pid, comm, role "
                                   "FROM host_threads ORDER BY tid"):
                self.threads[r["tid"]] = r
            self.sched_events = session.query(
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
        copsim's log, else its bindings), with life_ns; None when not
        known."""
        if not self.sched_recorded:
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

    def describe(self):
        """One line on how the host side was recorded."""
        parts = []
        if self.sched_state is None:
            return "host side: not recorded"
        if self.sched_recorded:
            parts.append("Linux scheduler events of %d threads (%d events, "
                         "%d lost)" % (len(self.threads), self.sched_events,
                                       self.sched_lost))
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
