"""The PyTorch and JAX tier: real torch (gloo on CPU) and jax started by tfboot, torchrun beside.

The tier runs in .venv-torch (requirements-torch.txt, `scripts/setup --torch`): pytest itself runs
there, and so does every rank. Fixtures:
  torch_venv  the venv (its bin directory on the ranks' PATH); fails when torch or jax is missing
  task_env    what every rank starts with besides tfboot's settings: the venv on PATH, HOME in tmp
The run ends with one line naming torch and jax as installed.
"""

import importlib.metadata
import os
import sys

import pytest

from paths import REPO_DIR

VENV = os.path.join(REPO_DIR, ".venv-torch")


def installed(distribution):
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_line(f"PyTorch and JAX tier, {sys.prefix}: torch {installed('torch') or 'absent'}, "
                                f"jax {installed('jax') or 'absent'}, jaxlib {installed('jaxlib') or 'absent'}")


@pytest.fixture(scope="session")
def torch_venv():
    """The venv's bin directory; the ranks run its python, as pytest does."""
    bin_dir = os.path.join(VENV, "bin")
    if not (installed("torch") and installed("jax")) or not os.access(os.path.join(bin_dir, "python"), os.X_OK):
        pytest.fail(f"torch and jax must be installed in {VENV} and pytest run from it; run scripts/setup --torch")
    return bin_dir


@pytest.fixture(scope="session")
def task_env(torch_venv, tmp_path_factory):
    """The environment each pod or `tfboot local` starts with, before tfboot's own settings."""
    home = tmp_path_factory.mktemp("home")
    return {"PATH": f"{torch_venv}:/usr/local/bin:/usr/bin:/bin", "HOME": str(home)}
