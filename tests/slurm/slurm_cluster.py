"""A real Slurm cluster on the harness's namespace network: munged, slurmctld and two slurmd "nodes".

Debian's slurm-wlm 22.05 and munge (``scripts/setup --slurm``), started by the tier itself, as
root, with every file in the network's temp dir; nothing listens in the root network namespace::

    ctl     a pod (network namespace, hostname "ctl"): munged, slurmctld on :6817, and srun
    node1   a pod with hostname "node1": slurmd on :6818 (the tasks it starts live here too)
    node2   the same for "node2"

Each name has a record in the network's dnsmasq, so tfboot on node1 finds node2 through DNS (and
itself through the pod's own /etc/hosts line), as on a cluster without a Service.

Offers:

* ``SlurmCluster(net)``: ``start()`` writes slurm.conf and a munge key, starts the daemons and
  returns once both nodes are idle (about a second; HarnessError naming the logs otherwise).
  ``srun(args, env=, cwd=, timeout=)`` runs ``srun ARGS`` in the ctl pod with exactly ``env``
  (plus SLURM_CONF and PATH), which srun passes on to every task, and returns a CompletedProcess.
  ``scontrol(args)`` likewise. ``logs()``: the daemons' logs, for a failing test's message.
  ``conf`` is the slurm.conf path. Teardown is the network's: ``net.close()`` kills the daemons
  and whatever still runs in the pods (slurmstepd, tasks) and removes the temp dir.

What a node in a network namespace needs (workarounds for running slurmd outside a real host):

* slurmd 22.05 always initialises its cgroup plugin and fails when nothing is mounted on
  /sys/fs/cgroup, and ``ip netns exec`` mounts a fresh /sys for the pod. So each slurmd starts
  behind ``mount -t tmpfs ... /sys/fs/cgroup`` in the pod's private mount namespace, with
  ``CgroupPlugin=cgroup/v1`` in cgroup.conf: nothing of the host's cgroups is used or changed,
  since ``ProctrackType=proctrack/linuxproc``, ``TaskPlugin=task/none`` and
  ``JobAcctGatherType=jobacct_gather/none`` never ask for a cgroup.
* Both nodes declare the machine's CPUs (at least 2 each, ``SlurmdParameters=config_overrides``),
  so ``srun -N2 -n4`` places 2 tasks per node.
"""

from __future__ import annotations

import os
import subprocess
import time

from harness.cluster import ClusterNetwork, HarnessError

NODES = ("node1", "node2")
SBIN = "/usr/sbin"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def slurm_installed() -> bool:
    return all(os.access(os.path.join(SBIN, daemon), os.X_OK) for daemon in ("slurmctld", "slurmd", "munged")) and \
        os.access("/usr/bin/srun", os.X_OK)


def slurm_conf(directory: str, controller_ip: str, nodes: list[tuple[str, str]], cpus: int) -> str:
    node_names = ",".join(name for name, _ in nodes)
    lines = [
        "ClusterName=tfboot",
        f"SlurmctldHost=ctl({controller_ip})",
        "AuthType=auth/munge",
        f"AuthInfo=socket={directory}/munge.socket",
        "CredType=cred/munge",
        "SlurmUser=root",
        "SlurmdUser=root",
        "SlurmctldPort=6817",
        "SlurmdPort=6818",
        f"StateSaveLocation={directory}/state",
        f"SlurmdSpoolDir={directory}/%n/spool",
        f"SlurmctldPidFile={directory}/slurmctld.pid",
        f"SlurmdPidFile={directory}/%n/slurmd.pid",
        f"SlurmctldLogFile={directory}/slurmctld.log",
        f"SlurmdLogFile={directory}/%n/slurmd.log",
        "SlurmctldDebug=info",
        "SlurmdDebug=info",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none",
        "SwitchType=switch/none",
        "MpiDefault=none",
        "SchedulerType=sched/builtin",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        "SlurmdParameters=config_overrides",
        "ReturnToService=2",
        "InactiveLimit=0",
        "KillWait=5",
        "MinJobAge=5",
        "SlurmdTimeout=30",
        *[f"NodeName={name} NodeAddr={ip} CPUs={cpus} State=UNKNOWN" for name, ip in nodes],
        f"PartitionName=debug Nodes={node_names} Default=YES MaxTime=INFINITE State=UP",
    ]
    return "\n".join(lines) + "\n"


