"""The per-symbol profile of a session: rows, separations, percentages and
their 95% intervals.

Every sample of the session is in exactly one table (docs/session-format.md)
and lands in exactly one row here:

- exact samples (table samples), by (image, overlay, function): the
  function is the symbol covering the sample's file offset in the image
  (symbols.py), so overlay functions sharing a VMA are distinct rows;
  offsets no symbol covers make one "[no symbol in SECTION]" row per
  section;
- ambiguous samples (and pending ones, which a session left by a killed
  coprofd still holds: a report treats them as ambiguous), by (image,
  region, candidate functions): "[ambiguous region 1: blur_picture|
  crc16_bitwise]" names every function the sample may have been in; the
  count is never split;
- unmapped samples, by (image, reason): "[unmapped no-segment]";
- orphan samples (no context on their slot): "[orphan]".

A separation splits the rows into groups: `none` (one group), `context`
(one per context, with a header naming it), `image` (one per coprocessor
image) or `slot` (one per slot the context was bound on; a context that
moved between slots is one group "slots 0,3", since samples are stored per
context, not per slot).  A row's percent is of its group's total, with a
95% interval of that share (intervals.py): from blocks of consecutive
samples of the group's contexts when there are enough of them (the
group's interval_method "batches"), else the Wilson score interval
("wilson"), which assumes independent samples.  Either covers sampling
noise only: not aliasing (a period in step with a loop, which the trace
unit's dither breaks) nor losses.

Captures outside the local store (cause outside-ls: QEMU's reset code,
which runs before a slot's first context) are no context's code: they are
counted apart (Profile.outside, totals "outside"), not as lost.

Losses: every LOST record has a slot and, when the slot had one, a context,
so the lost captures land in the group their context's samples are in (or
the "no context" / "no image" / slot group).  A group, context or image
that lost more than LOSS_WARN_PERCENT of its captures (lost / (samples +
lost)) is flagged: captures are lost where the FIFO overflowed, which
falls on the fastest code, so its shares may be biased.

Sides: `cop` is the coprocessor profile above; `host` the host CPU samples
of the host program (host.py), one group of rows by ELF file and symbol
with the same intervals; `all` (the default) both, apart.  Each context
also gets its host thread's on-CPU, run-queue and blocked time during its
life when the session holds the Linux scheduler's events.

Sampling: the capture period, the FIFO-full policy (stall or drop), the
time stalled and the dither setting come from the session keys sampling.*
and the stalls table (docs/session-format.md); a session recorded before
they existed says "not recorded".
"""

import functools
import math
import os

from . import intervals, stalls, symbols
from .session import content_hash

SEPARATIONS = ("none", "context", "slot", "image")
SIDES = ("all", "cop", "host")
Z95 = intervals.Z95
OUTSIDE = "outside-ls"      # the cause that is no loss (see above)


class FilterError(Exception):
    """An --image or --context filter matching nothing; str() names it."""


LOSS_WARN_PERCENT = 1.0


# The Wilson score interval (host.py and callgraph.py use it too).
interval = intervals.wilson


class Losses:
    """Captures lost, by cause, of a group, context or image; the share
    of its captures they are against `samples` (what it kept)."""

    def __init__(self):
        self._counts = {}       # (cause, cause_name) -> count

    def add(self, cause, name, count):
        key = (cause, name)
        self._counts[key] = self._counts.get(key, 0) + count

    @property
    def total(self):
        return sum(self._counts.values())

    def causes(self):
        """[(cause, cause_name, count)], the largest first."""
        return sorted(((c, n, k) for (c, n), k in self._counts.items()),
                      key=lambda x: (-x[2], x[0]))

    def percent(self, samples):
        """Lost as a percent of the captures (samples + lost)."""
        captures = samples + self.total
        return 100.0 * self.total / captures if captures else 0.0

    def biased(self, samples):
        """More than LOSS_WARN_PERCENT of the captures lost."""
        return self.percent(samples) > LOSS_WARN_PERCENT


class Share:
    """A count's share of its group, (p, low, high) of interval(), as
    percents."""

    __slots__ = ()

    @property
    def percent(self):
        return 100 * self.share[0]

    @property
    def ci_low(self):
        return 100 * self.share[1]

    @property
    def ci_high(self):
        return 100 * self.share[2]


class Row(Share):
    __slots__ = ("kind", "image", "symbol", "overlay", "section", "region",
                 "offset_lo", "offset_hi", "samples", "share", "reason",
                 "candidates", "batch_key", "interval_method", "stall")

    def __init__(self, kind, image, symbol, overlay=None, section=None,
                 region=None, reason=None, candidates=()):
        self.kind = kind            # exact, ambiguous, unmapped, orphan
        self.image = image          # ImageInfo or None
        self.symbol = symbol
        self.overlay = overlay      # overlay number (0: resident) or None
        self.section = section      # the overlay's (or code's) section
        self.region = region
        self.reason = reason
        self.candidates = candidates    # ambiguous: the functions it may be in
        self.offset_lo = None
        self.offset_hi = None
        self.samples = 0
        self.share = (0.0, 0.0, 0.0)    # of its group: interval()
        self.interval_method = "wilson"   # how share's bounds were drawn
        self.batch_key = None       # its key in the timeline's Blocks
        self.stall = None           # stalls.Breakdown of an exact row of
        #                             a session with reasons, else None

    def set_total(self, total, group=None):
        """Its group's samples are total: its share and interval (from
        the group's blocks when it has enough, intervals.py)."""
        share = None
        if group is not None and group.interval_method == "batches" and \
                self.batch_key is not None:
            share = intervals.batch_interval(self.batch_key, self.samples,
                                             total, group.blocks,
                                             group.unblocked)
        self.interval_method = "batches" if share else "wilson"
        self.share = share or interval(self.samples, total)

    def add(self, count, offset=None):
        self.samples += count
        if offset is not None:
            self.offset_lo = offset if self.offset_lo is None \
                else min(self.offset_lo, offset)
            self.offset_hi = offset if self.offset_hi is None \
                else max(self.offset_hi, offset)

    @property
    def overlay_label(self):
        """The overlay a row is in: its section name (".overlay.blur"),
        "region R" for an ambiguous row, "" for resident code."""
        if self.kind == "ambiguous" and self.region is not None:
            return "region %d" % self.region
        if self.overlay:
            return self.section or "overlay %d" % self.overlay
        return ""


