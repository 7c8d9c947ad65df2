"""What every pytest tier shares: the tfboot binary under test and the `root` marker.

Tests marked `root` need root: network, PID or mount namespaces, chroot, other users. A test file
marks its own, with `pytestmark = pytest.mark.root`, `@pytest.mark.root` on a test, or `marks=` on
a parameter. Run as another user, pytest skips them; `-m "not root"` leaves them out (scripts/check
does). The marker is registered in pytest.ini.
"""

import os
import subprocess

import pytest

from paths import REPO_DIR


def pytest_collection_modifyitems(config, items):
    if os.geteuid() == 0:
        return
    for item in items:
        if item.get_closest_marker("root"):
            item.add_marker(pytest.mark.skip(reason="needs root"))


@pytest.fixture(scope="session")
def tfboot():
    """Path of the tfboot binary under test (TFBOOT_BINARY, else build/launcher/tfboot)."""
    path = os.path.abspath(os.environ.get("TFBOOT_BINARY", os.path.join(REPO_DIR, "build", "launcher", "tfboot")))
    if not os.access(path, os.X_OK):
        pytest.fail(f"tfboot binary not found at {path}; build it first (scripts/build release) or set TFBOOT_BINARY")
    return path


@pytest.fixture
def run_tfboot(tfboot, tmp_path):
    """Runs tfboot with exactly the given environment (plus PATH) and returns CompletedProcess."""

    def run(args, env=None, timeout=30, **kwargs):
        full_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        full_env.update(env or {})
        return subprocess.run([tfboot, *args], env=full_env, capture_output=True, text=True,
                              timeout=timeout, cwd=kwargs.pop("cwd", tmp_path), **kwargs)

    return run
