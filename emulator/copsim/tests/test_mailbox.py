"""The mailboxes (cop.h's cop_mbox_*, libcop's cop_mailbox_*,
docs/coprocessor-abi.md "Mailboxes") through copsim and libcop, in the
slot model and the process model, with mbox-host playing the host of the
mbox-probe program (emulator/copsim/tests/):

- a ping-pong whose host answers every message: the exact counts'
  mailbox-wait cycles at the read equal the model's arithmetic
  (mailbox.host_latency less the cycles from the write to the read);
- messages arrive in order and the depths hold: a fifth inbound message
  is refused, a second outbound write waits until the host has read the
  first (and is charged the model's wait), a read of an empty outbound
  mailbox times out;
- a mailbox block the host corrupted is a clean fault of the context;
- through copsim --stream-out and coprofd, each (function, stall reason)
  share of the ping-pong's session samples is within 3.5 sigma of its
  exact share, the mailbox waits at the read among them, on an idle and
  a busy machine.
"""

import glob
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..",
                                "tests"))
import exact_counts  # noqa: E402
import stall_shares  # noqa: E402

HOST_LATENCY = 600       # emulator/timing/spu.model, mailbox.host_latency
READ_MARK, WRITE_MARK, COUNT_MARK = 0x7c30100f, 0x7c40100f, 0x7c50100f
MODELS = ["slot", "process"]


def mbox_host(copsim, test_bin, tmp_path, model, *args):
    counts = tmp_path / "counts"
    counts.mkdir()
    sim = copsim("--context-model=" + model, "--exact-counts", str(counts))
    proc = subprocess.run([test_bin("mbox-host")] + list(args), env=sim.env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    files = glob.glob(str(counts / "*.counts"))
    return proc.stdout.splitlines(), files[0] if files else None


def markers(counts):
    """{word: [pc, ...]} of the mailbox markers that ran."""
    found = {}
    for run in exact_counts.read_counts(counts):
        for code in run.codes:
            for insn in code.insns:
                word = int.from_bytes(insn.data, "little")
                if word in (READ_MARK, WRITE_MARK, COUNT_MARK) and insn.count:
                    found.setdefault(word, set()).add(insn.pc)
    return {word: sorted(pcs) for word, pcs in found.items()}


def executions(counts):
    """{pc: times executed} over every run and code."""
    out = {}
    for run in exact_counts.read_counts(counts):
        for code in run.codes:
            for insn in code.insns:
                out[insn.pc] = out.get(insn.pc, 0) + insn.count
    return out


def static_cycles(cycles, pc):
    c = cycles[pc]
    return c["issue"] + c["dependency"] + c["branch"]


@pytest.mark.parametrize("model", MODELS)
def test_pingpong_wait_is_the_models_arithmetic(copsim, test_bin, tmp_path,
                                                model):
    rounds = 20
    lines, counts = mbox_host(copsim, test_bin, tmp_path, model,
                              "pingpong", str(rounds))
    assert lines == ["pingpong rounds=20 bad=0",
                     "status=0 reason=exit fault="], lines
    cycles = exact_counts.cycles_by_pc(counts)
    mark = markers(counts)
    (write,), (read,) = mark[WRITE_MARK], mark[READ_MARK]
    assert write < read
    # Each answer is stamped with the write of the message it answers,
    # so it arrives HOST_LATENCY cycles after that write: the read waits
    # HOST_LATENCY less the cycles of the instructions after the write
    # marker, up to the read marker (each ran once a round).
    ran = executions(counts)
    between = [pc for pc in cycles if write < pc <= read and ran[pc]]
    assert all(ran[pc] == rounds for pc in between)
    gap = sum(static_cycles(cycles, pc) for pc in between) // rounds
    assert 0 < gap < HOST_LATENCY
    assert cycles[read]["mailbox_wait"] == rounds * (HOST_LATENCY - gap)
    # The outbound slot was free again long before each next write.
    assert sum(c["mailbox_wait"] for c in cycles.values()) \
        == cycles[read]["mailbox_wait"]


@pytest.mark.parametrize("model", MODELS)
def test_messages_arrive_in_order_and_depths_hold(copsim, test_bin, tmp_path,
                                                  model):
    lines, counts = mbox_host(copsim, test_bin, tmp_path, model, "order")
    assert lines[0].startswith("host: fifth: context ")
    assert lines[0].endswith(": the inbound mailbox is full (4 messages "
                             "unread)")
    assert lines[1].endswith(": no message in the outbound mailbox within "
                             "0 ms")
    assert lines[2:] == ["count=4 got=10,20,30,40 after=0",
                         "status=0 reason=exit fault="]
    # Every message had arrived (HOST_LATENCY after cycle 0) before the
    # reads: none of them waited.
    cycles = exact_counts.cycles_by_pc(counts)
    assert sum(c["mailbox_wait"] for c in cycles.values()) == 0


@pytest.mark.parametrize("model", MODELS)
def test_a_write_to_a_full_outbound_mailbox_waits(copsim, test_bin, tmp_path,
                                                  model):
    lines, counts = mbox_host(copsim, test_bin, tmp_path, model, "full")
    assert lines == ["wrote both", "host: got 111 222",
                     "status=0 reason=exit fault="], lines
    cycles = exact_counts.cycles_by_pc(counts)
    first, second = sorted(markers(counts)[WRITE_MARK])
    # The slot is free HOST_LATENCY cycles after the first write.
    ran = executions(counts)
    between = [pc for pc in cycles if first < pc <= second and ran[pc]]
    gap = sum(static_cycles(cycles, pc) for pc in between)
    assert cycles[first]["mailbox_wait"] == 0
    assert cycles[second]["mailbox_wait"] == HOST_LATENCY - gap


@pytest.mark.parametrize("model", MODELS)
def test_a_corrupt_mailbox_is_a_clean_fault(copsim, test_bin, tmp_path,
                                            model):
    lines, _ = mbox_host(copsim, test_bin, tmp_path, model, "corrupt")
    assert lines[-1].startswith("status=")
    assert " reason=fault " in lines[-1]
    assert ("mailbox: the inbound mailbox says 100 messages written and 0 "
            "read (it holds 4)") in lines[-1]


@pytest.mark.parametrize("busy", [False, True], ids=["idle", "busy"])
def test_session_mailbox_wait_shares(build_dir, test_bin, tmp_path, busy):
    with stall_shares.burners(2 if busy else 0):
        db, counts = stall_shares.record(
            build_dir, [test_bin("mbox-host"), "pingpong", "200"], tmp_path)
    got, want = stall_shares.compare(db, counts, test_bin("mbox-host"))
    mailbox = exact_counts.REASONS.index("mailbox_wait")
    # Each round's read waits the host's latency less the cycles from the
    # write to it (test_pingpong_wait_is_the_models_arithmetic).
    assert 0.9 * 200 * HOST_LATENCY < want[("main", mailbox)] \
        <= 200 * HOST_LATENCY
    assert got[("main", mailbox)] > sum(got.values()) / 2
    image_offset = db.execute("SELECT image_offset FROM images").fetchone()[0]
    offsets = {a.pc: a.file_offset for a in exact_counts.attribute(
        counts[0], test_bin("mbox-host"), image_offset)}
    [read] = markers(counts[0])[READ_MARK]
    assert db.execute("SELECT file_offset FROM sample_stalls WHERE stall = ?",
                      (mailbox,)).fetchall() == [(offsets[read]
                                                  - image_offset,)]