class ReasonRow(Row):
    """A row of --by=reason: one reason's samples of a Row (stall_reason:
    its value; None for a row with no reason: not exact, or a session
    without them)."""

    __slots__ = ("stall_reason",)


def reason_rows(g):
    """The rows of a finished group by symbol and reason, the most samples
    first, each with its share of the group's samples (Wilson's: a
    place's reasons have no timeline to batch)."""
    out = []
    for r in g.sorted:
        parts = r.stall.items() if r.stall is not None else []
        rest = r.samples - sum(n for _, n in parts)
        if rest > 0:            # samples without a reason
            parts.append((None, rest))
        for code, n in parts:
            rr = ReasonRow(r.kind, r.image, r.symbol, r.overlay, r.section,
                           r.region, r.reason, r.candidates)
            rr.stall_reason = code
            rr.add(n)
            rr.offset_lo, rr.offset_hi = r.offset_lo, r.offset_hi
            rr.share = interval(n, g.total)
            if code is not None:
                rr.stall = stalls.Breakdown()
                rr.stall.add(code, n)
            out.append(rr)
    out.sort(key=lambda r: (-r.samples, r.symbol, r.overlay_label,
                            r.stall_reason if r.stall_reason is not None
                            else -1))
    return out


class ImageInfo:
    """An image of the session: its short name, the file it was found in
    and the offset of its ELF header there (non-zero: embedded)."""

    def __init__(self, row, session):
        self.id = row["id"]
        self.path = row["path"]
        self.image_offset = row["image_offset"] or 0
        self.short_name = row["short_name"] or (
            os.path.basename(self.path) if self.path else "image%d" % self.id)
        self.status = row["status"]
        self.image_size = row["image_size"]
        # the checked bytes of self.file (never read again by name)
        self.file, self.base, self._bytes = session.image_file(row)
        self.symbolizer = symbols.symbolizer(self.file, self.base,
                                             self._bytes) \
            if self.file and self.status == "ok" else None
        self.samples = 0            # of the whole session, every kind
        self.losses = Losses()

    def where(self, full=False):
        """"host-pipeline@0x1a800" (embedded), "x.elf", or "?"."""
        if not self.path:
            return "?"
        name = self.path if full else os.path.basename(self.path)
        if self.image_offset:
            return "%s@0x%x" % (name, self.image_offset)
        return name

    @functools.cached_property
    def label(self):
        """"pipeline (host-pipeline@0x1a800)"."""
        return "%s (%s)" % (self.short_name, self.where())

    def read_bytes(self):
        """The image's bytes (those symbols are read from, as they were
        checked), or None when there is no usable copy."""
        if self._bytes is None:
            return None
        data = self._bytes[self.base:]
        if self.base and self.image_size:
            data = data[:self.image_size]
        return data

    @functools.cached_property
    def identity(self):
        """What matches this image with another session's: the content
        hash of its bytes ("hash:0123..."), else its short name
        ("name:kernels") when no copy of its bytes is at hand."""
        data = self.read_bytes()
        if data is not None:
            return "hash:" + content_hash(data)
        return "name:" + self.short_name


class ContextInfo:
    """A context: coprofd's number, copsim's, pid/tid, image and the
    symbolized host call site that created it."""

    def __init__(self, row, image):
        self.id = row["id"]
        self.context_id = row["context_id"]
        self.pid = row["pid"]
        self.tid = row["tid"]
        self.image = image
        self.first_slot = row["first_slot"]
        self.creation_stack = row["creation_stack"]
        self.slots = []
        self.samples = 0            # of the whole session, every kind
        self.losses = Losses()
        self.stall_count = 0
        self.stall_ns = 0
        self.session_name = None    # set in a report of several sessions
        self.host_times = None      # host.HostSide.context_times()

    @functools.cached_property
    def _creation_site(self):
        # Symbolizing reads the host executable: only for reports that say it.
        return creation_site(self.creation_stack)

    @property
    def created_at(self):
        return self._creation_site[0]

    @property
    def created_source(self):
        return self._creation_site[1]

    @property
    def label(self):
        """"context 3", or "SESSION: context 3" in a report of several
        sessions."""
        if self.session_name:
            return "%s: context %d" % (self.session_name, self.id)
        return "context %d" % self.id

    def header(self):
        s = "%s: pid %s tid %s, image %s" % (
            self.label, self.pid, self.tid,
            "%s (%s)" % (self.image.short_name, self.image.where(True))
            if self.image else "?")
        if self.created_at:
            s += ", created at %s" % self.created_at
            if self.created_source:
                s += " (%s)" % self.created_source
        return s


def _is_libcop(module):
    base = os.path.basename(module)
    return base.startswith("libcop.") or base.startswith("libcop-")


