"""Platforms that describe the job (docs/identity.md, "Platforms"): tfboot started by srun, in a
Volcano job's pod or in a JobSet's pod needs no TFBOOT_CLUSTER. The environment-based sources
(Slurm, Volcano) and JobSet's downward-API files (through --pod-info-dir) are run here with the
binary; SageMaker's fixed path and every format detail are covered by tests/unit/platforms_test.cpp.

The examples in docs/deploying.md ("Platforms that describe the job") are the ones run here: each
```json block after a `<!-- platform: NAME -->` marker must be exactly what tfboot prints."""

import json
import os
import re
import resource
import socket
import subprocess

import pytest

from paths import REPO_DIR
from harness.processes import communicate_all
from test_hostile import sanitized

# The issue's example: 4 tasks, 2 on gpu07, 1 each on gpu08 and cpu1; this is task 2.
SRUN_TASK_2 = {"SLURM_PROCID": "2", "SLURM_STEP_NUM_TASKS": "4", "SLURM_STEP_NODELIST": "gpu[07-08],cpu1",
               "SLURM_STEP_TASKS_PER_NODE": "2,1(x2)", "SLURM_LOCALID": "0", "SLURMD_NODENAME": "gpu08"}

# Pod mnist-worker-1 of the Volcano job "mnist" in docs/deploying.md (tasks chief and worker,
# plugins env and svc); its hostname is the pod's name.
VOLCANO_WORKER_1 = {"VC_TASK_INDEX": "1", "VK_TASK_INDEX": "1",
                    "VC_CHIEF_HOSTS": "mnist-chief-0.mnist", "VC_CHIEF_NUM": "1",
                    "VC_WORKER_HOSTS": "mnist-worker-0.mnist,mnist-worker-1.mnist", "VC_WORKER_NUM": "2",
                    "TFBOOT_HOSTNAME": "mnist-worker-1"}


def write_pod_info(directory, labels: dict, annotations: dict):
    """A downward-API volume as the kubelet writes it: key="value" lines, sorted, Go-quoted."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, entries in (("labels", labels), ("annotations", annotations)):
        text = "\n".join(f"{key}={json.dumps(value)}" for key, value in sorted(entries.items()))
        (directory / name).write_text(text)
    return directory


def jobset_pod_info(directory, replicated_job: str, job_index: int):
    """Pod <replicated_job>-<job_index> of the JobSet "bert" in docs/deploying.md: chief=1, worker=2."""
    replicas = {"chief": 1, "worker": 2}[replicated_job]
    jobset = {"jobset.sigs.k8s.io/jobset-name": "bert", "jobset.sigs.k8s.io/replicatedjob-name": replicated_job,
              "jobset.sigs.k8s.io/replicatedjob-replicas": str(replicas), "jobset.sigs.k8s.io/job-index": str(job_index),
              "jobset.sigs.k8s.io/global-replicas": "3", "batch.kubernetes.io/job-completion-index": "0"}
    annotations = {**jobset, "tfboot/cluster": "chief=1,worker=2",
                   "kubectl.kubernetes.io/last-applied-configuration": '{"quoted": "a \\"b\\"\\n"}'}
    return write_pod_info(directory, jobset, annotations)


def readme_examples() -> dict:
    with open(os.path.join(REPO_DIR, "docs", "deploying.md")) as f:
        text = f.read()
    blocks = re.finditer(r"<!-- platform: (?P<name>\S+) -->\s*```json\n(?P<json>.*?)```", text, re.S)
    return {m["name"]: json.loads(m["json"]) for m in blocks}


def one_error_line(result):
    errors = [l for l in result.stderr.splitlines() if " error " in l]
    assert len(errors) == 1, result.stderr
    return errors[0]


def test_slurm_the_issue_example(run_tfboot):
    result = run_tfboot(["--print", "--wait", "0"], env=SRUN_TASK_2)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ('{"cluster":{"worker":["gpu07:2222","gpu07:2223","gpu08:2222","cpu1:2222"]},'
                             '"task":{"type":"worker","index":2}}\n')
    assert "identity worker:2 from Slurm (SLURM_PROCID)" in result.stderr
    assert json.loads(result.stdout) == readme_examples()["slurm"]


def test_slurm_chief_at_ordinal_0(run_tfboot):
    result = run_tfboot(["--print", "--wait", "0", "--chief-at-ordinal-0"], env={**SRUN_TASK_2, "SLURM_PROCID": "0",
                                                                                    "SLURMD_NODENAME": "gpu07"})
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"cluster": {"chief": ["gpu07:2222"],
                                                     "worker": ["gpu07:2223", "gpu08:2222", "cpu1:2222"]},
                                         "task": {"type": "chief", "index": 0}}
    assert "identity chief:0 from Slurm (SLURM_PROCID), chief at ordinal 0" in result.stderr


def address_space_of_1_gib():
    """preexec_fn: what a container's memory limit would allow, as an address-space limit."""
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def test_a_slurm_host_list_too_large_is_a_usage_error_within_a_memory_limit(run_tfboot, tfboot):
    """590 brackets of 100,000 numbers in one name, 6.5 KB: 10^2950 hosts. tfboot counts before
    it expands, so under 1 GiB of address space the answer is the usage error (exit 2), not exit
    7 (out of memory) or an OOM kill."""
    if sanitized(tfboot):
        pytest.skip("AddressSanitizer's shadow memory cannot be reserved under RLIMIT_AS; the release binary runs this")
    env = {**SRUN_TASK_2, "SLURM_STEP_NODELIST": "n" + "[0-99999]" * 590}
    result = run_tfboot(["--print", "--wait", "0"], env=env, preexec_fn=address_space_of_1_gib)
    assert result.returncode == 2, result.stderr[-2000:]
    assert one_error_line(result).endswith(" gives more than 100000 hosts")


