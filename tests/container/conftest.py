"""The container tier's own fixture: `root`, which fails the test when not run as root."""

import os

import pytest


@pytest.fixture(scope="session")
def root():
    if os.geteuid() != 0:
        pytest.fail("tests/container build network namespaces and container images: run them as root")