def creation_site(stack):
    """(where, source) of a creation stack "MODULE+0xOFF ..." (innermost
    first): the first frame outside libcop and the C library, symbolized on
    its module by file offset ("worker_main+0x64", "host-pipeline.c"), or
    the raw frame when the module cannot be read."""
    if not stack:
        return None, None
    frames = []
    for f in stack.split():
        module, plus, off = f.rpartition("+")
        if not plus:
            continue
        try:
            frames.append((module, int(off, 16), f))
        except ValueError:
            continue
    pick = None
    for module, off, raw in frames:
        base = os.path.basename(module)
        if _is_libcop(module) or base.startswith("libc.so") or \
                base.startswith("libpthread") or base.startswith("ld-linux"):
            continue
        pick = (module, off, raw)
        break
    if pick is None:
        if not frames:
            return None, None
        pick = frames[0]
    module, off, raw = pick
    sym = symbols.symbolizer(module) if os.path.isfile(module) else None
    if sym is None:
        return raw, None
    # a return address: the call is the instruction before it
    f = sym.function_at(off - 1 if off else off)
    if f is None:
        return "%s+0x%x" % (os.path.basename(module), off), None
    return "%s+0x%x" % (f.name, off - f.offset), \
        f.source or os.path.basename(module)


class Group:
    def __init__(self, key, label, context=None):
        self.key = key
        self.label = label
        self.context = context      # ContextInfo for --separate=context
        self.rows = {}
        self.total = 0
        self.hidden = 0             # rows under the threshold
        self.sorted = []
        self.image_ids = set()      # images of its rows, hidden ones too
        self.losses = Losses()      # captures lost in the group
        self.blocks = []            # its contexts' intervals.Blocks
        self.blocked = 0            # the samples of those contexts
        self.binomial_contexts = 0  # its contexts of one block
        self.interval_method = "wilson"
        self.stall = None           # stalls.Breakdown of its exact rows
        self.stall_blocks = []      # its contexts' Blocks by reason
        self.stall_shares = {}      # reason -> (p, low, high) of stall
        self.stall_method = "wilson"

    @property
    def unblocked(self):
        """Its samples in contexts without blocks (binomial)."""
        return max(self.total - self.blocked, 0)

    @property
    def biased(self):
        return self.losses.biased(self.total)

    def row(self, key, factory):
        r = self.rows.get(key)
        if r is None:
            r = self.rows[key] = factory()
        return r


class Profile:
    """build() fills it: groups (in order), totals, images, contexts."""

    def __init__(self, separation):
        self.separation = separation
        self.groups = []
        self.totals = {}
        self.lost = []
        self.decode_errors = []
        self.complete = False
        self.sides = {"coprocessor": None, "host": None}    # Session.sides()
        self.images = {}
        self.contexts = {}
        self.threshold = 0.0
        self.sampling = None
        self.side = "all"
        self.host = None            # host.HostSide
        self.host_rows = []         # [host.HostRow] shown
        self.host_total = 0
        self.host_hidden = 0
        self.stalls_recorded = False    # the session has stall reasons
        self.by = "symbol"          # rows by symbol, or by symbol and reason
        self.dma_waits = None       # dma.DmaWaits, of reports that show it

    def group_summaries(self):
        """The groups, or (for ContextGroups) their totals and losses
        without rows."""
        summaries = getattr(self.groups, "summaries", None)
        return summaries() if summaries else self.groups

    def loss_warnings(self):
        """One line per group, and in a report unseparated or by slot per
        image shown (its share against the others is in no group), that
        lost more than LOSS_WARN_PERCENT of its captures."""
        out = ["group %s lost %.2f%% of its %d captures (more than %g%%):"
               " its shares may be biased"
               % (g.label, g.losses.percent(g.total),
                  g.total + g.losses.total, LOSS_WARN_PERCENT)
               for g in self.group_summaries() if g.biased]
        if self.separation in ("none", "slot"):
            shown = {i for g in self.groups for i in g.image_ids}
            out += ["image %s lost %.2f%% of its %d captures (more than %g%%):"
                    " the shares of its functions and between images may be"
                    " biased" % (i.label, i.losses.percent(i.samples),
                                 i.samples + i.losses.total,
                                 LOSS_WARN_PERCENT)
                    for i in self.images.values()
                    if i.id in shown and i.losses.biased(i.samples)]
        return out


class Sampling:
    """How a session was sampled: the event and its period N (events per
    capture), the FIFO-full policy, the dither and the time stalled on a
    full FIFO.  event, fifo_full, dither: the session's words, None when
    not recorded (event: a session of stream 1.4 or older, whose
    SPU_CYCLES counted retired instructions)."""

    def __init__(self, session):
        self.period = session.int_key("stream.lfsr_count")
        self.fifo_full = session.keys.get("sampling.fifo_full")
        self.dither = session.keys.get("sampling.dither")
        self.dither_seed = session.keys.get("sampling.dither_seed")
        self.event = session.keys.get("sampling.event")
        self.slots = session.int_key("stream.slots")
        start = session.int_key("stream.start_time_ns")
        stop = session.int_key("stream.stop_time_ns")
        self.run_ns = stop - start if start and stop > start else 0
        self.stalls_recorded = session.has_table("stalls")
        self.by_slot = {}           # slot -> [count, ns]
        self.stall_count = self.stall_ns = 0

    def add_stall(self, slot, count, ns):
        s = self.by_slot.setdefault(slot, [0, 0])
        s[0] += count
        s[1] += ns
        self.stall_count += count
        self.stall_ns += ns

    def period_text(self):
        """How often a capture was taken, e.g. "SPU_CYCLES:2003 (modelled
        cycles), a capture every 2003 cycles"; a session that does not
        record its event (stream 1.4 and older) keeps the old words."""
        n = self.period
        if self.event == "SPU_CYCLES":
            return ("SPU_CYCLES:%d (modelled cycles), a capture every %d "
                    "cycles" % (n, n))
        if self.event == "SPU_INSTRUCTIONS":
            return ("SPU_INSTRUCTIONS:%d, a capture every %d retired "
                    "instructions" % (n, n))
        if self.event is not None:
            return "event %s:%d, a capture every %d events" % (
                self.event, n, n)
        return "a capture every %d cycles (SPU_CYCLES:%d)" % (n, n)

    def share(self, ns, slots=1):
        """ns as a percent of `slots` slots' run time; None if unknown."""
        if not self.run_ns or slots <= 0:
            return None
        return 100.0 * ns / (self.run_ns * slots)


