"""What copsim's tests share: a copsim daemon of the test's own, and the
SCHED records it wrote (the fixtures are in conftest.py).

Copsim starts build/bin/copsim with a socket in a short private
directory (a UNIX socket path holds about 100 bytes) and an event log beside
it, waits until it says "ready", and stops it at the end of the test,
checking that it exited cleanly.  sched_events(log) reads the log with
`coplog dump --format json` and returns one dict per SCHED record: its kind
(the format's first word) and every key=value of the format with its
argument.  check_slot_history() is the consistency check of the issue:
per slot, bind and unbind alternate, name the same context, and the slot's
cycle counter only moves while a context is bound.  counted_cycles()
is a context's modelled cycles by its exact counts (copsim --exact-counts
DIR), the truth of the slot cycles its bindings add up to.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

SOURCE = os.environ.get("COPROF_SOURCE", os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
sys.path.insert(0, os.path.join(SOURCE, "tests"))
import exact_counts  # noqa: E402  (needs the path above)
FIELD = re.compile(r"(\w+)=(?:0x)?%[-0-9]*(?:ll|l|z)?[a-z]")


class Copsim:
    """A running copsim and where it keeps things."""

    def __init__(self, build_dir, options, prefix=(), ready_timeout=30):
        self.build_dir = build_dir
        self.dir = tempfile.mkdtemp(prefix="cs-", dir="/tmp")
        self.socket = os.path.join(self.dir, "copsim.sock")
        self.log = os.path.join(self.dir, "sched.coplog")
        read_end, write_end = os.pipe()
        command = list(prefix) or [os.path.join(build_dir, "bin", "copsim")]
        command += ["--socket", self.socket, "--event-log", self.log,
                    "--ready-fd", str(write_end)] + list(options)
        self.stderr = open(os.path.join(self.dir, "stderr"), "w+")
        self.process = subprocess.Popen(command, pass_fds=(write_end,),
                                        stderr=self.stderr)
        os.close(write_end)
        with os.fdopen(read_end) as ready:
            line = ready.readline()
        if line != "ready\n":
            self.process.wait(timeout=ready_timeout)
            raise RuntimeError("copsim did not start: " + self.errors())

    @property
    def env(self):
        """The environment of a client of this copsim."""
        env = dict(os.environ)
        env["COPSIM_SOCKET"] = self.socket
        return env

    def errors(self):
        self.stderr.flush()
        self.stderr.seek(0)
        return self.stderr.read()

    def alive(self):
        return self.process.poll() is None

    def emulators(self):
        """Pids of copsim's child processes (its QEMUs)."""
        children = []
        for task in os.listdir("/proc/%d/task" % self.process.pid):
            path = "/proc/%d/task/%s/children" % (self.process.pid, task)
            try:
                with open(path) as f:
                    children += [int(pid) for pid in f.read().split()]
            except FileNotFoundError:   # a thread that ended meanwhile
                continue
        return children

    def cpu_seconds(self):
        """CPU time of copsim, of the emulators it has reaped and of those
        still running (the slot model's long-lived ones)."""
        ticks = 0
        for pid in [self.process.pid] + self.emulators():
            try:
                with open("/proc/%d/stat" % pid) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:         # ended meanwhile: counted as reaped
                continue
            ticks += sum(int(fields[i]) for i in (11, 12, 13, 14))
        return ticks / os.sysconf("SC_CLK_TCK")

    def stop(self):
        if self.alive():
            self.process.send_signal(signal.SIGTERM)
        status = self.process.wait(timeout=30)
        self.stderr.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        return status


def parse_host_lines(text):
    """cop-host's per-context lines as dicts (the fault text is last)."""
    contexts = []
    for line in text.splitlines():
        if not line.startswith("context="):
            continue
        head, _, fault = line.partition(" fault=")
        fields = dict(item.split("=", 1) for item in head.split())
        fields["fault"] = fault
        contexts.append(fields)
    return contexts


def sched_events(build_dir, log):
    """The SCHED records of the log, in order, as dicts."""
    dump = subprocess.run([os.path.join(build_dir, "bin", "coplog"), "dump",
                           log, "--subsys", "SCHED", "--format", "json"],
                          capture_output=True, text=True, check=True)
    events = []
    for line in dump.stdout.splitlines():
        record = json.loads(line)
        event = {"kind": record["format"].split()[0],
                 "time_ns": record["time_ns"], "level": record["level"]}
        keys = FIELD.findall(record["format"])
        event.update(zip(keys, record["args"]))
        events.append(event)
    return events


def check_slot_history(events, n_slots):
    """Checks the bind/unbind history of every slot and returns, per
    context, its bindings as (slot, bind cycle, unbind cycle, reason)."""
    bound = {}              # slot -> bind event
    last_cycles = {}        # slot -> cycle counter at the last unbind
    last_mono = {}
    bindings = {}
    for e in events:
        if e["kind"] not in ("bind", "unbind", "preempt"):
            continue
        slot = e["slot"]
        assert 0 <= slot < n_slots, e
        assert e["mono"] >= last_mono.get(slot, 0), ("time went back", e)
        last_mono[slot] = e["mono"]
        if e["kind"] == "bind":
            assert slot not in bound, ("bound twice", bound.get(slot), e)
            assert e["cycles"] == last_cycles.get(slot, e["cycles"]), (
                "the slot ran while unbound", e)
            bound[slot] = e
        elif e["kind"] == "preempt":
            assert bound.get(slot, {}).get("context") == e["context"], e
        else:
            start = bound.pop(slot, None)
            assert start is not None, ("unbind of a free slot", e)
            assert start["context"] == e["context"], (start, e)
            assert e["cycles"] >= start["cycles"], (start, e)
            last_cycles[slot] = e["cycles"]
            bindings.setdefault(e["context"], []).append(
                (slot, start["cycles"], e["cycles"], e["reason"]))
    assert not bound, ("still bound at the end", bound)
    return bindings


def counted_cycles(counts_dir, context):
    """The timing model's cycles of every run of context `context` in
    copsim's --exact-counts DIR: what its slots counted (SPU_CYCLES) while
    it was bound."""
    path = os.path.join(str(counts_dir), "context-%d.counts" % int(context))
    return sum(r.cycles for r in exact_counts.read_counts(path))


def wait_for(predicate, timeout=30, interval=0.05):
    """Polls predicate() until it is true; fails the test after timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    pytest.fail("timed out waiting for %s" % predicate.__name__)
