"""PyTorch and JAX without the frameworks: what each process of a node gets, how several processes
of one task are supervised, and the usage errors, with plain shell as the command (docs/frameworks.md: PyTorch
and JAX). The PyTorch and JAX tier (tests/torch) runs real torch and jax, with torchrun beside.
"""

import json
import os
import signal
import subprocess
import time

import pytest

from harness.cluster import ClusterNetwork
from harness.exit_codes import STOPPED_BY_JOB
from harness.processes import communicate_all

ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}

# Each process prints its view of the job as one line.
SHOW = 'echo "rank=$RANK local=$LOCAL_RANK world=$WORLD_SIZE group=$GROUP_RANK/$GROUP_WORLD_SIZE ' \
       'master=$MASTER_ADDR:$MASTER_PORT omp=${OMP_NUM_THREADS:-unset} tf=${TF_CONFIG:-unset}"'


def local(tfboot, tmp_path, args, script, env=None, timeout=60):
    return subprocess.run([tfboot, "local", *args, "--", "sh", "-c", script], env={**ENV, **(env or {})}, cwd=tmp_path,
                          capture_output=True, text=True, timeout=timeout)


def test_local_pytorch_two_nodes_of_two_processes_get_torchrun_ranks(tfboot, tmp_path):
    result = local(tfboot, tmp_path, ["--framework", "pytorch", "--nproc-per-node", "2", "--cluster", "worker=2"], SHOW)
    assert result.returncode == 0, result.stderr
    lines = sorted(result.stdout.splitlines())
    master = lines[0].split("master=")[1].split(" ")[0]
    assert master.startswith("127.0.0.1:")
    assert lines == [f"[worker:{r // 2} rank {r}] rank={r} local={r % 2} world=4 group={r // 2}/2 master={master} omp=1 tf=unset"
                     for r in range(4)]
    assert "4 processes in all, 2 per task" in result.stderr


def test_local_jax_processes_get_kubeflow_variables(tfboot, tmp_path):
    result = local(tfboot, tmp_path, ["--framework", "jax", "--cluster", "worker=2"],
                   'echo "$JAX_COORDINATOR_ADDRESS $JAX_NUM_PROCESSES $JAX_PROCESS_ID ${RANK:-no-rank}"')
    assert result.returncode == 0, result.stderr
    lines = sorted(result.stdout.splitlines())
    coordinator = lines[0].split("] ")[1].split(" ")[0]
    assert lines == [f"[worker:{i} rank {i}] {coordinator} 2 {i} no-rank" for i in range(2)]


def test_a_failed_rank_is_named_with_its_torch_error_record(tfboot, tmp_path):
    # What torch's @record writes to TORCHELASTIC_ERROR_FILE when the rank raises.
    script = ('if [ "$RANK" = 3 ]; then printf \'{"message": {"message": "RuntimeError: rank 3 lost its data\\\\nTraceback", '
              '"extraInfo": {"py_callstack": "...", "timestamp": "0"}}}\' > "$TORCHELASTIC_ERROR_FILE"; exit 1; fi; '
              'trap "exit 0" TERM; while :; do sleep 0.1; done')  # no `wait`: a signal just before it waits for its end
    started = time.monotonic()
    result = local(tfboot, tmp_path, ["--framework", "pytorch", "--nproc-per-node", "2", "--cluster", "worker=2"], script)
    assert result.returncode == 1, result.stderr
    assert time.monotonic() - started < 20
    assert ("job failed: worker:1 rank 3 exited with status 1: rank 3 on 127.0.0.1: RuntimeError: rank 3 lost its data; "
            "exiting 1") in result.stderr


def test_an_error_file_from_an_earlier_run_is_not_taken_for_this_one(tfboot, tmp_path):
    stale = tmp_path / "logs" / "worker_0" / "error_rank0.json"
    stale.parent.mkdir(parents=True)
    stale.write_text('{"message": {"message": "OldError: from yesterday"}}')
    result = local(tfboot, tmp_path, ["--framework", "pytorch", "--cluster", "worker=1"], "exit 4")
    assert result.returncode == 4
    assert "OldError" not in result.stderr
    assert not stale.exists()


