"""The call graph of a session recorded with --call-graph: per function its
self and inclusive samples, its callers and its callees, like `perf report
-g caller` and gprof's call graph.

The session's `stacks` table (docs/session-format.md) holds, per context,
each distinct call stack with its samples: the sample's own place, then
the call site of every frame, innermost first, each a file offset in the
context's image with the overlay it lies in.  call_stacks() reads it into
Frames, resolving each place to its function with the image's symbols
(overlay functions sharing an address stay apart: they are different
file offsets).  It is the interface the exports build on:

    for context, frames, count in callgraph.call_stacks(session):
        frames[0]            # the sampled function's Frame
        frames[1:]           # its caller, the caller's caller, ...

A stack deeper than the recorded depth ends with TRUNCATED.

The graph (build()): a function's self samples are those whose stack
starts in it, its inclusive samples those whose stack holds it anywhere
(counted once per stack, so recursion does not count twice); an edge
caller -> callee counts the samples whose stack has the callee right
inside the caller (once per stack too).  Every percentage is of all the
samples with stacks, with the 95% Wilson score interval of profile.py:
sampling noise only, not aliasing, not losses.
"""

import collections
import re

from . import profile
from .session import SessionError

# One place of a stack: its function (a name, "[SECTION+0xN]" without a
# symbol, "[unmapped 0xLS]" when it did not resolve), the image (a
# profile.ImageInfo or None), the file offset (None when unmapped), the
# overlay (0: resident), the section, the local-store address (unmapped).
Frame = collections.namedtuple(
    "Frame", "function image file_offset overlay section ls_addr")

# The frame that ends a stack deeper than the frames recorded.
TRUNCATED = Frame("[...]", None, None, 0, None, None)

_PLACE = re.compile(r"^(?:0x([0-9a-f]+)(?:@(\d+))?|\?0x([0-9a-f]+)|\.\.\.)$")


class NoStacks(Exception):
    """The session holds no call stacks; str() says so in one line."""


def _parse(session, text):
    """[(file_offset, overlay, ls_addr) or None for "..."] of a frames
    column; SessionError when it is not one."""
    places = []
    for word in text.split():
        m = _PLACE.match(word)
        if m is None:
            raise SessionError("%s: stacks.frames is %r, not a call stack"
                               % (session.db_path, text))
        if word == "...":
            places.append(None)
        elif m.group(3) is not None:
            places.append((None, 0, int(m.group(3), 16)))
        else:
            places.append((int(m.group(1), 16), int(m.group(2) or 0), None))
    if not places or places[0] is None:
        raise SessionError("%s: stacks.frames is %r, not a call stack"
                           % (session.db_path, text))
    return places


class _Frames:
    """Frames by place, made once per image and place."""

    def __init__(self):
        self._made = {}

    def frame(self, image, place):
        if place is None:
            return TRUNCATED
        key = (image.id if image else None,) + place
        f = self._made.get(key)
        if f is None:
            f = self._made[key] = self._make(image, *place)
        return f

    @staticmethod
    def _make(image, offset, overlay, ls):
        if offset is None:
            return Frame("[unmapped 0x%x]" % ls, image, None, 0, None, ls)
        sym = image.symbolizer if image else None
        fn = sym.function_at(offset) if sym else None
        sec = sym.section_at(offset) if sym else None
        section = sec.name if sec else None
        if fn is not None:
            name = fn.name
        elif sym is not None:
            name = "[no symbol in %s]" % section if section else \
                "[0x%x]" % offset
        else:
            name = "[no symbols 0x%x]" % offset
        return Frame(name, image, offset, overlay, section, None)


def call_stacks(session, images=None, contexts=None):
    """Yield (context, frames, count) for every distinct call stack of the
    session: context a profile.ContextInfo (None for a stack whose context
    row is missing), frames a tuple of Frame, the sampled place first and
    then each caller's call site, ending with TRUNCATED when the stack was
    deeper than recorded; count its samples.  images and contexts: the
    {id: ImageInfo} and {id: ContextInfo} of
    profile.load_images_and_contexts(), read when not given.  A session
    without the table yields nothing."""
    if not session.has_table("stacks"):
        return
    for context, frames, _, count in _stacks(
            session, images, contexts,
            "SELECT context, image, frames, NULL, SUM(count) FROM stacks"
            " GROUP BY context, frames ORDER BY context, frames"):
        yield context, frames, count


