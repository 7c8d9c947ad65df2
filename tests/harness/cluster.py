"""A simulated Kubernetes cluster network for tfboot's tests: pods, cluster DNS, faults (root).

Everything lives in network namespaces made for one network (see namespaces.py); nothing is
created in, and no traffic goes to or from, the root network namespace::

    <prefix>net               bridge br0 10.213.0.1/16 (the address the harness queries DNS from)
    <prefix>dns               eth0 10.213.0.2/16: dnsmasq on :53 udp+tcp, or the failing responder
    <prefix>p<i>-<pod name>   eth0 10.213.<1+i//200>.<10+i%200>/16, lo up (one per add_pod)

Per-network files (pods' /etc files, dnsmasq's records and log) live in ``/tmp/<prefix>*``.

Usage::

    from harness.cluster import ClusterNetwork, HarnessError

    with ClusterNetwork(service="mnist", namespace="default", cluster_domain="cluster.local",
                        *, subnet="10.213", local_zones=("#",), log_queries=True,
                        service_records=True, dns_server="dnsmasq") as net:
        pod = net.add_pod("mnist-worker-0")    # hostname=, service= ("" = no subdomain), ip=,
                                               # hosts=/resolv= (text instead of kubelet's)
        net.publish(pod)                       # A <pod fqdn> -> ip, PTR, and the headless
                                               # Service name -> ip (service_records)
        net.publish_name("proj-worker-1.proj_default", ip, "worker")   # any name, + aliases
        net.unpublish(pod)                     # wait=False on these: "appears while waiting"
        proc = net.run(pod, [tfboot, "--print"], env={...})   # PodProcess, PID 1 by default
        net.signal(proc, signal.SIGTERM)
        net.exec_in_pod(pod, ["getent", "hosts", name])        # -> CompletedProcess
        net.dns_query(name, "AAAA", pod=pod)   # -> DnsResult; from the bridge without pod
        net.dns_query_many([(name, "A"), ...])
        net.drop_dns_packets(30)               # lost packets; 0 = none
        net.set_dns_failure("servfail")        # or "refused", "nxdomain"; None = dnsmasq
        net.stop_dns(); net.start_dns()        # server down (ECONNREFUSED) and back
        net.dns_queries(); net.dns_query_count(); net.reset_dns_query_count()

* dns_server: "dnsmasq" (default), or "coredns": CoreDNS answering as a Kubernetes cluster's DNS
  does, with kubeadm's ``cache 30`` (coredns.py; records take up to a second to be served, and
  names outside the cluster domain cannot be published).
* local_zones: names dnsmasq answers from its records only (NXDOMAIN/NODATA otherwise), besides
  the cluster domain and the reverse zones; "#" = every name (compose-style bare names too);
  () = names outside the cluster domain get REFUSED (nothing is forwarded).
* ``run`` (details in pods.py): the pod's hostname (or ``hostname=``), hosts, resolv.conf and
  nsswitch.conf bind-mounted over /etc, exactly ``env`` (plus PATH), stdin/stdout/stderr as
  for Popen (pipes by default: read them, or pass files for chatty programs), ``cwd``,
  ``extra_mounts=[(host path, path inside)]``, ``wait_exec=True`` (returns once argv is exec'd,
  so a signal sent next reaches the program). Exit 127/126 when argv cannot be exec'd. NB: PID 1
  only gets signals it has a handler for; wait for a sign of life before signalling.
* publish/unpublish act at once: with ``wait=True`` (default) they return once dnsmasq has read
  the change (<= 2 s); records may change while the server is stopped or failing.
* DNS details: dns_client.py (results), dns_server.py (faults, query log), dnsmasq.py.

Teardown (``close()``, also on ``__exit__``, on a failed ``start()`` and at exit) kills every
process started and whatever still runs in the namespaces, deletes the namespaces and the temp
dir; all waits are bounded. Processes die with the test process (PDEATHSIG), and the namespaces
a killed run leaves are removed by the next ``start()`` (``cleanup_stale``).
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from typing import Iterable, Sequence

from harness.coredns import CoreDnsServer
from harness.dns_client import DnsResult, query_many, reverse_name
from harness.dns_server import DnsServer
from harness.namespaces import (Bridge, add_netns, cleanup_stale, delete_netns, in_netns,
                                list_netns, new_prefix)
from harness.pods import (Pod, PodProcess, container_nsswitch, kubelet_hosts, kubelet_resolv,
                          pod_command, rewrite_in_place)
from harness.processes import DEFAULT_PATH, HarnessError, ProcessSet, communicate_bounded

__all__ = ["ClusterNetwork", "DnsResult", "HarnessError", "Pod", "PodProcess", "cleanup_stale",
           "reverse_name"]

_open_networks: "set[ClusterNetwork]" = set()


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._@:-]", "_", text).lstrip(".") or "_"


class ClusterNetwork:
    def __init__(self, service: str = "mnist", namespace: str = "default",
                 cluster_domain: str = "cluster.local", *, subnet: str = "10.213",
                 local_zones: Iterable[str] = ("#",), log_queries: bool = True,
                 service_records: bool = True, dns_server: str = "dnsmasq"):
        if dns_server not in ("dnsmasq", "coredns"):
            raise ValueError(f"unknown DNS server {dns_server!r}")
        self.dns_server = dns_server
        self.service = service
        self.namespace = namespace
        self.cluster_domain = cluster_domain.strip(".")
        self.subnet = subnet
        self.local_zones = [zone.strip(".") for zone in local_zones]
        self.service_records = service_records
        self.prefix = new_prefix()
        self.net_ns = self.prefix + "net"
        self.dns_ns = self.prefix + "dns"
        self.bridge_ip = f"{subnet}.0.1"
        self.dns_ip = f"{subnet}.0.2"
        self.dns_port = 53
        self.pods: dict[str, Pod] = {}
        self.tmpdir: str | None = None
        self.dns: DnsServer | None = None
        self._log_queries = log_queries
        self._bridge = Bridge(self.net_ns, self.bridge_ip)
        self._namespaces: list[str] = []
        self._processes = ProcessSet()
        self._started = False
        self._closed = False

    @property
    def service_fqdn(self) -> str:
        return f"{self.service}.{self.namespace}.svc.{self.cluster_domain}"

    @property
    def log_queries(self) -> bool:
        return self._log_queries

    @log_queries.setter
    def log_queries(self, enabled: bool) -> None:   # from the next start of the server on
        self._log_queries = enabled
        if self.dns is not None:
            self.dns.log_queries = enabled

    @property
    def hostsdir(self) -> str:
        return self.dns.records.path

    @property
    def dns_log(self) -> str:
        return self.dns.log

    @property
    def dns_running(self) -> bool:
        return self.dns is not None and self.dns.running

    # ---- lifecycle

    def __enter__(self) -> "ClusterNetwork":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self) -> "ClusterNetwork":
        if self._started:
            return self
        if os.geteuid() != 0:
            raise HarnessError("ClusterNetwork needs root (network/mount/PID namespaces)")
        self._started = True
        _open_networks.add(self)
        try:
            cleanup_stale()
            self.tmpdir = tempfile.mkdtemp(prefix=self.prefix)
            self._namespaces.append(self.net_ns)
            self._bridge.create()
            self._add_namespace(self.dns_ns, "vdns", self.dns_ip)
            zones = [self.cluster_domain, "in-addr.arpa", "ip6.arpa", *self.local_zones]
            if self.dns_server == "coredns":
                self.dns = CoreDnsServer(ns=self.dns_ns, ip=self.dns_ip, port=self.dns_port,
                                         workdir=self.tmpdir, processes=self._processes,
                                         domain=self.cluster_domain, zones=zones,
                                         log_queries=self._log_queries)
            else:
                self.dns = DnsServer(ns=self.dns_ns, ip=self.dns_ip, port=self.dns_port,
                                     workdir=self.tmpdir, processes=self._processes, zones=zones,
                                     log_queries=self._log_queries)
            self.dns.start()
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        if self._closed or not self._started:
            self._closed = True
            return
        self._closed = True
        _open_networks.discard(self)
        problems = self._processes.kill_all()
        for ns in reversed(self._namespaces):   # pods, the DNS namespace, then the bridge
            try:
                delete_netns(ns)
            except Exception as e:
                problems.append(e)
        if self.tmpdir:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
        left = [ns for ns in list_netns() if ns.startswith(self.prefix)]
        if left:
            problems.append(HarnessError(f"namespaces left behind: {left}"))
        if problems:
            raise HarnessError(f"teardown problems: {problems}")

    def _add_namespace(self, ns: str, veth_name: str, ip: str) -> None:
        add_netns(ns)
        self._namespaces.append(ns)
        self._bridge.attach(ns, veth_name, ip)

    def _check_open(self) -> None:
        if not self._started or self._closed:
            raise HarnessError("ClusterNetwork is not running (use it as a context manager)")

    # ---- pods

    def add_pod(self, name: str, *, hostname: str | None = None, service: str | None = None,
                ip: str | None = None, hosts: str | None = None,
                resolv: str | None = None) -> Pod:
        self._check_open()
        if name in self.pods:
            raise HarnessError(f"pod {name} exists")
        i = len(self.pods)
        if i >= 200 * 250:
            raise HarnessError("too many pods")
        ip = ip or f"{self.subnet}.{1 + i // 200}.{10 + i % 200}"
        hostname = hostname or name
        service = self.service if service is None else service
        fqdn = (f"{hostname}.{service}.{self.namespace}.svc.{self.cluster_domain}"
                if service else None)
        pod_dir = os.path.join(self.tmpdir, f"pod-{i}")
        os.makedirs(pod_dir)
        pod = Pod(name=name, hostname=hostname, ip=ip, fqdn=fqdn,
                  netns=f"{self.prefix}p{i}-{_safe(name)}"[:200], dir=pod_dir,
                  hosts_path=os.path.join(pod_dir, "hosts"),
                  resolv_path=os.path.join(pod_dir, "resolv.conf"),
                  nsswitch_path=os.path.join(pod_dir, "nsswitch.conf"))
        rewrite_in_place(pod.hosts_path, kubelet_hosts(ip, hostname, fqdn) if hosts is None
                         else hosts)
        rewrite_in_place(pod.resolv_path,
                         kubelet_resolv(self.namespace, self.cluster_domain, self.dns_ip)
                         if resolv is None else resolv)
        rewrite_in_place(pod.nsswitch_path, container_nsswitch())
        self._add_namespace(pod.netns, f"vp{i}", ip)
        self.pods[name] = pod
        return pod

    def _pod(self, pod: "Pod | str") -> Pod:
        if isinstance(pod, Pod):
            return pod
        try:
            return self.pods[pod]
        except KeyError:
            raise HarnessError(f"no pod named {pod!r}") from None

    # ---- running programs

    def run(self, pod: "Pod | str", argv: Sequence[str], *, env: dict | None = None,
            pid1: bool = True, hostname: str | None = None, cwd: str | None = None,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text: bool = True, wait_exec: bool = True,
            extra_mounts: Iterable[tuple[str, str]] = ()) -> PodProcess:
        self._check_open()
        pod = self._pod(pod)
        argv = [str(a) for a in argv]
        if not argv:
            raise ValueError("empty argv")
        command = pod_command(pod, argv, env=env or {}, pid1=pid1, extra_mounts=extra_mounts,
                              hostname=hostname if hostname is not None else pod.hostname)
        process = self._processes.spawn(command, cls=PodProcess, env={"PATH": DEFAULT_PATH},
                                        cwd=cwd, stdin=stdin, stdout=stdout, stderr=stderr,
                                        text=text)
        process.pod, process.pid1, process.argv = pod, pid1, argv
        if wait_exec:
            process.wait_exec()
        return process

    def signal(self, process: PodProcess, sig: int = signal.SIGTERM) -> None:
        """Deliver sig to the program started by :meth:`run` (PID 1 inside with pid1=True)."""
        process.send_signal(sig)

    def exec_in_pod(self, pod: "Pod | str", argv: Sequence[str], *, env: dict | None = None,
                    timeout: float = 10, input: str | None = None, pid1: bool = False,
                    check: bool = False) -> subprocess.CompletedProcess:
        process = self.run(pod, argv, env=env, pid1=pid1, wait_exec=False,
                           stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL)
        return communicate_bounded(process, argv, input, timeout, check,
                                   f"in pod {self._pod(pod).name}")

    def run_in_dns_ns(self, argv: Sequence[str], *, timeout: float = 10,
                      check: bool = False) -> subprocess.CompletedProcess:
        self._check_open()
        process = self._processes.spawn(["ip", "netns", "exec", self.dns_ns, *argv],
                                        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)
        return communicate_bounded(process, argv, None, timeout, check, "in the DNS namespace")

    # ---- DNS records

    def publish_name(self, name: str, ip: str, *aliases: str, wait: bool = True) -> None:
        self._check_open()
        self.dns.records.add(name, ip, aliases, wait=wait and self.dns.dnsmasq_running)

    def publish(self, pod: "Pod | str", *, ip: str | None = None, fqdn: str | None = None,
                service_record: bool | None = None, wait: bool = True) -> str:
        pod = self._pod(pod)
        fqdn = (fqdn or pod.fqdn or "").rstrip(".")
        if not fqdn:
            raise HarnessError(f"pod {pod.name} has no subdomain; pass fqdn=")
        service_record = self.service_records if service_record is None else service_record
        aliases = (self.service_fqdn,) if service_record and self.service else ()
        self.publish_name(fqdn, ip or pod.ip, *aliases, wait=wait)
        return fqdn

    def add_job_pods(self, count: int, prefix: str = "mnist-worker", *, publish: bool = True) -> list[Pod]:
        """Pods <prefix>-0 .. <prefix>-<count-1>, as a StatefulSet names them; published unless
        the test publishes them itself."""
        pods = [self.add_pod(f"{prefix}-{i}") for i in range(count)]
        if publish:
            for pod in pods:
                self.publish(pod)
        return pods

    def throttle(self, pod: "Pod | str", rate: str = "4mbit") -> None:
        """Slow a pod's link both ways with tc's token bucket filter: on its eth0 and on its port
        of the bridge. The queues go with the namespaces at teardown."""
        self._check_open()
        pod = self._pod(pod)
        index = list(self.pods).index(pod.name)
        for ns, device in ((pod.netns, "eth0"), (self._bridge.ns, f"vp{index}")):
            subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", device, "root", "tbf",
                            "rate", rate, "burst", "16kb", "latency", "50ms"], check=True, timeout=30)

    def unpublish(self, name: "Pod | str", ip: str | None = None, *, wait: bool = True) -> int:
        """Remove the records of a pod (its FQDN) or of a name; returns how many were removed."""
        self._check_open()
        if isinstance(name, Pod) or name in self.pods:
            name = self._pod(name).fqdn or ""
        return self.dns.records.remove(name, ip, wait=wait and self.dns.dnsmasq_running)

    # ---- the DNS server and its faults (see dns_server.py)

    def start_dns(self) -> None:
        self._check_open()
        self.dns.start()

    def stop_dns(self) -> None:
        self.dns.stop()

    def set_dns_failure(self, mode: str | None) -> None:
        self._check_open()
        self.dns.set_failure(mode)

    def drop_dns_packets(self, percent: float) -> None:
        self._check_open()
        self.dns.drop_packets(percent)

    def dns_queries(self) -> list[tuple[str, str, str]]:
        return self.dns.queries()

    def dns_query_count(self) -> int:
        return self.dns.query_count()

    def reset_dns_query_count(self) -> None:
        self.dns.reset_query_count()

    # ---- the tests' own DNS client (see dns_client.py)

    def dns_query_many(self, queries: Sequence[tuple[str, str]], *,
                       pod: "Pod | str | None" = None, server: str | None = None,
                       port: int | None = None, timeout: float = 1.0,
                       tcp: bool = False) -> list[DnsResult]:
        """Ask from pod's namespace, or from the bridge (source 10.213.0.1) without pod."""
        self._check_open()
        ns = self._pod(pod).netns if pod is not None else self.net_ns
        server, port = server or self.dns_ip, port or self.dns_port
        return in_netns(ns, lambda: query_many(server, list(queries), port=port, timeout=timeout,
                                               tcp=tcp),
                        timeout=timeout * max(1, len(queries)) + 5)

    def dns_query(self, name: str, qtype: str = "A", **kw) -> DnsResult:
        return self.dns_query_many([(name, qtype)], **kw)[0]


@atexit.register
def _close_open_networks() -> None:
    for network in list(_open_networks):
        try:
            network.close()
        except Exception as e:  # pragma: no cover
            print(f"harness.cluster: teardown at exit: {e}", file=sys.stderr)
