"""What Kubeflow Trainer (v2) makes of a TrainJob on its torch-distributed runtime: the JobSet it
creates, for workloads.kubernetes_pods to turn into pods.

The runtime (the ClusterTrainingRuntime `torch-distributed` the Trainer installs) is one
replicated Job `node` with one container `node`; the Trainer sets the Job's parallelism and
completions to numNodes, puts the TrainJob's image, command, args, env and resourcesPerNode into
the container, adds the PET_* variables its torch plugin writes for torchrun and the container
port 29500, and applies the TrainJob's runtimePatches (volumes, the grace period and security
context, and per container env, volumeMounts and securityContext). The JobSet is named like the
TrainJob, so its pods are <name>-node-0-<k> under the headless Service <name>; its network is JobSet's default. Only what the examples use is
modelled; anything else raises UnsupportedManifest.
"""

from __future__ import annotations

import copy

from workloads import UnsupportedManifest

RUNTIME = "torch-distributed"
NODE = "node"                       # the runtime's replicated Job and container
TRAINER_PORT = 29500                # the Trainer's ContainerTrainerPort: PET_MASTER_PORT
# The Job controller's annotation, which the torch plugin reads into PET_NODE_RANK.
COMPLETION_INDEX = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
# What the examples' runtimePatches set in the pod (a patch of anything else is not modelled).
PATCHED_POD_FIELDS = {"volumes", "containers", "terminationGracePeriodSeconds", "securityContext"}


def _num_proc_per_node(trainer: dict) -> str:
    if "numProcPerNode" in trainer:
        return str(trainer["numProcPerNode"])
    limits = (trainer.get("resourcesPerNode") or {}).get("limits", {})
    if any(key.endswith("/gpu") for key in limits):
        return "auto"
    raise UnsupportedManifest("numProcPerNode from the CPU limit is not modelled: give numProcPerNode")


def _apply_patches(name: str, patches: list[dict], pod_spec: dict) -> None:
    for patch in patches:
        for job in patch.get("trainingRuntimeSpec", {}).get("template", {}).get("spec", {}).get("replicatedJobs", []):
            if job["name"] != NODE:
                raise UnsupportedManifest(f"TrainJob {name}: runtime {RUNTIME} has no replicated Job {job['name']}")
            spec = job.get("template", {}).get("spec", {}).get("template", {}).get("spec", {})
            if set(spec) - PATCHED_POD_FIELDS:
                raise UnsupportedManifest(f"TrainJob {name}: patches of {sorted(set(spec) - PATCHED_POD_FIELDS)}")
            pod_spec.setdefault("volumes", []).extend(copy.deepcopy(spec.get("volumes", [])))
            pod_spec.update({key: copy.deepcopy(spec[key]) for key in ("terminationGracePeriodSeconds", "securityContext")
                             if key in spec})
            for patched in spec.get("containers", []):
                if patched["name"] != NODE:
                    raise UnsupportedManifest(f"TrainJob {name}: runtime {RUNTIME} has no container {patched['name']}")
                container = pod_spec["containers"][0]
                for key in ("env", "volumeMounts"):
                    container.setdefault(key, []).extend(copy.deepcopy(patched.get(key, [])))
                if "securityContext" in patched:
                    container["securityContext"] = copy.deepcopy(patched["securityContext"])


def trainjob_as_jobset(doc: dict) -> dict:
    name, spec = doc["metadata"]["name"], doc["spec"]
    if spec["runtimeRef"]["name"] != RUNTIME or spec["runtimeRef"].get("kind", "ClusterTrainingRuntime") != "ClusterTrainingRuntime":
        raise UnsupportedManifest(f"TrainJob {name}: only the ClusterTrainingRuntime {RUNTIME} is modelled")
    trainer = spec["trainer"]
    nodes = trainer.get("numNodes", 1)
    container = {"name": NODE, "image": trainer["image"]}
    for key in ("command", "args"):
        if key in trainer:
            container[key] = list(trainer[key])
    container["env"] = [*copy.deepcopy(trainer.get("env", [])),
                        {"name": "PET_NNODES", "value": str(nodes)},
                        {"name": "PET_NPROC_PER_NODE", "value": _num_proc_per_node(trainer)},
                        {"name": "PET_NODE_RANK", "valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX}}},
                        {"name": "PET_MASTER_ADDR", "value": f"{name}-{NODE}-0-0.{name}"},
                        {"name": "PET_MASTER_PORT", "value": str(TRAINER_PORT)}]
    container["ports"] = [{"containerPort": TRAINER_PORT}]
    if "resourcesPerNode" in trainer:
        container["resources"] = copy.deepcopy(trainer["resourcesPerNode"])
    pod_spec = {"containers": [container]}
    _apply_patches(name, spec.get("runtimePatches", []), pod_spec)
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": name},
            "spec": {"network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True},  # JobSet's defaults
                     "replicatedJobs": [{"name": NODE, "replicas": 1, "template": {"spec": {
                         "completionMode": "Indexed", "completions": nodes, "parallelism": nodes,
                         "template": {"spec": pod_spec}}}}]}}
