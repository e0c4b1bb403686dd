"""The HTML report (`copreport html -o DIR`): the profile, the annotated
hot functions and the timeline picture in one page that a browser opens
from the file system, without a server.

DIR/index.html holds everything: its style sheet inline, the timeline
PNG (the one `copreport timeline --png` draws, plot.py) as a data: URI,
and no outside reference; DIR/timeline.png is the same picture beside
it.  The page has three parts:

  profile     the report's rows without separation (profile.build), each
              with its share, its 95% interval and a bar of its share;
              the session's state, how it was sampled, and its losses;
  hot code    the --top hottest functions annotated (annotate.py), in
              address order, source lines above the instructions they
              became, each instruction's samples shaded by its share;
  timeline    the PNG.

A small inline script marks the page once it has loaded
(body data-rendered="yes", and data-timeline="loaded" when the picture
decoded), which a headless browser's DOM dump shows.  Every text from
the session is escaped.
"""

import base64
import html
import io
import os

from . import annotate, output, profile, safefile, timeline

TOP_FUNCTIONS = 5

STYLE = """
body { font-family: sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.2em; margin-top: 1.6em; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { padding: 2px 8px; text-align: left; white-space: nowrap; }
th { border-bottom: 1px solid #888; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
.bar { display: inline-block; height: 0.8em; background: #d9534f; }
pre, td.code { font-family: monospace; }
tr.src td { color: #2a6; font-family: monospace; }
.note { color: #666; }
img { max-width: 100%; border: 1px solid #ccc; }
"""

SCRIPT = """
window.addEventListener('load', function () {
  var img = document.getElementById('timeline');
  document.body.setAttribute('data-timeline',
      img && img.complete && img.naturalWidth > 0 ? 'loaded' : 'broken');
  document.body.setAttribute('data-rendered', 'yes');
});
"""


def e(text):
    return html.escape("" if text is None else str(text), quote=True)


def _profile_section(prof, name):
    out = ["<h2>Profile</h2>",
           "<p>%s</p>" % e(output.state_line(prof))]
    out += ["<p class=\"note\">%s</p>" % e(line)
            for line in output._sampling_lines(prof)]
    out.append("<table id=\"profile\"><tr><th>samples</th><th>%</th>"
               "<th>95% interval</th><th></th><th>image</th><th>overlay"
               "</th><th>symbol</th></tr>")
    for g in prof.groups:
        for r in g.sorted:
            out.append(
                "<tr><td class=\"n\">%d</td><td class=\"n\">%.2f</td>"
                "<td class=\"n\">%.2f&ndash;%.2f</td><td><span class=\"bar\""
                " style=\"width:%dpx\"></span></td><td>%s</td><td>%s</td>"
                "<td>%s</td></tr>" % (
                    r.samples, r.percent, r.ci_low, r.ci_high,
                    max(1, int(round(2 * r.percent))),
                    e(r.image.label if r.image else "-"),
                    e(r.overlay_label or "-"), e(r.symbol)))
    out.append("</table>")
    out += ["<p>%s</p>" % e(line) for line in output._footer_lines(prof)]
    return out


def _function_section(a, total):
    out = ["<h3>%s</h3>" % e(annotate._header(a, total))]
    if a.no_source:
        out.append("<p class=\"note\">no source: %s</p>" % e(a.no_source))
    out.append("<table class=\"annotate\"><tr><th>samples</th><th>%</th>"
               "<th>address</th><th>offset</th><th>instruction</th></tr>")
    last = None
    for i in a.instructions:
        where = (i.source_file, i.source_line)
        if i.source_file and where != last:
            out.append("<tr class=\"src\"><td></td><td></td><td colspan=3>"
                       "%s:%d: %s</td></tr>" % (
                           e(os.path.basename(i.source_file)),
                           i.source_line,
                           e(annotate._source_text(*where))))
        last = where
        share = annotate._pct(i.samples, a.samples)
        shade = "" if not i.samples else \
            " style=\"background: rgba(217,83,79,%.2f)\"" % min(
                0.8, 0.1 + share / 25.0)
        out.append("<tr%s><td class=\"n\">%d</td><td class=\"n\">%.2f</td>"
                   "<td class=\"code\">%08x</td><td class=\"code\">%08x</td>"
                   "<td class=\"code\">%s</td></tr>" % (
                       shade, i.samples, share, i.address, i.offset,
                       e(i.text)))
    out.append("</table>")
    return out


def _timeline_section(png):
    if png is None:
        return ["<h2>Timeline</h2>", "<p class=\"note\">no picture "
                "(python3-matplotlib is missing)</p>"]
    data = base64.b64encode(png).decode("ascii")
    return ["<h2>Timeline</h2>",
            "<img id=\"timeline\" alt=\"slot occupancy and functions over "
            "time\" src=\"data:image/png;base64,%s\">" % data]


def write(session, out_dir, top=TOP_FUNCTIONS):
    """Writes out_dir/index.html and out_dir/timeline.png; the page's
    path."""
    dirfd = safefile.output_dir(out_dir)
    try:
        return _write_in(session, dirfd, out_dir, top)
    finally:
        os.close(dirfd)


def _write_in(session, dirfd, out_dir, top):
    prof = profile.build(session, "none")
    funcs = annotate.annotate(session, top=top)
    total = annotate.session_samples(session)
    png_path = os.path.join(out_dir, "timeline.png")
    png = None
    try:
        from . import plot
    except ImportError:
        plot = None
    if plot is not None:
        buf = io.BytesIO()
        plot.write_png(timeline.build(session), buf,
                       "slot occupancy: %s" % session.name)
        png = buf.getvalue()
        with safefile.output_in(dirfd, "timeline.png", shown=png_path) as f:
            f.write(png)
    title = "coprof report: %s" % session.name
    parts = ["<!DOCTYPE html>", "<html lang=\"en\"><head>",
             "<meta charset=\"utf-8\">", "<title>%s</title>" % e(title),
             "<style>%s</style>" % STYLE, "<script>%s</script>" % SCRIPT,
             "</head><body>", "<h1>%s</h1>" % e(title)]
    parts += _profile_section(prof, session.name)
    parts.append("<h2>Hot functions</h2>")
    parts.append("<p class=\"note\">the %d hottest functions, each "
                 "instruction's percent of its function's samples</p>"
                 % len(funcs))
    for a in funcs:
        parts += _function_section(a, total)
    parts += _timeline_section(png)
    parts.append("</body></html>\n")
    page = os.path.join(out_dir, "index.html")
    with safefile.output_in(dirfd, "index.html", shown=page) as f:
        f.write("\n".join(parts).encode("utf-8"))
    return page
