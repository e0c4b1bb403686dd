"""The stall reason of every sample (issue 29): what a capture's cycle was
spent on, and the views of copreport that break samples down by it.

The trace unit gives each capture a reason (abi/trace-regs.h, enum
trace_stall_reason; docs/trace-unit.md "Stall reasons"): the instruction
was issuing, or waiting for an operand (dependency), a branch penalty, DMA
tags (dma_wait), a mailbox (mailbox_wait) or a direct main-memory access
(memory).  coprofd stores them in four optional tables of the session
(docs/session-format.md "Stall reasons"): sample_stalls (every exact
sample by reason; per place they sum to samples.count), dma_wait_samples,
stall_timeline and stack_stalls.  A session recorded before them lacks
the tables, or (a coprofd that created but did not fill them) holds them
empty beside samples: its reasons are "not recorded" (recorded()), and a
view that was asked for them says so in one line (NOT_RECORDED).

Breakdown is one place's samples by reason; its wait share (the samples
not issuing) and each reason's share come with the Wilson interval of
intervals.py: a place's reasons are not in the timeline by place, so no
batches can be drawn for them.  A group's reason shares (profile.py) do
have a timeline (stall_timeline) and get batches when it has enough
blocks, as every row's share does.
"""

from . import intervals

# enum trace_stall_reason's names, in the order of their values
REASONS = ("issue", "dependency", "branch", "dma_wait", "mailbox_wait",
           "memory")
ISSUE = 0
DMA_WAIT = 3

NOT_RECORDED = ("stall reasons: not recorded in this session (recorded "
                "before coprof stored a reason per sample)")


def name(code):
    """The name of a reason value: "dma_wait", or "stall7" for a value
    this copreport does not know (a newer trace unit's)."""
    if code is not None and 0 <= code < len(REASONS):
        return REASONS[code]
    return "stall%s" % code


def recorded(session, table="sample_stalls"):
    """Whether the session holds its samples' reasons in table: the table
    is there, and holds rows unless the session has no exact sample."""
    if not session.has_table(table):
        return False
    if session.query("SELECT EXISTS (SELECT 1 FROM %s)" % table)[0][0]:
        return True
    return not session.query("SELECT EXISTS (SELECT 1 FROM samples)")[0][0]


class Breakdown:
    """Samples by reason value."""

    __slots__ = ("counts",)

    def __init__(self):
        self.counts = {}

    def add(self, code, count):
        self.counts[code] = self.counts.get(code, 0) + count

    def merge(self, other):
        for code, count in other.counts.items():
            self.add(code, count)

    @property
    def total(self):
        return sum(self.counts.values())

    @property
    def wait(self):
        """The samples not issuing."""
        return self.total - self.counts.get(ISSUE, 0)

    def items(self):
        """[(code, samples)] of the reasons it has, the most first."""
        return sorted(((c, n) for c, n in self.counts.items() if n),
                      key=lambda x: (-x[1], x[0]))

    def top_wait(self):
        """The waiting reason with the most samples, or None."""
        waits = [(c, n) for c, n in self.items() if c != ISSUE]
        return waits[0][0] if waits else None

    def wait_share(self):
        """(p, low, high) of the wait share, Wilson's (percents)."""
        return tuple(100 * x for x in intervals.wilson(self.wait,
                                                       self.total))

    def to_json(self):
        """{reason name: samples}: every known reason (0 too), then any
        unknown value the session holds."""
        out = {n: self.counts.get(c, 0) for c, n in enumerate(REASONS)}
        for c, n in sorted(self.counts.items()):
            if not 0 <= c < len(REASONS):
                out[name(c)] = n
        return out

    def tag(self):
        """A compact text of it, "issue 40 dma_wait 12" (most first)."""
        return " ".join("%s %d" % (name(c), n) for c, n in self.items())


def wait_columns(b):
    """The wait% and top-wait columns of a place's text row."""
    if b is None or not b.total:
        return "-", "-"
    top = b.top_wait()
    return "%.1f%%" % b.wait_share()[0], name(top) if top is not None \
        else "-"
