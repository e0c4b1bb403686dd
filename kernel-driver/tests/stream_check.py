"""stream_check -- what the driver's tests ask of a stream.

Reads a stream with escape-protocol's Python decoder and answers:
which samples each context got (attribution follows CONTEXT and RELEASE),
the slot-cycle intervals each context ran (its slices), the samples and
LOST counts of each slot (conservation), and the OVERLAY records of each
context.  expected_samples() predicts, from a context's slices and its
every-instruction reference trace (cop-run --sample-every 1 --reference),
exactly which addresses the trace unit captures for it when contexts
share a slot whose LFSR keeps running across switches.
"""

import collections
import os
import re
import subprocess
import sys
import tempfile

SOURCE = os.environ.get("COPROF_SOURCE", os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(SOURCE, "escape-protocol"))

import coprof_stream as cs  # noqa: E402  (needs the path above)


class Stream:
    """A decoded driver stream, followed slot by slot.  A context still
    bound at STOP ran until its slot's last TIME record (the stop's final
    drain)."""

    def __init__(self, data):
        self.events, self.stats = cs.decode(data)
        self.errors = [e for e in self.events if isinstance(e, cs.Error)]
        self.start = None
        self.stop = None
        self.samples = collections.defaultdict(list)     # context -> addrs
        self.slices = collections.defaultdict(list)      # context -> [a, b]
        self.overlays = collections.defaultdict(list)    # context -> fields
        self.slot_samples = collections.Counter()
        self.slot_lost = collections.defaultdict(collections.Counter)
        self.orphans = 0
        self._follow()

    def _close_slice(self, context, cycle):
        if context is not None and self.slices[context][-1][1] is None:
            self.slices[context][-1][1] = cycle

    def _follow(self):
        current = {}
        self._last_time = {}
        for event in self.events:
            if isinstance(event, cs.Sample):
                context = current.get(event.slot)
                self.slot_samples[event.slot] += 1
                if context is None:
                    self.orphans += 1
                else:
                    self.samples[context].append(event.address)
            elif isinstance(event, cs.Record):
                self._record(event, current)

    def _record(self, rec, current):
        f = rec.fields
        if rec.code == cs.START:
            self.start = f
        elif rec.code == cs.CONTEXT:
            self._close_slice(current.get(f["slot"]), f["cycle"])
            current[f["slot"]] = f["context_id"]
            self.slices[f["context_id"]].append([f["cycle"], None])
        elif rec.code == cs.RELEASE:
            self._close_slice(current.pop(f["slot"], None), f["cycle"])
        elif rec.code == cs.OVERLAY:
            self.overlays[current.get(f["slot"])].append(f)
        elif rec.code == cs.LOST:
            self.slot_lost[f["slot"]][f["cause"]] += f["count"]
        elif rec.code == cs.TIME:
            self._last_time[f["slot"]] = f["cycle"]
        elif rec.code == cs.STOP:
            self.stop = f
            for slot, context in current.items():
                self._close_slice(context, self._last_time.get(slot))

    def lost(self, slot, cause=None):
        counts = self.slot_lost[slot]
        return sum(counts.values()) if cause is None else counts[cause]


def reference_trace(cop_run, image, args, every, fifo_depth=1 << 22,
                    dither=None, event="SPU_INSTRUCTIONS"):
    """Runs cop-run in reference mode (dithered with seed `dither` unless
    None), one capture every `every` of `event`; returns (addresses,
    counters)."""
    seed = [] if dither is None else ["--dither", str(dither)]
    with tempfile.NamedTemporaryFile("r") as out:
        result = subprocess.run(
            [cop_run, "--event", event, "--sample-every", str(every),
             "--reference",
             "--samples-out", out.name, "--fifo-depth", str(fifo_depth)] +
            seed + [image] + [str(a) for a in args],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            check=True)
        addresses = [int(line, 16) for line in out]
    counters = dict((k, int(v)) for k, v in
                    re.findall(r"(\w+)=(\d+)", result.stderr.splitlines()[-1]))
    return addresses, counters


def expected_samples(slices, every, trace, outside):
    """The captures of a context that ran the slot-cycle intervals `slices`
    of a slot whose LFSR was loaded at cycle 0 for one capture every
    `every` cycles: the slot captures the instruction that brings its cycle
    counter to a multiple of `every`.  trace holds the context's
    local-store addresses, one per instruction, after its first `outside`
    instructions (the reset code outside the local store).  Returns
    (addresses, captures of outside instructions)."""
    own = 0
    addresses = []
    outside_captures = 0
    for begin, end in slices:
        cycle = (begin // every + 1) * every
        while cycle <= end:
            index = own + cycle - begin          # 1-based, own instructions
            if index <= outside:
                outside_captures += 1
            else:
                addresses.append(trace[index - outside - 1])
            cycle += every
        own += end - begin
    return addresses, outside_captures
