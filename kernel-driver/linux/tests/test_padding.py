"""guest.py pads a register file to a power of two for ivshmem; the trace
unit (coptrace show, copsim, the hosted driver) must still open it.

This needs no kernel: it runs guest.py's padding and the trace unit's own
validator on one file, the rule of docs/trace-unit.md ("file_size").
"""

import os
import subprocess

from module_fixtures import guest_module, register_file  # noqa: F401


def test_padded_register_file_still_opens(build_dir, register_file):
    path = register_file("regs", "--slots", "3", "--fifo-depth", "1024")
    size = os.path.getsize(path)
    padded = guest_module.pad_to_power_of_two(path)
    assert padded > size and padded & (padded - 1) == 0
    assert os.path.getsize(path) == padded
    shown = subprocess.run([os.path.join(build_dir, "bin", "coptrace"),
                            "show", path], capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    assert "version 5, 3 slots" in shown.stdout
