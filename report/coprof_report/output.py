"""A Profile (profile.py) written as text, CSV or JSON.

text  opreport-like: a title, the session's state (complete, live or
      incomplete and why) and how it was sampled (period, dither, FIFO-full
      policy, time stalled), per group a header (for contexts: who, what
      image, created where), rows "samples  %  95% interval  image  overlay
      symbol" by samples and a footer of its losses (a warning when they
      may bias its shares), then a footer of totals, losses and errors.
csv   one line per row, with a header line; the group in the first column,
      the group's losses in the last ones.
json  one object: the session, the separation, sampling, groups (with
      their losses), rows (flat, each naming its group), totals,
      lost_by_cause, warnings, decode_errors, complete, end_state and
      end_reason (the whole session), sides (each side's end_state and
      end_reason: coprocessor, and host or null), image_warnings.

The host side (--side, host.py) is apart in each: text, a section of its
own after the coprocessor's groups, before the footer ("host samples
..."), and each context's header a line of its host thread's times; csv and json, rows
whose side is "host" and group "host", naming their ELF file; json also
a "host" object (how it was recorded, its totals).
"""

import csv
import json
import os

from . import dma, host as host_mod, profile, stalls

FORMATS = ("text", "csv", "json")
BYS = ("symbol", "reason")      # --by: rows per symbol, or symbol and reason


def _causes_json(causes):
    return [{"cause": c, "cause_name": n, "count": k} for c, n, k in causes]


def _losses_json(losses, samples):
    """The loss fields of a group, context or image."""
    return {"lost": losses.total,
            "lost_by_cause": _causes_json(losses.causes()),
            "lost_percent": round(losses.percent(samples), 4),
            "biased": losses.biased(samples)}


def _image_json(img):
    if img is None:
        return None
    d = {"id": img.id, "short_name": img.short_name, "path": img.path,
         "image_offset": img.image_offset, "status": img.status,
         "samples": img.samples}
    d.update(_losses_json(img.losses, img.samples))
    return d


def _host_times_json(c):
    t = c.host_times
    if t is None:
        return None
    return {"tid": c.tid, "running_ns": t["running"],
            "runnable_ns": t["runnable"], "blocked_ns": t["blocked"],
            "life_ns": t["life_ns"]}


def _context_json(c):
    if c is None:
        return None
    d = {"id": c.id, "context_id": c.context_id, "pid": c.pid,
         "tid": c.tid, "image": c.image.short_name if c.image else None,
         "slots": sorted(c.slots), "created_at": c.created_at,
         "created_source": c.created_source,
         "creation_stack": c.creation_stack, "samples": c.samples,
         "session": c.session_name}
    d.update(_losses_json(c.losses, c.samples))
    d.update({"stall_count": c.stall_count, "stall_ns": c.stall_ns,
              "host_thread": _host_times_json(c)})
    return d


def _group_json(g):
    d = {"label": g.label, "total": g.total, "hidden_rows": g.hidden,
         "context": _context_json(g.context),
         "interval_method": g.interval_method,
         "interval_blocks": sum(b.n_blocks for b in g.blocks),
         "interval_contexts": len(g.blocks),
         "binomial_contexts": g.binomial_contexts}
    d.update(_losses_json(g.losses, g.total))
    d.update(_group_stall_json(g))
    return d


def _group_stall_json(g):
    """A group's samples by reason and each reason's share of them."""
    if g.stall is None:
        return {"stall": None, "stall_shares": None,
                "stall_interval_method": None}
    return {"stall": g.stall.to_json(),
            "stall_shares": {stalls.name(c): {
                "percent": 100 * p, "ci_low": 100 * lo, "ci_high": 100 * hi}
                for c, (p, lo, hi) in sorted(g.stall_shares.items())},
            "stall_interval_method": g.stall_method}


