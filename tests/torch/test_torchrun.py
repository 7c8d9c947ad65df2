"""tfboot as PID 1 of two pods runs a gloo job, and torchrun in the same pods is the reference.

The same script runs under tfboot (--nproc-per-node 2) and under torchrun with a static rendezvous
(--nnodes 2 --nproc-per-node 2 --node-rank K --master-addr <pod 0> --master-port 29500); every
rank's environment is compared key by key. DIFFERENCES is the one list of what may differ, each
with its reason (docs/frameworks.md: PyTorch and JAX); any other difference fails the test and is named.
"""

import re

import pytest

from harness.cluster import ClusterNetwork

from harness.pod_job import PodJob
from ranks import ALLREDUCE, environments, result_lines

ABSENT = None
TFBOOT_ARGS = ["--framework", "pytorch", "--nproc-per-node", "2", "--cluster", "worker=2", "--wait", "1m"]


def torchrun_error_file(rank):
    # torch's multiprocessing API: <tmp>/torchelastic_<random>/<run id>_<random>/attempt_<restart>/<local rank>/
    # error.json
    return re.compile(rf"/tmp/torchelastic_[^/]+/none_[^/]+/attempt_0/{rank % 2}/error\.json")


# variable: (tfboot's value, torchrun's value, why). A value is a string, ABSENT, a compiled
# pattern, or a function of (rank, tfboot's log root) giving one of those.
DIFFERENCES = {
    "TORCHELASTIC_USE_AGENT_STORE": (
        "False", "True",
        "torchrun's agent on node 0 hosts the TCPStore at MASTER_PORT; tfboot is no Python process, so rank 0 "
        "hosts it in init_process_group, as without a launcher"),
    "TORCHELASTIC_ERROR_FILE": (
        lambda rank, logs: f"{logs}/worker_{rank // 2}/error_rank{rank}.json",
        lambda rank, _: torchrun_error_file(rank),
        "tfboot keeps a failed rank's error record in the task's log dir, where it reads it for the failure line; "
        "torchrun uses a temporary dir of its own"),
    "NCCL_SOCKET_IFNAME": (
        "eth0", ABSENT, "tfboot names the interface whose route reaches the master; torchrun leaves it to NCCL"),
    "GLOO_SOCKET_IFNAME": (
        "eth0", ABSENT, "tfboot names the interface whose route reaches the master; torchrun leaves it to gloo"),
    "PYTHONUNBUFFERED": (
        "1", ABSENT, "tfboot prefixes each rank's lines with [rank R] and wants them whole and in time"),
    "TFBOOT_LOG_DIR": (
        lambda rank, logs: f"{logs}/worker_{rank // 2}", ABSENT, "tfboot's own: the task's log dir"),
    "TFBOOT_TASK_TYPE": ("worker", ABSENT, "tfboot's own: the task this node is"),
    "TFBOOT_TASK_INDEX": (lambda rank, _: str(rank // 2), ABSENT, "tfboot's own: the task this node is"),
    "TFBOOT_RESTART_COUNT": ("0", ABSENT, "tfboot's own: the job's restarts in place, as TORCHELASTIC_RESTART_COUNT"),
}

# What torchrun's agent gives every worker (torch's local_elastic_agent): the comparison must cover them.
TORCHRUN_WORKER_VARIABLES = {
    "LOCAL_RANK", "RANK", "GROUP_RANK", "ROLE_RANK", "ROLE_NAME", "LOCAL_WORLD_SIZE", "WORLD_SIZE", "GROUP_WORLD_SIZE",
    "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS",
    "TORCHELASTIC_RUN_ID", "TORCHELASTIC_USE_AGENT_STORE", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "OMP_NUM_THREADS",
    "TORCHELASTIC_ERROR_FILE", "TORCHELASTIC_SIGNALS_TO_HANDLE",
}


def matches(expected, value):
    if isinstance(expected, re.Pattern):
        return value is not None and expected.fullmatch(value) is not None
    return value == expected


@pytest.fixture(scope="module")
def pods():
    with ClusterNetwork(service="mnist", namespace="default", cluster_domain="cluster.local") as net:
        pods = [net.add_pod(f"mnist-worker-{i}") for i in range(2)]
        for pod in pods:
            net.publish(pod)
        yield net, pods


@pytest.fixture(scope="module")
def tfboot_job(pods, tfboot, task_env, tmp_path_factory):
    """The job under tfboot, once for both tests: {pod name: Ended}, {rank: environment}, the log root."""
    net, nodes = pods
    directory = tmp_path_factory.mktemp("tfboot")
    job = PodJob(net, directory, "tfboot")
    for pod in nodes:
        job.start(pod, [tfboot, *TFBOOT_ARGS, "--log-root", str(directory / "logs"), "--", "python", ALLREDUCE],
                  task_env)
    ended = job.finish(timeout=240)
    found = {}
    for node in range(2):
        found.update(environments(directory / "logs" / f"worker_{node}"))
    return ended, found, directory / "logs"


@pytest.mark.root
def test_two_pods_of_two_processes_all_reduce_on_every_rank(tfboot_job):
    ended, _, _ = tfboot_job
    for node in range(2):
        pod = ended[f"mnist-worker-{node}"]
        assert pod.code == 0, pod.text[-4000:]
        assert "running 2 processes of" in pod.text and "(supervised as init)" in pod.text
        assert sorted(result_lines(pod.text)) == \
            [f"[rank {rank}] RESULT rank={rank} world=4 sum=10" for rank in (2 * node, 2 * node + 1)]


@pytest.mark.root
def test_every_rank_gets_what_torchrun_gives_it_but_the_documented_differences(pods, tfboot_job, task_env,
                                                                               tmp_path):
    net, nodes = pods
    _, under_tfboot, log_root = tfboot_job
    job = PodJob(net, tmp_path, "torchrun")
    for node, pod in enumerate(nodes):
        (tmp_path / f"node{node}").mkdir()
        job.start(pod, ["python", "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "2",
                        "--node-rank", str(node), "--master-addr", nodes[0].fqdn, "--master-port", "29500", ALLREDUCE],
                  task_env, cwd=str(tmp_path / f"node{node}"))
    ended = job.finish(timeout=240)
    under_torchrun = {}
    for node, pod in enumerate(nodes):
        assert ended[pod.name].code == 0, ended[pod.name].text[-4000:]
        under_torchrun.update(environments(tmp_path / f"node{node}"))
    assert sorted(under_tfboot) == sorted(under_torchrun) == [0, 1, 2, 3]

    problems = []
    for rank in range(4):
        ours, theirs = under_tfboot[rank], under_torchrun[rank]
        missing = TORCHRUN_WORKER_VARIABLES - set(theirs)
        assert not missing, f"torchrun gave rank {rank} no {sorted(missing)}: is the reference torchrun's?"
        for key in sorted(set(ours) | set(theirs)):
            if key in DIFFERENCES:
                want_ours, want_theirs = (value(rank, str(log_root)) if callable(value) else value
                                          for value in DIFFERENCES[key][:2])
                if not matches(want_ours, ours.get(key)) or not matches(want_theirs, theirs.get(key)):
                    problems.append(f"rank {rank} {key}: tfboot {ours.get(key)!r}, torchrun {theirs.get(key)!r}; "
                                    f"documented: tfboot {want_ours!r}, torchrun {want_theirs!r}")
            elif ours.get(key) != theirs.get(key):
                problems.append(f"rank {rank} {key}: tfboot {ours.get(key)!r}, torchrun {theirs.get(key)!r} "
                                "(not a documented difference)")
    assert not problems, "\n".join(problems)