def call_stacks_by_stall(session, images=None, contexts=None):
    """call_stacks() of the stack_stalls table: (context, frames, stall,
    count), each stack's samples by stall reason (stalls.py).  A session
    without the table yields nothing."""
    if not session.has_table("stack_stalls"):
        return
    yield from _stacks(
        session, images, contexts,
        "SELECT context, image, frames, stall, SUM(count) FROM stack_stalls"
        " GROUP BY context, frames, stall ORDER BY context, frames, stall")


def _stacks(session, images, contexts, sql):
    """(context, frames, stall, count) of a query of rows (context, image,
    frames text, stall, count)."""
    if images is None or contexts is None:
        images, contexts = profile.load_images_and_contexts(session)
    made = _Frames()
    for context, image, text, stall, count in session.iterate(sql):
        img = images.get(image)
        frames = tuple(made.frame(img, p) for p in _parse(session, text))
        yield contexts.get(context), frames, stall, count


def function_key(frame):
    """A function's identity in the graph: image, overlay and name."""
    return (frame.image.id if frame.image else None, frame.overlay,
            frame.function)


class Function:
    """A function of the graph with its counts and edges."""

    def __init__(self, frame):
        self.name = frame.function
        self.image = frame.image
        self.overlay = frame.overlay
        self.section = frame.section
        self.self_samples = 0
        self.inclusive = 0
        self.callers = collections.Counter()    # function key -> samples
        self.callees = collections.Counter()

    @property
    def key(self):
        return (self.image.id if self.image else None, self.overlay,
                self.name)

    @property
    def overlay_label(self):
        if not self.overlay:
            return ""
        return self.section or "overlay %d" % self.overlay


class Graph:
    """The call graph: functions by key, the samples, the contexts."""

    def __init__(self):
        self.functions = {}
        self.samples = 0
        self.truncated = 0
        self.contexts = set()

    def function(self, frame):
        key = function_key(frame)
        f = self.functions.get(key)
        if f is None:
            f = self.functions[key] = Function(frame)
        return f

    def add(self, frames, count):
        """One stack of count samples."""
        self.samples += count
        if frames[-1] is TRUNCATED:
            self.truncated += count
            frames = frames[:-1]
        chain = [self.function(f) for f in frames]
        chain[0].self_samples += count
        for f in {id(f): f for f in chain}.values():
            f.inclusive += count
        edges = {(chain[i + 1].key, chain[i].key)
                 for i in range(len(chain) - 1)}
        for caller, callee in edges:
            self.functions[caller].callees[callee] += count
            self.functions[callee].callers[caller] += count

    def share(self, k):
        """(percent, low, high) of k samples among all."""
        p, lo, hi = profile.interval(k, self.samples)
        return 100 * p, 100 * lo, 100 * hi

    def ordered(self, threshold=0.0):
        """Functions by inclusive samples, then self, then name; those
        under threshold percent inclusive left out."""
        keep = [f for f in self.functions.values()
                if self.samples and 100.0 * f.inclusive / self.samples
                >= threshold]
        return sorted(keep, key=lambda f: (-f.inclusive, -f.self_samples,
                                           f.name, str(f.key)))


def build(session, context_filter=(), image_filter=()):
    """The Graph of the session's call stacks, of the contexts and images
    the filters name (profile's --context and --image syntax).  NoStacks
    when there are none; profile.FilterError for a filter naming
    nothing."""
    images, contexts = profile.load_images_and_contexts(session)
    want_images = profile._match_images(images, image_filter) \
        if image_filter else None
    want_contexts = profile._match_contexts(contexts, context_filter) \
        if context_filter else None
    graph = Graph()
    for context, frames, count in call_stacks(session, images, contexts):
        cid = context.id if context else None
        iid = frames[0].image.id if frames[0].image else None
        if want_contexts is not None and cid not in want_contexts:
            continue
        if want_images is not None and iid not in want_images:
            continue
        graph.add(frames, count)
        graph.contexts.add(cid)
    if not graph.samples:
        raise NoStacks("%s: no call stacks in this session%s (record with "
                       "coprof record --call-graph or copcontrol "
                       "--call-graph)" % (session.dir, " for these filters"
                                          if image_filter or context_filter
                                          else ""))
    return graph


