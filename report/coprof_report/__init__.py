"""coprof_report: the reports of a coprof session (copreport).

Modules, one job each:

    session   open a session directory read-only and query it
    symbols   ELF symbolizer by file offset (coprocessor images, host programs)
    profile   per-symbol rows, separations, percentages and 95% intervals
    output    the profile as text, CSV or JSON
    timeline  Chrome trace event JSON (Perfetto) of slots, contexts, scheduler
    plot      the timeline as a PNG (matplotlib, Agg)
    cli       copreport's command line
"""

__all__ = ["session", "symbols", "profile", "output", "timeline", "plot", "cli"]