@pytest.mark.parametrize("args, env, message", [
    (["--framework", "mxnet"], {}, "--framework 'mxnet' must be tensorflow, pytorch or jax"),
    (["--nproc-per-node", "2"], {}, "--nproc-per-node '2' applies to --framework pytorch and jax; a TensorFlow task is one process"),
    (["--framework", "pytorch", "--nproc-per-node", "lots"], {},
     "--nproc-per-node 'lots' must be a number of processes 1..1024, gpu, cpu or auto"),
    (["--framework", "pytorch", "--cluster", "ps=1,worker=2"], {},
     "--framework pytorch: the cluster has ps:0, but a pytorch job has only nodes (chief and workers); drop its ps tasks"),
    (["--framework", "pytorch", "--cluster", "worker=2"], {"GLOO_SOCKET_IFNAME": "nosuch0"},
     "GLOO_SOCKET_IFNAME='nosuch0' names 'nosuch0', which is no interface of this host"),
])
def test_usage_errors_exit_2_before_any_lookup(run_tfboot, args, env, message):
    started = time.monotonic()
    result = run_tfboot([*args, "--hostname", "mnist-worker-1", "--wait", "1m", "--", "true"],
                        env={"TFBOOT_CLUSTER": "worker=2", **env})
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert len([line for line in result.stderr.splitlines() if " error " in line]) == 1
    assert time.monotonic() - started < 5  # nothing waited on the network


# Pods: network namespaces with tfboot as PID 1 behind a real dnsmasq (tests/harness).

def start_pod(net, tfboot, pod, script, log_root, args=(), env=None):
    full = {"TFBOOT_LOG_ROOT": str(log_root), "TFBOOT_WAIT": "30s", "TFBOOT_STOP_GRACE": "5s", **(env or {})}
    return net.run(pod, [tfboot, *args, "--", "sh", "-c", script], env=full)


@pytest.mark.root
def test_pods_two_processes_each_and_the_collectives_interface(net, tfboot, tmp_path):
    pods = [net.add_pod(f"mnist-worker-{i}") for i in range(2)]
    for pod in pods:
        net.publish(pod)
    script = SHOW + '; echo "if=$GLOO_SOCKET_IFNAME/$NCCL_SOCKET_IFNAME"'
    procs = [start_pod(net, tfboot, pod, script, tmp_path,
                       ["--framework", "pytorch", "--nproc-per-node", "2", "--cluster", "worker=2"]) for pod in pods]
    results = [(out, err) for _, out, err in communicate_all(procs, 60)]
    assert [proc.returncode for proc in procs] == [0, 0], [err for _, err in results]
    master = "mnist-worker-0.mnist.default.svc.cluster.local:29500"
    for node, (out, err) in enumerate(results):
        lines = sorted(line for line in out.splitlines() if "rank=" in line)
        assert lines == [f"[rank {r}] rank={r} local={r % 2} world=4 group={node}/2 master={master} omp=1 tf=unset"
                         for r in (2 * node, 2 * node + 1)], err
        # The pod's one network interface besides lo is the one whose route reaches the master.
        interfaces = {line.split("] ", 1)[1] for line in out.splitlines() if "if=" in line}
        assert len(interfaces) == 1 and interfaces != {"if=lo/lo"} and "/" in interfaces.pop(), out
        assert "running 2 processes of" in err
        framework = json.loads((tmp_path / f"worker_{node}" / "startup.json").read_text())["framework"]
        interface = framework.pop("collectives_interface")
        assert framework == {"name": "pytorch", "node_rank": node, "nodes": 2, "nproc_per_node": 2, "world_size": 4,
                             "master": master}
        assert len(interface) == 2 and interface[0].startswith("NCCL_SOCKET_IFNAME=")


@pytest.mark.root
def test_pods_one_rank_fails_its_task_and_the_other_pod_stops_with_its_message(net, tfboot, tmp_path):
    pods = [net.add_pod(f"mnist-worker-{i}") for i in range(2)]
    for pod in pods:
        net.publish(pod)
    script = ('if [ "$RANK" = 3 ]; then sleep 1; printf \'{"message": {"message": "ValueError: bad shard"}}\' '
              '> "$TORCHELASTIC_ERROR_FILE"; exit 3; fi; trap "exit 0" TERM; sleep 60 & wait')
    args = ["--framework", "pytorch", "--nproc-per-node", "2", "--cluster", "worker=2"]
    started = time.monotonic()
    procs = [start_pod(net, tfboot, pod, script, tmp_path, args) for pod in pods]
    results = [(out, err) for _, out, err in communicate_all(procs, 60)]
    elapsed = time.monotonic() - started
    assert [proc.returncode for proc in procs] == [STOPPED_BY_JOB, 3], [err for _, err in results]
    assert elapsed < 20
    assert "rank 3 failed: rank 3 on mnist-worker-1: ValueError: bad shard; stopping the other processes of the task" in results[1][1]
    assert "stopping: worker:1 failed with status 3: rank 3 on mnist-worker-1: ValueError: bad shard" in results[0][1]


