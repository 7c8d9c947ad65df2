"""Shared setup for the container and example tests: import paths and the tfboot binary."""

import os
import sys

import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))
TESTS_DIR = os.path.dirname(_HERE)
REPO_DIR = os.path.dirname(TESTS_DIR)
for path in (TESTS_DIR, _HERE):   # harness.cluster, and this directory's helper modules
    if path not in sys.path:
        sys.path.insert(0, path)


@pytest.fixture(scope="session")
def tfboot():
    """Path of the tfboot binary under test (TFBOOT_BINARY, else build/launcher/tfboot)."""
    path = os.path.abspath(os.environ.get("TFBOOT_BINARY", os.path.join(REPO_DIR, "build", "launcher", "tfboot")))
    if not os.access(path, os.X_OK):
        pytest.fail(f"tfboot binary not found at {path}; build it first (scripts/build release)")
    return path


@pytest.fixture(scope="session")
def root():
    if os.geteuid() != 0:
        pytest.fail("tests/container build network namespaces and container images: run them as root")
