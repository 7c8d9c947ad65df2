"""Reading what the tier's pods did: the trainer's lines (images.TRAIN_SH), pod states, Job and
JobSet conditions, the TF_CONFIG docs/deploying.md shows, and bounded waits for them on a harness.kubernetes cluster."""

from __future__ import annotations

import calendar
import json
import re
import time

from paths import REPO_DIR

TRAIN_LINE = re.compile(r"^train: task=(?P<task>\S+) restart=(?P<restart>\d*) pwd=(?P<pwd>\S*) "
                        r"started=(?P<started>\d+)$", re.M)
TF_CONFIG_LINE = re.compile(r"^train: TF_CONFIG=(?P<json>.*)$", re.M)
INDEX_LINE = re.compile(r"^train: JOB_COMPLETION_INDEX=(?P<index>.*)$", re.M)


def documented_tf_config(example: str) -> tuple[str, dict]:
    """The pod and TF_CONFIG that docs/deploying.md shows for examples/kubernetes/<example>."""
    block = re.compile(rf"<!-- tf_config: kubernetes/{re.escape(example)} pod=(\S+) -->\s*```json\n(.*?)```", re.S)
    with open(f"{REPO_DIR}/docs/deploying.md") as f:
        [(pod, text)] = block.findall(f.read())
    return pod, json.loads(text)


def runs(log: str) -> list[dict]:
    """Each run of train.sh in a pod's log: task, restart, pwd, started (Unix seconds)."""
    return [{"task": m["task"], "restart": int(m["restart"] or -1), "pwd": m["pwd"], "started": int(m["started"])}
            for m in TRAIN_LINE.finditer(log)]


def tf_configs(log: str) -> list[dict]:
    return [json.loads(m["json"]) for m in TF_CONFIG_LINE.finditer(log)]


def completion_indexes(log: str) -> list[str]:
    return INDEX_LINE.findall(log)


def wait_logs(cluster, pods: list[str], text: str, timeout: float = 120) -> dict[str, str]:
    """Each pod's trainer log once every one of them holds text."""
    def logs():
        found = {}
        for pod in pods:
            got = cluster.kubectl("logs", pod, "-c", "trainer", check=False)
            if got.returncode != 0 or text not in got.stdout:
                return None
            found[pod] = got.stdout
        return found
    return cluster.wait_for(f"{text!r} in the logs of {', '.join(pods)}", logs, timeout=timeout, interval=0.5)


def pods_of(cluster, selector: str) -> dict[str, dict]:
    """The pods with the label selector, by name."""
    return {p["metadata"]["name"]: p for p in cluster.get("pods", selector=selector)}


def trainer_status(pod: dict) -> dict:
    [status] = [s for s in pod["status"].get("containerStatuses", []) if s["name"] == "trainer"]
    return status


def terminated(pod: dict) -> dict | None:
    statuses = [s for s in pod["status"].get("containerStatuses", []) if s["name"] == "trainer"]
    return statuses[0]["state"].get("terminated") if statuses else None


def job_finished(cluster, name: str) -> dict | None:
    """The Job once it has a Complete or Failed condition, else None."""
    job = cluster.get("job", name)
    for condition in job["status"].get("conditions", []):
        if condition["type"] in ("Complete", "Failed") and condition["status"] == "True":
            return job
    return None


def wait_job_finished(cluster, name: str, timeout: float = 120) -> dict:
    return cluster.wait_for(f"Job {name} to complete or fail", lambda: job_finished(cluster, name),
                            timeout=timeout, interval=0.5)


def jobset_finished(cluster, name: str) -> dict | None:
    """The JobSet once it has a Completed or Failed condition, else None."""
    jobset = cluster.get("jobset", name)
    done = {c["type"] for c in jobset.get("status", {}).get("conditions", []) if c["status"] == "True"}
    return jobset if done & {"Completed", "Failed"} else None


def wait_jobset_finished(cluster, name: str, timeout: float = 120) -> dict:
    return cluster.wait_for(f"JobSet {name} to complete or fail", lambda: jobset_finished(cluster, name),
                            timeout=timeout, interval=0.5)


def condition(job: dict, kind: str) -> dict | None:
    for c in job["status"].get("conditions", []):
        if c["type"] == kind and c["status"] == "True":
            return c
    return None


def timestamp(text: str) -> int:
    """An API timestamp (2026-12-03T07:52:01Z) as Unix seconds."""
    return calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ"))