def _load_sampling(session, contexts):
    """The Sampling of a session; adds each context's stall time."""
    smp = Sampling(session)
    for slot, ctx, count, ns in session.stalls():
        smp.add_stall(slot, count or 0, ns or 0)
        c = contexts.get(ctx)
        if c is not None:
            c.stall_count += count or 0
            c.stall_ns += ns or 0
    return smp


def _match_images(images, wanted):
    """Image ids matching --image values: short name, id, or the file's
    path or basename (all its images)."""
    ids = set()
    for w in wanted:
        hit = {i.id for i in images.values()
               if w == i.short_name or w == str(i.id) or
               (i.path and (w == i.path or w == os.path.basename(i.path) or
                            w == i.where() or w == i.where(True)))}
        if not hit:
            raise FilterError("%s: no such image in the session (images: %s)"
                              % (w, ", ".join(sorted(
                                  {i.short_name for i in images.values()}))
                                 or "none"))
        ids |= hit
    return ids


def _match_contexts(contexts, wanted):
    """Context ids matching --context values: coprofd's number N, or
    "pid:PID" / "tid:TID" (all contexts of that host process or thread)."""
    ids = set()
    for w in wanted:
        hit = set()
        kind, _, value = w.rpartition(":")
        try:
            n = int(value)
        except ValueError:
            raise FilterError("%s: not a context (N, pid:PID or tid:TID)" % w)
        if kind == "":
            hit = {n} if n in contexts else set()
        elif kind == "pid":
            hit = {c.id for c in contexts.values() if c.pid == n}
        elif kind == "tid":
            hit = {c.id for c in contexts.values() if c.tid == n}
        else:
            raise FilterError("%s: not a context (N, pid:PID or tid:TID)" % w)
        if not hit:
            raise FilterError("%s: no such context in the session" % w)
        ids |= hit
    return ids


def load_images_and_contexts(session):
    """{id: ImageInfo} and {id: ContextInfo} of a session."""
    images = {i: ImageInfo(r, session) for i, r in session.images().items()}
    contexts = {i: ContextInfo(r, images.get(r["image"]))
                for i, r in session.contexts().items()}
    return images, contexts


def finish_group(g, threshold):
    """A group's total, its rows' percentages and intervals, the rows
    under threshold (percent) hidden, the rest in order."""
    g.total = sum(r.samples for r in g.rows.values())
    if intervals.batch_df(g.blocks) >= intervals.MIN_BATCH_DF:
        g.interval_method = "batches"
    rows = []
    for r in g.rows.values():
        r.set_total(g.total, g)
        if r.percent + 1e-12 < threshold:
            g.hidden += 1
            continue
        rows.append(r)
    rows.sort(key=lambda r: (-r.samples, r.symbol, r.overlay_label,
                             r.image.short_name if r.image else ""))
    g.sorted = rows
    g.image_ids = {r.image.id for r in g.rows.values()
                   if r.image is not None}
    g.rows = None       # by key: no longer needed
    if g.stall is not None:
        _reason_shares(g)


def _reason_shares(g):
    """A group's reason shares of its samples with a reason: from its
    contexts' blocks of stall_timeline when they have enough (as its
    rows'), else Wilson's."""
    total = g.stall.total
    batches = intervals.batch_df(g.stall_blocks) >= intervals.MIN_BATCH_DF
    unblocked = max(total - sum(b.total for b in g.stall_blocks), 0)
    methods = set()
    for code, n in g.stall.items():
        share = intervals.batch_interval(code, n, total, g.stall_blocks,
                                         unblocked) if batches else None
        methods.add("batches" if share else "wilson")
        g.stall_shares[code] = share or interval(n, total)
    g.stall_method = methods.pop() if len(methods) == 1 else \
        ("mixed" if methods else "wilson")


CONTEXT_CHUNK = 2000    # contexts whose rows are in memory at once