@pytest.mark.root
def test_pods_kubeflow_pet_variables_alone_run_a_pytorch_job(tfboot, tmp_path):
    # A TrainJob "bert" of two nodes: JobSet names its pods bert-node-0-<k> in subdomain bert.
    with ClusterNetwork(service="bert", namespace="default", cluster_domain="cluster.local") as trainjob:
        pods = [trainjob.add_pod(f"bert-node-0-{k}") for k in range(2)]
        for pod in pods:
            trainjob.publish(pod)
        procs = []
        for k, pod in enumerate(pods):
            env = {"PET_NNODES": "2", "PET_NODE_RANK": str(k), "PET_MASTER_ADDR": "bert-node-0-0.bert",
                   "PET_MASTER_PORT": "29500", "PET_NPROC_PER_NODE": "1", "TFBOOT_LOG_ROOT": str(tmp_path),
                   "TFBOOT_WAIT": "30s"}
            procs.append(trainjob.run(pod, [tfboot, "sh", "-c", SHOW], env=env))
        results = [(out, err) for _, out, err in communicate_all(procs, 60)]
    assert [proc.returncode for proc in procs] == [0, 0], [err for _, err in results]
    for k, (out, err) in enumerate(results):
        assert out.strip() == f"rank={k} local=0 world=2 group={k}/2 master=bert-node-0-0.bert:29500 omp=unset tf=unset"
        assert f"identity worker:{k} from Kubeflow (PET_NODE_RANK={k})" in err
    startup = json.loads((tmp_path / "worker_1" / "startup.json").read_text())
    assert startup["identity_source"] == "Kubeflow (PET_NODE_RANK=1)"


@pytest.mark.root
def test_pods_the_job_ends_when_every_node_is_done_not_node_0(net, tfboot, tmp_path):
    # torchrun waits for every rank: node 0 finishing first must not stop node 1 at work.
    pods = [net.add_pod(f"mnist-worker-{i}") for i in range(2)]
    for pod in pods:
        net.publish(pod)
    script = 'if [ "$RANK" = 1 ]; then trap "echo stopped; exit 143" TERM; sleep 8 & wait; echo finished; fi'
    args = ["--framework", "pytorch", "--cluster", "worker=2"]
    procs = [start_pod(net, tfboot, pod, script, tmp_path, args) for pod in pods]
    results = [(out, err) for _, out, err in communicate_all(procs, 60)]
    assert [proc.returncode for proc in procs] == [0, 0], [err for _, err in results]
    assert results[1][0].strip() == "finished"
    assert "this task is done; waiting for the job's outcome (the others' end, or a failure)" in results[0][1]
    assert "the job is done: every task finished" in results[0][1]


def test_local_pytorch_waits_for_every_rank(tfboot, tmp_path):
    script = 'if [ "$RANK" = 1 ]; then trap "echo stopped; exit 143" TERM; sleep 7 & wait; echo finished; fi'
    result = local(tfboot, tmp_path, ["--framework", "pytorch", "--cluster", "worker=2"], script)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[worker:1 rank 1] finished"


def session_of(pid):
    """The session id in /proc/<pid>/stat (after the command's name, which may hold spaces)."""
    with open(f"/proc/{pid}/stat") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[3])


def test_each_rank_has_a_session_of_its_own_and_a_stop_reaches_every_rank(tfboot, tmp_path):
    """As torchrun starts them: a session per rank (the kernel's autogroup then schedules each rank
    as a group of its own, not all ranks with tfboot). tfboot still stops every rank and what it left."""
    script = 'sleep 600 & echo "$RANK $$ $!"; exec sleep 600'
    proc = subprocess.Popen([tfboot, "--init", "--wait", "0", "--control-port", "0", "--framework", "pytorch",
                             "--nproc-per-node", "3", "--cluster", "worker=1", "--hostname", "job-worker-0",
                             "--log-root", str(tmp_path / "logs"), "--stop-grace", "5s", "--", "sh", "-c", script],
                            env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ranks = {}
        while len(ranks) < 3:
            line = proc.stdout.readline()
            assert line, proc.stderr.read() if proc.poll() is not None else "stdout closed"
            rank, pid, child = line.split()[-3:]  # after the label "[rank 0] "
            ranks[int(rank)] = (int(pid), int(child))
        sessions = {rank: session_of(pid) for rank, (pid, _) in ranks.items()}
        # Each rank leads its own session; what it starts stays in it, and tfboot keeps its own.
        assert sessions == {rank: pid for rank, (pid, _) in ranks.items()}
        assert all(session_of(child) == sessions[rank] for rank, (_, child) in ranks.items())
        assert session_of(proc.pid) not in sessions.values()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
        assert proc.returncode == 143, err
        for pid, child in ranks.values():
            for gone in (pid, child):
                assert not os.path.exists(f"/proc/{gone}") or open(f"/proc/{gone}/stat").read().split(")")[1].split()[0] == "Z"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
