"""Running the tier's rank scripts as jobs (with tests/harness/pod_job.py), and reading what the ranks
print and dump.

* ``ALLREDUCE``, ``JAX_SUM``: the scripts (allreduce.py, jax_sum.py beside this file).
* ``result_lines(text)``: the lines of text that hold a script's ``RESULT``, in order.
* ``environments(directory)`` -> {rank: the environment the rank started with}, from the
  ``env_rank<R>.json`` files allreduce.py writes.
* ``add_interface(net, pod, name, cidr, default_route=)``: a second network interface in a pod,
  as Multus adds one: a veth whose other end is left unattached in the network's bridge
  namespace (nothing is reachable through it), optionally with the pod's default route on it.
"""

import glob
import json
import os
import re

from harness.processes import run_command

HERE = os.path.dirname(os.path.abspath(__file__))
ALLREDUCE = os.path.join(HERE, "allreduce.py")
JAX_SUM = os.path.join(HERE, "jax_sum.py")


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
