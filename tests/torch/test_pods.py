"""A gloo job through tfboot as PID 1 of namespace pods, as platforms start it: Kubeflow's PET_*
variables alone, a pod that comes late, a pod with a second network (docs/frameworks.md: PyTorch and JAX)."""

import json
import time

import pytest

from harness.cluster import ClusterNetwork
from harness.processes import run_command

from harness.pod_job import PodJob
from ranks import ALLREDUCE, add_interface, environments, result_lines

pytestmark = pytest.mark.root

PYTORCH_NODES = ["--framework", "pytorch", "--cluster", "worker=2", "--wait", "1m"]


def test_kubeflow_pet_variables_alone_run_the_job(tfboot, task_env, tmp_path):
    # A TrainJob "myjob" of two nodes: JobSet names its pods myjob-node-0-<k>, subdomain myjob.
    with ClusterNetwork(service="myjob", namespace="default", cluster_domain="cluster.local") as net:
        pods = [net.add_pod(f"myjob-node-0-{k}") for k in range(2)]
        for pod in pods:
            net.publish(pod)
        job = PodJob(net, tmp_path, "trainjob")
        for k, pod in enumerate(pods):
            env = {**task_env, "PET_NNODES": "2", "PET_NODE_RANK": str(k), "PET_MASTER_ADDR": "myjob-node-0-0.myjob",
                   "PET_MASTER_PORT": "29500", "PET_NPROC_PER_NODE": "1", "TFBOOT_LOG_ROOT": str(tmp_path / "logs")}
            job.start(pod, [tfboot, "python", ALLREDUCE], env)
        ended = job.finish(timeout=180)
    for k, pod in enumerate(pods):
        text = ended[pod.name].text
        assert ended[pod.name].code == 0, text[-4000:]
        assert result_lines(text) == [f"RESULT rank={k} world=2 sum=3"], text[-4000:]
        assert f"identity worker:{k} from Kubeflow (PET_NODE_RANK={k})" in text
        assert (f"pytorch: node {k} of 2, 1 process per node (PET_NPROC_PER_NODE '1'), ranks {k}..{k} of 2; "
                "master myjob-node-0-0.myjob:29500") in text
        log_dir = tmp_path / "logs" / f"worker_{k}"
        startup = json.loads((log_dir / "startup.json").read_text())
        assert startup["identity_source"] == f"Kubeflow (PET_NODE_RANK={k})"
        assert startup["framework"] == {"name": "pytorch", "node_rank": k, "nodes": 2, "nproc_per_node": 1,
                                        "world_size": 2, "master": "myjob-node-0-0.myjob:29500",
                                        "collectives_interface": ["NCCL_SOCKET_IFNAME=eth0", "GLOO_SOCKET_IFNAME=eth0"]}
        env = environments(log_dir)[k]
        assert (env["MASTER_ADDR"], env["MASTER_PORT"], env["WORLD_SIZE"], env["LOCAL_WORLD_SIZE"]) == \
            ("myjob-node-0-0.myjob", "29500", "2", "1")


def test_a_pod_that_starts_late_with_its_record_published_late_still_joins(tfboot, task_env, tmp_path):
    with ClusterNetwork(service="mnist", namespace="default", cluster_domain="cluster.local") as net:
        pods = [net.add_pod(f"mnist-worker-{i}") for i in range(2)]
        job = PodJob(net, tmp_path, "late")
        argv = [tfboot, *PYTORCH_NODES, "--log-root", str(tmp_path / "logs"), "--", "python", ALLREDUCE]
        net.publish(pods[0])
        job.start(pods[0], argv, task_env)
        job.wait_for(pods[0], "start barrier: waiting for", timeout=30)
        time.sleep(5)
        assert job.procs[pods[0].name].poll() is None, "node 0 waits for node 1"
        net.publish(pods[1])
        job.start(pods[1], argv, task_env)
        ended = job.finish(timeout=180)
    for index, pod in enumerate(pods):
        assert ended[pod.name].code == 0, ended[pod.name].text[-4000:]
        assert result_lines(ended[pod.name].text) == [f"RESULT rank={index} world=2 sum=3"]


def wrong_default_route(net, pod):
    """A second network, net1, that holds the pod's default route: only eth0 reaches the master."""
    add_interface(net, pod, "net1", f"192.168.77.{10 + list(net.pods).index(pod.name)}/24", default_route=True)
    routes = run_command(["ip", "-n", pod.netns, "route", "show", "default"]).stdout
    assert routes.split()[:3] == ["default", "dev", "net1"], routes


def test_the_collectives_use_the_interface_that_reaches_the_master_not_the_default_route(tfboot, task_env, tmp_path):
    with ClusterNetwork(service="mnist", namespace="default", cluster_domain="cluster.local") as net:
        pods = [net.add_pod(f"mnist-worker-{i}") for i in range(2)]
        for pod in pods:
            wrong_default_route(net, pod)
            net.publish(pod)
        job = PodJob(net, tmp_path, "interfaces")
        for pod in pods:
            job.start(pod, [tfboot, *PYTORCH_NODES, "--log-root", str(tmp_path / "logs"), "--", "python", ALLREDUCE],
                      task_env)
        ended = job.finish(timeout=180)
    for index, pod in enumerate(pods):
        text = ended[pod.name].text
        assert ended[pod.name].code == 0, text[-4000:]
        assert result_lines(text) == [f"RESULT rank={index} world=2 sum=3"], text[-4000:]
        assert "collectives: interface eth0 reaches the master" in text
        env = environments(tmp_path / "logs" / f"worker_{index}")[index]
        assert (env["NCCL_SOCKET_IFNAME"], env["GLOO_SOCKET_IFNAME"]) == ("eth0", "eth0")


def test_a_gloo_interface_the_pod_lacks_is_exit_2_before_the_command(tfboot, task_env, tmp_path):
    with ClusterNetwork(service="mnist", namespace="default", cluster_domain="cluster.local") as net:
        pod = net.add_pod("mnist-worker-1")   # no record published: a lookup would wait the minute
        wrong_default_route(net, pod)
        started = time.monotonic()
        proc = net.run(pod, [tfboot, *PYTORCH_NODES, "--log-root", str(tmp_path / "logs"), "--", "python", ALLREDUCE],
                       env={**task_env, "GLOO_SOCKET_IFNAME": "nosuch0"})
        out, err = proc.communicate(timeout=30)
        elapsed = time.monotonic() - started
    assert proc.returncode == 2, err
    assert elapsed < 5, "nothing waited on the network"
    errors = [line for line in err.splitlines() if " error " in line]
    assert len(errors) == 1, err
    assert errors[0].endswith("GLOO_SOCKET_IFNAME='nosuch0' names 'nosuch0', which is no interface of this host "
                              "(it has eth0, lo, net1)"), err
    assert out == "" and not (tmp_path / "logs").exists(), "the command never started"