def _sampling_json(smp):
    return {"period_cycles": smp.period or None,
            "event": smp.event,
            "fifo_full": smp.fifo_full,
            "dither": smp.dither,
            "dither_seed": int(smp.dither_seed)
            if smp.dither_seed is not None and
            str(smp.dither_seed).isdigit() else None,
            "run_ns": smp.run_ns or None,
            "stalls_recorded": smp.stalls_recorded,
            "stall_count": smp.stall_count,
            "stall_ns": smp.stall_ns,
            "stall_by_slot": [{"slot": slot, "count": c, "ns": ns,
                               "percent": smp.share(ns)}
                              for slot, (c, ns) in
                              sorted(smp.by_slot.items())]}


def _row_json(group, r):
    return {
        "side": "cop",
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
        "interval_method": r.interval_method,
        "stall": r.stall.to_json() if r.stall is not None else None,
    }


def _reason_row_json(group, r):
    """A row of --by=reason: _row_json's, and its reason."""
    d = _row_json(group, r)
    d["stall_reason"] = stalls.name(r.stall_reason) \
        if r.stall_reason is not None else None
    return d


def _rows(prof, g):
    """A group's rows as the report shows them: by symbol, or (--by=
    reason) by symbol and reason."""
    if prof.by == "reason":
        return profile.reason_rows(g)
    return g.sorted


def _row_dict(prof, g, r):
    if prof.by == "reason":
        return _reason_row_json(g, r)
    return _row_json(g, r)


def _host_row_json(r):
    return {
        "side": "host",
        "group": "host",
        "kind": "host",
        "symbol": r.name,
        "file": r.file,
        "path": r.file,
        "build_id": r.build_id,
        "inlined": dict(sorted(r.inlined.items(), key=lambda x: -x[1])),
        "samples": r.samples,
        "percent": r.percent,
        "ci_low": r.ci_low,
        "ci_high": r.ci_high,
    }


def _host_json(prof):
    h = prof.host
    if h is None:           # several sessions: no host side summed
        return None
    return {"sched": h.sched_state, "samples_state": h.samples_state,
            "event": h.event, "period": h.period,
            "call_graph": h.call_graph, "samples": prof.host_total,
            "samples_lost": h.samples_lost, "hidden_rows": prof.host_hidden,
            "sched_events": h.sched_events, "sched_lost": h.sched_lost,
            "threads": [{"tid": t["tid"], "pid": t["pid"],
                         "comm": t["comm"], "role": t["role"]}
                        for t in h.threads.values()]}


def _causes_text(causes):
    """"fifo-overflow 15, cause 7 4"."""
    return ", ".join("%s %d" % (name or "cause %s" % cause, n)
                     for cause, name, n in causes)


def _ms(ns):
    return "%.2f ms" % (ns / 1e6)


def _stall_text(smp, count, ns, slots=1):
    """"stalled 1.20 ms in 3 stalls (0.10% of its run time)"; slots 0:
    without the share."""
    share = smp.share(ns, slots)
    return "stalled %s in %d stall%s%s" % (
        _ms(ns), count, "" if count == 1 else "s",
        " (%.2f%% of %s run time)" % (share, "its" if slots == 1 else
                                      "the %d slots'" % slots)
        if share is not None else "")


def _sampling_lines(prof):
    """The header's account of how the session was sampled."""
    smp = prof.sampling
    period = (smp.period_text() if smp.period
              else "capture period not recorded")
    if smp.dither == "on":
        dither = "dither on (seed %s)" % smp.dither_seed
    elif smp.dither == "off":
        dither = "dither off (a fixed period: code in step with it aliases)"
    else:
        dither = "dither not recorded"
    if smp.fifo_full is None:
        fifo = "FIFO full: policy not recorded"
    else:
        fifo = "FIFO full: %s" % smp.fifo_full
    if smp.stall_count or smp.fifo_full == "stall":
        fifo += ", " + _stall_text(smp, smp.stall_count, smp.stall_ns,
                                   max(smp.slots, 1))
    lines = ["sampling: %s, %s, %s" % (period, dither, fifo)]
    stalled = [(slot, c, ns) for slot, (c, ns) in sorted(smp.by_slot.items())
               if ns]
    if stalled:
        lines.append("stalled by slot: " + ", ".join(
            "slot %s %s%s" % (slot, _ms(ns), " (%.2f%%)" % smp.share(ns)
                              if smp.share(ns) is not None else "")
            for slot, c, ns in stalled))
    lines.append(_clock_line(prof))
    return lines


