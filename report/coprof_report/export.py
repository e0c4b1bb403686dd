"""A session's samples for other viewers: pprof, callgrind, folded stacks
and speedscope (`copreport export --format F -o FILE`).

Every exporter reads the same thing, stacks(): per context, (stack,
count) pairs, a stack being the frames from the outermost caller to the
sampled function.  Each frame keeps what coprof knows of a place: its
image, its overlay and its function (Frame).  Until a session holds call
stacks, a sample's stack is its leaf frame alone: one stack per row of
the profile by context (profile.build(..., "context")), so that every
sample of the session, exact, ambiguous, unmapped or orphan, is in
exactly one stack and the exports add up to the report.  A session
recorded with --call-graph gives its call stacks instead
(callgraph.call_stacks(), the samples that came with their stack), and
every exporter carries them.

How each format keeps image, overlay and context:

  pprof       profile.proto, gzipped (pprof_message()): a Mapping per
              image (its file and offset, the image's content hash as the
              build id), a Function per (image, overlay, function) named
              "NAME (IMAGE)" where a name is in several images, its
              filename the source file from the image's DWARF
              ("IMAGE:SECTION" without one); a Location per sampled
              instruction (the mapping's start + its file offset) with
              its Line; every Sample labelled context, pid, tid, image
              and overlay.  The sample type is samples/count, the period
              the capture period in cycles.
  callgrind   the context is the outermost frame of every stack, so
              KCachegrind shows each context's functions as its callees;
              ob= the image, fl= the source file (IMAGE:SECTION without
              debug information), fn= "NAME (IMAGE[ OVERLAY])"; the cost
              lines at their source line; one event, Samples; inclusive
              costs on the calls= lines, from the call site's line.

Without call stacks, a function's samples are split by instruction (the
session's samples by file offset), so each has its line (Places: the
symbolizer's address, annotate's DWARF line tables).
  folded      "context 3 pid 1 tid 2;stage_denoise (pipeline) 7015": one
              line per distinct stack, the context first, root to leaf;
              the counts add up to the session's samples.
  speedscope  the file format of speedscope.app: one sampled profile per
              context (named after it), frames shared, each frame's file
              IMAGE:SECTION; unit "none" (samples).

The pprof message is built with python3-protobuf from a descriptor made
here (_pprof_classes()) with the field numbers and types of upstream's
proto/profile.proto (package perftools.profiles), no generated code.
"""

import collections
import gzip
import json

from . import profile, safefile, stalls

FORMATS = ("pprof", "callgrind", "folded", "speedscope")

Frame = collections.namedtuple("Frame", "image overlay function offset")
Frame.__doc__ = """A place code ran: image (profile.ImageInfo or None),
overlay (its section, "" for resident code), function (a name, or a
report's "[...]" name for samples it could not place), offset (the file
offset of the first sampled instruction in it, or None)."""

Stack = collections.namedtuple("Stack", "context frames count stall",
                               defaults=(None,))
Stack.__doc__ = """count samples of context (profile.ContextInfo, None for
samples of no context) whose call stack was frames (Frames, outermost
caller first, the sampled function last), with the stall reason stall
(stalls.py's value; None when the session has none for them)."""


def leaf_frame(row):
    """The Frame of a profile row."""
    return Frame(row.image, row.section if row.overlay else "", row.symbol,
                 row.offset_lo)


def stacks(session, prof):
    """Every sample of the session as Stacks, per context.  prof is the
    session's profile by context (profile.build(session, "context")).

    This is the one place stacks come from.  A session recorded with
    --call-graph gives its call stacks (callgraph.call_stacks(): every
    sample that came with its stack, the outermost caller first, a cut
    stack starting with "[...]"); any other gives each sample's leaf frame
    alone, one Stack per row of its context."""
    from . import callgraph     # callgraph builds on profile, as this does
    got = False
    by_stall = stalls.recorded(session, "stack_stalls")
    read = callgraph.call_stacks_by_stall if by_stall else \
        lambda *a: ((c, f, None, n) for c, f, n in callgraph.call_stacks(*a))
    for context, frames, stall, count in read(session, prof.images,
                                              prof.contexts):
        got = True
        yield Stack(context, tuple(call_frame(f) for f in reversed(frames)),
                    count, stall)
    if got:
        return
    offsets = _exact_offsets(session, prof, prof.stalls_recorded)
    for g in prof.groups:
        for r in g.sorted:
            frame = leaf_frame(r)
            places = offsets.get(_row_key(g.context, r))
            if r.kind != "exact" or not places or \
                    sum(places.values()) != r.samples:
                yield Stack(g.context, (frame,), r.samples)
                continue
            for off, stall in sorted(places, key=lambda k: (k[0], k[1]
                                                            or 0)):
                yield Stack(g.context, (frame._replace(offset=off),),
                            places[(off, stall)], stall)


