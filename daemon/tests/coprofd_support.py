"""Helpers for the tests of coprofd: streams, an address oracle, a simulated
driver with the truth behind every sample, and the session database.

Writer builds streams with escape-protocol's Python encoder.  Resolver asks
copovl (the overlay library, tested on its own) where an LS address lies
under a guard state.  Simulation plays a random run the way the driver
sees it -- samples and overlay swaps happen at true moments; the driver
drains at polls and context switches and reads guard words only after its
poll drains -- and keeps the true guard state of every sample.  Contexts
may have the trace unit's overlay watch on: their swaps reach the driver
as events placed before the next capture, written as placed OVERLAY
records among the samples, and their poll reads are not reported (the
unbind's read is, placed).  Model predicts, from the rules in
daemon/README.md written out again here, which samples coprofd must store
exact, ambiguous or unmapped, and checks on the way that the rules never
call a sample exact whose true place differs.
"""

import collections
import os
import random
import sqlite3
import subprocess

import coprof_stream as cs

NONE = -1           # a guard value not known, as the database stores it
LS_SIZE = 262144


def open_session(directory):
    """The session database of a session directory, read-only."""
    uri = "file:%s?mode=ro" % os.path.join(directory, "session.db")
    return sqlite3.connect(uri, uri=True)


def identity(path):
    st = os.stat(path)
    return dict(device=st.st_dev, inode=st.st_ino, size=st.st_size,
                hash=cs.image_hash(path))


class Writer:
    """A stream in the making: records and samples in order."""

    def __init__(self):
        self.parts = []
        self.samples = 0
        self.lost = 0

    def record(self, name, **fields):
        self.parts.append(cs.encode_record(name, **fields))

    def start(self, slots=8, **sampling):
        """START; sampling: fifo_full, dither, dither_seed, watermark (1.2),
        none for a 1.1 START."""
        self.record("start", version=cs.VERSION, slots=slots,
                    lfsr_value=0xFFFFFE, lfsr_count=1, clock_hz=10**9,
                    fifo_depth=1024, ls_size=LS_SIZE,
                    poll_interval_ns=10**6, start_time_ns=1000, **sampling)

    def image(self, path, ident=None):
        ident = ident or identity(path)
        self.record("image", path=os.fsencode(path), **ident)

    def context(self, slot, context_id, ident, cycle=0, pid=10, tid=None):
        self.record("context", slot=slot, pid=pid,
                    tid=tid if tid is not None else 100 + context_id,
                    context_id=context_id, object_id=0x5000, image_offset=0,
                    cycle=cycle, **ident)

    def overlay(self, slot, region, guard, cycle=0, placed=False):
        if placed:
            self.record("overlay", slot=slot, region=region, guard=guard,
                        cycle=cycle, placed=cs.OVERLAY_PLACED)
        else:
            self.record("overlay", slot=slot, region=region, guard=guard,
                        cycle=cycle)

    def sample(self, slot, address, count=1):
        self.parts.append(cs.encode_sample(slot, address) * count)
        self.samples += count

    def callstack(self, slot, frames, depth=None):
        """The CALLSTACK (1.4) of the sample just written: frames are
        (return address, overlay), innermost first."""
        self.record("callstack", slot=slot,
                    depth=len(frames) if depth is None else depth,
                    frames=list(frames))

    def reasons(self, slot, stalls):
        """REASONS (1.6): the stall reasons of the slot's next sample
        words, one a sample (a sequence of 0..15 or hex digits)."""
        self.record("reasons", slot=slot, stalls=stalls)

    def transfer(self, slot, tag=None, issuer=None):
        """TRANSFER (1.6): the DMA transfer (tag, issuer's address) the
        slot's DMA-wait samples wait on from here on; none without a
        tag."""
        known = tag is not None
        self.record("transfer", slot=slot,
                    known=cs.TRANSFER_KNOWN if known else 0,
                    tag=tag or 0, issuer=issuer or 0)

    def time(self, slot, cycle, time_ns):
        self.record("time", slot=slot, cycle=cycle, time_ns=time_ns)

    def lost_samples(self, slot, cause, count, cycle=0):
        self.record("lost", slot=slot, cause=cause, count=count, cycle=cycle)
        self.lost += count

    def stall(self, slot, count, ns, cycle=0):
        self.record("stall", slot=slot, count=count, ns=ns, cycle=cycle)

    def release(self, slot, cycle=0):
        self.record("release", slot=slot, cycle=cycle)

    def stop(self, time_ns=10**9):
        self.record("stop", time_ns=time_ns, samples=self.samples,
                    lost=self.lost)

    def bytes(self):
        return b"".join(self.parts)


