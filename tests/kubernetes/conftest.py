"""The Kubernetes tier's cluster: one real single-node cluster for the whole session
(tests/harness/kubernetes.py), the tier's images imported into it, and namespace default
emptied after each test."""

import os
import shutil
import tempfile

import pytest

from harness import kubernetes
from harness.processes import HarnessError
from images import build_images, PAUSE_IMAGE


@pytest.fixture(scope="session")
def cluster(tfboot):
    reason = kubernetes.missing_reason()
    if reason:
        pytest.fail(reason, pytrace=False)
    if os.geteuid() != 0:
        pytest.skip("needs root")
    kubernetes.cleanup_stale()
    workdir = tempfile.mkdtemp(prefix="tfboot-test-images.")
    try:
        images = build_images(tfboot, workdir)
        cluster = kubernetes.KubernetesCluster(images=images, sandbox_image=PAUSE_IMAGE)
        try:
            cluster.up()
            print(f"\ncluster up in {cluster.up_seconds:.1f}s")
            yield cluster
        finally:
            problems = cluster.down()
            print(f"\ncluster down in {cluster.down_seconds:.1f}s")
            left = kubernetes.leftovers(cluster)
            if problems or left:
                raise HarnessError(f"the cluster's teardown: problems {problems}; left behind {left}")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def k8s(cluster):
    """The cluster, with namespace default emptied of what the test applied when it ends."""
    yield cluster
    cluster.reset()