def _clock_line(prof):
    """What a sample's stall reason says under the session's clock, or
    that the session has none."""
    if not prof.stalls_recorded:
        return stalls.NOT_RECORDED
    event = prof.sampling.event
    if event == "SPU_INSTRUCTIONS":
        return ("clock: SPU_INSTRUCTIONS (retired instructions): every "
                "sample is an issuing instruction, none waits")
    return ("clock: %s (modelled cycles): a waiting coprocessor is sampled "
            "at the waiting instruction; wait%% = samples not issuing "
            "(%s), top wait = the most of them"
            % (event or "SPU_CYCLES", ", ".join(stalls.REASONS[1:])))


def _group_reason_line(g):
    """"  by reason: issue 70.00% (65.1-74.5), dma_wait ..." of a group
    with reasons."""
    if g.stall is None or not g.stall.total:
        return None
    return "  by reason (%s intervals): %s" % (
        "batch" if g.stall_method == "batches" else "Wilson"
        if g.stall_method == "wilson" else g.stall_method,
        ", ".join("%s %.2f%% (%.2f-%.2f)" % (
            stalls.name(c), 100 * g.stall_shares[c][0],
            100 * g.stall_shares[c][1], 100 * g.stall_shares[c][2])
            for c, _ in g.stall.items()))


def _group_footer_lines(prof, g):
    """A group's losses (and a context's stall time) under its rows."""
    lines = []
    if prof.separation != "none":       # else the session footer says it
        lost = g.losses.total
        s = "  lost %d capture%s" % (lost, "" if lost == 1 else "s")
        if lost:
            s += " (%s): %.2f%% of the group's %d captures" % (
                _causes_text(g.losses.causes()),
                g.losses.percent(g.total), g.total + lost)
        c = g.context
        if c is not None and (c.stall_count or
                              prof.sampling.fifo_full == "stall"):
            s += "; " + _stall_text(prof.sampling, c.stall_count, c.stall_ns,
                                    0)      # no share: a context's run
                                            # time is not the session's
        if g.biased:
            s += "; more than %g%%: its shares may be biased" \
                % profile.LOSS_WARN_PERCENT
        lines.append(s)
    return lines


def _footer_lines(prof):
    t = prof.totals
    lines = ["WARNING: " + w for w in prof.loss_warnings()]
    amb = "ambiguous %d" % (t["ambiguous"] + t["pending"])
    if t["pending"]:
        amb += " (%d pending: the daemon did not finish)" % t["pending"]
    lines.append("total %d samples: exact %d, %s, unmapped %d, orphan %d"
                 % (t["samples"], t["exact"], amb, t["unmapped"],
                    t["orphan"]))
    if prof.lost:
        lines.append("lost %d samples%s (%s)"
                     % (t["lost"], " of the whole session" if prof.filtered
                        else "", _causes_text(prof.lost)))
        lossy = [i for i in prof.images.values() if i.losses.total]
        if lossy:
            lines.append("lost by image: " + ", ".join(
                "%s %d (%.2f%% of its captures)"
                % (i.short_name, i.losses.total,
                   i.losses.percent(i.samples)) for i in lossy))
    else:
        lines.append("lost 0 samples")
    if t.get("outside"):
        lines.append("outside any context %d capture%s (PCs outside the "
                     "local store: QEMU's reset code), not samples and not "
                     "lost" % (t["outside"], "" if t["outside"] == 1
                               else "s"))
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


def _host_thread_line(prof, c):
    """A context's host thread during its life, or None."""
    if prof.host is None:
        return None
    if c.host_times is not None:
        return "  host thread %s (%s): %s" % (
            c.tid, prof.host.thread_name(c.tid),
            host_mod.times_text(c.host_times))
    if prof.host.sched_recorded:
        return "  host thread %s: no scheduler event in the context's " \
               "life" % c.tid
    return None