# ---- output -----------------------------------------------------------------

def _label(graph, key):
    f = graph.functions[key]
    text = f.name
    if f.overlay:
        text += " [%s]" % f.overlay_label
    return text


def _share_text(graph, k):
    p, lo, hi = graph.share(k)
    return "%9d %7.2f%% %13s" % (k, p, "%.2f-%.2f" % (lo, hi))


def write_text(graph, out, session_dir, threshold=0.0):
    out.write("copreport callgraph: %s%s\n" % (
        session_dir, ", functions under %g%% inclusive hidden" % threshold
        if threshold else ""))
    out.write("%d samples with call stacks in %d context%s%s\n" % (
        graph.samples, len(graph.contexts),
        "" if len(graph.contexts) == 1 else "s",
        ", %d of them deeper than recorded (their outermost callers cut)"
        % graph.truncated if graph.truncated else ""))
    out.write("percent: of all samples with call stacks, with its 95% "
              "Wilson score interval\n(sampling noise only: not aliasing, "
              "not losses)\n\n")
    functions = graph.ordered(threshold)
    out.write("%9s %8s %13s %9s %8s %13s  %-28s %-18s %s\n" % (
        "inclusive", "%", "95% interval", "self", "%", "95% interval",
        "image", "overlay", "function"))
    for f in functions:
        out.write("%s %s  %-28s %-18s %s\n" % (
            _share_text(graph, f.inclusive), _share_text(graph,
                                                         f.self_samples),
            f.image.label if f.image else "-", f.overlay_label or "-",
            f.name))
    out.write("\ncallers and callees: the samples with the callee right "
              "inside the caller\n")
    for f in functions:
        out.write("\n%s  %s\n" % (_share_text(graph, f.inclusive),
                                  _label(graph, f.key)))
        for title, edges in (("callers", f.callers), ("callees", f.callees)):
            for key, k in sorted(edges.items(),
                                 key=lambda e: (-e[1], str(e[0]))):
                out.write("    %s  %s %s\n" % (_share_text(graph, k),
                                               title[:-1].ljust(6),
                                               _label(graph, key)))


def _share_json(graph, k):
    p, lo, hi = graph.share(k)
    return {"samples": k, "percent": p, "ci_low": lo, "ci_high": hi}


def _ref_json(graph, key):
    f = graph.functions[key]
    return {"function": f.name,
            "image": f.image.short_name if f.image else None,
            "image_id": f.image.id if f.image else None,
            "overlay": f.overlay, "section": f.section}


def to_json(graph, session_dir, threshold=0.0):
    functions = []
    for f in graph.ordered(threshold):
        d = _ref_json(graph, f.key)
        d["self"] = _share_json(graph, f.self_samples)
        d["inclusive"] = _share_json(graph, f.inclusive)
        for title, edges in (("callers", f.callers), ("callees", f.callees)):
            d[title] = [dict(_ref_json(graph, key), **_share_json(graph, k))
                        for key, k in sorted(edges.items(),
                                             key=lambda e: (-e[1],
                                                            str(e[0])))]
        functions.append(d)
    return {"format": "copreport-callgraph", "version": 1,
            "session": session_dir, "samples": graph.samples,
            "truncated": graph.truncated,
            "contexts": sorted(c for c in graph.contexts if c is not None),
            "threshold": threshold, "functions": functions}


def write_json(graph, out, session_dir, threshold=0.0):
    import json
    json.dump(to_json(graph, session_dir, threshold), out, indent=1)
    out.write("\n")


WRITERS = {"text": write_text, "json": write_json}
