"""The TensorFlow tier: real TensorFlow (tensorflow-cpu in .venv), started by tfboot."""

import os
import sys

import pytest

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO_DIR = os.path.dirname(TESTS_DIR)
if TESTS_DIR not in sys.path:
    sys.path.insert(0, TESTS_DIR)

VENV_BIN = os.path.join(REPO_DIR, ".venv", "bin")


@pytest.fixture(scope="session")
def tfboot():
    path = os.path.abspath(os.environ.get("TFBOOT_BINARY", os.path.join(REPO_DIR, "build", "launcher", "tfboot")))
    if not os.access(path, os.X_OK):
        pytest.fail(f"tfboot binary not found at {path}")
    return path


@pytest.fixture(scope="session")
def python_with_tensorflow():
    python = os.path.join(VENV_BIN, "python")
    if not os.path.exists(os.path.join(REPO_DIR, ".venv")) or os.system(f"{python} -c 'import tensorflow' 2>/dev/null"):
        pytest.fail("tensorflow is not installed in .venv; run scripts/setup --tensorflow")
    return python


@pytest.fixture
def task_env():
    """What every TensorFlow task needs besides tfboot's own settings: the venv on PATH, quiet logs."""
    return {"PATH": f"{VENV_BIN}:/usr/local/bin:/usr/bin:/bin", "TF_CPP_MIN_LOG_LEVEL": "2", "HOME": "/root",
            "PYTHONUNBUFFERED": "1"}