class Resolver:
    """Where an LS address lies under a guard state, and its candidates,
    from copovl (cached); info() reads an image's layout."""

    def __init__(self, copovl):
        self.copovl = copovl
        self.cache = {}

    def _run(self, *args):
        result = subprocess.run([self.copovl, *map(str, args)],
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        return result.stdout.splitlines()

    @staticmethod
    def _fields(line):
        words = line.split()
        return words[1], dict(w.split("=", 1) for w in words[2:] if "=" in w)

    def resolve(self, image, guards, address):
        """('mapped', file_offset, overlay) or ('unmapped', reason, guard)
        with guard NONE when the line has none."""
        key = (image, tuple(guards), address)
        if key not in self.cache:
            args = ["resolve"]
            if guards:
                args += ["--guards", ",".join(map(str, guards))]
            line = self._run(*args, image, hex(address))[0]
            kind, f = self._fields(line)
            if kind == "mapped":
                self.cache[key] = ("mapped", int(f["file_offset"], 16),
                                   int(f["overlay"]))
            else:
                self.cache[key] = ("unmapped", f["reason"],
                                   int(f.get("guard", NONE)))
        return self.cache[key]

    def candidates(self, image, address):
        """{overlay: file_offset} of every place the address could be."""
        key = (image, "candidates", address)
        if key not in self.cache:
            lines = self._run("candidates", image, hex(address))[1:]
            found = {}
            for line in lines:
                _, f = self._fields(line.strip())
                found[int(f["overlay"])] = int(f["file_offset"], 16)
            self.cache[key] = found
        return self.cache[key]

    def info(self, path):
        return image_info(self.copovl, path)

    def region_of(self, image, address, regions):
        """The 1-based region of an address (0 outside regions)."""
        line = self._run("resolve", "--guards", ",".join(["0"] * regions),
                         image, hex(address))[0] if regions else ""
        _, f = self._fields(line) if line else ("", {})
        return int(f.get("region", 0))


# ---- a simulated run --------------------------------------------------------

LS_BASE = 0x80000000


class ImageInfo:
    """What a simulation needs of an image: its path, its overlay regions
    with the guard values each may take (its overlays' indexes and 0), and
    LS addresses worth sampling."""

    def __init__(self, path, guard_choices, addresses):
        self.path = path
        self.guard_choices = guard_choices      # [(guard, ...)] by region
        self.regions = len(guard_choices)
        self.addresses = addresses


def layout_of_overlay_test_image(path):
    """overlay/'s test image overlays.elf, whose layout is known
    (overlay/tests/overlay-test.ld): resident code, region 1 with overlays
    1-3 (0x114: in all three, 0x150: in 2 and 3, 0x1c0: in 2 only),
    region 2 with overlays 4-5, an unused region 3, a gap at 0x800."""
    return ImageInfo(path, [(1, 2, 3, 0), (4, 5), (0,)],
                     (0x000, 0x010, 0x100, 0x114, 0x118, 0x150, 0x1c0, 0x1c8,
                      0x1ec, 0x20c, 0x800))


def image_info(copovl, path):
    """An ImageInfo read with `copovl info`: the edges and middles of every
    resident segment, region and overlay, and an address in no segment."""
    out = subprocess.run([copovl, "info", path], capture_output=True,
                         text=True, check=True).stdout.splitlines()
    fields = [dict(w.split("=", 1) for w in line.split() if "=" in w)
              for line in out]
    spans, choices = [], {}
    for line, f in zip(out, fields):
        if line.startswith("segment "):
            start = int(f["vaddr"], 16) - LS_BASE
            spans.append((start, start + int(f["memsz"], 16)))
        elif line.startswith("region "):
            start, end = (int(x, 16) for x in f["ls"].split("-"))
            spans.append((start, end))
            choices[int(line.split()[1])] = [0]
        elif line.startswith("overlay "):
            start = int(f["vaddr"], 16) - LS_BASE
            spans.append((start, start + int(f["size"], 16)))
            choices[int(f["region"])].insert(-1, int(line.split()[1]))
    addresses = {LS_SIZE - 16}
    for start, end in spans:
        for a in (start, (start + end) // 2, end - 4, end):
            if 0 <= a < LS_SIZE:
                addresses.add(a & ~3)
    guard_choices = [tuple(choices[r]) for r in sorted(choices)]
    return ImageInfo(path, guard_choices, tuple(sorted(addresses)))


Sample = collections.namedtuple("Sample", "context address guards")
# The trace unit's overlay event: pushed before the capture that follows a
# guard change, in the FIFO's order.
Event = collections.namedtuple("Event", "region guard")


class Context:
    def __init__(self, number, image, watched=False):
        self.number = number            # the stream's context id
        self.image = image.path
        self.info = image
        self.regions = image.regions
        self.guards = [choices[0] for choices in image.guard_choices]
        self.slot = None
        self.swapped = set()            # regions swapped since the last read
        self.reported = []
        self.watched = watched          # the trace unit watches its guards
        self.captured = list(self.guards)   # guards at its last capture


class Simulation:
    """A random run: contexts bound to slots, polls, switches, overlay
    swaps, all with the truth kept.  Produces the stream (writer) and the
    script of what the driver drained when (events), for model()."""

    def __init__(self, seed, images, slots=3, contexts=5, steps=120,
                 watch="none"):
        """images: ImageInfo objects, used by the contexts in turn.
        watch: which contexts the trace unit's overlay watch covers:
        "none", "half" (numbers 1, 2, 5, 6, ...: of every image, with two
        images) or "all"."""
        self.rng = random.Random(seed)
        self.writer = Writer()
        self.events = []
        self.slots = [None] * slots
        self.fifo = [[] for _ in range(slots)]
        self.cycle = 0
        self.placed = 0
        self.contexts = []
        for n in range(contexts):
            watched = watch == "all" or (watch == "half" and n // 2 % 2 == 0)
            self.contexts.append(Context(n + 1, images[n % len(images)],
                                         watched))
        self.idents = {image.path: identity(image.path) for image in images}
        self.writer.start(slots)
        for image in images:
            self.writer.image(image.path)
        for _ in range(steps):
            self.step()
        self.finish()

    # -- what happens on the coprocessors, in true time
    def happen(self, slot, n):
        """n random moments of the slot's context: samples and overlay
        swaps.  A region swaps at most once between two guard reads: a swap
        and its undoing between reads is invisible to any driver that only
        reads guard words (daemon/README.md, limits).
        A watched context may swap freely: the trace unit compares the
        guards at each capture, and a swap undone before the next capture
        has no sample under it."""
        context = self.slots[slot]
        for _ in range(n):
            if context.regions and self.rng.random() < 0.15:
                region = self.rng.randrange(context.regions)
                choices = [g for g in context.info.guard_choices[region]
                           if g != context.guards[region]]
                if (region in context.swapped and not context.watched or
                        not choices):
                    continue
                context.guards[region] = self.rng.choice(choices)
                context.swapped.add(region)
            else:
                self.capture(slot, context)

    def capture(self, slot, context):
        """A capture; with the watch on, an event per guard changed since
        the context's last capture goes first."""
        if context.watched:
            for region, value in enumerate(context.guards):
                if value != context.captured[region]:
                    self.fifo[slot].append(Event(region, value))
            context.captured = list(context.guards)
        self.fifo[slot].append(Sample(
            context, self.rng.choice(context.info.addresses),
            tuple(context.guards)))

    # -- what the driver does
    def drain(self, slot):
        """The samples, with a placed OVERLAY at each event that changes
        what the stream last said of its region."""
        context = self.slots[slot]
        segment = []
        for item in self.fifo[slot]:
            if isinstance(item, Sample):
                self.writer.sample(slot, item.address)
                segment.append(item)
                continue
            if item.guard == context.reported[item.region]:
                continue
            self.events.append(("drain", slot, segment))
            segment = []
            self.write_placed(slot, item.region, item.guard)
        self.events.append(("drain", slot, segment))
        self.fifo[slot].clear()

    def write_placed(self, slot, region, value):
        self.writer.overlay(slot, region, value, self.cycle, placed=True)
        self.events.append(("placed", slot, region, value))
        self.slots[slot].reported[region] = value
        self.placed += 1

    def read_guards(self, slot, first):
        """The poll read after a drain: not reported for a watched context
        (the trace unit places the change at its next capture)."""
        context = self.slots[slot]
        context.swapped.clear()
        if context.watched and not first:
            return
        for region in range(context.regions):
            value = context.guards[region]
            if first or value != context.reported[region]:
                self.writer.overlay(slot, region, value, self.cycle)
                self.events.append(("guard", slot, region, value, first))
                context.reported[region] = value

    def final_read(self, slot):
        """A switch: the emulator is stopped, so a watched context's change
        the read finds came after its last capture: placed at the end."""
        context = self.slots[slot]
        if context is None or not context.watched:
            return
        for region in range(context.regions):
            if context.guards[region] != context.reported[region]:
                self.write_placed(slot, region, context.guards[region])

    def poll(self, slot):
        self.drain(slot)
        if self.slots[slot] is not None:
            self.happen(slot, self.rng.randrange(0, 3))
            self.read_guards(slot, first=False)
        self.cycle += 100
        self.writer.time(slot, self.cycle, self.cycle * 10)
        self.events.append(("time", slot))

    def bind(self, slot, context):
        if self.fifo[slot]:
            self.drain(slot)
        self.final_read(slot)
        self.slots[slot] = context
        context.slot = slot
        context.reported = list(context.guards)
        self.writer.context(slot, context.number,
                            self.idents[context.image], self.cycle)
        self.events.append(("context", slot, context))
        self.read_guards(slot, first=True)

    def unbind(self, slot):
        self.drain(slot)
        self.final_read(slot)
        self.slots[slot].slot = None
        self.slots[slot] = None
        self.writer.release(slot, self.cycle)
        self.events.append(("release", slot))

    def step(self):
        rng = self.rng
        slot = rng.randrange(len(self.slots))
        waiting = [c for c in self.contexts if c.slot is None]
        context = self.slots[slot]
        if context is None:
            if waiting:
                self.bind(slot, rng.choice(waiting))
            return
        self.happen(slot, rng.randrange(1, 12))
        choice = rng.random()
        if choice < 0.75:
            self.poll(slot)
        elif choice < 0.9 and waiting:
            context.slot = None
            self.bind(slot, rng.choice(waiting))
        else:
            self.unbind(slot)
            self.writer.lost_samples(slot, 2, 1, self.cycle)

    def finish(self):
        for slot, context in enumerate(self.slots):
            if context is not None and self.rng.random() < 0.5:
                self.poll(slot)
        for slot, context in enumerate(self.slots):
            if self.fifo[slot]:
                self.drain(slot)
        self.writer.stop()
        self.events.append(("stop",))


# ---- the model of coprofd's rules -------------------------------------------

class Model:
    """What coprofd must store for a Simulation: exact counts by (context,
    image, file offset), ambiguous ones by (context, LS address, region,
    before, after), unmapped ones by (context, LS address, reason, guard).
    Contexts are the stream's ids.  While predicting, checks the rules
    against the truth: an exact sample is where it truly was, an ambiguous
    one has its true place among the candidates."""

    def __init__(self, sim, resolver):
        self.resolver = resolver
        self.exact = collections.Counter()
        self.ambiguous = collections.Counter()
        self.unmapped = collections.Counter()
        self.per_context = collections.Counter()
        self.timeline = collections.Counter()   # exact at a TIME, by context
        self.state = {}             # context -> per-region dict
        self.bound = {}             # slot -> context
        self.open = collections.defaultdict(list)   # slot -> drained samples
        self.held = collections.defaultdict(list)   # slot -> (sample,
        #                             region, guard): before a placed change
        self.first = {}             # slot -> in the first read
        self.tails = {}             # context -> [samples], region values
        for event in sim.events:
            getattr(self, "on_" + event[0])(*event[1:])

    # -- per context and region: guard now, at the last two closes, changes
    def regions(self, context):
        if context not in self.state:
            self.state[context] = [dict(now=NONE, closed=NONE, before=NONE,
                                        changed=False, changed_before=False,
                                        reread=False)
                                   for _ in range(context.regions)]
        return self.state[context]

    def guards(self, context):
        return [max(r["now"], 0) for r in self.regions(context)]

    def place(self, context, address, guards=None):
        return self.resolver.resolve(context.image,
                                     guards or self.guards(context), address)

    def region_of(self, context, address):
        if not context.regions:
            return 0
        key = (context.image, address)
        if key not in self.resolver.cache:
            self.resolver.cache[key] = self.resolver.region_of(
                context.image, address, context.regions)
        return self.resolver.cache[key]

    def count_place(self, context, sample, at_time=False, guards=None):
        place = self.place(context, sample.address, guards)
        truth = self.resolver.resolve(context.image, list(sample.guards),
                                      sample.address)
        assert place == truth, "exact but misattributed: %r" % (sample,)
        if place[0] == "mapped":
            self.exact[(context.number, context.image, place[1])] += 1
            if at_time:
                self.timeline[context.number] += 1
        else:
            self.unmapped[(context.number, sample.address, place[1],
                           place[2])] += 1

    def count_ambiguous(self, context, sample, region, before, after):
        truth = self.resolver.resolve(context.image, list(sample.guards),
                                      sample.address)
        if truth[0] == "mapped":
            assert truth[1] in self.resolver.candidates(
                context.image, sample.address).values()
        self.ambiguous[(context.number, sample.address, region, before,
                        after)] += 1

    # -- the stream's events
    def on_context(self, slot, context):
        self.close(slot, trailing=True)
        self.bound[slot] = context
        self.first[slot] = True
        for r in self.regions(context):
            r["reread"] = False

    def end_first(self, slot):
        if not self.first.get(slot):
            return
        self.first[slot] = False
        context = self.bound[slot]
        for r in self.regions(context):
            r["closed"] = r["before"] = r["now"]
            r["changed"] = r["changed_before"] = False
        for sample, region, value in self.tails.pop(context, []):
            r = self.regions(context)[region - 1]
            after = r["now"] if r["reread"] else NONE
            if after != NONE and after == value:
                self.count_place(context, sample)
            else:
                self.count_ambiguous(context, sample, region, value, after)

    def on_guard(self, slot, region, value, first):
        context = self.bound[slot]
        r = self.regions(context)[region]
        if self.first.get(slot) and not first:
            self.end_first(slot)
        r["now"] = value
        if self.first.get(slot):
            r["reread"] = True
        else:
            r["changed"] = True

    def on_placed(self, slot, region, value):
        """A placed change of region (0-based): the group's samples in it so
        far were taken under its guard now; they are held with it."""
        context = self.bound[slot]
        self.end_first(slot)
        r = self.regions(context)[region]
        keep = []
        for sample in self.open[slot]:
            if self.region_of(context, sample.address) == region + 1:
                self.held[slot].append((sample, region + 1, r["now"]))
            else:
                keep.append(sample)
        self.open[slot] = keep
        r["now"] = value

    def attribute_held(self, context, sample, region, guard, trailing):
        """Taken under guard: exact, unless an unplaced change of its region
        touches the window (then ambiguous, as any sample of the group)."""
        r = self.regions(context)[region - 1]
        if r["changed"] or r["changed_before"]:
            before = r["before"] if r["changed_before"] else r["closed"]
            self.count_ambiguous(context, sample, region, before, guard)
            return
        guards = self.guards(context)
        guards[region - 1] = guard
        self.count_place(context, sample, at_time=not trailing,
                         guards=guards)

    def on_drain(self, slot, samples):
        if samples:
            self.end_first(slot)
        self.per_context.update(s.context.number for s in samples)
        self.open[slot].extend(samples)

    def attribute(self, context, sample, trailing):
        region = self.region_of(context, sample.address)
        if region == 0:
            self.count_place(context, sample, at_time=not trailing)
            return
        r = self.regions(context)[region - 1]
        if r["changed"] or r["changed_before"]:
            before = r["before"] if r["changed_before"] else r["closed"]
            self.count_ambiguous(context, sample, region, before, r["now"])
        elif trailing:
            self.tails.setdefault(context, []).append(
                (sample, region, r["now"]))
        else:
            self.count_place(context, sample, at_time=True)

    def close(self, slot, trailing):
        context = self.bound.get(slot)
        if context is None:
            assert not self.open[slot]
            return
        self.end_first(slot)
        for sample, region, guard in self.held.pop(slot, []):
            self.attribute_held(context, sample, region, guard, trailing)
        for sample in self.open.pop(slot, []):
            self.attribute(context, sample, trailing)
        if not trailing:
            for r in self.regions(context):
                r["before"], r["closed"] = r["closed"], r["now"]
                r["changed_before"], r["changed"] = r["changed"], False

    def on_time(self, slot):
        self.close(slot, trailing=False)

    def on_release(self, slot):
        self.close(slot, trailing=True)
        self.bound.pop(slot, None)

    def on_stop(self):
        for slot in list(self.bound):
            self.close(slot, trailing=True)
        self.bound.clear()
        for context, tail in self.tails.items():
            for sample, region, value in tail:
                self.count_ambiguous(context, sample, region, value, NONE)
        self.tails.clear()


def session_counts(db):
    """The session's counts in the Model's shapes."""
    contexts = dict(db.execute("SELECT id, context_id FROM contexts"))
    images = dict(db.execute("SELECT id, path FROM images"))
    exact = collections.Counter()
    for c, i, offset, n in db.execute(
            "SELECT context, image, file_offset, count FROM samples"):
        exact[(contexts[c], images[i], offset)] += n
    ambiguous = collections.Counter()
    for c, a, r, f, t, n in db.execute(
            "SELECT context, ls_addr, region, guard_from, guard_to, count"
            " FROM ambiguous_samples"):
        ambiguous[(contexts[c], a, r, f, t)] += n
    unmapped = collections.Counter()
    for c, a, reason, g, n in db.execute(
            "SELECT context, ls_addr, reason, guard, count"
            " FROM unmapped_samples"):
        unmapped[(contexts[c], a, reason, g)] += n
    return exact, ambiguous, unmapped
