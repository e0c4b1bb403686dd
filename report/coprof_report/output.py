"""A Profile (profile.py) written as text, CSV or JSON.

text  opreport-like: a title, per group a header (for contexts: who, what
      image, created where) and rows "samples  %  +-95%  image  overlay
      symbol" by samples, then a footer of totals, losses and errors.
csv   one line per row, with a header line; the group in the first column.
json  one object: the session, the separation, groups, rows (flat, each
      naming its group), totals, lost_by_cause, decode_errors, complete,
      end_state and end_reason, image_warnings.
"""

import csv
import json

FORMATS = ("text", "csv", "json")


def _image_json(img):
    if img is None:
        return None
    return {"id": img.id, "short_name": img.short_name, "path": img.path,
            "image_offset": img.image_offset, "status": img.status}


def _context_json(c):
    if c is None:
        return None
    return {"id": c.id, "context_id": c.context_id, "pid": c.pid,
            "tid": c.tid, "image": c.image.short_name if c.image else None,
            "slots": sorted(c.slots), "created_at": c.created_at,
            "created_source": c.created_source,
            "creation_stack": c.creation_stack}


def _row_json(group, r):
    return {
        "group": group.label,
        "kind": r.kind,
        "symbol": r.symbol,
        "overlay": r.overlay_label or None,
        "overlay_index": r.overlay,
        "region": r.region,
        "section": r.section,
        "reason": r.reason,
        "candidates": list(r.candidates),
        "image": r.image.short_name if r.image else None,
        "image_id": r.image.id if r.image else None,
        "path": r.image.path if r.image else None,
        "image_offset": r.image.image_offset if r.image else None,
        "file_offset_lo": r.offset_lo,
        "file_offset_hi": r.offset_hi,
        "samples": r.samples,
        "percent": r.percent,
        "ci_low": r.ci_low,
        "ci_high": r.ci_high,
    }


def _footer_lines(prof):
    t = prof.totals
    lines = []
    amb = "ambiguous %d" % (t["ambiguous"] + t["pending"])
    if t["pending"]:
        amb += " (%d pending: the daemon did not finish)" % t["pending"]
    lines.append("total %d samples: exact %d, %s, unmapped %d, orphan %d"
                 % (t["samples"], t["exact"], amb, t["unmapped"],
                    t["orphan"]))
    if prof.lost:
        causes = ", ".join("%s %d" % (name or "cause %s" % cause, n)
                           for cause, name, n in prof.lost)
        lines.append("lost %d samples%s (%s)"
                     % (t["lost"], " of the whole session" if prof.filtered
                        else "", causes))
    else:
        lines.append("lost 0 samples")
    if prof.decode_errors:
        lines.append("decode errors: " + ", ".join(
            "%s %d" % (k, n) for k, n in prof.decode_errors))
    if prof.filtered:
        lines.append("(filtered: %d of the session's %d samples)"
                     % (t["samples"], prof.stream_samples))
    lines.append(state_line(prof))
    return lines


def state_line(prof):
    """What the session says about itself: "session complete", "session
    LIVE: ..." (as of its last flush) or "session INCOMPLETE: why"."""
    if prof.end_state == "complete":
        return "session complete"
    return "session %s: %s" % (prof.end_state.upper(), prof.end_reason)


def write_text(prof, out, session_dir):
    out.write("copreport: %s, separated by %s%s\n" % (
        session_dir, prof.separation,
        ", rows under %g%% hidden" % prof.threshold if prof.threshold
        else ""))
    out.write(state_line(prof) + "\n")
    out.write("percent: of the group's samples, +- the half-width of its "
              "95% interval\n")
    hdr = "%9s %8s %7s  %-34s %-18s %s\n" % (
        "samples", "%", "95%", "image", "overlay", "symbol")
    for g in prof.groups:
        out.write("\n")
        if g.context is not None:
            out.write(g.context.header() + "\n")
        elif prof.separation != "none":
            out.write("%s\n" % g.label)
        out.write("  %d samples%s\n" % (
            g.total, ", %d rows under the threshold" % g.hidden
            if g.hidden else ""))
        if not g.sorted:
            continue
        out.write(hdr)
        for r in g.sorted:
            half = max(r.percent - r.ci_low, r.ci_high - r.percent)
            out.write("%9d %7.2f%% %7s  %-34s %-18s %s\n" % (
                r.samples, r.percent, "\u00b1%.2f" % half,
                r.image.label if r.image else "-",
                r.overlay_label or "-", r.symbol))
    out.write("\n")
    for line in _footer_lines(prof):
        out.write(line + "\n")


CSV_FIELDS = ["group", "samples", "percent", "ci_low", "ci_high", "image",
              "path", "image_offset", "overlay", "symbol", "kind",
              "file_offset_lo", "file_offset_hi"]


def write_csv(prof, out, session_dir):
    w = csv.writer(out, lineterminator="\n")
    w.writerow(CSV_FIELDS)
    for g in prof.groups:
        for r in g.sorted:
            d = _row_json(g, r)
            d["percent"] = "%.4f" % r.percent
            d["ci_low"] = "%.4f" % r.ci_low
            d["ci_high"] = "%.4f" % r.ci_high
            w.writerow(["" if d[k] is None else d[k] for k in CSV_FIELDS])


def to_json(prof, session_dir):
    return {
        "format": "copreport-profile",
        "version": 1,
        "session": session_dir,
        "separation": prof.separation,
        "threshold": prof.threshold,
        "groups": [{"label": g.label, "total": g.total,
                    "hidden_rows": g.hidden,
                    "context": _context_json(g.context)}
                   for g in prof.groups],
        "rows": [_row_json(g, r) for g in prof.groups for r in g.sorted],
        "totals": dict(prof.totals),
        "lost_by_cause": [{"cause": c, "cause_name": n, "count": k}
                          for c, n, k in prof.lost],
        "decode_errors": [{"kind": k, "count": n}
                          for k, n in prof.decode_errors],
        "complete": prof.complete,
        "end_state": prof.end_state,
        "end_reason": prof.end_reason,
        "image_warnings": list(prof.warnings),
        "contexts": [_context_json(c) for c in prof.contexts.values()],
        "images": [_image_json(i) for i in prof.images.values()],
    }


def write_json(prof, out, session_dir):
    json.dump(to_json(prof, session_dir), out, indent=1)
    out.write("\n")


WRITERS = {"text": write_text, "csv": write_csv, "json": write_json}
