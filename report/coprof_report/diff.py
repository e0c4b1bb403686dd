"""Two sessions compared, function by function, like `perf diff`
(`copreport diff OLD NEW`).

Each session's profile (profile.build, no separation) gives every row's
samples and its share of the session's samples.  Rows are matched by
(image, overlay, symbol, kind), an image of OLD with the image of NEW
that has the same identity (the content hash of its bytes,
ImageInfo.identity), else with the one of the same short name (a rebuilt
program: the same image, changed).  A row only one session has is 0
samples in the other.

Whether a share changed beyond sampling noise is the two-proportion z
test: with k1 of n1 samples in OLD and k2 of n2 in NEW, the pooled share
p = (k1 + k2) / (n1 + n2), z = (k2/n2 - k1/n1) / sqrt(p (1 - p) (1/n1 +
1/n2)), and its two-sided p-value erfc(|z| / sqrt 2).  A diff tests
every row at once, so a row is `significant` when it passes Holm's
step-down correction at the report's confidence (95%): the rows by
p-value, the i-th smallest of m significant while p_i <= 0.05 / (m - i),
so that two runs of the same workload flag no row in 95 diffs of 100
however many functions they have.  Rows come most significant first (by
p-value, then by the size of the change).

The change is in points of share (NEW% - OLD%).  A function made slower
also lowers the shares of the others, by its own growth times their
share; with enough samples that shift is itself significant, which is
what shares mean: compare sessions of the same work.
"""

import csv
import json
import math

from . import profile

FORMATS = ("text", "csv", "json")
CONFIDENCE = 0.95


class DiffRow:
    __slots__ = ("image", "overlay", "symbol", "kind", "old", "new", "z",
                 "p_value", "significant")

    def __init__(self, image, overlay, symbol, kind):
        self.image, self.overlay, self.symbol = image, overlay, symbol
        self.kind = kind
        self.old = self.new = 0
        self.z = 0.0
        self.p_value = 1.0
        self.significant = False


def two_proportion(k1, n1, k2, n2):
    """(z, two-sided p-value) of the change from k1/n1 to k2/n2."""
    if n1 <= 0 or n2 <= 0:
        return 0.0, 1.0
    p = (k1 + k2) / (n1 + n2)
    se = math.sqrt(p * (1.0 - p) * (1.0 / n1 + 1.0 / n2))
    if se == 0.0:
        return 0.0, 1.0
    z = (k2 / n2 - k1 / n1) / se
    return z, math.erfc(abs(z) / math.sqrt(2.0))


def holm(rows, alpha):
    """Marks the rows that pass Holm's step-down test at family-wise
    level alpha."""
    ordered = sorted(rows, key=lambda r: r.p_value)
    m = len(ordered)
    for i, r in enumerate(ordered):
        if r.p_value > alpha / (m - i):
            break
        r.significant = True


def _image_names(old_images, new_images):
    """{old ImageInfo id: the name both sessions' rows use} and the same
    for new: matched by identity, then by short name."""
    old_name, new_name = {}, {}
    by_identity = {i.identity: i for i in new_images.values()}
    unmatched_new = dict(new_images)
    for i in old_images.values():
        old_name[i.id] = i.short_name
        n = by_identity.get(i.identity)
        if n is not None and n.id in unmatched_new:
            new_name[n.id] = i.short_name
            del unmatched_new[n.id]
    for n in unmatched_new.values():     # by name: the key is the name
        new_name[n.id] = n.short_name
    return old_name, new_name


