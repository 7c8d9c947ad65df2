"""Shared setup for the integration tests: the harness import path, the tfboot binary, and the
`root` marker.

Tests marked `root` need root: network, PID or mount namespaces, chroot, other users. Run as
another user, pytest skips them; `-m "not root"` leaves them out (scripts/check does). A test
file marks its own with `@pytest.mark.root` or `pytestmark = pytest.mark.root`; ROOT_MODULES and
ROOT_TESTS below mark those of the files that do not (yet).
"""

import os
import subprocess
import sys

import pytest

_TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO_DIR = os.path.dirname(_TESTS_DIR)
if _TESTS_DIR not in sys.path:
    sys.path.insert(0, _TESTS_DIR)


# Every test of these files builds namespace pods (tests/harness) or mounts.
ROOT_MODULES = {"test_compose.py", "test_dns.py", "test_harness.py", "test_hostile.py", "test_resolver.py",
                "test_supervision.py"}
# Single tests elsewhere: tfboot as PID 1 under `unshare --pid`, bind mounts, chroot, setpriv.
ROOT_TESTS = {
    "test_init.py": {"test_sigterm_to_pid1_ends_command_with_143", "test_orphans_are_reaped_and_no_zombie_is_left"},
    "test_init_dumb_init.py": {"test_pid1_exits_128_plus_n_when_the_command_kills_itself"},
    "test_reliability.py": {"test_read_only_log_root_is_exit_4", "test_no_descriptor_leaks_after_a_dns_wait",
                            "test_fork_failure_under_rlimit_nproc_is_a_clear_error"},
    "test_static.py": {"test_runs_in_empty_root"},
}
# init_support.Supervised's "pid1" mode runs tfboot under `unshare --pid`.
ROOT_MODES = {"pid1"}


def _needs_root(item):
    module = item.path.name
    if module in ROOT_MODULES or item.originalname in ROOT_TESTS.get(module, ()):
        return True
    callspec = getattr(item, "callspec", None)
    return callspec is not None and callspec.params.get("mode") in ROOT_MODES


def pytest_configure(config):
    config.addinivalue_line("markers", "root: needs root (namespaces, mounts, chroot, other users)")


def pytest_collection_modifyitems(config, items):
    as_root = os.geteuid() == 0
    for item in items:
        if _needs_root(item):
            item.add_marker(pytest.mark.root)
        if not as_root and item.get_closest_marker("root"):
            item.add_marker(pytest.mark.skip(reason="needs root"))


def _binary_path():
    path = os.environ.get("TFBOOT_BINARY", os.path.join(REPO_DIR, "build", "launcher", "tfboot"))
    return os.path.abspath(path)


@pytest.fixture(scope="session")
def tfboot():
    """Path of the tfboot binary under test (TFBOOT_BINARY, else build/launcher/tfboot)."""
    path = _binary_path()
    if not os.access(path, os.X_OK):
        pytest.fail(f"tfboot binary not found at {path}; build it first (scripts/test does)")
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
