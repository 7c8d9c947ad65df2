"""JAX through tfboot as PID 1 of two pods: jax.distributed.initialize from tfboot's variables and a
cross-process sum (docs/frameworks.md: PyTorch and JAX, "JAX")."""

import pytest

from harness.cluster import ClusterNetwork

from harness.pod_job import PodJob
from ranks import JAX_SUM, result_lines


@pytest.mark.root
def test_two_pods_initialize_jax_and_sum_across_processes(tfboot, task_env, tmp_path):
    with ClusterNetwork(service="mnist", namespace="default", cluster_domain="cluster.local") as net:
        pods = [net.add_pod(f"mnist-worker-{i}") for i in range(2)]
        for pod in pods:
            net.publish(pod)
        job = PodJob(net, tmp_path, "jax")
        for pod in pods:
            job.start(pod, [tfboot, "--framework", "jax", "--cluster", "worker=2", "--wait", "1m",
                            "--log-root", str(tmp_path / "logs"), "--", "python", JAX_SUM], task_env)
        ended = job.finish(timeout=180)
    for index, pod in enumerate(pods):
        text = ended[pod.name].text
        assert ended[pod.name].code == 0, text[-4000:]
        # process_count() is 2 and the gathered 1 + 2 reached both processes.
        assert result_lines(text) == [f"RESULT rank={index} world=2 sum=3"], text[-4000:]
