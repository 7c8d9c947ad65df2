"""pytorch-indexed-job.yaml and pytorch-jobset.yaml on a real cluster: tfboot --framework pytorch
as the container's command, 2 pods with 2 processes each; every process gets the torchrun
variables that docs/deploying.md shows (a plain `sh` printing them stands in for train_torch.py)."""

import re

import pytest

import manifests
from paths import REPO_DIR
from workloads import condition, pods_of, wait_job_finished, wait_jobset_finished

pytestmark = pytest.mark.root

VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT")
PRINT = "echo torch: " + " ".join(f"{v}=${v}" for v in VARIABLES)


def documented_torch_env(example: str) -> tuple[str, list[str]]:
    """The pod and the variables' lines that docs/deploying.md shows for the example."""
    block = re.compile(rf"<!-- torch_env: kubernetes/{re.escape(example)} pod=(\S+) -->\s*```sh\n(.*?)```", re.S)
    with open(f"{REPO_DIR}/docs/deploying.md") as f:
        [(pod, text)] = block.findall(f.read())
    return pod, sorted(text.strip().splitlines())


def printed_variables(k8s, selector: str) -> dict[str, list[str]]:
    """Each pod's (by hostname) processes' variable lines, sorted."""
    lines = {}
    for name, pod in pods_of(k8s, selector).items():
        log = k8s.logs(name, "trainer")
        # tfboot prefixes each process's lines with its rank when a pod runs several.
        lines[pod["spec"]["hostname"]] = sorted(re.findall(r"^\[rank \d+\] torch: (.*)$", log, re.M))
    return lines


def test_pytorch_indexed_job_gives_each_process_torchruns_variables(k8s):
    objects = manifests.for_cluster(manifests.load("pytorch-indexed-job.yaml"), checkpoints=k8s.host_dir("ddp"))
    trainer = manifests.trainer(objects)
    assert trainer["command"] == ["tfboot", "--framework", "pytorch", "--nproc-per-node", "2"]
    trainer["args"] = ["sh", "-c", PRINT]
    k8s.apply(objects)

    job = wait_job_finished(k8s, "ddp")
    assert condition(job, "Complete"), job["status"]
    lines = printed_variables(k8s, "app.kubernetes.io/name=ddp")
    pod, documented = documented_torch_env("pytorch-indexed-job.yaml")
    assert lines[pod] == documented
    master = "MASTER_ADDR=ddp-0.ddp.default.svc.cluster.local MASTER_PORT=29500"
    assert lines["ddp-0"] == [
        f"RANK=0 LOCAL_RANK=0 WORLD_SIZE=4 LOCAL_WORLD_SIZE=2 GROUP_RANK=0 {master}",
        f"RANK=1 LOCAL_RANK=1 WORLD_SIZE=4 LOCAL_WORLD_SIZE=2 GROUP_RANK=0 {master}",
    ]


def test_pytorch_jobset_gives_each_process_torchruns_variables(k8s):
    objects = manifests.for_cluster(manifests.load("pytorch-jobset.yaml"), checkpoints=k8s.host_dir("vit"))
    [jobset] = [o for o in objects if o["kind"] == "JobSet"]
    [job] = jobset["spec"]["replicatedJobs"]
    [trainer] = job["template"]["spec"]["template"]["spec"]["containers"]
    assert trainer["command"] == ["tfboot", "--framework", "pytorch", "--nproc-per-node", "2"]
    trainer["args"] = ["sh", "-c", PRINT]
    k8s.apply(objects)

    jobset = wait_jobset_finished(k8s, "vit")
    assert any(c["type"] == "Completed" and c["status"] == "True" for c in jobset["status"]["conditions"]), \
        jobset["status"]
    lines = printed_variables(k8s, "jobset.sigs.k8s.io/jobset-name=vit")
    assert sorted(lines) == ["vit-node-0-0", "vit-node-0-1"]
    pod, documented = documented_torch_env("pytorch-jobset.yaml")
    assert lines[pod] == documented
    master = "MASTER_ADDR=vit-node-0-0.vit.default.svc.cluster.local MASTER_PORT=29500"
    assert lines["vit-node-0-0"] == [
        f"RANK=0 LOCAL_RANK=0 WORLD_SIZE=4 LOCAL_WORLD_SIZE=2 GROUP_RANK=0 {master}",
        f"RANK=1 LOCAL_RANK=1 WORLD_SIZE=4 LOCAL_WORLD_SIZE=2 GROUP_RANK=0 {master}",
    ]
