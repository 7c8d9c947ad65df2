"""The Slurm tier: tfboot started by a real Slurm (Debian's slurm-wlm and munge, `scripts/setup --slurm`).

`slurm` (one per session): the cluster of slurm_cluster.py, started once for every test that asks
for it and torn down at the end, failing or not. `tensorflow_venv`: the TensorFlow tier's pinned
venv (`.venv`, `scripts/setup --tensorflow`), for the real training run.
"""

import glob
import os

import pytest

from harness.cluster import ClusterNetwork
from paths import REPO_DIR

from slurm_cluster import SlurmCluster, slurm_installed


@pytest.fixture(scope="session")
def slurm():
    if not slurm_installed():
        pytest.fail("slurm-wlm and munge are not installed; run scripts/setup --slurm")
    with ClusterNetwork(service="", namespace="default") as net:
        yield SlurmCluster(net).start()


@pytest.fixture(scope="session")
def tensorflow_venv():
    venv = os.path.join(REPO_DIR, ".venv")
    if not glob.glob(os.path.join(venv, "lib", "python*", "site-packages", "tensorflow_cpu-*.dist-info")):
        pytest.fail(f"tensorflow-cpu is not installed in {venv}; run scripts/setup --tensorflow")
    return venv
