-- session-schema.sql — the tables of a session's session.db
-- (docs/session-format.md says what every row means).
--
-- Who writes and reads: coprofd (daemon/store.c) creates the tables of
-- the writer "coprofd" in one transaction when it creates a session, and
-- sets the database's application_id and user_version below; coprof-host
-- (hostprof/store.c) creates those of the writer "coprof-host" (IF NOT
-- EXISTS) beside them at the session's end.  copreport
-- (report/coprof_report/session.py) checks and reads them, copcontrol
-- and coprof (control/session.c) read the totals of a summary.  The C
-- writers compile this file (abi/session_schema.py writes
-- build/gen/abi/session-schema.h from it) and copreport reads it at run
-- time, so a change here is the whole change of the schema.
--
-- Version rule: a new table or a new column at the end of a table keeps
-- the format version (a reader of the old format ignores it; a table
-- that older sessions lack is marked [optional]); a column that changes
-- meaning, kind or place, or a table removed, raises @format_version,
-- and copreport refuses sessions newer than the version it knows.
--
-- Annotations (comments in square brackets, read by session_schema.py):
--   -- @writer NAME             the statements that follow are NAME's
--   -- @application_id N, -- @format_version N
--   CREATE TABLE t (  -- [optional]   a session may lack t
--   column TYPE,      -- [KIND]       what a reader may rely on; copreport
--                                     refuses a session holding another
--   column TYPE,      -- [KIND -> t]  and it names a row of t by its id
--   -- @key NAME KIND               a key of the session table (NAME.*: a
--                                     family of keys); copreport refuses
--                                     an integer key holding another value
-- A column without a kind is stored but no reader checks it.  Kinds:
--   count   an integer >= 0              id    a row id (an integer >= 1)
--   uint    an integer >= 0              int   an integer
--   text    text
-- and each with "?": the same, or NULL.  A key's kind is int, uint,
-- count, positive (an integer >= 1) or text; an integer key may hold its
-- decimal text (coprof-host and copcontrol write every key as text).

-- @application_id 0x436f7072
-- @format_version 1

-- @writer coprofd

CREATE TABLE session (
    key TEXT PRIMARY KEY,
    value
);
-- The session table's keys (docs/session-format.md, "Session keys"), by
-- whoever writes them: coprofd,
-- @key format_version int
-- @key coprofd_version text
-- @key source text
-- @key created_realtime_ns int
-- @key end_state text
-- @key end_reason text
-- @key stream.version text
-- @key stream.slots uint
-- @key stream.lfsr_value uint
-- @key stream.lfsr_count uint
-- @key stream.clock_hz uint
-- @key stream.fifo_depth uint
-- @key stream.ls_size uint
-- @key stream.poll_interval_ns uint
-- @key stream.start_time_ns int
-- @key stream.stop_time_ns int
-- @key stream.stop_samples count
-- @key stream.stop_lost count
-- @key stream.bytes count
-- @key stream.samples count
-- @key stream.records count
-- @key stream.unknown_records count
-- @key stream.lost count
-- @key stream.errors count
-- @key stream.skipped_bytes count
-- @key stream.resyncs count
-- @key stream.ignored_overlays count
-- @key stream.complete uint
-- @key stream.callstacks count
-- @key stream.callstacks_unattached count
-- @key sampling.event text
-- @key sampling.fifo_full text
-- @key sampling.dither text
-- @key sampling.dither_seed text
-- @key sampling.watermark uint
-- @key timeline.bucket_ns uint
-- @key eventlog.path text
-- @key eventlog.position uint
-- @key flushes.* count
-- @key last_flush_reason text
-- @key last_flush_realtime_ns uint
-- copcontrol and coprof (the driver; the host side's end until
-- coprof-host stores its own),
-- @key driver text
-- @key host.end_state text
-- @key host.end_reason text
-- and coprof-host.
-- @key host.sched text
-- @key host.sched_threads text
-- @key host.sched_lost count
-- @key host.start_ns uint
-- @key host.stop_ns uint
-- @key host.bucket_ns positive
-- @key host.sched_events count
-- @key host.raw_events count
-- @key host.raw_dropped count
-- @key host.raw_from_ns uint
-- @key host.sched_late count
-- @key host.ring uint
-- @key host.samples text
-- @key host.event text
-- @key host.period positive
-- @key host.call_graph text
-- @key host.samples_lost count
CREATE TABLE images (
    id INTEGER PRIMARY KEY,             -- [id]
    path TEXT,                          -- [text?]
    image_offset INTEGER NOT NULL,      -- [uint]
    device INTEGER,
    inode INTEGER,
    size INTEGER,                       -- [uint?]
    hash TEXT,                          -- [text?]
    status TEXT NOT NULL,               -- [text]
    message TEXT,                       -- [text?]
    short_name TEXT,                    -- [text?]
    image_size INTEGER,                 -- [uint?]
    cache_file TEXT,                    -- [text?]
    image_hash TEXT                     -- checked by reading (older sessions lack it)
);
CREATE TABLE regions (
    image INTEGER,
    region INTEGER,
    ls_start INTEGER,
    ls_end INTEGER,
    guard_ls_addr INTEGER,
    overlays INTEGER,
    PRIMARY KEY (image, region)
);
CREATE TABLE overlays (
    image INTEGER,
    overlay INTEGER,
    region INTEGER,
    vaddr INTEGER,
    size INTEGER,
    file_offset INTEGER,
    section TEXT,
    PRIMARY KEY (image, overlay)
);
CREATE TABLE contexts (
    id INTEGER PRIMARY KEY,             -- [id]
    context_id INTEGER,                 -- [int?]
    pid INTEGER,                        -- [int?]
    tid INTEGER,                        -- [int?]
    object_id TEXT,
    image INTEGER,                      -- [id? -> images]
    first_slot INTEGER,                 -- [uint?]
    first_cycle INTEGER,
    creation_stack TEXT                 -- [text?]
);
CREATE TABLE bindings (
    id INTEGER PRIMARY KEY,             -- [id]
    slot INTEGER,                       -- [uint]
    context INTEGER,                    -- [id? -> contexts]
    start_cycle INTEGER,
    end_cycle INTEGER,
    start_time_ns INTEGER,              -- [int?]
    end_time_ns INTEGER,                -- [int?]
    end_reason TEXT                     -- [text?]
);
CREATE TABLE samples (
    context INTEGER,                    -- [id? -> contexts]
    image INTEGER,                      -- [id? -> images]
    file_offset INTEGER,                -- [uint]
    overlay INTEGER,                    -- [uint?]
    count INTEGER NOT NULL,             -- [count]
    PRIMARY KEY (context, image, file_offset)
) WITHOUT ROWID;
CREATE TABLE unmapped_samples (
    context INTEGER,                    -- [id? -> contexts]
    image INTEGER,                      -- [id? -> images]
    ls_addr INTEGER,                    -- [uint?]
    reason TEXT,                        -- [text?]
    guard INTEGER,                      -- [int?]
    count INTEGER NOT NULL,             -- [count]
    PRIMARY KEY (context, image, ls_addr, reason, guard)
) WITHOUT ROWID;
CREATE TABLE ambiguous_samples (
    context INTEGER,                    -- [id? -> contexts]
    image INTEGER,                      -- [id? -> images]
    ls_addr INTEGER,                    -- [uint]
    region INTEGER,                     -- [uint?]
    guard_from INTEGER,                 -- [int?]
    guard_to INTEGER,                   -- [int?]
    count INTEGER NOT NULL,             -- [count]
    PRIMARY KEY (context, image, ls_addr, region, guard_from, guard_to)
) WITHOUT ROWID;
CREATE TABLE ambiguous_candidates (
    image INTEGER,                      -- [id? -> images]
    ls_addr INTEGER,                    -- [uint]
    overlay INTEGER,                    -- [uint?]
    file_offset INTEGER,                -- [uint]
    PRIMARY KEY (image, ls_addr, overlay)
) WITHOUT ROWID;
CREATE TABLE sample_timeline (
    context INTEGER,                    -- [id? -> contexts]
    image INTEGER,                      -- [id? -> images]
    bucket_start_ns INTEGER,            -- [int]
    function_offset INTEGER,            -- [uint]
    count INTEGER NOT NULL,             -- [count]
    PRIMARY KEY (context, image, bucket_start_ns, function_offset)
) WITHOUT ROWID;
CREATE TABLE orphan_samples (
    slot INTEGER,                       -- [uint]
    ls_addr INTEGER,                    -- [uint?]
    count INTEGER NOT NULL,             -- [count]
    PRIMARY KEY (slot, ls_addr)
) WITHOUT ROWID;
CREATE TABLE pending_samples (
    context INTEGER,                    -- [id? -> contexts]
    image INTEGER,                      -- [id? -> images]
    ls_addr INTEGER,                    -- [uint]
    region INTEGER,                     -- [uint?]
    guard INTEGER,                      -- [int?]
    count INTEGER                       -- [count]
);
CREATE TABLE overlay_events (
    id INTEGER PRIMARY KEY,
    context INTEGER,
    slot INTEGER,
    region INTEGER,
    guard INTEGER,
    cycle INTEGER,
    initial INTEGER,
    placed INTEGER
);
CREATE TABLE lost_events (
    id INTEGER PRIMARY KEY,
    slot INTEGER,                       -- [int?]
    context INTEGER,                    -- [id? -> contexts]
    cause INTEGER,                      -- [int?]
    cause_name TEXT,                    -- [text?]
    count INTEGER,                      -- [count]
    cycle INTEGER
);
CREATE TABLE stalls (                   -- [optional]
    id INTEGER PRIMARY KEY,
    slot INTEGER,                       -- [uint?]
    context INTEGER,                    -- [id? -> contexts]
    count INTEGER,                      -- [count]
    ns INTEGER,                         -- [count]
    cycle INTEGER
);
CREATE TABLE stacks (                   -- [optional]
    context INTEGER,                    -- [id? -> contexts]
    image INTEGER,                      -- [id? -> images]
    frames TEXT,                        -- [text]
    count INTEGER NOT NULL,             -- [count]
    PRIMARY KEY (context, frames)
) WITHOUT ROWID;
CREATE TABLE sample_stalls (            -- [optional]
    context INTEGER,                    -- [id? -> contexts]
    image INTEGER,                      -- [id? -> images]
    file_offset INTEGER,                -- [uint]
    stall INTEGER,                      -- [uint]
    count INTEGER NOT NULL,             -- [count]
    PRIMARY KEY (context, image, file_offset, stall)
) WITHOUT ROWID;
CREATE TABLE dma_wait_samples (         -- [optional]
    context INTEGER,                    -- [id? -> contexts]
    image INTEGER,                      -- [id? -> images]
    file_offset INTEGER,                -- [uint]
    tag INTEGER,                        -- [uint]
    issuer_ls_addr INTEGER,             -- [uint]
    issuer_offset INTEGER,              -- [uint?]
    count INTEGER NOT NULL,             -- [count]
    PRIMARY KEY (context, image, file_offset, tag, issuer_ls_addr)
) WITHOUT ROWID;
CREATE TABLE stall_timeline (           -- [optional]
    context INTEGER,                    -- [id? -> contexts]
    image INTEGER,                      -- [id? -> images]
    bucket_start_ns INTEGER,            -- [int]
    stall INTEGER,                      -- [uint]
    count INTEGER NOT NULL,             -- [count]
    PRIMARY KEY (context, image, bucket_start_ns, stall)
) WITHOUT ROWID;
CREATE TABLE stack_stalls (             -- [optional]
    context INTEGER,                    -- [id? -> contexts]
    image INTEGER,                      -- [id? -> images]
    frames TEXT,                        -- [text]
    stall INTEGER,                      -- [uint]
    count INTEGER NOT NULL,             -- [count]
    PRIMARY KEY (context, frames, stall)
) WITHOUT ROWID;
CREATE TABLE time_sync (
    slot INTEGER,
    cycle INTEGER,
    time_ns INTEGER
);
CREATE INDEX time_sync_slot ON time_sync (slot, cycle);
CREATE TABLE decode_errors (
    kind TEXT PRIMARY KEY,              -- [text]
    count INTEGER                       -- [count]
);
CREATE TABLE error_log (
    id INTEGER PRIMARY KEY,
    stream_offset INTEGER,
    kind TEXT,
    code INTEGER
);
CREATE TABLE sched_events (
    order_num INTEGER,                  -- [int]
    ring INTEGER,
    seq INTEGER,
    time_ns INTEGER,                    -- [int]
    level INTEGER,
    pid INTEGER,
    tid INTEGER,
    cpu INTEGER,
    kind TEXT,                          -- [text?]
    slot INTEGER,                       -- [int?]
    context_id INTEGER,                 -- [int?]
    cycle INTEGER,                      -- [int?]
    host_pid INTEGER,                   -- [int?]
    host_tid INTEGER,                   -- [int?]
    stack TEXT,
    message TEXT,                       -- [text?]
    PRIMARY KEY (order_num, ring, seq)
);
CREATE INDEX sched_events_context ON sched_events (context_id, kind);
CREATE VIEW stall_by_context AS SELECT context, SUM(count) AS count,
    SUM(ns) AS ns FROM stalls GROUP BY context;
CREATE VIEW lost_by_cause AS SELECT cause, cause_name,
    SUM(count) AS count FROM lost_events GROUP BY cause;
CREATE VIEW context_totals AS SELECT c.id AS context,
    (SELECT IFNULL(SUM(count), 0) FROM samples s WHERE s.context = c.id)
    AS exact,
    (SELECT IFNULL(SUM(count), 0) FROM unmapped_samples s
    WHERE s.context = c.id) AS unmapped,
    (SELECT IFNULL(SUM(count), 0) FROM ambiguous_samples s
    WHERE s.context = c.id) AS ambiguous,
    (SELECT IFNULL(SUM(count), 0) FROM pending_samples s
    WHERE s.context = c.id) AS pending,
    (SELECT IFNULL(SUM(count), 0) FROM lost_events l
    WHERE l.context = c.id) AS lost FROM contexts c;

-- @writer coprof-host
-- The host side: a session recorded without coprof-host lacks it.

CREATE TABLE IF NOT EXISTS host_threads (   -- [optional]
    tid INTEGER PRIMARY KEY,            -- [int]
    pid INTEGER NOT NULL,               -- [int]
    comm TEXT,                          -- [text?]
    role TEXT NOT NULL                  -- [text]
);
CREATE TABLE IF NOT EXISTS host_sched_events (  -- [optional]
    id INTEGER PRIMARY KEY,             -- [id]
    time_ns INTEGER NOT NULL,           -- [int]
    cpu INTEGER NOT NULL,               -- [int]
    kind TEXT NOT NULL,                 -- [text]
    tid INTEGER NOT NULL,               -- [int]
    comm TEXT,                          -- [text?]
    prev_state TEXT,                    -- [text?]
    other_tid INTEGER,                  -- [int?]
    other_comm TEXT,
    orig_cpu INTEGER,
    target_cpu INTEGER,                 -- [int?]
    clone_flags INTEGER
);
CREATE INDEX IF NOT EXISTS host_sched_events_tid
    ON host_sched_events (tid, time_ns);
CREATE TABLE IF NOT EXISTS host_thread_times (  -- [optional]
    tid INTEGER NOT NULL,               -- [int]
    bucket_start_ns INTEGER NOT NULL,   -- [int]
    running_ns INTEGER NOT NULL,        -- [int]
    runnable_ns INTEGER NOT NULL,       -- [int]
    blocked_ns INTEGER NOT NULL,        -- [int]
    PRIMARY KEY (tid, bucket_start_ns)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS host_context_times ( -- [optional]
    context_id INTEGER PRIMARY KEY,     -- [int]
    tid INTEGER NOT NULL,               -- [int]
    start_ns INTEGER NOT NULL,          -- [int]
    end_ns INTEGER NOT NULL,            -- [int]
    running_ns INTEGER NOT NULL,        -- [int]
    runnable_ns INTEGER NOT NULL,       -- [int]
    blocked_ns INTEGER NOT NULL         -- [int]
);
CREATE TABLE IF NOT EXISTS host_locations (     -- [optional]
    id INTEGER PRIMARY KEY,             -- [id]
    file TEXT NOT NULL,                 -- [text]
    build_id TEXT,                      -- [text?]
    symbol TEXT,                        -- [text?]
    symbol_offset INTEGER NOT NULL,     -- [int]
    inlined TEXT,                       -- [text?]
    source TEXT,                        -- [text?]
    line INTEGER                        -- [int?]
);
CREATE TABLE IF NOT EXISTS host_samples (       -- [optional]
    id INTEGER PRIMARY KEY,             -- [id]
    time_ns INTEGER NOT NULL,           -- [int]
    pid INTEGER NOT NULL,               -- [int]
    tid INTEGER NOT NULL,               -- [int]
    cpu INTEGER NOT NULL,               -- [int]
    ip INTEGER NOT NULL,
    location INTEGER NOT NULL,          -- [id -> host_locations]
    callchain TEXT                      -- [text?]
);
