"""examples/kubernetes/ as a user applies them, with every change the test cluster needs made here,
in code, never in a kept copy of a file:

* ``image:`` the tier's image (images.TRAINER_IMAGE) with ``imagePullPolicy: Never`` (no registry);
* ``nvidia.com/gpu`` requests removed (no GPUs), and the CPU and memory a GPU pod asks for made
  what one small node offers every pod of a test (TEST_REQUESTS, no CPU or memory limit);
* each PersistentVolumeClaim dropped and its volume a hostPath directory instead: on one node a
  directory is what a ReadWriteMany claim is, a place every pod of the job sees and that outlives
  them (no storage class here offers ReadWriteMany);
* the control Secret's value filled in (control-secret.yaml leaves it empty for the user);
* where a test asks: the size (replicas or completions and parallelism, and TFBOOT_CLUSTER's
  count with it), environment variables added, ``args:``, an init container.

Offers ``load(file)`` -> the file's objects, and ``for_cluster(objects, checkpoints=)`` and the small
editors below, each returning nothing and changing the objects in place.
"""

from __future__ import annotations

import base64
import copy
import os

import yaml

from images import TRAINER_IMAGE
from paths import REPO_DIR

EXAMPLES_DIR = os.path.join(REPO_DIR, "examples", "kubernetes")
GPU = "nvidia.com/gpu"
WORKLOADS = ("StatefulSet", "Job")


SECRET_MARKER = "# control secret (optional)"
NON_ROOT_MARKER = "# non-root (optional)"
# A GPU pod's CPU and memory requests, on the test's one node of 2 cores: every pod of a test fits.
TEST_REQUESTS = {"cpu": "50m", "memory": "64Mi"}


def load(name: str, *, control_secret: bool = False, non_root: bool = False) -> list[dict]:
    """The file's objects; with control_secret (non_root), as a user who turns the secret (the
    non-root variant) on makes them: every comment line right below a "# control secret
    (optional)" ("# non-root (optional)") line, at its indent, uncommented."""
    with open(os.path.join(EXAMPLES_DIR, name)) as f:
        lines = f.read().splitlines(keepends=True)
    for marker, wanted in ((SECRET_MARKER, control_secret), (NON_ROOT_MARKER, non_root)):
        if not wanted:
            continue
        out, i, uncommented = [], 0, 0
        while i < len(lines):
            line = lines[i]
            out.append(line)
            i += 1
            if line.lstrip().startswith(marker):
                indent = line[:len(line) - len(line.lstrip())]
                while i < len(lines) and lines[i].startswith(indent + "# "):
                    out.append(indent + lines[i][len(indent) + 2:])
                    uncommented += 1
                    i += 1
        assert uncommented, f"{name}: no lines under {marker!r}"
        lines = out
    return [o for o in yaml.safe_load_all("".join(lines)) if o]


def pod_specs(objects: list[dict]) -> list[dict]:
    """Every pod template's spec: a StatefulSet's or Job's, and each replicated Job's of a JobSet."""
    specs = [o["spec"]["template"]["spec"] for o in objects if o["kind"] in WORKLOADS]
    for jobset in (o for o in objects if o["kind"] == "JobSet"):
        specs += [job["template"]["spec"]["template"]["spec"] for job in jobset["spec"]["replicatedJobs"]]
    return specs


def containers(objects: list[dict]) -> list[dict]:
    return [c for spec in pod_specs(objects) for c in spec["containers"] + spec.get("initContainers", [])]


def for_cluster(objects: list[dict], *, checkpoints: str) -> list[dict]:
    """The objects with the test cluster's image, no GPUs, and hostPath checkpoints under
    the directory ``checkpoints`` (one subdirectory per claim)."""
    objects = copy.deepcopy(objects)
    for container in containers(objects):
        container["image"] = TRAINER_IMAGE
        container["imagePullPolicy"] = "Never"
        resources = container.get("resources", {})
        for kind in ("limits", "requests"):
            for name in (GPU, "cpu", "memory"):
                resources.get(kind, {}).pop(name, None)
            if kind in resources and not resources[kind]:
                del resources[kind]
        if "resources" in container:
            resources["requests"] = dict(TEST_REQUESTS)
    for spec in pod_specs(objects):
        for volume in spec.get("volumes", []):
            claim = volume.pop("persistentVolumeClaim", None)
            if claim:
                volume["hostPath"] = {"path": os.path.join(checkpoints, claim["claimName"]),
                                      "type": "DirectoryOrCreate"}
    for secret in (o for o in objects if o["kind"] == "Secret" and o["stringData"].get("secret") == ""):
        secret["stringData"]["secret"] = base64.b64encode(os.urandom(32)).decode()
    return [o for o in objects if o["kind"] != "PersistentVolumeClaim"]


def labelled(objects: list[dict], name: str) -> list[dict]:
    """What `kubectl apply -f FILE -l app.kubernetes.io/name=NAME` applies of the objects."""
    return [o for o in objects if o["metadata"].get("labels", {}).get("app.kubernetes.io/name") == name]


def workload(objects: list[dict]) -> dict:
    [found] = [o for o in objects if o["kind"] in WORKLOADS]
    return found


def trainer(objects: list[dict]) -> dict:
    [found] = [c for c in workload(objects)["spec"]["template"]["spec"]["containers"] if c["name"] == "trainer"]
    return found


def set_env(objects: list[dict], **values: str) -> None:
    env = trainer(objects).setdefault("env", [])
    for name, value in values.items():
        env[:] = [e for e in env if e["name"] != name] + [{"name": name, "value": value}]


def env_value(objects: list[dict], name: str) -> str:
    [value] = [e["value"] for e in trainer(objects)["env"] if e["name"] == name]
    return value


def resize_job(objects: list[dict], tasks: int) -> None:
    """An Indexed Job of ``tasks`` pods: completions, parallelism and TFBOOT_CLUSTER's count."""
    job = workload(objects)
    job["spec"]["completions"] = job["spec"]["parallelism"] = tasks
    set_env(objects, TFBOOT_CLUSTER=f"worker={tasks}")
