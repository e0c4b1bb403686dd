"""--call-graph on the slot model (issue 30): a context's shadow stack
travels with it from slot to slot.

Three contexts of tests/cop/calltree (recursion, tail calls, overlays
calling each other through the manager, a longjmp) run time-sliced on two
slots, every instruction captured (SPU_INSTRUCTIONS:1, undithered, FIFOs that
stall: nothing is lost), once on the slot model and once on the process
model.  Since every instruction of every context is a sample with its
stack, each context's stacks table (frames -> count) is the exact
histogram of its execution, however the contexts were interleaved: the
slot model's must equal the process model's, context for context, in the
fast and the reference mode.  The slot model's run must have handed a
context back in the middle of a call (its last stack deeper than main's)
and resumed it on the other slot."""

import collections
import os
import sqlite3
import subprocess

import pytest

CONTEXTS = 3
MAIN_DEPTH = 2          # main's frames: __cop_start, _start


def record(build_dir, test_bin, tmp_path, model, mode):
    """The stream of CONTEXTS calltree contexts on 2 slots under copsim's
    one-command mode, and its event log.  copsim binds nothing until all
    of them wait and both slots' emulators have booted
    (COPSIM_TEST_GATHER), so one always waits and the running ones are
    preempted on both slots."""
    out = tmp_path / ("%s-%s" % (model, mode))
    out.mkdir()
    image = os.path.join(build_dir, "tests", "cop", "calltree.elf")
    proc = subprocess.run(
        [os.path.join(build_dir, "bin", "copsim"), "--event=SPU_INSTRUCTIONS:1",
         "--stream-out", str(out / "stream"), "--no-dither",
         "--fifo-depth", "1024", "--clock", "100kHz", "--slots", "2",
         "--slice", "5000", "--call-graph=64", "--event-log",
         str(out / "log"), "--context-model=" + model]
        + (["--reference"] if mode == "reference" else []) +
        ["--", test_bin("cop-host"), "--contexts", str(CONTEXTS),
         "--threads", str(CONTEXTS), image, "4"],
        capture_output=True, text=True, timeout=600,
        env=dict(os.environ, COPSIM_TEST_GATHER=str(CONTEXTS)))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("status=0 reason=exit") == CONTEXTS, proc.stdout
    return out


def stacks(build_dir, out):
    """Per context: its stacks table as a dict frames -> count."""
    session = out / "session"
    replay = subprocess.run(
        [os.path.join(build_dir, "bin", "coprofd"), "--replay",
         str(out / "stream"), "--session-dir", str(session)],
        capture_output=True, text=True, timeout=300)
    assert replay.returncode == 0, replay.stderr
    db = sqlite3.connect("file:%s?mode=ro" % (session / "session.db"),
                         uri=True)
    lost = db.execute("SELECT value FROM session WHERE key = 'stream.lost'"
                      ).fetchone()[0]
    assert int(lost) == CONTEXTS * 6    # the reset code, outside the LS
    per_context = collections.defaultdict(dict)
    for context, frames, count in db.execute(
            "SELECT context, frames, count FROM stacks"):
        per_context[context][frames] = count
    db.close()
    assert len(per_context) == CONTEXTS
    return sorted(sorted(t.items()) for t in per_context.values())


def migrations_mid_call(build_dir, out):
    """Depths of the last stack of each context handed back on one slot
    and bound next on the other (from `copstream dump --no-samples`)."""
    dump = subprocess.run(
        [os.path.join(build_dir, "bin", "copstream"), "dump", "--no-samples",
         str(out / "stream")], capture_output=True, text=True, check=True,
        timeout=300).stdout
    bound, last_depth, handed_back, depths = {}, {}, {}, []
    for line in dump.splitlines():
        words = line.split()
        fields = dict(w.split("=", 1) for w in words[2:] if "=" in w)
        slot = fields.get("slot")
        if words[1] == "context":
            context = fields["context_id"]
            if context in handed_back and handed_back[context][0] != slot:
                depths.append(handed_back[context][1])
            handed_back.pop(context, None)
            bound[slot] = context
        elif words[1] == "callstack":
            last_depth[slot] = int(fields["depth"])
        elif words[1] == "release" and bound.get(slot) is not None:
            handed_back[bound[slot]] = (slot, last_depth.get(slot, 0))
            bound[slot] = None
    return depths


@pytest.mark.parametrize("mode", ["fast", "reference"])
def test_slot_stacks_equal_the_process_model(build_dir, test_bin, tmp_path,
                                             mode):
    slot = record(build_dir, test_bin, tmp_path, "slot", mode)
    process = record(build_dir, test_bin, tmp_path, "process", mode)
    slot_stacks = stacks(build_dir, slot)
    assert slot_stacks == stacks(build_dir, process)
    # The three contexts ran the same program: the same histogram.
    assert slot_stacks[0] == slot_stacks[1] == slot_stacks[2]
    assert max(len(f.split()) for f, _ in slot_stacks[0]) > 8
    # Handed back inside a callee of main, resumed on the other slot.
    depths = migrations_mid_call(build_dir, slot)
    assert depths and max(depths) > MAIN_DEPTH, depths
