"""Pods: a network namespace with a hostname and kubelet-style /etc files, and programs run in it.

Offers:

* ``Pod``: ``name``, ``hostname``, ``ip``, ``fqdn`` (``<hostname>.<service>.<namespace>.svc.
  <domain>``, None without a service), ``netns``, ``dir``, ``hosts_path``, ``resolv_path``,
  ``nsswitch_path``; ``set_hosts(text)`` / ``set_resolv(text)`` rewrite the file in place, so
  programs already running see the change (their bind mounts point at the same inode).
* ``kubelet_hosts(ip, hostname, fqdn)``, ``kubelet_resolv(namespace, domain, dns_ip)``: the
  files the kubelet writes (hosts: localhost lines, then ``<ip>\\t<fqdn>\\t<hostname>``;
  resolv.conf: ``search <ns>.svc.<domain> svc.<domain> <domain>``, the nameserver,
  ``options ndots:5``); ``container_nsswitch()``: the host's nsswitch.conf with
  ``hosts: files dns``, like a container image (no resolved/mdns/myhostname path that could
  leave the pod's namespaces).
* ``pod_command(pod, argv, env=, hostname=, pid1=, extra_mounts=)``: the command that runs argv
  in the pod through ``pod_shim.py`` (see there): the pod's hostname and /etc files, exactly
  ``env`` (plus PATH if it has none), with ``pid1`` as PID 1 of a new PID namespace.
* ``PodProcess``: the Popen of such a command. ``pid`` is the outer process (the shim, outside
  the new PID namespace, with pid1; else the program itself); ``program_pid`` the host pid of
  the program; ``wait_exec(timeout=10)`` -> True once argv is exec'd, False if it ended first;
  ``send_signal``/``terminate``/``kill`` go to the program; ``nspid()`` -> [host pid, pid inside].

Usage (``ClusterNetwork.run`` does this)::

    process = processes.spawn(pod_command(pod, ["sleep", "5"], env={}), cls=PodProcess, ...)
    process.pod, process.pid1, process.argv = pod, True, ["sleep", "5"]
    process.wait_exec()
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Iterable, Sequence

from harness.pod_shim import MARKER as SHIM_MARKER
from harness.processes import DEFAULT_PATH, HarnessError, children, cmdline

SHIM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pod_shim.py")


def rewrite_in_place(path: str, text: str) -> None:
    # in place, not by rename: bind mounts of running pods keep pointing at the same inode
    with open(path, "r+" if os.path.exists(path) else "w") as f:
        f.seek(0)
        f.truncate()
        f.write(text)


@dataclass
class Pod:
    name: str
    hostname: str
    ip: str
    fqdn: str | None
    netns: str
    dir: str
    hosts_path: str
    resolv_path: str
    nsswitch_path: str

    def set_hosts(self, text: str) -> None:
        rewrite_in_place(self.hosts_path, text)

    def set_resolv(self, text: str) -> None:
        rewrite_in_place(self.resolv_path, text)


def kubelet_hosts(ip: str, hostname: str, fqdn: str | None) -> str:
    return ("# Kubernetes-managed hosts file.\n"
            "127.0.0.1\tlocalhost\n"
            "::1\tlocalhost ip6-localhost ip6-loopback\n"
            "fe00::0\tip6-localnet\n"
            "fe00::0\tip6-mcastprefix\n"
            "fe00::1\tip6-allnodes\n"
            "fe00::2\tip6-allrouters\n"
            + (f"{ip}\t{fqdn}\t{hostname}\n" if fqdn else f"{ip}\t{hostname}\n"))


def kubelet_resolv(namespace: str, domain: str, dns_ip: str) -> str:
    return (f"search {namespace}.svc.{domain} svc.{domain} {domain}\n"
            f"nameserver {dns_ip}\n"
            "options ndots:5\n")


def container_nsswitch() -> str:
    try:
        with open("/etc/nsswitch.conf") as f:
            lines = [ln for ln in f.read().splitlines() if not re.match(r"\s*hosts\s*:", ln)]
    except OSError:
        lines = ["passwd: files", "group: files"]
    return "\n".join(lines + ["hosts: files dns"]) + "\n"


def pod_command(pod: Pod, argv: Sequence[str], *, env: dict, hostname: str, pid1: bool,
                extra_mounts: Iterable[tuple[str, str]] = ()) -> list[str]:
    env = dict(env)
    env.setdefault("PATH", DEFAULT_PATH)
    mounts = [(pod.hosts_path, "/etc/hosts"), (pod.resolv_path, "/etc/resolv.conf"),
              (pod.nsswitch_path, "/etc/nsswitch.conf"), *[tuple(m) for m in extra_mounts]]
    unshare = ["unshare", "--uts", "--mount", "--propagation", "private",
               *(["--pid"] if pid1 else [])]
    return ["ip", "netns", "exec", pod.netns, *unshare,
            sys.executable, "-I", "-S", SHIM, SHIM_MARKER, hostname, json.dumps(mounts),
            json.dumps(env), "pid1" if pid1 else "plain", "--", *argv]


class PodProcess(subprocess.Popen):
    pod: Pod
    pid1: bool
    argv: list

    @property
    def program_pid(self) -> int | None:
        if getattr(self, "_program_pid", None) is None:
            if not self.pid1:
                self._program_pid = self.pid
            else:   # the shim's only child, once it has forked
                kids = children(self.pid)
                self._program_pid = kids[0] if kids else None
        return self._program_pid

    def wait_exec(self, timeout: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout
        marker = b"\0" + SHIM_MARKER.encode() + b"\0"
        while time.monotonic() < deadline:
            if self.poll() is not None:
                return False
            pid = self.program_pid
            if pid is not None:
                command = cmdline(pid)
                if not command:   # gone, or a zombie
                    return False
                if marker not in command:
                    return True
            time.sleep(0.002)
        raise HarnessError(f"program {self.argv!r} did not start within {timeout}s")

    def send_signal(self, sig: int) -> None:
        self.poll()
        if self.returncode is not None:
            return
        pid = self.program_pid
        if pid is None:       # not forked yet: the outer process group relays it
            os.killpg(self.pid, sig)
            return
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass

    def nspid(self) -> list[int]:
        with open(f"/proc/{self.program_pid}/status") as f:
            for line in f:
                if line.startswith("NSpid:"):
                    return [int(x) for x in line.split()[1:]]
        return []
