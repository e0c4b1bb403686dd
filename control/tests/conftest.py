"""The cenv fixture of control/'s tests (control_support.Env): its own
COPSIM_SOCKET and XDG_DATA_HOME, whatever it started stopped at the end."""

import pytest

from control_support import Env


@pytest.fixture
def cenv(coprof_bin, build_dir, tmp_path):
    env = Env(coprof_bin, build_dir, tmp_path)
    yield env
    env.cleanup()