class Diff:
    """OLD against NEW: rows, the sessions' totals and names."""

    def __init__(self, old_prof, new_prof, old_name, new_name):
        self.old_name, self.new_name = old_name, new_name
        self.n_old = sum(g.total for g in old_prof.groups)
        self.n_new = sum(g.total for g in new_prof.groups)
        self.old_period = old_prof.sampling.period
        self.new_period = new_prof.sampling.period
        self.rows = []
        names = _image_names(old_prof.images, new_prof.images)
        rows = {}
        for prof, side, image_name in ((old_prof, "old", names[0]),
                                       (new_prof, "new", names[1])):
            for g in prof.groups:
                for r in g.sorted:
                    img = image_name.get(r.image.id) if r.image else None
                    key = (img, r.overlay_label, r.symbol, r.kind)
                    d = rows.get(key)
                    if d is None:
                        d = rows[key] = DiffRow(img, r.overlay_label,
                                                r.symbol, r.kind)
                    setattr(d, side, getattr(d, side) + r.samples)
        for d in rows.values():
            d.z, d.p_value = two_proportion(d.old, self.n_old, d.new,
                                            self.n_new)
        holm(rows.values(), 1.0 - CONFIDENCE)
        self.rows = sorted(rows.values(), key=lambda d: (
            not d.significant, d.p_value, -abs(self.change(d)), d.symbol))

    def share(self, k, n):
        return 100.0 * k / n if n else 0.0

    def old_percent(self, d):
        return self.share(d.old, self.n_old)

    def new_percent(self, d):
        return self.share(d.new, self.n_new)

    def change(self, d):
        return self.new_percent(d) - self.old_percent(d)


def build(old_session, new_session):
    """The Diff of two open sessions."""
    old = profile.build(old_session, "none")
    new = profile.build(new_session, "none")
    return Diff(old, new, old_session.name, new_session.name)


def _row_json(diff, d):
    return {"symbol": d.symbol, "image": d.image, "overlay": d.overlay or None,
            "kind": d.kind, "old_samples": d.old, "new_samples": d.new,
            "old_percent": round(diff.old_percent(d), 4),
            "new_percent": round(diff.new_percent(d), 4),
            "change": round(diff.change(d), 4), "z": round(d.z, 4),
            "p_value": d.p_value, "significant": d.significant}


def write_json(diff, out):
    json.dump({"format": "copreport-diff", "version": 1,
               "old": diff.old_name, "new": diff.new_name,
               "old_samples": diff.n_old, "new_samples": diff.n_new,
               "old_period_cycles": diff.old_period or None,
               "new_period_cycles": diff.new_period or None,
               "confidence": CONFIDENCE, "correction": "holm",
               "rows": [_row_json(diff, d) for d in diff.rows]},
              out, indent=1)
    out.write("\n")


CSV_FIELDS = ["symbol", "image", "overlay", "kind", "old_samples",
              "new_samples", "old_percent", "new_percent", "change", "z",
              "p_value", "significant"]


def write_csv(diff, out):
    w = csv.writer(out, lineterminator="\n")
    w.writerow(CSV_FIELDS)
    for d in diff.rows:
        j = _row_json(diff, d)
        j["significant"] = int(d.significant)
        w.writerow(["" if j[k] is None else j[k] for k in CSV_FIELDS])


def write_text(diff, out):
    out.write("copreport diff: %s (OLD, %d samples) -> %s (NEW, %d "
              "samples)\n" % (diff.old_name, diff.n_old, diff.new_name,
                              diff.n_new))
    if diff.old_period != diff.new_period:
        out.write("sampled at different periods (%s and %s cycles): shares"
                  " compare, counts do not\n" % (diff.old_period or "?",
                                                 diff.new_period or "?"))
    out.write("change: NEW%% - OLD%% in points of share; significant: "
              "beyond sampling noise\nat %d%% for the whole table (two-"
              "proportion z test, Holm's correction)\n"
              % round(100 * CONFIDENCE))
    out.write("\n%8s %8s %8s %8s %8s %9s  %-4s %-10s %-18s %s\n" % (
        "old", "new", "old%", "new%", "change", "p-value", "sig", "image",
        "overlay", "symbol"))
    for d in diff.rows:
        out.write("%8d %8d %7.2f%% %7.2f%% %+8.2f %9.2g  %-4s %-10s %-18s"
                  " %s\n" % (d.old, d.new, diff.old_percent(d),
                             diff.new_percent(d), diff.change(d), d.p_value,
                             "yes" if d.significant else "-", d.image or "-",
                             d.overlay or "-", d.symbol))
    flagged = sum(1 for d in diff.rows if d.significant)
    out.write("\n%d of %d rows changed beyond sampling noise\n"
              % (flagged, len(diff.rows)))


WRITERS = {"text": write_text, "csv": write_csv, "json": write_json}
