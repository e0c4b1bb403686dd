"""The HTML report (`copreport html -o FILE.html`): one page a user
explores in a browser opened from the file system, without a server and
without fetching anything.

The page is one file.  Everything it needs is inside it: its style
sheet (page.css), its script (page.js), the libraries it draws with
(d3 7 and d3-flame-graph 5, minified, from the npm registry: `make deps`
installs them into report/js/node_modules and the build copies them to
lib/coprof/js, LIBRARIES below), and the session's data for the drawn
views as JSON.  A Content-Security-Policy meta tag forbids any load from
outside the page, so a reference that slipped in would fail loudly (a
console error) instead of reaching the network.

Views, one shown at a time, switched by the links of the bar at the top
(the URL's fragment names the view, so the browser's back button and a
mailed link work):

  profile      the report's rows without separation (profile.build),
               each with its share, its 95% interval and a bar; each
               function's symbol links to its annotation; the session's
               state, how it was sampled and its losses
  contexts     a table per context (--separate=context), buttons to show
  slots        one of them or all; a table per slot (--separate=slot)
  flame graph  the call stacks (callgraph.call_stacks) as a flame graph,
               outermost caller at the bottom, drawn by d3-flame-graph
               (click a frame to zoom into it); a session without the
               stacks table says why there is none
  timeline     the tracks of `copreport timeline` (slots, contexts with
               their function slices, the scheduler, host threads) on a
               canvas that zooms and pans (d3-zoom: wheel, drag, the
               buttons), a slice's name and times under the pointer
  fn-N         one function's annotation (annotate.py): its source
               lines hottest first, then its instructions hottest first
               or, by a button, in address order with the source lines
               above the instructions they became

Rows and annotations are HTML written here (they read without the
script); the flame graph and the timeline are drawn by page.js from the
JSON.  Every text from the session is escaped.

page.js has a self-test: opened with the fragment #selftest, it clicks
the first function link, checks the annotation shows hottest first,
switches to the context and slot views, checks the flame graph drew its
frames (or says why there are none), zooms the timeline and checks its
domain narrowed, then writes "pass" or "fail: WHY" into the body's
data-selftest attribute, which `chromium --headless --dump-dom` prints.
"""

import html
import json
import os

from . import annotate, callgraph, dma, export, output, profile, safefile
from . import stalls, timeline

# (file in lib/coprof/js, file under report/js/node_modules)
LIBRARIES = [("d3.min.js", "d3/dist/d3.min.js"),
             ("d3-flamegraph.min.js",
              "d3-flame-graph/dist/d3-flamegraph.umd.min.js")]

CSP = ("default-src 'none'; script-src 'unsafe-inline'; "
       "style-src 'unsafe-inline'; img-src data:")

VIEWS = [("profile", "Profile"), ("contexts", "By context"),
         ("slots", "By slot"), ("flame", "Flame graph"),
         ("timeline", "Timeline")]


class HtmlError(Exception):
    """The page cannot be made; str() is one line."""


def e(text):
    return html.escape("" if text is None else str(text), quote=True)


def _here(name):
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), name)


def library_paths():
    """[(name, path)] of the libraries the page inlines: lib/coprof/js
    beside the package (build tree, installed PREFIX), else the source
    tree's report/js/node_modules.  HtmlError when one is missing."""
    pkg = os.path.dirname(os.path.abspath(__file__))
    built = os.path.normpath(os.path.join(pkg, "..", "..", "js"))
    npm = os.path.normpath(os.path.join(pkg, "..", "js", "node_modules"))
    found = []
    for name, rel in LIBRARIES:
        for path in (os.path.join(built, name), os.path.join(npm, rel)):
            if os.path.isfile(path):
                found.append((name, path))
                break
        else:
            raise HtmlError("%s: not in %s nor %s (make deps installs it "
                            "with npm)" % (name, built, npm))
    return found


