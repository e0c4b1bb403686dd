"""Fixtures shared by every pytest test in the tree.

`make check` sets COPROF_BUILD to the build folder; run by hand, the tests
fall back to ./build beside this file.
"""

import os
import sqlite3

import pytest

SOURCE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="session")
def build_dir():
    return os.environ.get("COPROF_BUILD", os.path.join(SOURCE, "build"))


@pytest.fixture(scope="session")
def coprof_bin(build_dir):
    """coprof_bin(NAME) is the path of build/bin/NAME; the test fails if absent."""
    def path(name):
        p = os.path.join(build_dir, "bin", name)
        if not os.access(p, os.X_OK):
            pytest.fail("%s is not built: run make" % p)
        return p
    return path


@pytest.fixture(scope="session")
def only_a_reset_capture():
    """only_a_reset_capture(DIR) makes the session in DIR lose nothing but
    one capture outside the local store (QEMU's reset code, cause
    outside-ls), which every summary counts apart, as no loss."""
    def plant(session_dir):
        db = sqlite3.connect(os.path.join(str(session_dir), "session.db"))
        try:
            db.execute("DELETE FROM lost_events")
            db.execute("INSERT INTO lost_events (slot, context, cause, "
                       "cause_name, count, cycle) VALUES (0, NULL, 4, "
                       "'outside-ls', 1, 3)")
            db.commit()
        finally:
            db.close()
    return plant