def _row_key(context, row):
    return (context.id if context is not None else None,
            id(row.image), row.section if row.overlay else "", row.symbol)


def _exact_offsets(session, prof, by_stall=False):
    """{(context, image, overlay, function): {(file offset, stall):
    samples}} of the exact samples, to split a function's row by
    instruction (and by stall reason when by_stall, else stall None)."""
    images = {i.id: i for i in prof.images.values()} \
        if isinstance(prof.images, dict) else {}
    out = collections.defaultdict(dict)
    overlay = {}
    for ctx, img, off, ovl, count in session.samples(by_context=True):
        overlay[(img, off)] = ovl
        if not by_stall:
            _add_place(out, images, ctx, img, off, ovl, None, count)
    if by_stall:
        for ctx, img, off, stall, count in session.sample_stalls():
            if (img, off) in overlay:
                _add_place(out, images, ctx, img, off, overlay[(img, off)],
                           stall, count)
    return out


def _add_place(out, images, ctx, img, off, ovl, stall, count):
    info = images.get(img)
    f = info.symbolizer.function_at(off) \
        if info is not None and info.symbolizer else None
    if f is None:
        return
    d = out[(ctx, id(info), f.section if ovl else "", f.name)]
    d[(off, stall)] = d.get((off, stall), 0) + count


def with_stall_leaf(st):
    """A Stack's frames, with a leaf frame "[dma_wait]" after the sampled
    function when its samples were waiting (not issue), for the formats
    that have no other place for a reason (folded, speedscope)."""
    if st.stall is None or st.stall == stalls.ISSUE:
        return st.frames
    return st.frames + (Frame(None, None, "[%s]" % stalls.name(st.stall),
                              None),)


def call_frame(frame):
    """The Frame of a callgraph.Frame (a sampled place or a call site)."""
    return Frame(frame.image, frame.section if frame.overlay else "",
                 frame.function, frame.file_offset)


def all_stacks(sessions, prof_of):
    """The Stacks of several sessions, each with its profile by context
    (prof_of(session))."""
    for s in sessions:
        yield from stacks(s, prof_of(s))


# --- source places -----------------------------------------------------

class Places:
    """The address and source line of a Frame's file offset: the
    symbolizer gives the function's address, the image's DWARF
    (annotate's line tables) its file and line.  close() removes the
    temporary copies of embedded images."""

    def __init__(self):
        self.lines = {}         # id(image) -> (annotate._Lines, _ImageFile)
        self.cache = {}

    def _lines_of(self, image):
        from . import annotate
        key = id(image)
        if key not in self.lines:
            f = annotate._ImageFile(image)
            self.lines[key] = (annotate._Lines(f.path) if f.path else None,
                               f)
        return self.lines[key][0]

    def __call__(self, frame):
        """(address, source file, line, function start line); address
        None when the frame has no place in an image, file and lines None
        without debug information."""
        key = (id(frame.image), frame.offset)
        if key in self.cache:
            return self.cache[key]
        out = (None, None, 0, 0)
        image = frame.image
        sym = image.symbolizer if image is not None else None
        f = sym.function_at(frame.offset) \
            if sym is not None and frame.offset is not None else None
        if f is not None:
            address = f.vaddr + (frame.offset - f.offset)
            lines = self._lines_of(image)
            lookup = lines.for_function(f.name, f.vaddr)[0] \
                if lines is not None else None
            file, line = lookup(address) if lookup else (None, None)
            start = lookup(f.vaddr)[1] if lookup else None
            out = (address, file, line or 0, start or 0)
        self.cache[key] = out
        return out

    def close(self):
        for _, f in self.lines.values():
            f.close()
        self.lines = {}