def _read_text(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def _script(text, name):
    if "</script" in text.lower():
        raise HtmlError("%s: holds </script and cannot be inlined" % name)
    return "<script>\n%s\n</script>" % text


def _json_script(data):
    text = json.dumps(data, separators=(",", ":"))
    text = text.replace("<", "\\u003c").replace(">", "\\u003e") \
        .replace("&", "\\u0026")
    return "<script type=\"application/json\" id=\"data\">%s</script>" % text


# --- functions and their annotations ----------------------------------

def _function_key(image_id, overlay_label, name):
    return (image_id, overlay_label or "", name)


def _anchors(funcs):
    """{function key: "fn-N"} of the annotated functions."""
    return {_function_key(a.image.id, a.overlay_label, a.name): "fn-%d" % n
            for n, a in enumerate(funcs, 1)}


def _symbol_cell(r, anchors):
    anchor = None
    if r.kind == "exact" and r.image is not None:
        anchor = anchors.get(_function_key(r.image.id, r.overlay_label,
                                           r.symbol))
    if anchor is None:
        return "<td>%s</td>" % e(r.symbol)
    return "<td><a class=\"fn\" href=\"#%s\">%s</a></td>" % (anchor,
                                                             e(r.symbol))


# --- profile tables ----------------------------------------------------

TABLE_HEAD = ("<tr><th>samples</th><th>%</th><th>95% interval</th>"
              "<th>share</th><th>image</th><th>overlay</th><th>symbol</th>"
              "</tr>")


def _rows_table(g, anchors):
    out = ["<table class=\"profile\">", TABLE_HEAD]
    for r in g.sorted:
        out.append(
            "<tr><td class=\"n\">%d</td><td class=\"n\">%.2f</td>"
            "<td class=\"n\">%.2f&ndash;%.2f</td><td><span class=\"bar\""
            " style=\"width:%dpx\"></span></td><td>%s</td><td>%s</td>"
            "%s</tr>" % (
                r.samples, r.percent, r.ci_low, r.ci_high,
                max(1, int(round(2 * r.percent))),
                e(r.image.label if r.image else "-"),
                e(r.overlay_label or "-"), _symbol_cell(r, anchors)))
    out.append("</table>")
    return out


def _profile_view(prof, anchors):
    out = ["<p>%s</p>" % e(output.state_line(prof))]
    out += ["<p class=\"note\">%s</p>" % e(line)
            for line in output._sampling_lines(prof)]
    out.append("<p class=\"note\">each symbol links to its annotation; "
               "percent of all samples, with its 95%% interval (%s)</p>"
               % e(", ".join(output._interval_text(g) for g in prof.groups)))
    for g in prof.groups:
        out += _rows_table(g, anchors)
    out += _stalls_view(prof, anchors)
    out += ["<p>%s</p>" % e(line) for line in output._footer_lines(prof)]
    return out


def _stalls_view(prof, anchors):
    """The breakdown by stall reason: per group its reasons' shares, a
    table of each symbol's samples by reason, and the DMA waits by
    transfer; one line when the session has no reasons."""
    if not prof.stalls_recorded:
        return ["<p class=\"note\" id=\"no-stalls\">%s</p>"
                % e(stalls.NOT_RECORDED)]
    out = ["<h3 id=\"stalls\">By stall reason</h3>"]
    head = "".join("<th>%s</th>" % e(n) for n in stalls.REASONS)
    for g in prof.groups:
        line = output._group_reason_line(g)
        if line:
            out.append("<p class=\"note\">%s</p>" % e(line.strip()))
        out += ["<table class=\"profile stalls\">",
                "<tr><th>samples</th><th>wait%%</th><th>top wait</th>%s"
                "<th>symbol</th></tr>" % head]
        for r in g.sorted:
            if r.stall is None:
                continue
            wait, top = stalls.wait_columns(r.stall)
            out.append("<tr><td class=\"n\">%d</td><td class=\"n\">%s</td>"
                       "<td>%s</td>%s%s</tr>" % (
                           r.samples, e(wait), e(top), "".join(
                               "<td class=\"n\">%d</td>"
                               % r.stall.counts.get(c, 0)
                               for c in range(len(stalls.REASONS))),
                           _symbol_cell(r, anchors)))
        out.append("</table>")
    out += _dma_view(prof.dma_waits)
    return out


def _dma_view(waits):
    """The DMA waits by transfer (dma.py) as a table, when there are
    DMA-wait samples."""
    if not dma.shown(waits):
        return []
    out = ["<h3 id=\"dma-waits\">DMA waits by transfer</h3>",
           "<table class=\"profile dma\"><tr><th>samples</th>"
           "<th>waiting at</th><th>tag</th><th>issued by (get/put)</th>"
           "</tr>"]
    for w in waits:
        out.append("<tr><td class=\"n\">%d</td><td>%s</td><td class=\"n\">"
                   "%d</td><td>%s</td></tr>" % (
                       w.samples, e(w.where + dma.source_text(w.source)),
                       w.tag, e(w.issuer + dma.source_text(w.issuer_source))))
    out.append("</table>")
    return out


def _group_title(g):
    if g.context is not None:
        return g.context.header()
    return g.label


def _groups_view(prof, anchors, what):
    """The tables of a separated profile, one per group, with a button
    per group to show it alone."""
    if not prof.groups:
        return ["<p class=\"note\">no %s with samples</p>" % what]
    out = ["<p class=\"groups\"><button type=\"button\" class=\"group on\" "
           "data-group=\"all\">all %d</button>" % len(prof.groups)]
    for n, g in enumerate(prof.groups):
        out.append("<button type=\"button\" class=\"group\" data-group="
                   "\"%d\">%s</button>" % (n, e(g.label)))
    out.append("</p>")
    for n, g in enumerate(prof.groups):
        out.append("<div class=\"group\" data-group=\"%d\">" % n)
        out.append("<h3>%s</h3>" % e(_group_title(g)))
        out.append("<p class=\"note\">%d samples, %s</p>" % (
            g.total, e(output._interval_text(g))))
        out += _rows_table(g, anchors)
        out += ["<p class=\"note\">%s</p>" % e(line)
                for line in output._group_footer_lines(prof, g)]
        out.append("</div>")
    return out


# --- annotations -------------------------------------------------------

def _hot_lines(a):
    """[(samples, file, line)] of the function's source lines with
    samples, hottest first."""
    lines = annotate.by_source([a])
    rows = [(n, path, line) for path, by_line in lines.items()
            for line, n in by_line.items() if n]
    rows.sort(key=lambda r: (-r[0], r[1], r[2]))
    return rows


def _insn_row(i, a, tail=""):
    share = annotate._pct(i.samples, a.samples)
    shade = "" if not i.samples else \
        " style=\"background: rgba(217,83,79,%.2f)\"" % min(
            0.8, 0.1 + share / 25.0)
    return ("<tr class=\"insn\"%s><td class=\"n\">%d</td><td class=\"n\">"
            "%.2f</td><td class=\"code\">%08x</td><td class=\"code\">%08x"
            "</td><td class=\"code\">%s%s</td></tr>" % (
                shade, i.samples, share, i.address, i.offset, e(i.text),
                tail))


def _where(i):
    return "%s:%d" % (os.path.basename(i.source_file), i.source_line)


def _annotation_view(a, total):
    out = ["<p><a href=\"#profile\">&larr; profile</a></p>",
           "<h2>%s</h2>" % e(annotate._header(a, total))]
    if a.no_source:
        out.append("<p class=\"note\">no source: %s</p>" % e(a.no_source))
    hot = _hot_lines(a)
    if hot:
        out.append("<h3>Source lines, hottest first</h3>")
        out.append("<table class=\"lines\"><tr><th>samples</th><th>%</th>"
                   "<th>line</th><th>source</th></tr>")
        for n, path, line in hot:
            out.append("<tr><td class=\"n\">%d</td><td class=\"n\">%.2f</td>"
                       "<td>%s:%d</td><td class=\"code\">%s</td></tr>" % (
                           n, annotate._pct(n, a.samples),
                           e(os.path.basename(path)), line,
                           e(annotate._source_text(path, line))))
        out.append("</table>")
    out.append("<h3>Instructions</h3><p><button type=\"button\" "
               "class=\"order on\" data-order=\"samples\">hottest first"
               "</button><button type=\"button\" class=\"order\" "
               "data-order=\"address\">address order</button></p>")
    out.append("<table class=\"annotate\"><tr><th>samples</th><th>%</th>"
               "<th>address</th><th>offset</th><th>instruction</th></tr>")
    out.append("<tbody data-order=\"samples\">")
    for i in sorted(a.instructions, key=lambda i: (-i.samples, i.offset)):
        tail = "<span class=\"where\">  # %s</span>" % e(_where(i)) \
            if i.source_file else ""
        out.append(_insn_row(i, a, tail))
    out.append("</tbody><tbody data-order=\"address\" hidden>")
    last = None
    for i in a.instructions:
        where = (i.source_file, i.source_line)
        if i.source_file and where != last:
            out.append("<tr class=\"src\"><td></td><td></td><td colspan=3>"
                       "%s: %s</td></tr>" % (
                           e(_where(i)), e(annotate._source_text(*where))))
        last = where
        out.append(_insn_row(i, a))
    out.append("</tbody></table>")
    return out


# --- data for the drawn views ------------------------------------------

def flame_tree(session, anchors):
    """The call stacks as d3-flame-graph's tree, outermost caller below
    the root ("all"), each node's value its inclusive samples and its
    "fn" the anchor of its function's annotation (anchors: _anchors())
    when it has one; None when the session has no stacks."""
    root = {"name": "all", "value": 0, "children": []}
    index = {}
    for _context, frames, count in callgraph.call_stacks(session):
        root["value"] += count
        node, path = root, ()
        for f in reversed(frames):
            frame = export.call_frame(f)
            name = export.frame_name(frame)
            path += (name,)
            child = index.get(path)
            if child is None:
                child = index[path] = {"name": name, "value": 0,
                                       "children": []}
                fn = anchors.get(_function_key(
                    f.image.id if f.image else None, frame.overlay,
                    f.function))
                if fn:
                    child["fn"] = fn
                node["children"].append(child)
            child["value"] += count
            node = child
    return root if root["value"] else None


def timeline_data(trace):
    """The trace events of timeline.trace_events() as tracks for the
    canvas: {t0, t1 (microseconds from t0), names, tracks: [{group,
    name, x: [[start, dur, name index]], i: [[time, name index]]}]}."""
    proc_name, proc_sort, thread_name, thread_sort = {}, {}, {}, {}
    names, name_index, by_track = [], {}, {}
    t0, t1 = None, None
    for ev in trace["traceEvents"]:
        if ev["ph"] == "C":
            continue        # counters (stall reasons): no canvas track
        key = (ev["pid"], ev["tid"])
        if ev["ph"] == "M":
            v = ev["args"]
            {"process_name": proc_name, "process_sort_index": proc_sort,
             "thread_name": thread_name, "thread_sort_index": thread_sort}[
                ev["name"]][ev["pid"] if ev["name"].startswith("process")
                            else key] = v.get("name", v.get("sort_index"))
            continue
        end = ev["ts"] + ev.get("dur", 0)
        t0 = ev["ts"] if t0 is None else min(t0, ev["ts"])
        t1 = end if t1 is None else max(t1, end)
        if ev["name"] not in name_index:
            name_index[ev["name"]] = len(names)
            names.append(ev["name"])
        by_track.setdefault(key, []).append(ev)
    tracks = []
    order = sorted(by_track, key=lambda k: (
        proc_sort.get(k[0], k[0]), thread_sort.get(k, k[1]), k))
    for key in order:
        evs = sorted(by_track[key], key=lambda ev: ev["ts"])
        tracks.append({
            "group": proc_name.get(key[0], "process %d" % key[0]),
            "name": thread_name.get(key, "track %d" % key[1]),
            "x": [[round(ev["ts"] - t0, 3), round(ev["dur"], 3),
                   name_index[ev["name"]]] for ev in evs if ev["ph"] == "X"],
            "i": [[round(ev["ts"] - t0, 3), name_index[ev["name"]]]
                  for ev in evs if ev["ph"] != "X"]})
    return {"t0": t0 or 0, "t1": round((t1 or 0) - (t0 or 0), 3),
            "names": names, "tracks": tracks}


# --- the page ----------------------------------------------------------

def _nav():
    return ["<nav>"] + ["<a class=\"view\" href=\"#%s\">%s</a>" % (v, t)
                        for v, t in VIEWS] + ["</nav>"]


def _section(view, title, body):
    return ["<section class=\"view\" id=\"%s\" hidden>" % view,
            "<h2>%s</h2>" % e(title)] + body + ["</section>"]


def page(session, top=None):
    """The page's text."""
    libs = library_paths()
    funcs = annotate.annotate(session, top=top)
    total = annotate.session_samples(session)
    anchors = _anchors(funcs)
    flame = flame_tree(session, anchors)
    tl = timeline_data(timeline.trace_events(timeline.build(session)))
    data = {"flame": flame, "timeline": tl}
    title = "coprof report: %s" % session.name
    parts = ["<!DOCTYPE html>", "<html lang=\"en\"><head>",
             "<meta charset=\"utf-8\">",
             "<meta http-equiv=\"Content-Security-Policy\" content=\"%s\">"
             % CSP, "<title>%s</title>" % e(title),
             "<style>%s</style>" % _read_text(_here("page.css")),
             "</head><body>", "<h1>%s</h1>" % e(title)]
    parts += _nav()
    parts += _section("profile", "Profile",
                      _profile_view(profile.build(session, "none"), anchors))
    parts += _section("contexts", "By context", _groups_view(
        profile.build(session, "context"), anchors, "context"))
    parts += _section("slots", "By slot", _groups_view(
        profile.build(session, "slot"), anchors, "slot"))
    if flame is None:
        body = ["<p class=\"note\" id=\"no-stacks\">no call stacks in this "
                "session: it was recorded without them (record with coprof "
                "record --call-graph or copcontrol --call-graph)</p>"]
    else:
        body = ["<p class=\"note\">%d samples with call stacks; the "
                "outermost caller at the bottom; click a frame to zoom "
                "into it, the bottom bar to zoom out</p>" % flame["value"],
                "<p id=\"flame-fn\" class=\"note\"></p>",
                "<div id=\"flamegraph\"></div>"]
    parts += _section("flame", "Flame graph", body)
    parts += _section("timeline", "Timeline", [
        "<p class=\"note\">wheel or the buttons to zoom, drag to pan; "
        "milliseconds from the first event; slots' bindings, contexts' "
        "function slices (%s), scheduler events, host threads</p>"
        % e(timeline.FUNCTION_SLICES),
        "<p><button type=\"button\" id=\"tl-in\">zoom in</button>"
        "<button type=\"button\" id=\"tl-out\">zoom out</button>"
        "<button type=\"button\" id=\"tl-reset\">whole session</button>"
        "<span id=\"tl-info\" class=\"note\"></span></p>",
        "<div id=\"tl-box\"><canvas id=\"tl-canvas\"></canvas></div>"])
    parts.append("<p class=\"note\" id=\"annotated\">%d function%s "
                 "annotated</p>" % (len(funcs), "" if len(funcs) == 1
                                    else "s"))
    for a in funcs:
        parts += ["<section class=\"view fn\" id=\"%s\" hidden>" % anchors[
            _function_key(a.image.id, a.overlay_label, a.name)]]
        parts += _annotation_view(a, total) + ["</section>"]
    parts.append(_json_script(data))
    for name, path in libs:
        parts.append(_script(_read_text(path), name))
    parts.append(_script(_read_text(_here("page.js")), "page.js"))
    parts.append("</body></html>\n")
    return "\n".join(parts)


def write(session, path, top=None):
    """Writes the page to path (an existing directory: path/index.html)
    by the rule of paths a user names (safefile.py); the page's path."""
    if os.path.isdir(path):
        path = os.path.join(path, "index.html")
    data = page(session, top).encode("utf-8")
    with safefile.output(path, "wb") as f:
        f.write(data)
    return path