class _Builder:
    """What build() knows while it fills groups: the session, the
    separation, the filters, the images and contexts."""

    def __init__(self, session, separation, images, contexts, want_images,
                 want_contexts, threshold):
        self.session = session
        self.separation = separation
        self.images = images
        self.contexts = contexts
        self.want_images = want_images
        self.want_contexts = want_contexts
        self.threshold = threshold
        self.filtered = want_images is not None or want_contexts is not None
        self.cand_names = {}
        self.candidates = None
        self.losses = {}        # group key -> Losses, before any row
        self.last = (None, None)    # ((ctx, img), its group) of the last row
        self.totals_by_context = {}     # kept samples by context (None:
        #                                 orphans and unknown contexts)
        # the rows come summed by SQLite: by context only when groups or
        # filters need it
        self.by_context = separation in ("context", "slot") or \
            want_contexts is not None
        self.stalls = stalls.recorded(session)

    def keep(self, ctx, img):
        if self.want_contexts is not None and ctx not in self.want_contexts:
            return False
        if self.want_images is not None and img not in self.want_images:
            return False
        return True

    def key_label(self, ctx, img, slot=None):
        """(key, label, ContextInfo or None) of the group of a sample."""
        sep = self.separation
        if sep == "none":
            return "all", "all", None
        if sep == "context":
            cinfo = self.contexts.get(ctx)
            return ctx, (cinfo.label if cinfo else "no context"), cinfo
        if sep == "image":
            return img, (self.images[img].label if img in self.images
                         else "no image"), None
        if ctx is None:
            slots = [slot] if slot is not None else []
        else:
            c = self.contexts.get(ctx)
            slots = sorted(c.slots) if c else []
        label = ("slot %d" % slots[0]) if len(slots) == 1 else \
            ("slots %s" % ",".join(map(str, slots)) if slots else "no slot")
        return tuple(slots), label, None

    def group_of(self, groups, ctx, img, slot=None):
        if slot is None and (ctx, img) == self.last[0]:
            return self.last[1]     # rows come by context: mostly the same
        g = self._group_of(groups, ctx, img, slot)
        if slot is None:
            self.last = ((ctx, img), g)
        return g

    def _group_of(self, groups, ctx, img, slot=None):
        key, label, cinfo = self.key_label(ctx, img, slot)
        g = groups.get(key)
        if g is None:
            g = groups[key] = Group(key, label, cinfo)
            if key in self.losses:
                g.losses = self.losses[key]
        return g

    def totals(self):
        """The report's totals by kind, and every context's and image's
        samples (for their loss shares), summed by SQLite."""
        totals = dict(exact=0, ambiguous=0, pending=0, unmapped=0, orphan=0)
        by_context = self.totals_by_context
        for kind, ctx, img, count in self.session.sample_totals():
            if ctx in self.contexts:
                self.contexts[ctx].samples += count
            if img in self.images:
                self.images[img].samples += count
            if self.keep(ctx, img):
                totals[kind] += count
                key = ctx if ctx in self.contexts else None
                by_context[key] = by_context.get(key, 0) + count
        if not self.filtered:
            for slot, count in self.session.orphans():
                totals["orphan"] += count
                by_context[None] = by_context.get(None, 0) + count
        return totals

    def group_losses(self):
        """Lost captures: to their context, its image and the group they
        are in (kept by key until the group is made)."""
        for ctx, slot, cause, name, count in self.session.lost_by_context():
            if name == OUTSIDE:
                continue        # no context's code: not a loss
            c = self.contexts.get(ctx)
            img = c.image.id if c is not None and c.image is not None \
                else None
            if c is not None:
                c.losses.add(cause, name, count)
                if c.image is not None:
                    c.image.losses.add(cause, name, count)
            if self.filtered and (c is None or not self.keep(ctx, img)):
                continue
            key = self.key_label(ctx, img, slot)[0]
            self.losses.setdefault(key, Losses()).add(cause, name, count)

    def fill(self, groups, first=None, last=None):
        """The rows of the sample tables into groups (contexts first to
        last only, when given)."""
        s, images = self.session, self.images
        span = (first, last) if first is not None else None
        self.last = (None, None)    # groups is a new dict
        placed = {}             # (group, image, offset) -> its exact Row
        for ctx, img, off, ovl, count in s.samples(self.by_context, span):
            if not self.keep(ctx, img):
                continue
            info = images.get(img)
            g = self.group_of(groups, ctx, img)
            sym = info.symbolizer if info else None
            f = sym.function_at(off) if sym else None
            if f is not None:
                key = ("x", img, ovl, f.offset)
                name, section = f.name, f.section
            else:
                sec = sym.section_at(off) if sym else None
                section = sec.name if sec else None
                key = ("x", img, ovl, None, section)
                name = "[no symbol in %s]" % section if section else \
                    "[no symbols]"
            r = g.row(key, lambda: Row("exact", info, name, overlay=ovl,
                                       section=section))
            r.add(count, off)
            r.batch_key = self.batch_key(info, img, off)
            placed[(id(g), img, off)] = r
        if self.stalls:
            self.fill_stalls(groups, placed, span)
        for ctx, img, ls, region, count, pending in \
                s.ambiguous(self.by_context, span):
            if not self.keep(ctx, img):
                continue
            info = images.get(img)
            names = self.names_at(info, img, ls)
            g = self.group_of(groups, ctx, img)
            key = ("a", img, region, names)
            what = "|".join(names) if names else "ls 0x%x" % ls
            g.row(key, lambda: Row(
                "ambiguous", info, "[ambiguous region %s: %s]"
                % (region, what), region=region,
                candidates=names)).add(count)
        for ctx, img, reason, count in s.unmapped(self.by_context, span):
            if not self.keep(ctx, img):
                continue
            g = self.group_of(groups, ctx, img)
            key = ("u", img, reason)
            g.row(key, lambda: Row("unmapped", images.get(img),
                                   "[unmapped %s]" % reason,
                                   reason=reason)).add(count)

    def fill_stalls(self, groups, placed, span):
        """Each exact row's samples by reason (sample_stalls), and its
        group's."""
        for ctx, img, off, code, count in \
                self.session.sample_stalls(self.by_context, span):
            if not self.keep(ctx, img):
                continue
            g = self.group_of(groups, ctx, img)
            r = placed.get((id(g), img, off))
            if r is None:
                continue        # no sample there: not a row of the report
            if r.stall is None:
                r.stall = stalls.Breakdown()
            r.stall.add(code, count)
            if g.stall is None:
                g.stall = stalls.Breakdown()
            g.stall.add(code, count)

    def batch_key(self, info, img, off):
        """What the timeline and a row have in common for a file offset:
        (image, its function's offset) or (image, None, its section)."""
        sym = info.symbolizer if info else None
        f = sym.function_at(off) if sym else None
        if f is not None:
            return (img, f.offset)
        sec = sym.section_at(off) if sym else None
        return (img, None, sec.name if sec else None)

    def add_blocks(self, groups, span=None):
        """Each context's exact samples in blocks of consecutive ones
        (the session's sample_timeline), to its group (intervals.py);
        with reasons, the same of stall_timeline by reason."""
        def key(img, off):
            return self.batch_key(self.images.get(img), img, off)
        for ctx, g, b in self._blocks(groups, self.session.timeline_of(span),
                                      key):
            if b.n_blocks < intervals.MIN_CONTEXT_BLOCKS:
                g.binomial_contexts += 1
                continue
            # the context's samples of every kind, its blocks' exact ones
            b.weight = self.totals_by_context.get(ctx, b.total) / b.total
            g.blocks.append(b)
            g.blocked += self.totals_by_context.get(ctx, b.total)
        if not self.stalls or not self.session.has_table("stall_timeline"):
            return
        for ctx, g, b in self._blocks(
                groups, self.session.stall_timeline_of(span),
                lambda img, code: code):
            if b.n_blocks >= intervals.MIN_CONTEXT_BLOCKS:
                g.stall_blocks.append(b)

    def _blocks(self, groups, timeline, key):
        """(context, its group, its Blocks) of each context of the
        timeline rows (context, image, bucket, what, count) in a group,
        key(image, what) the blocks' key."""
        blocks, last = {}, None
        for ctx, img, bucket, what, count in timeline:
            if not self.keep(ctx, img) or ctx not in self.contexts:
                continue
            b = blocks.get(ctx)
            if b is None:
                b = blocks[ctx] = intervals.Blocks()
            b.add(key(img, what), count, (ctx, bucket) != last)
            last = (ctx, bucket)
        for ctx, b in blocks.items():
            c = self.contexts[ctx]
            g = groups.get(self.key_label(
                ctx, c.image.id if c.image else None)[0])
            if g is None or not b.total:
                continue
            yield ctx, g, b.cut()

    def fill_orphans(self, groups):
        """Orphans: no context, no image."""
        if self.filtered:
            return
        for slot, count in self.session.orphans():
            g = self.group_of(groups, None, None, slot)
            g.row(("o",), lambda: Row("orphan", None, "[orphan]")).add(count)

    def names_at(self, info, img, ls):
        """The candidate functions of an ambiguous LS address."""
        ck = (img, ls)
        names = self.cand_names.get(ck)
        if names is not None:
            return names
        if self.candidates is None:
            self.candidates = self.session.candidates()
        names = []
        sym = info.symbolizer if info else None
        for ovl, foff in self.candidates.get(ck, ()):
            f = sym.function_at(foff) if sym else None
            if f is not None:
                n = f.name
            else:       # padding past an overlay's last function
                sec = sym.section_at(foff) if sym else None
                n = "%s:?" % sec.name if sec else "0x%x" % foff
            if n not in names:
                names.append(n)
        names = self.cand_names[ck] = tuple(names)
        return names

    def finish(self, g):
        finish_group(g, self.threshold)

    def order_key(self, g):
        k = g.key
        if self.separation in ("context", "image"):
            return (k is None, k or 0)
        if self.separation == "slot":
            return (len(k) == 0, k)
        return (0,)

    def all_groups(self):
        """Every group, in order, all in memory (any separation)."""
        groups = {}
        self.fill(groups)
        self.add_blocks(groups)
        self.fill_orphans(groups)
        for key in self.losses:     # groups that only lost captures
            if key not in groups:
                self.group_of(groups, *self._sample_of(key))
        for g in groups.values():
            self.finish(g)
        order = sorted(groups.values(), key=self.order_key)
        if self.separation == "context":
            self._add_empty_contexts(order, groups)
            order.sort(key=self.order_key)
        return order

    def _sample_of(self, key):
        """(ctx, img, slot) whose group has key (for groups of losses)."""
        if self.separation == "context":
            return key, None, None
        if self.separation == "image":
            return None, key, None
        if self.separation == "slot":
            return None, None, key[0] if key else None
        return None, None, None

    def _add_empty_contexts(self, order, groups):
        """Contexts of the filter that had no sample still get their
        header."""
        if self.want_images is not None:
            return
        for cid, c in self.contexts.items():
            if cid not in groups and (self.want_contexts is None or
                                      cid in self.want_contexts):
                order.append(Group(cid, c.label, c))


