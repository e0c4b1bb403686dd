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
context, not per slot).  A row's percent is of its group's total, with the
95% Wilson score interval of that share (interval() below): unlike the
normal (Wald) interval it stays inside [0, 1] and keeps its coverage for
small counts.  It covers sampling noise only: not aliasing (a period in
step with a loop, which the trace unit's dither breaks) nor losses.

Losses: every LOST record has a slot and, when the slot had one, a context,
so the lost captures land in the group their context's samples are in (or
the "no context" / "no image" / slot group).  A group, context or image
that lost more than LOSS_WARN_PERCENT of its captures (lost / (samples +
lost)) is flagged: captures are lost where the FIFO overflowed, which
falls on the fastest code, so its shares may be biased.

Sampling: the capture period, the FIFO-full policy (stall or drop), the
time stalled and the dither setting come from the session keys sampling.*
and the stalls table (docs/session-format.md); a session recorded before
they existed says "not recorded".
"""

import functools
import math
import os

from . import symbols

SEPARATIONS = ("none", "context", "slot", "image")
Z95 = 1.959963984540054


class FilterError(Exception):
    """An --image or --context filter matching nothing; str() names it."""


LOSS_WARN_PERCENT = 1.0


def interval(k, n):
    """(p, low, high) of a share k/n with its 95% Wilson score interval:
    the p0 for which |k/n - p0| <= z sqrt(p0 (1 - p0) / n), that is
    (p + z^2/2n +- z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n)."""
    if n <= 0:
        return 0.0, 0.0, 0.0
    p = k / n
    z2 = Z95 * Z95
    scale = 1.0 + z2 / n
    centre = (p + z2 / (2.0 * n)) / scale
    half = Z95 * math.sqrt(p * (1.0 - p) / n + z2 / (4.0 * n * n)) / scale
    # the bounds are exact at 0 and 1; rounding must not cross p
    return p, min(p, max(0.0, centre - half)), max(p, min(1.0, centre + half))


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


class Row:
    __slots__ = ("kind", "image", "symbol", "overlay", "section", "region",
                 "offset_lo", "offset_hi", "samples", "percent", "ci_low",
                 "ci_high", "reason", "candidates")

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
        self.percent = self.ci_low = self.ci_high = 0.0

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
        self.file, self.base = session.image_file(row)
        self.symbolizer = symbols.symbolizer(self.file, self.base) \
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

    @property
    def label(self):
        """"pipeline (host-pipeline@0x1a800)"."""
        return "%s (%s)" % (self.short_name, self.where())


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
        return "context %d" % self.id

    def header(self):
        s = "context %d (copsim context %s): pid %s tid %s, image %s" % (
            self.id, self.context_id, self.pid, self.tid,
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
        self.losses = Losses()      # captures lost in the group

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
        self.images = {}
        self.contexts = {}
        self.threshold = 0.0
        self.sampling = None

    def loss_warnings(self):
        """One line per group, and in a report unseparated or by slot per
        image shown (its share against the others is in no group), that
        lost more than LOSS_WARN_PERCENT of its captures."""
        out = ["group %s lost %.2f%% of its %d captures (more than %g%%):"
               " its shares may be biased"
               % (g.label, g.losses.percent(g.total),
                  g.total + g.losses.total, LOSS_WARN_PERCENT)
               for g in self.groups if g.biased]
        if self.separation in ("none", "slot"):
            shown = {r.image.id for g in self.groups for r in g.rows.values()
                     if r.image is not None}
            out += ["image %s lost %.2f%% of its %d captures (more than %g%%):"
                    " the shares of its functions and between images may be"
                    " biased" % (i.label, i.losses.percent(i.samples),
                                 i.samples + i.losses.total,
                                 LOSS_WARN_PERCENT)
                    for i in self.images.values()
                    if i.id in shown and i.losses.biased(i.samples)]
        return out


class Sampling:
    """How a session was sampled: the period N (cycles per capture), the
    FIFO-full policy, the dither and the time stalled on a full FIFO.
    fifo_full, dither: the session's words, None when not recorded."""

    def __init__(self, session):
        self.period = session.int_key("stream.lfsr_count")
        self.fifo_full = session.keys.get("sampling.fifo_full")
        self.dither = session.keys.get("sampling.dither")
        self.dither_seed = session.keys.get("sampling.dither_seed")
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


