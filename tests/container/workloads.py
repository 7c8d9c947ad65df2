"""What Kubernetes and docker compose make of the files in examples/: the pods they would create.

For each pod: its name, hostname and subdomain (which decide the kubelet's /etc/hosts line), the
container's environment as the kubelet computes it (downward API, `$(VAR)` references, the Job
controller's JOB_COMPLETION_INDEX), the container's args, and the DNS names that point at it
(a headless Service publishes a pod's record before the pod is Ready only with
`publishNotReadyAddresses: true`; Docker's DNS answers container and service names, and the PTR
of a container's address is `<container name>.<network>`). Only the features the examples use
are modelled; anything else raises UnsupportedManifest so that a new example cannot pass
unexamined.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

# The image's CMD (docker/Dockerfile): the command tfboot runs when a manifest gives no args.
IMAGE_CMD = ["python", "train.py"]
CLUSTER_DOMAIN = "cluster.local"


class UnsupportedManifest(ValueError):
    pass


@dataclass
class Pod:
    name: str                       # pod name (compose: container name)
    hostname: str
    subdomain: str                  # "" = none: /etc/hosts says "<ip> <hostname>" only
    namespace: str
    env: dict[str, str]
    args: list[str]                 # what the image's ENTRYPOINT (tfboot) gets
    ports: list[int]                # containerPorts (compose: empty, every port is reachable)
    dns_names: list[str] = field(default_factory=list)  # names that resolve to the pod; first = its PTR
    compose: bool = False           # docker's resolv.conf (ndots:0, no search list) instead of the kubelet's
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def own_names(self) -> set[str]:
        """The host names that stand for this pod in a TF_CONFIG address (its first label)."""
        return {self.name, self.hostname}


# --------------------------------------------------------------------------------------------
# Kubernetes

_FIELD_LABEL = re.compile(r"^metadata\.(labels|annotations)\['([^']+)'\]$")
_VAR_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def _expand(value: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion: earlier variables only, $$ escapes, unknown refs stay."""
    def sub(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))
    return _VAR_REF.sub(sub, value)


def _field_ref(path: str, meta: dict) -> str:
    if path == "metadata.name":
        return meta["name"]
    if path == "metadata.namespace":
        return meta["namespace"]
    m = _FIELD_LABEL.match(path)
    if m:
        return meta.get(m.group(1), {}).get(m.group(2), "")
    raise UnsupportedManifest(f"fieldRef {path!r} is not modelled")


def container_env(container: dict, meta: dict, injected: dict[str, str]) -> dict[str, str]:
    """The environment the kubelet gives a container: injected variables (JOB_COMPLETION_INDEX),
    then the container's env list in order."""
    if container.get("envFrom"):
        raise UnsupportedManifest("envFrom is not modelled")
    env = dict(injected)
    for item in container.get("env", []):
        name = item["name"]
        if "valueFrom" in item:
            source = item["valueFrom"]
            if set(source) != {"fieldRef"}:
                raise UnsupportedManifest(f"env {name}: only valueFrom.fieldRef is modelled")
            env[name] = _field_ref(source["fieldRef"]["fieldPath"], meta)
        else:
            env[name] = _expand(str(item.get("value", "")), env)
    return env


def _trainer(pod_spec: dict) -> dict:
    containers = pod_spec.get("containers", [])
    if len(containers) != 1:
        raise UnsupportedManifest("the examples' pods have exactly one container")
    return containers[0]


def _make_pod(name: str, hostname: str, subdomain: str, namespace: str, template: dict,
              extra_labels: dict, extra_annotations: dict, injected: dict) -> Pod:
    meta_in = template.get("metadata", {})
    meta = {"name": name, "namespace": namespace,
            "labels": {**meta_in.get("labels", {}), **extra_labels},
            "annotations": {**meta_in.get("annotations", {}), **extra_annotations}}
    container = _trainer(template["spec"])
    return Pod(name=name, hostname=hostname, subdomain=subdomain, namespace=namespace,
               env=container_env(container, meta, injected),
               args=list(container.get("args") or IMAGE_CMD),
               ports=[p["containerPort"] for p in container.get("ports", [])],
               labels=meta["labels"])


def _pod_name_suffix(seed: str) -> str:
    # Like the API server's generateName: 5 characters from a consonant/digit alphabet.
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    digest = hashlib.sha256(seed.encode()).digest()
    return "".join(alphabet[b % len(alphabet)] for b in digest[:5])


def _indexed_job_pods(job_name: str, job_spec: dict, namespace: str, default_subdomain: str,
                      extra_labels: dict) -> list[Pod]:
    if job_spec.get("completionMode", "NonIndexed") != "Indexed":
        raise UnsupportedManifest(f"Job {job_name}: only completionMode: Indexed gives pods stable hostnames")
    template = job_spec["template"]
    subdomain = template["spec"].get("subdomain", default_subdomain)
    pods = []
    for index in range(job_spec.get("completions", 1)):
        labels = {**extra_labels, "job-name": job_name, "batch.kubernetes.io/job-name": job_name,
                  "batch.kubernetes.io/job-completion-index": str(index)}
        pods.append(_make_pod(f"{job_name}-{index}-{_pod_name_suffix(f'{job_name}-{index}')}",
                              f"{job_name}-{index}", subdomain, namespace, template, labels,
                              {"batch.kubernetes.io/job-completion-index": str(index)},
                              {"JOB_COMPLETION_INDEX": str(index)}))
    return pods