class SlurmCluster:
    def __init__(self, net: ClusterNetwork):
        self.net = net
        self.dir = os.path.join(net.tmpdir, "slurm")
        self.conf = os.path.join(self.dir, "slurm.conf")
        self.ctl = None
        self.nodes = []

    @property
    def env(self) -> dict:
        return {"SLURM_CONF": self.conf, "PATH": DEFAULT_PATH}

    def start(self) -> "SlurmCluster":
        net = self.net
        resolv = f"nameserver {net.dns_ip}\n"
        self.ctl = net.add_pod("ctl", service="", resolv=resolv)
        self.nodes = [net.add_pod(name, service="", resolv=resolv) for name in NODES]
        for pod in (self.ctl, *self.nodes):
            net.publish_name(pod.hostname, pod.ip)
        os.makedirs(os.path.join(self.dir, "state"))
        for pod in self.nodes:
            os.makedirs(os.path.join(self.dir, pod.hostname, "spool"))
        cpus = max(2, os.cpu_count() or 2)
        with open(self.conf, "w") as f:
            f.write(slurm_conf(self.dir, self.ctl.ip, [(pod.hostname, pod.ip) for pod in self.nodes], cpus))
        with open(os.path.join(self.dir, "cgroup.conf"), "w") as f:
            f.write("CgroupPlugin=cgroup/v1\n")
        key = os.path.join(self.dir, "munge.key")
        with open(key, "wb") as f:
            f.write(os.urandom(128))
        os.chmod(key, 0o400)

        socket = os.path.join(self.dir, "munge.socket")
        self._daemon(self.ctl, "munged", ["munged", "--foreground", "--force", f"--socket={socket}",
                                          f"--key-file={key}", f"--pid-file={self.dir}/munged.pid",
                                          f"--log-file={self.dir}/munged.log",
                                          f"--seed-file={self.dir}/munged.seed"])
        self._wait(lambda: os.path.exists(socket), 10, "munged's socket")
        self._daemon(self.ctl, "slurmctld", ["slurmctld", "-D", "-i", "-f", self.conf])
        for pod in self.nodes:
            # A tmpfs of its own on /sys/fs/cgroup, in the pod's private mount namespace (see above).
            self._daemon(pod, f"slurmd-{pod.hostname}",
                         ["sh", "-c", 'mount -t tmpfs -o size=64k tfboot-slurm /sys/fs/cgroup && exec "$@"', "slurmd",
                          "slurmd", "-D", "-f", self.conf, "-N", pod.hostname])
        self._wait(self._nodes_idle, 60, "both nodes idle")
        return self

    def _daemon(self, pod, name: str, argv: list[str]) -> None:
        with open(os.path.join(self.dir, f"{name}.out"), "w") as out:
            self.net.run(pod, argv, env=self.env, pid1=False, stdout=out, stderr=subprocess.STDOUT)

    def _nodes_idle(self) -> bool:
        listed = self.scontrol(["show", "nodes", "--oneliner"], timeout=10)
        states = [line for line in listed.stdout.splitlines() if line.startswith("NodeName=")]
        return len(states) == len(NODES) and all("State=IDLE " in line for line in states)

    def _wait(self, ready, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            if time.monotonic() > deadline:
                raise HarnessError(f"Slurm: no {what} after {timeout}s\n{self.logs()}")
            time.sleep(0.1)

    def srun(self, args: list[str], *, env: dict | None = None, cwd: str | None = None,
             timeout: float = 60) -> subprocess.CompletedProcess:
        return self._run(["srun", *args], env, cwd, timeout)

    def scontrol(self, args: list[str], *, timeout: float = 10) -> subprocess.CompletedProcess:
        return self._run(["scontrol", *args], None, None, timeout)

    def _run(self, argv, env, cwd, timeout) -> subprocess.CompletedProcess:
        process = self.net.run(self.ctl, argv, env={**self.env, **(env or {})}, pid1=False, cwd=cwd,
                               wait_exec=False)
        try:
            out, err = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            out, err = process.communicate(timeout=10)
            raise HarnessError(f"{argv!r} timed out after {timeout}s\nstdout: {out[-3000:]}\nstderr: {err[-3000:]}\n"
                               f"{self.logs()}")
        return subprocess.CompletedProcess(argv, process.returncode, out, err)

    def logs(self) -> str:
        parts = []
        for name in ("slurmctld.log", *[f"{node}/slurmd.log" for node in NODES], "munged.log"):
            try:
                with open(os.path.join(self.dir, name), errors="replace") as f:
                    parts.append(f"--- {name}\n{f.read()[-2000:]}")
            except OSError:
                pass
        return "\n".join(parts)