def build(session, separation="none", image_filter=(), context_filter=(),
          threshold=0.0):
    """The Profile of a session.  threshold: rows under this percent of
    their group are left out (counted in Group.hidden)."""
    if separation not in SEPARATIONS:
        raise ValueError(separation)
    prof = Profile(separation)
    prof.threshold = threshold
    images, contexts = load_images_and_contexts(session)
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
    filtered = want_images is not None or want_contexts is not None

    def keep(ctx, img):
        if want_contexts is not None and ctx not in want_contexts:
            return False
        if want_images is not None and img not in want_images:
            return False
        return True

    groups = {}

    def group_of(ctx, img, slot=None):
        if separation == "none":
            key, label, cinfo = "all", "all", None
        elif separation == "context":
            cinfo = contexts.get(ctx)
            key = ctx
            label = cinfo.label if cinfo else "no context"
        elif separation == "image":
            cinfo = None
            key = img
            label = images[img].label if img in images else "no image"
        else:
            cinfo = None
            if ctx is None:
                slots = [slot] if slot is not None else []
            else:
                c = contexts.get(ctx)
                slots = sorted(c.slots) if c else []
            key = tuple(slots)
            label = ("slot %d" % slots[0]) if len(slots) == 1 else \
                ("slots %s" % ",".join(map(str, slots)) if slots
                 else "no slot")
        g = groups.get(key)
        if g is None:
            g = groups[key] = Group(key, label, cinfo)
        return g

    totals = dict(exact=0, ambiguous=0, pending=0, unmapped=0, orphan=0)

    def whole(ctx, img, count):
        """Count a sample for its context's and image's loss shares."""
        if ctx in contexts:
            contexts[ctx].samples += count
        if img in images:
            images[img].samples += count

    # exact samples
    for ctx, img, off, ovl, count in session.samples():
        whole(ctx, img, count)
        if not keep(ctx, img):
            continue
        totals["exact"] += count
        info = images.get(img)
        g = group_of(ctx, img)
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
        g.row(key, lambda: Row("exact", info, name, overlay=ovl,
                               section=section)).add(count, off)

    # ambiguous and pending samples
    candidates = session.candidates()
    cand_names = {}
    for ctx, img, ls, region, gfrom, gto, count, pending in \
            session.ambiguous():
        whole(ctx, img, count)
        if not keep(ctx, img):
            continue
        totals["pending" if pending else "ambiguous"] += count
        info = images.get(img)
        ck = (img, ls)
        names = cand_names.get(ck)
        if names is None:
            names = []
            sym = info.symbolizer if info else None
            for ovl, foff in candidates.get(ck, ()):
                f = sym.function_at(foff) if sym else None
                if f is not None:
                    n = f.name
                else:       # padding past an overlay's last function
                    sec = sym.section_at(foff) if sym else None
                    n = "%s:?" % sec.name if sec else "0x%x" % foff
                if n not in names:
                    names.append(n)
            names = cand_names[ck] = tuple(names)
        g = group_of(ctx, img)
        key = ("a", img, region, names)
        what = "|".join(names) if names else "ls 0x%x" % ls
        g.row(key, lambda: Row(
            "ambiguous", info, "[ambiguous region %s: %s]" % (region, what),
            region=region, candidates=names)).add(count)

    # unmapped samples
    for ctx, img, ls, reason, guard, count in session.unmapped():
        whole(ctx, img, count)
        if not keep(ctx, img):
            continue
        totals["unmapped"] += count
        g = group_of(ctx, img)
        key = ("u", img, reason)
        g.row(key, lambda: Row("unmapped", images.get(img),
                               "[unmapped %s]" % reason,
                               reason=reason)).add(count)

    # orphans: no context, no image
    if not filtered:
        for slot, ls, count in session.orphans():
            totals["orphan"] += count
            g = group_of(None, None, slot)
            g.row(("o",), lambda: Row("orphan", None, "[orphan]")).add(count)

    # lost captures: to their context, its image and the group they are in
    for ctx, slot, cause, name, count in session.lost_by_context():
        c = contexts.get(ctx)
        img = c.image.id if c is not None and c.image is not None else None
        if c is not None:
            c.losses.add(cause, name, count)
            if c.image is not None:
                c.image.losses.add(cause, name, count)
        if filtered and (c is None or not keep(ctx, img)):
            continue
        group_of(ctx, img, slot).losses.add(cause, name, count)

    # percentages, intervals, threshold, order
    order = []
    for key, g in groups.items():
        g.total = sum(r.samples for r in g.rows.values())
        rows = []
        for r in g.rows.values():
            p, lo, hi = interval(r.samples, g.total)
            r.percent, r.ci_low, r.ci_high = 100 * p, 100 * lo, 100 * hi
            if r.percent + 1e-12 < threshold:
                g.hidden += 1
                continue
            rows.append(r)
        rows.sort(key=lambda r: (-r.samples, r.symbol, r.overlay_label,
                                 r.image.short_name if r.image else ""))
        g.sorted = rows
        order.append(g)

    def gorder(g):
        k = g.key
        if separation in ("context", "image"):
            return (k is None, k or 0)
        if separation == "slot":
            return (len(k) == 0, k)
        return (0,)
    order.sort(key=gorder)
    # contexts of the filter that had no sample still get their header
    if separation == "context":
        seen = {g.key for g in order}
        for cid, c in contexts.items():
            if cid not in seen and (want_contexts is None or
                                    cid in want_contexts) and \
                    want_images is None:
                order.append(Group(cid, c.label, c))
        order.sort(key=gorder)
    prof.groups = order

    totals["samples"] = sum(totals.values())
    prof.totals = totals
    prof.filtered = filtered
    prof.lost = [(r["cause"], r["cause_name"], r["count"])
                 for r in session.lost_by_cause()]
    totals["lost"] = sum(c for _, _, c in prof.lost)
    prof.decode_errors = [(r["kind"], r["count"])
                          for r in session.decode_errors()]
    prof.stream_samples = session.int_key("stream.samples")
    session_state(prof, session)
    prof.sampling = _load_sampling(session, contexts)
    return prof


def session_state(prof, session):
    """The session's truth about itself (Session.end()) and the warnings
    of its images, on the profile."""
    prof.end_state, prof.end_reason = session.end()
    prof.complete = prof.end_state == "complete"
    prof.warnings = list(session.warnings)
