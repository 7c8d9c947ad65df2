"""Running the tier's rank scripts as jobs, and reading what the ranks print and dump.

* ``ALLREDUCE``, ``JAX_SUM``: the scripts (allreduce.py, jax_sum.py beside this file).
* ``PodJob``, ``STOPPED_BY_JOB``: the TensorFlow tier's (tests/tensorflow/jobs.py: tfboot
  as PID 1 of namespace pods, each pod's output in a file), with ``start(pod, argv, env, cwd=)``:
  torchrun's workers write their files in its working directory.
* ``result_lines(text)``: the lines of text that hold a script's ``RESULT``, in order.
* ``environments(directory)`` -> {rank: the environment the rank started with}, from the
  ``env_rank<R>.json`` files allreduce.py writes.
* ``add_interface(net, pod, name, cidr, default_route=)``: a second network interface in a pod,
  as Multus adds one: a veth whose other end is left unattached in the network's bridge
  namespace (nothing is reachable through it), optionally with the pod's default route on it.
"""

import glob
import importlib.util
import json
import os
import re
import subprocess

from harness.processes import run_command
from paths import REPO_DIR

HERE = os.path.dirname(os.path.abspath(__file__))
ALLREDUCE = os.path.join(HERE, "allreduce.py")
JAX_SUM = os.path.join(HERE, "jax_sum.py")


def _load_tensorflow_tier_jobs():
    # By path: each tier's helpers sit beside its tests under one module name space (pytest puts
    # the tier's folder on sys.path), and "tensorflow" as a package name would be the framework.
    path = os.path.join(REPO_DIR, "tests", "tensorflow", "jobs.py")
    spec = importlib.util.spec_from_file_location("tensorflow_tier_jobs", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_jobs = _load_tensorflow_tier_jobs()
STOPPED_BY_JOB = _jobs.STOPPED_BY_JOB


class PodJob(_jobs.PodJob):
    def start(self, pod, argv, env, cwd=None):
        with open(self.path(pod), "w") as out:
            self.procs[pod.name] = self.net.run(pod, argv, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
        return self.procs[pod.name]


def result_lines(text):
    return [line for line in text.splitlines() if "RESULT " in line]


def environments(directory):
    found = {}
    for path in glob.glob(os.path.join(directory, "env_rank*.json")):
        rank = int(re.fullmatch(r"env_rank(\d+)\.json", os.path.basename(path)).group(1))
        with open(path) as f:
            found[rank] = json.load(f)
    return found


def add_interface(net, pod, name, cidr, default_route=False):
    # veth rather than dummy: the dummy driver may be missing where the tests run (a container).
    loose_end = f"vx{list(net.pods).index(pod.name)}"
    run_command(["ip", "-n", pod.netns, "link", "add", name, "type", "veth", "peer", "name", loose_end,
                 "netns", net.net_ns])
    run_command(["ip", "-n", net.net_ns, "link", "set", loose_end, "up"])
    for args in (["addr", "add", cidr, "dev", name], ["link", "set", name, "up"]):
        run_command(["ip", "-n", pod.netns, *args])
    if default_route:
        run_command(["ip", "-n", pod.netns, "route", "add", "default", "dev", name])