def kubernetes_pods(docs: list[dict], namespace: str = "default") -> list[Pod]:
    """The pods the controllers create for the workloads in docs, with the DNS names their
    headless Services publish before the pods are Ready (i.e. while tfboot waits)."""
    pods: list[Pod] = []
    headless: dict[str, dict] = {}   # subdomain -> {"selector": ..., "not_ready": bool}
    for doc in docs:
        kind, meta, spec = doc["kind"], doc["metadata"], doc.get("spec", {})
        if kind == "Service":
            if spec.get("clusterIP") == "None":
                headless[meta["name"]] = {"selector": spec.get("selector", {}),
                                          "not_ready": bool(spec.get("publishNotReadyAddresses", False))}
        elif kind == "StatefulSet":
            template = spec["template"]
            for ordinal in range(spec.get("replicas", 1)):
                name = f"{meta['name']}-{ordinal}"
                labels = {"statefulset.kubernetes.io/pod-name": name, "apps.kubernetes.io/pod-index": str(ordinal)}
                pods.append(_make_pod(name, name, spec["serviceName"], namespace, template, labels, {}, {}))
        elif kind == "PersistentVolumeClaim":
            continue                 # storage (the checkpoints): no pods, no names
        elif kind == "Job":
            pods += _indexed_job_pods(meta["name"], spec, namespace, "", {})
        elif kind == "JobSet":
            network = spec.get("network", {})
            subdomain = network.get("subdomain") or meta["name"]
            if network.get("enableDNSHostnames", True):
                # the JobSet controller creates this headless Service itself
                headless[subdomain] = {"selector": {"jobset.sigs.k8s.io/jobset-name": meta["name"]},
                                       "not_ready": bool(network.get("publishNotReadyAddresses", True))}
            else:
                subdomain = ""
            for replicated in spec["replicatedJobs"]:
                for job_index in range(replicated.get("replicas", 1)):
                    job_name = f"{meta['name']}-{replicated['name']}-{job_index}"
                    job_spec = dict(replicated["template"]["spec"])
                    job_spec.setdefault("completionMode", "Indexed")   # JobSet's default
                    labels = {"jobset.sigs.k8s.io/jobset-name": meta["name"],
                              "jobset.sigs.k8s.io/replicatedjob-name": replicated["name"],
                              "jobset.sigs.k8s.io/job-index": str(job_index)}
                    pods += _indexed_job_pods(job_name, job_spec, namespace, subdomain, labels)
        else:
            raise UnsupportedManifest(f"kind {kind} is not modelled")
    for pod in pods:
        service = headless.get(pod.subdomain)
        selected = service is not None and all(pod.labels.get(k) == v for k, v in service["selector"].items())
        if pod.subdomain and selected and service["not_ready"]:
            pod.dns_names = [f"{pod.hostname}.{pod.subdomain}.{namespace}.svc.{CLUSTER_DOMAIN}"]
    return pods


def tfjob_pods(tf_configs: dict[str, dict], namespace: str = "default") -> list[Pod]:
    """Pods of a Kubeflow TFJob: the operator names them <job>-<type>-<index>, sets TF_CONFIG in
    each, and gives each its own headless Service of the same name (<pod>.<ns>.svc.<domain>)."""
    import json
    pods = []
    for name, tf_config in tf_configs.items():
        pods.append(Pod(name=name, hostname=name, subdomain="", namespace=namespace,
                        env={"TF_CONFIG": json.dumps(tf_config, separators=(",", ":"))},
                        args=list(IMAGE_CMD), ports=[2222],
                        dns_names=[f"{name}.{namespace}.svc.{CLUSTER_DOMAIN}"]))
    return pods


# --------------------------------------------------------------------------------------------
# docker compose


def _container_id(seed: str) -> str:
    return hashlib.sha256(seed.encode()).hexdigest()[:12]


def compose_containers(config: dict, project: str) -> list[Pod]:
    """The containers `docker compose -p <project> up` starts for a normalized compose config
    (the output of `docker compose config`), with the names Docker's DNS answers for each."""
    pods = []
    for service_name, service in config["services"].items():
        if service.get("entrypoint"):
            raise UnsupportedManifest(f"service {service_name}: entrypoint would replace tfboot")
        if set(service.get("networks", {}) or {}) - {"default"}:
            raise UnsupportedManifest(f"service {service_name}: only the default network is modelled")
        environment = service.get("environment", {}) or {}
        if isinstance(environment, list):
            environment = dict(item.split("=", 1) if "=" in item else (item, "") for item in environment)
        replicas = (service.get("deploy") or {}).get("replicas", 1)
        network = f"{project}_default"
        for number in range(1, replicas + 1):
            name = service.get("container_name") or f"{project}-{service_name}-{number}"
            command = service.get("command")
            if isinstance(command, str):
                raise UnsupportedManifest(f"service {service_name}: give command as a list")
            pods.append(Pod(name=name, hostname=service.get("hostname") or _container_id(name), subdomain="",
                            namespace="", env={k: "" if v is None else str(v) for k, v in environment.items()},
                            args=list(command or IMAGE_CMD), ports=[],
                            dns_names=[f"{name}.{network}", name, service_name], compose=True))
    return pods
