"""examples/pingpong through copsim and libcop, in both context models:
every answer right, and the exact counts show the ping-pong's waiting
as mailbox wait at the read of each answer, the model's arithmetic:
mailbox.host_latency less the cycles from the write to the read."""

import glob
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..",
                                "tests"))
import exact_counts  # noqa: E402

HOST_LATENCY = 600       # emulator/timing/spu.model, mailbox.host_latency
READ_MARK, WRITE_MARK = 0x7c30100f, 0x7c40100f


def runs_of(counts):
    """{pc: executions} and {word: sorted pcs} of the mailbox markers."""
    ran, marks = {}, {}
    for run in exact_counts.read_counts(counts):
        for code in run.codes:
            for insn in code.insns:
                ran[insn.pc] = ran.get(insn.pc, 0) + insn.count
                word = int.from_bytes(insn.data, "little")
                if word in (READ_MARK, WRITE_MARK) and insn.count:
                    marks.setdefault(word, set()).add(insn.pc)
    return ran, {w: sorted(p) for w, p in marks.items()}


@pytest.mark.parametrize("model", ["slot", "process"])
def test_pingpong_waits_at_the_read(copsim, build_dir, tmp_path, model):
    rounds = 50
    counts_dir = tmp_path / "counts"
    counts_dir.mkdir()
    sim = copsim("--context-model=" + model, "--exact-counts",
                 str(counts_dir))
    proc = subprocess.run([os.path.join(build_dir, "examples",
                                        "pingpong-host"), str(rounds)],
                          env=sim.env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("pingpong: 50 rounds, sum ")
    assert proc.stdout.endswith(", 0 wrong answers\n")
    (counts,) = glob.glob(str(counts_dir / "*.counts"))
    cycles = exact_counts.cycles_by_pc(counts)
    ran, marks = runs_of(counts)
    (write,) = marks[WRITE_MARK]
    first_read, answer_read = marks[READ_MARK]     # the round count first
    assert write < answer_read
    between = [pc for pc in cycles if write < pc <= answer_read and ran[pc]]
    assert all(ran[pc] == rounds for pc in between)
    gap = sum(cycles[pc]["issue"] + cycles[pc]["dependency"]
              + cycles[pc]["branch"] for pc in between) // rounds
    assert cycles[answer_read]["mailbox_wait"] == rounds * (HOST_LATENCY
                                                            - gap)
    # The round count was written before the run, stamped 0: it arrived
    # at cycle HOST_LATENCY, whatever the wall clock did.
    assert cycles[first_read]["mailbox_wait"] < HOST_LATENCY
    waits = sum(c["mailbox_wait"] for c in cycles.values())
    total = sum(sum(c.values()) for c in cycles.values())
    print("pingpong %s: %d of %d cycles mailbox wait" % (model, waits,
                                                          total))
    # Every wait is at a read: the outbound slot was always free again.
    assert waits == (cycles[first_read]["mailbox_wait"]
                     + cycles[answer_read]["mailbox_wait"])


def pingpong_cycles(copsim, build_dir, tmp_path, model, rounds):
    """cycles_by_pc of a run of pingpong-host ROUNDS in copsim's model."""
    counts_dir = tmp_path / model
    counts_dir.mkdir()
    sim = copsim("--context-model=" + model, "--exact-counts",
                 str(counts_dir))
    proc = subprocess.run([os.path.join(build_dir, "examples",
                                        "pingpong-host"), str(rounds)],
                          env=sim.env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (counts,) = glob.glob(str(counts_dir / "*.counts"))
    return exact_counts.cycles_by_pc(counts)


def test_pingpong_costs_the_same_in_both_models(copsim, build_dir,
                                                tmp_path):
    # A context costs on a slot (the stub's patched words costed as the
    # image's) what it costs in a QEMU of its own, waits included: every
    # wait is computed on the context's cycles, so one cycle of difference
    # before a read changes its wait.
    rounds = 20
    slot = pingpong_cycles(copsim, build_dir, tmp_path, "slot", rounds)
    process = pingpong_cycles(copsim, build_dir, tmp_path, "process",
                              rounds)
    assert slot == process