class ContextGroups:
    """The groups of --separate=context, made CONTEXT_CHUNK contexts at a
    time as they are iterated, so that a session of 100,000 contexts
    never has its million rows in memory at once.  Iterating again reads
    the session again.  summaries(): every group's label, total and
    losses, without rows (for the loss warnings)."""

    def __init__(self, builder, totals_by_context):
        self.builder = builder
        self.totals_by_context = totals_by_context

    def _wanted(self, cid):
        b = self.builder
        if cid in b.losses or self.totals_by_context.get(cid):
            return True
        return b.want_images is None and (b.want_contexts is None or
                                          cid in b.want_contexts)

    def __iter__(self):
        b = self.builder
        ids = sorted(cid for cid in b.contexts if self._wanted(cid))
        for at in range(0, len(ids), CONTEXT_CHUNK):
            chunk = ids[at:at + CONTEXT_CHUNK]
            groups = {}
            b.fill(groups, chunk[0], chunk[-1])
            b.add_blocks(groups, (chunk[0], chunk[-1]))
            for cid in chunk:
                g = groups.get(cid)
                if g is None:
                    g = b.group_of(groups, cid, None)
                    g.rows = {}
                b.finish(g)
                yield g
            groups.clear()
        groups = {}
        b.fill_orphans(groups)
        if None in b.losses:
            b.group_of(groups, None, None)
        for g in groups.values():
            b.finish(g)
            yield g

    def __len__(self):
        return sum(1 for _ in self.summaries())

    def summaries(self):
        b = self.builder
        for cid in sorted(c for c in b.contexts if self._wanted(c)):
            c = b.contexts[cid]
            g = Group(cid, c.label, c)
            g.total = self.totals_by_context.get(cid, 0)
            g.losses = b.losses.get(cid, Losses())
            yield g
        if None in b.losses or self.totals_by_context.get(None):
            g = Group(None, "no context")
            g.total = self.totals_by_context.get(None, 0)
            g.losses = b.losses.get(None, Losses())
            yield g


