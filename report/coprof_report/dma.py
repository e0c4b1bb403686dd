"""Which transfer a DMA wait waits on: the session's dma_wait_samples
named for a reader (issue 29).

coprofd stores each DMA-wait sample by the waiting instruction (image and
file offset), the tag it waited on, and the get/put that issued that
tag's last transfer: its local-store address, and its file offset when
it lies in the same image (docs/session-format.md "Stall reasons").  Here
both instructions are named as "symbol+0xoff" by the symbolizer (an
issuer outside the image stays "ls 0x..."), with the source file and
line of each from the image's DWARF when it has them (annotate.py's line
tables), summed over contexts and ordered by samples.  cop.h's
cop_dma_get/put/wait are inlined, so their line is cop.h's: the DWARF's
inlined call (DW_TAG_inlined_subroutine's DW_AT_call_file/call_line at
the instruction) names the line of the program that called them,
"stream.c:77 (cop_dma_get, cop.h:90)".  build() gives the Waits of a
session (None when it holds no reasons: stalls.recorded()).
"""

from . import annotate, stalls


class Wait:
    """The DMA-wait samples of one (waiting instruction, tag, issuer)."""

    __slots__ = ("image", "offset", "tag", "issuer_ls_addr",
                 "issuer_offset", "samples", "where", "source",
                 "issuer", "issuer_source")

    def __init__(self, image, offset, tag, ls_addr, issuer_offset):
        self.image = image              # profile.ImageInfo or None
        self.offset = offset
        self.tag = tag
        self.issuer_ls_addr = ls_addr
        self.issuer_offset = issuer_offset
        self.samples = 0
        self.where = self.issuer = None     # "symbol+0xoff"
        self.source = self.issuer_source = NO_PLACE    # annotate.Place


NO_PLACE = annotate.Place(None, None, None)


def _describe(image, offset):
    """"symbol+0xoff" of a file offset of an image ("[0x..]" without a
    symbol there, "offset 0x.." without symbols)."""
    sym = image.symbolizer if image is not None else None
    if sym is None:
        return "offset 0x%x" % offset
    return sym.describe(offset)


def build(session, images, keep):
    """[Wait] of the session's DMA waits whose (context, image) keep()
    takes, the most samples first; None when the session has no stall
    reasons."""
    if not stalls.recorded(session) or \
            not session.has_table("dma_wait_samples"):
        return None
    waits = {}
    for ctx, img, off, tag, ls, issuer, count in session.dma_waits():
        if not keep(ctx, img):
            continue
        key = (img, off, tag, ls, issuer)
        w = waits.get(key)
        if w is None:
            w = waits[key] = Wait(images.get(img), off, tag, ls, issuer)
        w.samples += count
    out = sorted(waits.values(), key=lambda w: (
        -w.samples, w.image.id if w.image else 0, w.offset, w.tag,
        w.issuer_ls_addr))
    _name(out)
    return out


def _name(waits):
    """Each wait's instructions named, with their source lines."""
    wanted = {}
    for w in waits:
        w.where = _describe(w.image, w.offset)
        if w.issuer_offset is not None:
            w.issuer = _describe(w.image, w.issuer_offset)
        else:
            w.issuer = "ls 0x%x" % w.issuer_ls_addr
        if w.image is not None:
            offs = wanted.setdefault(w.image.id, (w.image, set()))[1]
            offs.add(w.offset)
            if w.issuer_offset is not None:
                offs.add(w.issuer_offset)
    lines = {}
    for image, offsets in wanted.values():
        for off, where in annotate.places_at(image, offsets).items():
            lines[(image.id, off)] = where
    for w in waits:
        if w.image is None:
            continue
        w.source = lines.get((w.image.id, w.offset), NO_PLACE)
        if w.issuer_offset is not None:
            w.issuer_source = lines.get((w.image.id, w.issuer_offset),
                                        NO_PLACE)


def source_text(where):
    """" (stream.c:40)" of an annotate.Place, of inlined code " (stream.c:77
    (cop_dma_get, cop.h:90))"; "" when unknown."""
    if where.file is None:
        return ""
    return " (%s)" % annotate.place_text(*where)


def to_json(waits):
    """The report's "dma_waits" (null when the session has no reasons)."""
    if waits is None:
        return None
    return [{"image": w.image.short_name if w.image else None,
             "image_id": w.image.id if w.image else None,
             "file_offset": w.offset, "where": w.where,
             "source_file": w.source.file, "source_line": w.source.line,
             "inlined": annotate.inlined_json(w.source.inlined),
             "tag": w.tag, "issuer_ls_addr": w.issuer_ls_addr,
             "issuer_offset": w.issuer_offset, "issuer": w.issuer,
             "issuer_source_file": w.issuer_source.file,
             "issuer_source_line": w.issuer_source.line,
             "issuer_inlined": annotate.inlined_json(
                 w.issuer_source.inlined),
             "samples": w.samples} for w in waits]


def shown(waits):
    """Whether a report shows the section: the session has reasons and
    DMA-wait samples where the filters look (the JSON's dma_waits is
    there either way)."""
    return bool(waits) and any(w.samples for w in waits)


def text_lines(waits):
    """The text report's section: per waiting instruction and tag, the
    transfer's issuing instruction and the samples; nothing without
    DMA-wait samples."""
    if not shown(waits):
        return []
    lines = ["", "DMA waits by transfer: %d samples waiting on DMA tags"
             % sum(w.samples for w in waits)]
    rows = [(w.samples, w.where + source_text(w.source), w.tag,
             w.issuer + source_text(w.issuer_source)) for w in waits]
    width = max([40] + [len(r[1]) for r in rows])
    lines.append("%9s  %-*s %4s  %s" % ("samples", width, "waiting at",
                                        "tag", "issued by (get/put)"))
    for samples, where, tag, issuer in rows:
        lines.append("%9d  %-*s %4d  %s" % (samples, width, where, tag,
                                            issuer))
    return lines
