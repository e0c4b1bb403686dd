"""coprof_report: the reports of a coprof session (copreport).

Modules, one job each:

    session   open a session directory read-only and query it
    symbols   ELF symbolizer by file offset (coprocessor images, host programs)
    profile   per-symbol rows, separations, percentages and 95% intervals
    output    the profile as text, CSV or JSON
    timeline  Chrome trace event JSON (Perfetto) of slots, contexts, scheduler
    plot      the timeline as a PNG (matplotlib, Agg)
    annotate  per-instruction and per-source-line samples (objdump, DWARF)
    export    stacks(), and pprof, callgrind, folded and speedscope files
    diff      two sessions compared, with significance tests
    archive   a session and its images in one file, and reading one
    html      the report as one HTML page
    cli       copreport's command line
"""

__all__ = ["session", "symbols", "profile", "output", "timeline", "plot",
           "annotate", "export", "diff", "archive", "html", "cli"]