def build(session, separation="none", image_filter=(), context_filter=(),
          threshold=0.0, session_name=None, side="all"):
    """The Profile of a session.  threshold: rows under this percent of
    their group are left out (counted in Group.hidden).  session_name:
    the session's name in a report of several (merge()), in its contexts'
    labels.  side: SIDES."""
    if separation not in SEPARATIONS:
        raise ValueError(separation)
    if side not in SIDES:
        raise ValueError(side)
    prof = Profile(separation)
    prof.threshold = threshold
    prof.side = side
    images, contexts = load_images_and_contexts(session)
    for c in contexts.values():
        c.session_name = session_name
    prof.images = images
    for b in session.bindings():
        c = contexts.get(b["context"])
        if c is not None and b["slot"] not in c.slots:
            c.slots.append(b["slot"])
    for c in contexts.values():
        if not c.slots and c.first_slot is not None:
            c.slots.append(c.first_slot)
    prof.contexts = contexts

    want_images = _match_images(images, image_filter) if image_filter \
        else None
    want_contexts = _match_contexts(contexts, context_filter) \
        if context_filter else None
    builder = _Builder(session, separation, images, contexts, want_images,
                       want_contexts, threshold)
    prof.stalls_recorded = builder.stalls
    totals = builder.totals()
    builder.group_losses()
    if side == "host":
        prof.groups = []
    elif separation == "context":
        prof.groups = ContextGroups(builder, builder.totals_by_context)
    else:
        prof.groups = builder.all_groups()
    _load_host(prof, session, contexts)

    totals["samples"] = sum(totals.values())
    prof.totals = totals
    prof.filtered = builder.filtered
    causes = [(r["cause"], r["cause_name"], r["count"])
              for r in session.lost_by_cause()]
    prof.lost = [c for c in causes if c[1] != OUTSIDE]
    totals["lost"] = sum(c for _, _, c in prof.lost)
    totals["outside"] = sum(c for _, name, c in causes if name == OUTSIDE)
    prof.decode_errors = [(r["kind"], r["count"])
                          for r in session.decode_errors()]
    prof.stream_samples = session.int_key("stream.samples")
    prof.session_name = session_name or session.name
    session_state(prof, session)
    prof.sampling = _load_sampling(session, contexts)
    if side != "host" and session_name is None:
        from . import dma       # dma.py names instructions as annotate
        prof.dma_waits = dma.build(session, images, builder.keep)
    return prof


def _load_host(prof, session, contexts):
    """The host side: the contexts' thread times, and the host rows over
    the threshold when the side shows them."""
    from . import host      # host.py builds on this module
    prof.host = host.HostSide(session)
    if prof.side != "host":
        prof.host.context_times(contexts)
    if prof.side == "cop":
        return
    rows, prof.host_total = prof.host.rows()
    prof.host_rows = [r for r in rows
                      if r.percent + 1e-12 >= prof.threshold]
    prof.host_hidden = len(rows) - len(prof.host_rows)


def session_state(prof, session):
    """The session's truth about itself (Session.end()) and the warnings
    of its images, on the profile."""
    prof.end_state, prof.end_reason = session.end()
    prof.complete = prof.end_state == "complete"
    prof.sides = session.sides()
    prof.warnings = list(session.warnings)


# --- several sessions in one report (-d A -d B) ----------------------------


def merged_sides(profs):
    """The sides of several sessions as one: per side, complete when each
    session's is, else the first one that is not, its reason naming the
    session; the host side None when no session has one."""
    out = {}
    for side in ("coprocessor", "host"):
        ends = [(p.session_name, p.sides[side]) for p in profs
                if p.sides[side] is not None]
        bad = [(name, e) for name, e in ends if e["end_state"] != "complete"]
        if not ends:
            out[side] = None
        elif not bad:
            out[side] = {"end_state": "complete", "end_reason": ""}
        else:
            out[side] = {"end_state": bad[0][1]["end_state"],
                         "end_reason": "; ".join(
                             "%s: %s" % (name, e["end_reason"])
                             for name, e in bad)}
    return out