# --- names --------------------------------------------------------------

def context_name(c):
    """"context 3 pid 1200 tid 1201" (its session first in a report of
    several), or "no context"."""
    if c is None:
        return "no context"
    return "%s pid %s tid %s" % (c.label, c.pid, c.tid)


def image_name(frame):
    return frame.image.short_name if frame.image else "no image"


def file_name(frame):
    """"overlays:.overlay.crc", "pipeline:.text": the image and the
    section of the function ("stall reason" for with_stall_leaf()'s)."""
    if frame.overlay is None:
        return "stall reason"
    return "%s:%s" % (image_name(frame), frame.overlay or "resident")


def frame_name(frame):
    """"crc16_bitwise (overlays .overlay.crc)", "main (kernels)": unique
    per image and overlay, no ";" (a folded line's separator)."""
    if frame.overlay is None:       # with_stall_leaf()'s reason frame
        return frame.function
    where = image_name(frame)
    if frame.overlay:
        where += " " + frame.overlay
    return ("%s (%s)" % (frame.function, where)).replace(";", ",")


# --- folded -------------------------------------------------------------

def write_folded(all_st, out, sampling, name):
    """One line per distinct stack: "ROOT;...;LEAF COUNT"."""
    del sampling, name      # a folded line has no room for them
    lines = collections.OrderedDict()
    for st in all_st:
        key = ";".join([context_name(st.context).replace(";", ",")] +
                       [frame_name(f) for f in with_stall_leaf(st)])
        lines[key] = lines.get(key, 0) + st.count
    for key, count in lines.items():
        out.write("%s %d\n" % (key, count))


# --- speedscope ---------------------------------------------------------

SPEEDSCOPE_SCHEMA = "https://www.speedscope.app/file-format-schema.json"


def speedscope_json(all_st, name):
    """The speedscope file: a sampled profile per context."""
    frames, index = [], {}
    profiles = collections.OrderedDict()

    def frame_index(f):
        key = (id(f.image), f.overlay, f.function)
        if key not in index:
            index[key] = len(frames)
            frames.append({"name": frame_name(f), "file": file_name(f)})
        return index[key]

    for st in all_st:
        p = profiles.setdefault(id(st.context), {
            "type": "sampled", "name": context_name(st.context),
            "unit": "none", "startValue": 0, "endValue": 0,
            "samples": [], "weights": []})
        p["samples"].append([frame_index(f) for f in with_stall_leaf(st)])
        p["weights"].append(st.count)
        p["endValue"] += st.count
    return {"$schema": SPEEDSCOPE_SCHEMA, "version": "0.7.1",
            "name": name, "exporter": "copreport", "activeProfileIndex": 0,
            "shared": {"frames": frames},
            "profiles": list(profiles.values())}


def write_speedscope(all_st, out, sampling, name):
    del sampling
    json.dump(speedscope_json(all_st, name), out)
    out.write("\n")


# --- callgrind ----------------------------------------------------------

class _Names:
    """callgrind's name compression: "(N) name" the first time, "(N)"
    after."""

    def __init__(self):
        self.ids = {}

    def __call__(self, name):
        n = self.ids.get(name)
        if n is not None:
            return "(%d)" % n
        n = self.ids[name] = len(self.ids) + 1
        return "(%d) %s" % (n, name)


def _callgrind_place(frame, places):
    """(ob, fl, fn, line) of a Frame: fl the function's source file
    (IMAGE:SECTION without debug information), line its line there."""
    _, file, line, _ = places(frame)
    return (frame.image.label if frame.image else "no image",
            file or file_name(frame), frame_name(frame), line)


