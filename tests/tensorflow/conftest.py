"""The TensorFlow tier: real TensorFlow started by tfboot, on two installations.

Every test runs once per venv (the fixture `tensorflow` is parametrized over them):
  pinned  .venv            requirements-tf.txt (`scripts/setup --tensorflow`)
  latest  .venv-tf-latest  the newest tensorflow-cpu at install time (`scripts/setup --tensorflow-latest`)
Test ids carry the installed version (e.g. `[tf2.16.1]`), and the run ends with one line per venv
naming TensorFlow, Keras, tf-keras and TensorBoard as installed there.
"""

import glob
import os
from dataclasses import dataclass

import pytest

from paths import REPO_DIR

VENVS = {"pinned": ".venv", "latest": ".venv-tf-latest"}
SETUP_FLAG = {"pinned": "--tensorflow", "latest": "--tensorflow-latest"}


def installed_version(venv_dir, distribution):
    """The version of a distribution installed in a venv, read from its METADATA (no import)."""
    pattern = os.path.join(venv_dir, "lib", "python*", "site-packages", f"{distribution}-*.dist-info",
                           "METADATA")
    for path in sorted(glob.glob(pattern)):
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("Version:"):
                    return line.split(":", 1)[1].strip()
    return None


@dataclass(frozen=True)
class TensorFlowVenv:
    label: str        # pinned or latest
    dir: str
    version: str | None
    keras: str | None
    tf_keras: str | None
    tensorboard: str | None

    @property
    def bin(self):
        return os.path.join(self.dir, "bin")

    @property
    def python(self):
        return os.path.join(self.bin, "python")

    @property
    def test_id(self):
        return f"tf{self.version}" if self.version else f"{self.label}-not-installed"

    def describe(self):
        return (f"{self.label} {os.path.basename(self.dir)}: tensorflow-cpu {self.version or 'absent'}, "
                f"keras {self.keras or 'absent'}, tf-keras {self.tf_keras or 'absent'}, "
                f"tensorboard {self.tensorboard or 'absent'}")


def find_venv(label):
    venv_dir = os.path.join(REPO_DIR, VENVS[label])
    return TensorFlowVenv(label=label, dir=venv_dir, version=installed_version(venv_dir, "tensorflow_cpu"),
                          keras=installed_version(venv_dir, "keras"), tf_keras=installed_version(venv_dir, "tf_keras"),
                          tensorboard=installed_version(venv_dir, "tensorboard"))


TENSORFLOW_VENVS = [find_venv(label) for label in VENVS]


def pytest_terminal_summary(terminalreporter):
    for venv in TENSORFLOW_VENVS:
        terminalreporter.write_line(f"TensorFlow tier, {venv.describe()}")


@pytest.fixture(scope="session", params=TENSORFLOW_VENVS, ids=[venv.test_id for venv in TENSORFLOW_VENVS])
def tensorflow(request):
    venv = request.param
    if venv.version is None or not os.access(venv.python, os.X_OK):
        pytest.fail(f"tensorflow-cpu is not installed in {venv.dir}; run scripts/setup {SETUP_FLAG[venv.label]}")
    return venv


@pytest.fixture
def task_env(tensorflow):
    """What every TensorFlow task needs besides tfboot's own settings: the venv on PATH, quiet logs."""
    return {"PATH": f"{tensorflow.bin}:/usr/local/bin:/usr/bin:/bin", "TF_CPP_MIN_LOG_LEVEL": "2", "HOME": "/root",
            "PYTHONUNBUFFERED": "1"}