class MergeError(Exception):
    """Sessions that cannot be summed; str() says why."""


def build_many(sessions, separation="none", image_filter=(),
               context_filter=(), threshold=0.0, side="all"):
    """The Profile of one session, or of several summed (merge()): their
    coprocessor side only, since host samples of different runs are not
    shares of one program (--side=host is refused)."""
    if len(sessions) == 1:
        return build(sessions[0], separation, image_filter, context_filter,
                     threshold, side=side)
    if side == "host":
        raise MergeError("--side=host reports one session at a time: the "
                         "host side of several sessions is not summed")
    profs = [build(s, separation, image_filter, context_filter, 0.0,
                   session_name=s.name, side="cop") for s in sessions]
    out = merge(profs, threshold)
    out.side = "cop"
    return out


def same_period(profs):
    """The first Profile's Sampling when every Profile was sampled at the
    same period, else MergeError."""
    periods = {p.sampling.period for p in profs}
    if len(periods) > 1:
        raise MergeError("the sessions were sampled at different periods "
                         "(%s cycles): their samples cannot be summed"
                         % ", ".join(str(n) for n in sorted(periods)))
    return profs[0].sampling


def _merge_key(separation, g, images):
    """The merged group a session's group goes into."""
    if separation == "context":
        return ("c", id(g))             # contexts are kept apart
    if separation == "image":
        info = images.get(g.key)
        return ("i", info.identity if info else None)
    return ("g", g.label)               # none: "all"; slot: "slot 3"


def _row_key(r, rep):
    return (r.kind, rep.id if rep else None, r.overlay, r.symbol,
            r.section, r.region, r.reason)


def merge(profs, threshold=0.0):
    """Several sessions' Profiles (each built with threshold 0 and its
    session_name) summed into one: images matched by identity (the content
    hash of their bytes, else their name) are one image; a function of
    one image is one row; contexts stay apart, each labelled with its
    session.  The capture periods must be the same (MergeError): samples
    at different rates do not add up to shares of anything."""
    same_period(profs)
    out = Profile(profs[0].separation)
    out.threshold = threshold
    reps = {}               # identity -> the merged report's ImageInfo
    groups = {}
    for p in profs:
        for info in p.images.values():
            rep = reps.get(info.identity)
            if rep is None:
                rep = reps[info.identity] = info
                info.id = len(reps)
            else:
                rep.samples += info.samples
                for cause, name, n in info.losses.causes():
                    rep.losses.add(cause, name, n)
        for c in p.contexts.values():
            out.contexts[len(out.contexts) + 1] = c
        for g in p.groups:
            key = _merge_key(out.separation, g, p.images)
            m = groups.get(key)
            if m is None:
                label = g.label
                if out.separation == "image" and g.key in p.images:
                    label = reps[p.images[g.key].identity].label
                m = groups[key] = Group(key, label, g.context)
            for cause, name, n in g.losses.causes():
                m.losses.add(cause, name, n)
            for r in g.sorted:
                rep = reps[r.image.identity] if r.image else None
                mr = m.row(_row_key(r, rep), lambda: Row(
                    r.kind, rep, r.symbol, r.overlay, r.section, r.region,
                    r.reason, r.candidates))
                mr.add(r.samples)
                for off in (r.offset_lo, r.offset_hi):
                    if off is not None:
                        mr.add(0, off)
                if r.stall is not None:
                    mr.stall = _merged(mr.stall, r.stall)
                    m.stall = _merged(m.stall, r.stall)
    for g in groups.values():
        finish_group(g, threshold)
    out.groups = list(groups.values())
    out.images = {i.id: i for i in reps.values()}
    _merge_totals(out, profs)
    return out


def _merged(into, breakdown):
    """into (a stalls.Breakdown, or None: a new one) plus breakdown."""
    into = into or stalls.Breakdown()
    into.merge(breakdown)
    return into


def _merge_totals(out, profs):
    """Totals, losses, errors, sampling and state of the merged Profile."""
    out.totals = {}
    lost, errors = {}, {}
    for p in profs:
        for k, v in p.totals.items():
            out.totals[k] = out.totals.get(k, 0) + v
        for cause, name, n in p.lost:
            lost[(cause, name)] = lost.get((cause, name), 0) + n
        for kind, n in p.decode_errors:
            errors[kind] = errors.get(kind, 0) + n
    out.lost = sorted(((c, nm, n) for (c, nm), n in lost.items()),
                      key=lambda x: -x[2])
    out.decode_errors = sorted(errors.items())
    out.filtered = any(p.filtered for p in profs)
    out.stalls_recorded = all(p.stalls_recorded for p in profs)
    out.stream_samples = sum(p.stream_samples for p in profs)
    out.warnings = [w for p in profs for w in p.warnings]
    bad = [p for p in profs if p.end_state != "complete"]
    out.end_state = bad[0].end_state if bad else "complete"
    out.end_reason = "; ".join("%s: %s" % (p.session_name, p.end_reason)
                               for p in bad)
    out.complete = not bad
    out.sides = merged_sides(profs)
    smp = out.sampling = profs[0].sampling
    for p in profs[1:]:
        o = p.sampling
        for slot, (count, ns) in o.by_slot.items():
            smp.add_stall(slot, count, ns)
        smp.run_ns += o.run_ns
        if o.dither != smp.dither:
            smp.dither = None
        if o.dither_seed != smp.dither_seed:
            smp.dither_seed = "several"
        if o.fifo_full != smp.fifo_full:
            smp.fifo_full = None