def write_callgrind(all_st, out, sampling, name):
    """The callgrind format: the context as every stack's outermost
    frame, self cost on the sampled function's lines, inclusive cost on
    each call from its call site's line; name is its cmd: line.  fn=
    names carry the image (and overlay), so each image's main is its own
    function."""
    places = Places()
    try:
        _write_callgrind(all_st, out, sampling, name, places)
    finally:
        places.close()


def _cost(st, width):
    """A Stack's cost vector: its samples, then (width > 1) its samples
    under each stall reason's event (0 under the others)."""
    v = [st.count] + [0] * (width - 1)
    if width > 1 and st.stall is not None and st.stall < len(stalls.REASONS):
        v[1 + st.stall] = st.count
    return v


def _add(into, key, cost):
    have = into.get(key)
    into[key] = cost if have is None else [a + b for a, b in zip(have, cost)]


def _costs(v):
    return " ".join("%d" % x for x in v)


def _write_callgrind(all_st, out, sampling, name, places):
    all_st = list(all_st)
    by_reason = any(st.stall is not None for st in all_st)
    events = ["Samples"] + (list(stalls.REASONS) if by_reason else [])
    width = len(events)
    self_cost = collections.OrderedDict()   # function -> {line: costs}
    calls = collections.OrderedDict()       # (caller, line, callee) -> costs
    where = {}                              # function -> its (ob, fl)
    total = [0] * width
    for st in all_st:
        cost = _cost(st, width)
        root = ("contexts", "contexts", context_name(st.context), 0)
        chain = [root] + [_callgrind_place(f, places) for f in st.frames]
        for p in chain:
            where.setdefault(p[2], p[:2])
            self_cost.setdefault(p[2], {})
        for caller, callee in zip(chain, chain[1:]):
            _add(calls, (caller[2], caller[3], callee[2]), cost)
        _add(self_cost[chain[-1][2]], chain[-1][3], cost)
        total = [a + b for a, b in zip(total, cost)]
    ob, fl, fn = _Names(), _Names(), _Names()
    out.write("# callgrind format\nversion: 1\ncreator: copreport\n")
    out.write("cmd: %s\n" % name)
    if sampling is not None and sampling.period:
        out.write("desc: Sampling: %s\n" % sampling.period_text())
    out.write("positions: line\nevents: %s\n" % " ".join(events))
    out.write("summary: %s\n" % _costs(total))
    by_caller = collections.OrderedDict()
    for (caller, line, callee), n in calls.items():
        by_caller.setdefault(caller, []).append((line, callee, n))
    for func, lines in self_cost.items():
        o, f = where[func]
        out.write("\nob=%s\nfl=%s\nfn=%s\n" % (ob(o), fl(f), fn(func)))
        for line in sorted(lines):
            out.write("%d %s\n" % (line, _costs(lines[line])))
        for line, callee, n in by_caller.get(func, ()):
            co, cf = where[callee]
            out.write("cob=%s\ncfi=%s\ncfn=%s\ncalls=%d %d\n%d %s\n"
                      % (ob(co), fl(cf), fn(callee), n[0],
                         min(self_cost[callee] or {0: 0}), line, _costs(n)))
    out.write("\ntotals: %s\n" % _costs(total))


# --- pprof --------------------------------------------------------------

