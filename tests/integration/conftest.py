"""Shared setup for the integration tests: the harness import path and the tfboot binary."""

import os
import subprocess
import sys

import pytest

_TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO_DIR = os.path.dirname(_TESTS_DIR)
if _TESTS_DIR not in sys.path:
    sys.path.insert(0, _TESTS_DIR)


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