def free_tcp_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_slurm_step_of_two_tasks(tfboot, tmp_path, env=None):
    """Tasks 0 and 1 of one srun step on this host (localhost), each printing its TF_CONFIG: the
    two processes, each with its (stdout, stderr)."""
    control_port = str(free_tcp_port())
    tasks = []
    for rank in ("0", "1"):
        task_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "SLURM_PROCID": rank, "SLURM_LOCALID": rank,
                    "SLURM_STEP_NUM_TASKS": "2", "SLURM_STEP_NODELIST": "localhost", "SLURM_STEP_TASKS_PER_NODE": "2",
                    "SLURMD_NODENAME": "localhost", "TFBOOT_CONTROL_PORT": control_port, "TFBOOT_WAIT": "20s",
                    "TFBOOT_START_TIMEOUT": "20s", "TFBOOT_LOG_ROOT": str(tmp_path / "logs"), **(env or {})}
        tasks.append(subprocess.Popen([tfboot, "--", "sh", "-c", 'printf %s "$TF_CONFIG"'], env=task_env, cwd=tmp_path,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outputs = []
    try:
        outputs = [(out, err) for _, out, err in communicate_all(tasks, 60)]
    finally:
        for task in tasks:
            if task.poll() is None:
                task.kill()
                task.wait()
    return list(zip(tasks, outputs))


def test_slurm_step_of_two_tasks_waits_for_names_and_meets_on_the_control_port(tfboot, tmp_path):
    """Two tasks of one step on this host: the DNS wait, the start barrier, the files, as on Kubernetes."""
    cluster = {"worker": ["localhost:2222", "localhost:2223"]}
    for rank, (task, (stdout, stderr)) in enumerate(run_slurm_step_of_two_tasks(tfboot, tmp_path)):
        assert task.returncode == 0, stderr
        assert json.loads(stdout) == {"cluster": cluster, "task": {"type": "worker", "index": rank}}
        assert f"identity worker:{rank} from Slurm (SLURM_PROCID)" in stderr
        # The coordinator resolves both names after the barrier; the other task only the coordinator's.
        assert ("all 2 names resolve" if rank == 0 else "the name resolves") in stderr
        startup = json.loads((tmp_path / "logs" / f"worker_{rank}" / "startup.json").read_text())
        assert startup["identity_source"] == "Slurm (SLURM_PROCID)"
        assert startup["job"]["coordinator"] == "worker:0"
        assert startup["job"]["tasks_present"] == 2
        assert startup["job"]["names_resolved_by_coordinator"] is True
        assert [p["name"] for p in startup["peers"]] == ["localhost", "localhost"]
        assert [p["port"] for p in startup["peers"]] == [2222, 2223]


def test_two_tasks_of_one_host_measure_their_links_each_on_a_port_of_its_own(tfboot, tmp_path):
    """--preflight network with two tasks on one host: one --preflight-port cannot take both, so
    each listens on a port the kernel chooses and says it in its hello; both links are measured."""
    env = {"TFBOOT_PREFLIGHT": "network", "TFBOOT_PREFLIGHT_PORT": str(free_tcp_port())}
    for rank, (task, (_, stderr)) in enumerate(run_slurm_step_of_two_tasks(tfboot, tmp_path, env=env)):
        assert task.returncode == 0, stderr
        network = json.loads((tmp_path / "logs" / f"worker_{rank}" / "startup.json").read_text())["preflight"]["network"]
        assert network["links"] == 2, network


def test_the_coordinator_names_the_dns_servers_it_used_in_startup_json(tfboot, tmp_path):
    """The coordinator resolves nothing before the barrier and every name after it: its
    startup.json names the servers of those lookups, as the other task's does."""
    # localhost is answered from /etc/hosts; the server is only named, never asked.
    results = run_slurm_step_of_two_tasks(tfboot, tmp_path, env={"TFBOOT_DNS_SERVER": "127.0.0.1:5399"})
    for rank, (task, (stdout, stderr)) in enumerate(results):
        assert task.returncode == 0, stderr
        startup = json.loads((tmp_path / "logs" / f"worker_{rank}" / "startup.json").read_text())
        assert startup["job"]["names_resolved_by_coordinator"] is True
        assert startup["dns_servers"] == ["127.0.0.1:5399"], f"worker:{rank}"


def test_volcano_worker(run_tfboot):
    result = run_tfboot(["--print", "--wait", "0"], env=VOLCANO_WORKER_1)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ('{"cluster":{"chief":["mnist-chief-0.mnist:2222"],'
                             '"worker":["mnist-worker-0.mnist:2222","mnist-worker-1.mnist:2222"]},'
                             '"task":{"type":"worker","index":1}}\n')
    assert ("identity worker:1 from Volcano (VC_TASK_INDEX, type from hostname 'mnist-worker-1' (from TFBOOT_HOSTNAME) "
            "in VC_WORKER_HOSTS)") in result.stderr
    assert json.loads(result.stdout) == readme_examples()["volcano"]


def test_jobset_from_the_pod_info_dir(run_tfboot, tmp_path):
    pod_info = jobset_pod_info(tmp_path / "podinfo", "worker", 1)
    # In the pod the kubelet's /etc/hosts line names the Service "bert"; here the flags stand in for it.
    result = run_tfboot(["--print", "--wait", "0", "--pod-info-dir", str(pod_info), "--service", "bert",
                         "--namespace", "default"], env={"TFBOOT_HOSTNAME": "bert-worker-1-0"})
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == readme_examples()["jobset"]
    assert (f"identity worker:1 from JobSet 'bert' (replicated job worker, job index 1, from {pod_info})"
            in result.stderr)
    twin = run_tfboot(["--print", "--wait", "0"], env={"TFBOOT_POD_INFO_DIR": str(pod_info), "TFBOOT_HOSTNAME": "bert-worker-1-0"})
    assert twin.returncode == 0, twin.stderr
    assert json.loads(twin.stdout)["cluster"]["worker"] == ["bert-worker-0-0:2222", "bert-worker-1-0:2222"]


def test_jobset_pod_whose_hostname_is_another_task_is_exit_2(run_tfboot, tmp_path):
    pod_info = jobset_pod_info(tmp_path / "podinfo", "worker", 1)
    result = run_tfboot(["--print", "--wait", "0", "--pod-info-dir", str(pod_info)], env={"TFBOOT_HOSTNAME": "bert-worker-0-0"})
    assert result.returncode == 2, result.stderr
    assert (f"JobSet 'bert': the labels in {pod_info} make this pod bert-worker-1-0 (replicated job worker, job index 1), "
            "but its hostname is 'bert-worker-0-0' (from TFBOOT_HOSTNAME)") in one_error_line(result)
    assert result.stdout == ""


@pytest.mark.parametrize("make_unreadable", [
    pytest.param(lambda path: os.mkfifo(path), id="fifo"),
    pytest.param(lambda path: path.mkdir(), id="directory"),
    pytest.param(lambda path: path.write_text("x" * (1024 * 1024 + 1)), id="over-1-MiB"),
])
def test_a_platform_file_that_cannot_be_read_is_exit_2_naming_it(run_tfboot, tmp_path, make_unreadable):
    """The JobSet's labels are also in the annotations file, but a labels file that is there and
    cannot be read is not taken for absent."""
    pod_info = jobset_pod_info(tmp_path / "podinfo", "worker", 1)
    (pod_info / "labels").unlink()
    make_unreadable(pod_info / "labels")
    result = run_tfboot(["--print", "--wait", "0", "--pod-info-dir", str(pod_info)], env={"TFBOOT_HOSTNAME": "bert-worker-1-0"})
    assert result.returncode == 2, result.stderr
    assert f"{pod_info}/labels exists but cannot be read" in one_error_line(result)
    assert result.stdout == ""


def test_explicit_configuration_wins(run_tfboot):
    with_cluster = run_tfboot(["--print", "--wait", "0"], env={**SRUN_TASK_2, "TFBOOT_CLUSTER": "worker=2",
                                                                 "TFBOOT_HOSTNAME": "trainer-1"})
    assert with_cluster.returncode == 0, with_cluster.stderr
    assert json.loads(with_cluster.stdout) == {"cluster": {"worker": ["trainer-0:2222", "trainer-1:2222"]},
                                               "task": {"type": "worker", "index": 1}}
    operator = {"cluster": {"worker": ["w-0:2000"]}, "task": {"type": "worker", "index": 0}}
    with_tf_config = run_tfboot(["--print", "--wait", "0"], env={**VOLCANO_WORKER_1, "TF_CONFIG": json.dumps(operator)})
    assert with_tf_config.returncode == 0, with_tf_config.stderr
    assert json.loads(with_tf_config.stdout) == operator


@pytest.mark.parametrize("env, needle", [
    ({**SRUN_TASK_2, "SLURM_STEP_NODELIST": "gpu[07-08,cpu1"}, "SLURM_STEP_NODELIST 'gpu[07-08,cpu1': '[' without ']'"),
    ({**SRUN_TASK_2, "SLURM_PROCID": "4"}, "SLURM_PROCID '4' is outside SLURM_STEP_NUM_TASKS '4'"),
    ({**SRUN_TASK_2, "SLURM_STEP_TASKS_PER_NODE": "2(x3)"},
     "SLURM_STEP_TASKS_PER_NODE '2(x3)' places 6 tasks, but SLURM_STEP_NUM_TASKS '4' says 4"),
    ({"VC_TASK_INDEX": "0"}, "Volcano (VC_TASK_INDEX is set): no VC_CHIEF_HOSTS"),
    ({**VOLCANO_WORKER_1, "VC_WORKER_NUM": "3"}, "VC_WORKER_NUM '3' does not match VC_WORKER_HOSTS, which lists 2 hosts"),
    ({"POD_NAME": "a-worker-0"}, "--cluster (or TFBOOT_CLUSTER) is required when TF_CONFIG is not set and no platform "
                                 "describes the job (Slurm, SageMaker, Volcano, JobSet)"),
])
def test_bad_platform_data_is_one_line_and_exit_2(run_tfboot, tmp_path, env, needle):
    log_root = tmp_path / "logs"
    result = run_tfboot(["--log-root", str(log_root), "--", "touch", str(tmp_path / "ran")],
                        env={**env, "TFBOOT_CONTROL_PORT": "0"})
    assert result.returncode == 2, result.stderr
    assert needle in one_error_line(result)
    assert "waiting" not in result.stderr, "a usage error never waits on the network"
    assert not (tmp_path / "ran").exists(), "nothing is run after an error"
    assert not log_root.exists(), "nothing is written after an error"


def test_every_platform_example_in_the_readme_is_run_here():
    assert sorted(readme_examples()) == ["jobset", "slurm", "volcano"]