# (message, [(field, number, type, repeated, message type)]) as in
# upstream's proto/profile.proto
_PPROF_FIELDS = (
    ("Profile", (("sample_type", 1, "message", True, "ValueType"),
                 ("sample", 2, "message", True, "Sample"),
                 ("mapping", 3, "message", True, "Mapping"),
                 ("location", 4, "message", True, "Location"),
                 ("function", 5, "message", True, "Function"),
                 ("string_table", 6, "string", True, None),
                 ("drop_frames", 7, "int64", False, None),
                 ("keep_frames", 8, "int64", False, None),
                 ("time_nanos", 9, "int64", False, None),
                 ("duration_nanos", 10, "int64", False, None),
                 ("period_type", 11, "message", False, "ValueType"),
                 ("period", 12, "int64", False, None),
                 ("comment", 13, "int64", True, None),
                 ("default_sample_type", 14, "int64", False, None))),
    ("ValueType", (("type", 1, "int64", False, None),
                   ("unit", 2, "int64", False, None))),
    ("Sample", (("location_id", 1, "uint64", True, None),
                ("value", 2, "int64", True, None),
                ("label", 3, "message", True, "Label"))),
    ("Label", (("key", 1, "int64", False, None),
               ("str", 2, "int64", False, None),
               ("num", 3, "int64", False, None),
               ("num_unit", 4, "int64", False, None))),
    ("Mapping", (("id", 1, "uint64", False, None),
                 ("memory_start", 2, "uint64", False, None),
                 ("memory_limit", 3, "uint64", False, None),
                 ("file_offset", 4, "uint64", False, None),
                 ("filename", 5, "int64", False, None),
                 ("build_id", 6, "int64", False, None),
                 ("has_functions", 7, "bool", False, None),
                 ("has_filenames", 8, "bool", False, None),
                 ("has_line_numbers", 9, "bool", False, None),
                 ("has_inline_frames", 10, "bool", False, None))),
    ("Location", (("id", 1, "uint64", False, None),
                  ("mapping_id", 2, "uint64", False, None),
                  ("address", 3, "uint64", False, None),
                  ("line", 4, "message", True, "Line"),
                  ("is_folded", 5, "bool", False, None))),
    ("Line", (("function_id", 1, "uint64", False, None),
              ("line", 2, "int64", False, None))),
    ("Function", (("id", 1, "uint64", False, None),
                  ("name", 2, "int64", False, None),
                  ("system_name", 3, "int64", False, None),
                  ("filename", 4, "int64", False, None),
                  ("start_line", 5, "int64", False, None))),
)

_pprof_profile_class = None


class ExportError(Exception):
    """An export that cannot be made; str() says why in one line."""


def _pprof_classes():
    """The Profile message class of perftools.profiles, from a descriptor
    built here (proto3)."""
    global _pprof_profile_class
    if _pprof_profile_class is not None:
        return _pprof_profile_class
    try:
        from google.protobuf import descriptor_pb2, descriptor_pool
        from google.protobuf import message_factory
    except ImportError as e:
        raise ExportError("pprof: needs Debian's python3-protobuf (%s)" % e)
    fd = descriptor_pb2.FileDescriptorProto(
        name="coprof_profile.proto", package="perftools.profiles",
        syntax="proto3")
    F = descriptor_pb2.FieldDescriptorProto
    types = {"int64": F.TYPE_INT64, "uint64": F.TYPE_UINT64,
             "string": F.TYPE_STRING, "bool": F.TYPE_BOOL,
             "message": F.TYPE_MESSAGE}
    for name, fields in _PPROF_FIELDS:
        m = fd.message_type.add(name=name)
        for fname, number, kind, repeated, msg in fields:
            f = m.field.add(name=fname, number=number, type=types[kind],
                            label=F.LABEL_REPEATED if repeated
                            else F.LABEL_OPTIONAL)
            if msg:
                f.type_name = ".perftools.profiles." + msg
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    desc = pool.FindMessageTypeByName("perftools.profiles.Profile")
    if hasattr(message_factory, "GetMessageClass"):
        cls = message_factory.GetMessageClass(desc)
    else:
        cls = message_factory.MessageFactory(pool).GetPrototype(desc)
    _pprof_profile_class = cls
    return cls


class _Strings:
    """pprof's string table: index 0 is ""."""

    def __init__(self, table):
        self.table = table
        self.index = {"": 0}
        table.append("")

    def __call__(self, s):
        s = "" if s is None else str(s)
        i = self.index.get(s)
        if i is None:
            i = self.index[s] = len(self.table)
            self.table.append(s)
        return i


MAPPING_SPAN = 1 << 32      # each image's addresses: its own 4 GiB


def pprof_message(all_st, sampling, time_nanos=0, duration_nanos=0):
    """The Profile message of the Stacks: a Mapping per image (its
    content hash the build id), a Location per (image, file offset) at
    the mapping's start + the offset, with the Line of the image's DWARF;
    a Function per (image, overlay, function) named NAME (IMAGE) where a
    name is in several images (each image's main apart), its filename
    the source file (IMAGE:SECTION without debug information)."""
    places = Places()
    try:
        return _pprof_message(all_st, sampling, places, time_nanos,
                              duration_nanos)
    finally:
        places.close()


