"""coprofd's call stacks (stream 1.4): each CALLSTACK record after a sample
becomes a row of the stacks table, keyed by the context and the chain of
file offsets, the sample's first, then each frame's call site resolved in
the overlay it was made in, whatever is loaded there now."""

from coprofd_support import Writer, identity, open_session

REGION_1 = 0x114        # overlays.elf: in overlays 1, 2 and 3 of region 1
RESIDENT = 0x010


def replay(coprofd, writer, tmp_path):
    stream = tmp_path / "stream.bin"
    stream.write_bytes(writer.bytes())
    session = tmp_path / "session"
    result = coprofd("--replay", stream, "--session-dir", session)
    assert result.returncode == 0, result.stderr
    return open_session(session)


def run_with_stacks(test_image):
    image = test_image("overlays.elf")
    w = Writer()
    w.start()
    w.image(image)
    w.context(0, 1, identity(image))
    w.overlay(0, 0, 1)                  # region 1 holds overlay 1
    w.overlay(0, 1, 4)
    w.overlay(0, 2, 0)
    for _ in range(3):
        w.sample(0, RESIDENT)
        w.callstack(0, [(REGION_1 + 4, 2), (RESIDENT + 8, 0)])
    w.sample(0, REGION_1)
    w.callstack(0, [(RESIDENT + 4, 0)], depth=7)
    w.sample(0, RESIDENT)               # an older writer's sample: no stack
    w.time(0, 100, 2000)
    return image, w


def test_frames_resolve_in_their_own_overlay(coprofd, resolver, test_image,
                                            tmp_path):
    image, w = run_with_stacks(test_image)
    w.stop()
    db = replay(coprofd, w, tmp_path)
    rows = dict(db.execute("SELECT frames, count FROM stacks"
                           " WHERE context = 1 AND image = 1"))

    def place(address, guards):
        kind, offset, overlay = resolver.resolve(image, guards, address)
        assert kind == "mapped"
        return "0x%x" % offset + ("@%d" % overlay if overlay else "")

    leaf = place(RESIDENT, [1, 4, 0])
    in_two = place(REGION_1, [2, 4, 0])           # the call site, overlay 2
    assert in_two.endswith("@2")
    expected = {
        " ".join([leaf, in_two, place(RESIDENT + 4, [1, 4, 0])]): 3,
        " ".join([place(REGION_1, [1, 4, 0]), place(RESIDENT, [1, 4, 0]),
                  "..."]): 1,
    }
    assert rows == expected
    keys = dict(db.execute("SELECT key, value FROM session"
                           " WHERE key LIKE 'stream.callstacks%'"))
    assert keys == {"stream.callstacks": 4,
                    "stream.callstacks_unattached": 0}


def test_stacks_by_stall_reason_add_up_to_the_stacks(coprofd, test_image,
                                                   tmp_path):
    """stack_stalls: each stack by its sample's stall reason (the slot's
    REASONS before it, CALLSTACKs between them; ISSUE again after a
    CONTEXT), summing to `stacks`."""
    image = test_image("plain.elf")
    w = Writer()
    w.start()
    w.image(image)
    w.context(0, 1, identity(image))
    w.transfer(0, tag=4, issuer=RESIDENT)
    w.reasons(0, "001113")
    for _ in range(6):
        w.sample(0, RESIDENT)
        w.callstack(0, [(RESIDENT + 8, 0)])
    w.context(0, 1, identity(image))    # back to ISSUE
    w.sample(0, RESIDENT)
    w.callstack(0, [(RESIDENT + 8, 0)])
    w.stop()
    db = replay(coprofd, w, tmp_path)
    by_stall = dict(db.execute("SELECT stall, count FROM stack_stalls"))
    assert by_stall == {0: 3, 1: 3, 3: 1}
    assert db.execute("SELECT frames FROM stack_stalls GROUP BY frames"
                      ).fetchall() == db.execute(
                          "SELECT frames FROM stacks").fetchall()
    assert db.execute("SELECT SUM(count) FROM stacks").fetchone()[0] == 7


def test_stacks_add_up_across_flushes_and_strays_are_counted(
        coprofd, test_image, tmp_path):
    image, w = run_with_stacks(test_image)
    w.callstack(0, [])                  # follows a TIME: no sample
    w.release(0)
    w.sample(1, RESIDENT)               # an orphan sample: no stack kept
    w.callstack(1, [(RESIDENT + 4, 0)])
    w.stop()
    db = replay(coprofd, w, tmp_path)
    assert db.execute("SELECT SUM(count) FROM stacks").fetchone()[0] == 4
    keys = dict(db.execute("SELECT key, value FROM session"
                           " WHERE key LIKE 'stream.callstacks%'"))
    assert keys == {"stream.callstacks": 4,
                    "stream.callstacks_unattached": 1}


def test_a_stream_without_stacks_leaves_the_table_empty(coprofd, test_image,
                                                        tmp_path):
    image = test_image("plain.elf")
    w = Writer()
    w.start()
    w.image(image)
    w.context(0, 1, identity(image))
    w.sample(0, RESIDENT, 5)
    w.stop()
    db = replay(coprofd, w, tmp_path)
    assert db.execute("SELECT COUNT(*) FROM stacks").fetchone()[0] == 0
    assert db.execute("SELECT value FROM session"
                      " WHERE key = 'stream.callstacks'").fetchone()[0] == 0


def test_stacks_of_a_missing_image_keep_their_addresses(coprofd, tmp_path):
    ident = dict(device=1, inode=2, size=3, hash=4)
    w = Writer()
    w.start()
    w.image(str(tmp_path / "gone.elf"), ident)
    w.context(0, 1, ident)
    w.sample(0, RESIDENT)
    w.callstack(0, [(REGION_1 + 4, 2)])
    w.stop()
    db = replay(coprofd, w, tmp_path)
    assert db.execute("SELECT frames, count FROM stacks").fetchall() == \
        [("?0x%x ?0x%x" % (RESIDENT, REGION_1), 1)]