def _host_lines(prof):
    """The host side's section: its rows, apart from the coprocessor's."""
    h = prof.host
    lines = ["", "host samples: %d%s" % (
        prof.host_total, ", %d rows under the threshold" % prof.host_hidden
        if prof.host_hidden else "")]
    if not h.samples_recorded:
        lines[1] = "host samples: %s" % (
            h.samples_state if h.samples_state not in (None, "off")
            else "not recorded (coprof record --host-event=cpu-clock)")
        return lines
    if prof.host_rows:
        lines.append("%9s %8s %13s  %-34s %s" % (
            "samples", "%", "95% interval", "file", "symbol"))
    for r in prof.host_rows:
        lines.append("%9d %7.2f%% %13s  %-34s %s" % (
            r.samples, r.percent, "%.2f-%.2f" % (r.ci_low, r.ci_high),
            os.path.basename(r.file), r.name))
    lines.append("total %d host samples, lost %d" % (prof.host_total,
                                                     h.samples_lost))
    return lines


def write_text(prof, out, session_dir):
    out.write("copreport: %s, separated by %s%s%s\n" % (
        session_dir, prof.separation,
        ", rows under %g%% hidden" % prof.threshold if prof.threshold
        else "", ", %s side" % prof.side if prof.side != "all" else ""))
    out.write(state_line(prof) + "\n")
    if prof.side != "host":
        for line in _sampling_lines(prof):
            out.write(line + "\n")
    if prof.host is not None and prof.host.sched_state is not None:
        out.write(prof.host.describe() + "\n")
    if prof.side != "host":
        _write_cop_text(prof, out)
    if prof.side != "cop" and prof.host is not None and \
            prof.host.sched_state is not None:
        for line in _host_lines(prof):
            out.write(line + "\n")
    if prof.side != "host":
        for line in dma.text_lines(prof.dma_waits):
            out.write(line + "\n")
        out.write("\n")
        for line in _footer_lines(prof):
            out.write(line + "\n")
    else:
        out.write(state_line(prof) + "\n")


def _row_text(prof, r):
    """A row's line: samples, percent, interval, (with reasons) its wait
    share and top wait, or with --by=reason its reason, image, overlay,
    symbol."""
    s = "%9d %7.2f%% %13s  " % (r.samples, r.percent,
                                "%.2f-%.2f" % (r.ci_low, r.ci_high))
    if prof.by == "reason":
        s += "%-12s " % (stalls.name(r.stall_reason)
                         if r.stall_reason is not None else "-")
    elif prof.stalls_recorded:
        s += "%6s %-12s " % stalls.wait_columns(r.stall)
    return s + "%-34s %-18s %s\n" % (r.image.label if r.image else "-",
                                      r.overlay_label or "-", r.symbol)


def _write_cop_text(prof, out):
    out.write(INTERVAL_TEXT)
    cols = "%9s %8s %13s  " % ("samples", "%", "95% interval")
    if prof.by == "reason":
        cols += "%-12s " % "reason"
    elif prof.stalls_recorded:
        cols += "%6s %-12s " % ("wait%", "top wait")
    hdr = cols + "%-34s %-18s %s\n" % ("image", "overlay", "symbol")
    for g in prof.groups:
        out.write("\n")
        if g.context is not None:
            out.write(g.context.header() + "\n")
            line = _host_thread_line(prof, g.context)
            if line:
                out.write(line + "\n")
        elif prof.separation != "none":
            out.write("%s\n" % g.label)
        out.write("  %d samples%s, %s\n" % (
            g.total, ", %d rows under the threshold" % g.hidden
            if g.hidden else "", _interval_text(g)))
        line = _group_reason_line(g)
        if line:
            out.write(line + "\n")
        if g.sorted:
            out.write(hdr)
        for r in _rows(prof, g):
            out.write(_row_text(prof, r))
        for line in _group_footer_lines(prof, g):
            out.write(line + "\n")