def _pprof_message(all_st, sampling, places, time_nanos, duration_nanos):
    all_st = list(all_st)
    p = _pprof_classes()()
    st_ = _Strings(p.string_table)
    p.sample_type.add(type=st_("samples"), unit=st_("count"))
    p.period_type.type = st_("cycles")
    p.period_type.unit = st_("count")
    p.time_nanos = time_nanos
    p.duration_nanos = duration_nanos
    if sampling is not None and sampling.period:
        p.period = sampling.period
        p.comment.append(st_("a capture every %d coprocessor cycles"
                             % sampling.period))
    mappings, functions, locations = {}, {}, {}
    images_of = collections.defaultdict(set)
    for s in all_st:
        for f in s.frames:
            images_of[f.function].add(id(f.image))

    def mapping_id(image):
        key = id(image)
        if key not in mappings:
            m = p.mapping.add(id=len(mappings) + 1)
            m.memory_start = m.id * MAPPING_SPAN
            m.memory_limit = m.memory_start + MAPPING_SPAN - 1
            m.filename = st_(image.where(True) if image else "no image")
            if image is not None:
                m.build_id = st_(image.identity.split(":", 1)[1])
            m.has_functions = m.has_filenames = m.has_line_numbers = True
            mappings[key] = m
        return mappings[key]

    def function_id(f, file, start):
        key = (id(f.image), f.overlay, f.function)
        if key not in functions:
            name = f.function
            if len(images_of[f.function]) > 1:
                name = frame_name(f)
            functions[key] = p.function.add(
                id=len(functions) + 1, name=st_(name),
                system_name=st_(f.function),
                filename=st_(file or file_name(f)), start_line=start).id
        return functions[key]

    def location_id(f):
        key = (id(f.image), f.overlay, f.function, f.offset)
        if key in locations:
            return locations[key]
        address, file, line, start = places(f)
        m = mapping_id(f.image)
        loc = p.location.add(id=len(locations) + 1, mapping_id=m.id,
                             address=m.memory_start + (f.offset or 0))
        loc.line.add(function_id=function_id(f, file, start), line=line)
        locations[key] = loc.id
        return loc.id

    for s in all_st:
        smp = p.sample.add()
        smp.location_id.extend(location_id(f) for f in reversed(s.frames))
        smp.value.append(s.count)
        leaf = s.frames[-1]
        smp.label.add(key=st_("context"), str=st_(context_name(s.context)))
        if s.context is not None:
            smp.label.add(key=st_("pid"), num=s.context.pid or 0)
            smp.label.add(key=st_("tid"), num=s.context.tid or 0)
        smp.label.add(key=st_("image"), str=st_(image_name(leaf)))
        smp.label.add(key=st_("overlay"), str=st_(leaf.overlay or
                                                  "resident"))
        if s.stall is not None:
            smp.label.add(key=st_("stall"), str=st_(stalls.name(s.stall)))
    return p


def write_pprof(all_st, path, sampling):
    """The gzipped profile.proto at path (binary)."""
    data = pprof_message(all_st, sampling).SerializeToString()
    with safefile.output(path, "wb") as f:
        with gzip.GzipFile(fileobj=f, mode="wb", mtime=0) as z:
            z.write(data)


def export(sessions, fmt, path, name):
    """Writes the sessions' stacks in fmt to path."""
    profs = {}

    def prof_of(s):
        if id(s) not in profs:
            profs[id(s)] = profile.build(
                s, "context", session_name=s.name if len(sessions) > 1
                else None)
        return profs[id(s)]

    sampling = profile.same_period([prof_of(s) for s in sessions])
    all_st = all_stacks(sessions, prof_of)
    if fmt == "pprof":
        write_pprof(all_st, path, sampling)
        return
    with safefile.output(path) as f:
        TEXT_WRITERS[fmt](all_st, f, sampling, name)


TEXT_WRITERS = {"folded": write_folded, "callgrind": write_callgrind,
                "speedscope": write_speedscope}