CSV_FIELDS = ["group", "samples", "percent", "ci_low", "ci_high", "image",
              "path", "image_offset", "overlay", "symbol", "kind",
              "file_offset_lo", "file_offset_hi", "group_lost",
              "group_lost_by_cause", "group_biased", "side", "stall",
              "stall_reason"]


def write_csv(prof, out, session_dir):
    w = csv.writer(out, lineterminator="\n")
    w.writerow(CSV_FIELDS)
    for g in prof.groups:
        for r in _rows(prof, g):
            d = _row_dict(prof, g, r)
            d["stall"] = ";".join("%s=%d" % (stalls.name(c), n)
                                  for c, n in r.stall.items()) \
                if r.stall is not None else None
            d["percent"] = "%.4f" % r.percent
            d["ci_low"] = "%.4f" % r.ci_low
            d["ci_high"] = "%.4f" % r.ci_high
            d["group_lost"] = g.losses.total
            d["group_lost_by_cause"] = ";".join(
                "%s=%d" % (name or "cause %s" % cause, n)
                for cause, name, n in g.losses.causes())
            d["group_biased"] = int(g.biased)
            w.writerow(["" if d.get(k) is None else d[k] for k in CSV_FIELDS])
    for r in prof.host_rows:
        d = _host_row_json(r)
        d["percent"] = "%.4f" % r.percent
        d["ci_low"] = "%.4f" % r.ci_low
        d["ci_high"] = "%.4f" % r.ci_high
        w.writerow(["" if d.get(k) is None else d[k] for k in CSV_FIELDS])


INTERVAL_TEXT = (
    "percent: of the group's samples, with its 95% interval: from blocks "
    "of\nconsecutive samples of the group's contexts where it has enough "
    "(batches),\nelse the 95% Wilson score interval of independent samples "
    "(sampling noise only:\nnot aliasing, not losses)\n")


def _interval_text(g):
    """The interval a group's rows have, for its header."""
    if g.interval_method == "batches":
        text = "intervals from %d blocks of %d context%s" % (
            sum(b.n_blocks for b in g.blocks), len(g.blocks),
            "" if len(g.blocks) == 1 else "s")
        if g.binomial_contexts:
            text += " (%d more of one block, binomial)" % g.binomial_contexts
        return text
    return "Wilson intervals"


def interval_method(groups):
    """The report's interval_method, of its groups' JSON: "batches" or
    "wilson" when every group with samples has it, "mixed" else, "wilson"
    without groups."""
    methods = {g["interval_method"] for g in groups if g["total"]}
    return methods.pop() if len(methods) == 1 else \
        ("mixed" if methods else "wilson")


def to_json(prof, session_dir):
    groups, rows = [], []
    for g in prof.groups:       # ContextGroups: one chunk at a time
        groups.append(_group_json(g))
        rows += [_row_dict(prof, g, r) for r in _rows(prof, g)]
    return {
        "format": "copreport-profile",
        "version": 1,
        "session": session_dir,
        "separation": prof.separation,
        "threshold": prof.threshold,
        "sampling": _sampling_json(prof.sampling),
        "groups": groups,
        "interval_method": interval_method(groups),
        "side": prof.side,
        "by": prof.by,
        "stall_reasons": prof.stalls_recorded,
        "rows": rows + [_host_row_json(r) for r in prof.host_rows],
        "dma_waits": dma.to_json(prof.dma_waits),
        "host": _host_json(prof),
        "totals": dict(prof.totals),
        "lost_by_cause": _causes_json(prof.lost),
        "warnings": prof.loss_warnings(),
        "decode_errors": [{"kind": k, "count": n}
                          for k, n in prof.decode_errors],
        "complete": prof.complete,
        "end_state": prof.end_state,
        "end_reason": prof.end_reason,
        "sides": prof.sides,
        "image_warnings": list(prof.warnings),
        "contexts": [_context_json(c) for c in prof.contexts.values()],
        "images": [_image_json(i) for i in prof.images.values()],
    }


def write_json(prof, out, session_dir):
    json.dump(to_json(prof, session_dir), out, indent=1)
    out.write("\n")


WRITERS = {"text": write_text, "csv": write_csv, "json": write_json}
