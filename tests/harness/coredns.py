"""CoreDNS as the cluster DNS, answering the way a Kubernetes cluster's does (kubeadm's default).

The reference server beside dnsmasq: CoreDNS 1.11.3, built once by ``scripts/setup-coredns`` into
the test cache (``$TFBOOT_TEST_CACHE``, default /var/cache/tfboot-test; ``TFBOOT_COREDNS`` names
another binary). The kubernetes plugin's answers come from ``file`` zones the harness writes:
each pod's A record under the headless Service's subdomain, the Service's A RRset (one address
per pod), SRV for its named port (``_grpc._tcp.<service>``, 2222), PTR in the network's /16
reverse zone; every record with TTL 30 and an SOA whose minimum is 30, as the plugin with kubeadm's
``ttl 30`` gives. ``reload 1s`` stands in for the API watch: a change is served within about a
second, once CoreDNS has re-read the zone (the serial goes up with every change). In front, the
plugins of kubeadm's Corefile that shape answers: ``errors``, ``cache 30`` (answers, NXDOMAIN
included, are served from the cache until their TTL runs out), ``loadbalance``; ``prometheus``
on <ip>:9153 counts requests. Left out: ``health``/``ready`` (the harness waits for the sockets),
``forward`` and ``loop`` (nothing leaves the network: other zones get NXDOMAIN from a
``template`` block, names outside every zone REFUSED, as dnsmasq's ``--local`` zones do).

Offers:

* ``COREDNS`` (the binary's path), ``missing_reason()`` -> why CoreDNS cannot run, or None.
* ``CoreDnsServer(ns=, ip=, port=, workdir=, processes=, domain=, zones=, log_queries=)``: a
  ``dns_server.DnsServer`` running CoreDNS instead of dnsmasq (start/stop, set_failure with the
  failing responder, drop_packets, queries/query_count as there). ``log_queries`` adds the
  ``log`` plugin (one line per query, cached answers too); ``records`` is a ``KubernetesZones``;
  ``metrics()`` -> {"requests", "cache_hits", "cache_misses"} from prometheus (counted with or
  without the log); ``cpu_seconds()`` the server's CPU time so far.
* ``KubernetesZones(path, log, domain, reverse_zone)``: the records. ``add(name, ip, aliases,
  wait=)``: the A (or AAAA) record name -> ip, the PTR ip -> name (the first name given an ip
  keeps it), and for each alias ``<service>.<namespace>.svc.<domain>``, ip in the Service's A RRset
  and name in its SRV records; ``add_many([(name, ip, aliases)], wait=)`` as one change, ``clear(
  wait=)``. ``remove(name, ip=None, wait=)`` -> how many records went. With
  wait, each returns once CoreDNS has loaded the change (<= 3 s, else HarnessError); ``wait()``
  waits for every change so far and returns how long it took.
* ``cpu_seconds(pid)``: CPU seconds of a process, all its threads, from /proc (any server's).

Usage (``ClusterNetwork(dns_server="coredns")`` does this)::

    server = CoreDnsServer(ns=prefix + "dns", ip="10.213.0.2", port=53, workdir=tmp,
                           processes=processes, domain="cluster.local",
                           zones=["cluster.local", "in-addr.arpa", "ip6.arpa", "#"])
    server.start()
    server.records.add("w-0.mnist.default.svc.cluster.local", "10.213.1.10",
                       ("mnist.default.svc.cluster.local",), wait=True)
"""

from __future__ import annotations

import ipaddress
import os
import re
import time
import urllib.request
from typing import Iterable

from harness.dns_server import DnsServer
from harness.namespaces import in_netns
from harness.processes import HarnessError, ProcessSet

VERSION = "1.11.3"
CACHE_DIR = os.environ.get("TFBOOT_TEST_CACHE", "/var/cache/tfboot-test")
COREDNS = os.environ.get("TFBOOT_COREDNS") or os.path.join(CACHE_DIR, f"coredns-{VERSION}", "coredns")
TTL = 30                      # kubeadm's `ttl 30` in the kubernetes plugin, and `cache 30`
METRICS_PORT = 9153           # kubeadm's prometheus port
NAMED_PORT = ("grpc", "tcp", 2222)   # the Service port of the examples (examples/kubernetes)
_LOG_LINE = re.compile(r'\[INFO\] (\S+):\d+ - \d+ "(\S+) IN (\S+) (?:udp|tcp) ')
_RESPONDER_LINE = re.compile(r"query\[([^\]]+)\] (\S+) from (\S+)")


def missing_reason() -> str | None:
    if not os.access(COREDNS, os.X_OK):
        return f"CoreDNS {VERSION} is not built at {COREDNS} (scripts/setup-coredns builds it)"
    return None


def cpu_seconds(pid: int) -> float:
    """CPU time of every thread of pid: their /proc schedstat run times (ns), else the 10 ms
    ticks of utime + stime in /proc/<pid>/stat."""
    try:
        total = 0
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        return total / 1e9
    except (OSError, ValueError, IndexError):
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        fields = stat[stat.rindex(b")") + 2:].split()   # after "(comm)": state is field 0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")   # utime, stime


def reverse_zone_of(ip: str) -> str:
    """The in-addr.arpa zone of ip's /16, the network the harness gives its pods."""
    a, b, _, _ = str(ipaddress.IPv4Address(ip)).split(".")
    return f"{b}.{a}.in-addr.arpa"


def corefile(*, ip: str, port: int, domain: str, reverse_zone: str, zone_files: dict[str, str],
             other_zones: Iterable[str], log_queries: bool) -> str:
    common = [f"bind {ip}", "errors", *(["log"] if log_queries else []),
              f"prometheus {ip}:{METRICS_PORT}"]
    served = [*common, f"cache {TTL}", "loadbalance",
              *[f"file {path} {zone} {{\n        reload 1s\n    }}" for zone, path in zone_files.items()]]
    blocks = [(f"{domain}:{port} {reverse_zone}:{port}", served)]
    other = sorted({"." if zone == "#" else zone.strip(".") for zone in other_zones} - {domain, reverse_zone})
    if other:   # the cluster DNS's upstream, which would say NXDOMAIN for names nobody serves
        blocks.append((" ".join(f"{zone}:{port}" for zone in other),
                       [*common, f"cache {TTL}", "template ANY ANY {\n        rcode NXDOMAIN\n    }"]))
    return "".join(f"{keys} {{\n" + "".join(f"    {line}\n" for line in lines) + "}\n"
                   for keys, lines in blocks)


class KubernetesZones:
    def __init__(self, path: str, log: str, domain: str, reverse_zone: str):
        self.path = path
        self.log = log
        self.domain = domain.strip(".")
        self.reverse_zone = reverse_zone.strip(".")
        self.records: list[tuple[str, str, tuple[str, ...]]] = []   # name, ip, aliases; in order
        self.serial = 1
        self.serial_at_start = 1   # what CoreDNS read when it last started (see started())
        os.makedirs(path, exist_ok=True)
        self.files = {self.domain: os.path.join(path, f"db.{self.domain}"),
                      self.reverse_zone: os.path.join(path, f"db.{self.reverse_zone}")}
        self._write()

    def add(self, name: str, ip: str, aliases: Iterable[str] = (), *, wait: bool) -> None:
        ipaddress.ip_address(ip)
        name = self._in_domain(name)
        aliases = tuple(self._in_domain(alias) for alias in aliases)
        self.records.append((name, ip, aliases))
        self._changed(wait)

    def add_many(self, records: Iterable[tuple[str, str, Iterable[str]]], *, wait: bool) -> None:
        """add() for each (name, ip, aliases), written as one change (thousands at once)."""
        for name, ip, aliases in records:
            ipaddress.ip_address(ip)
            self.records.append((self._in_domain(name), ip, tuple(self._in_domain(a) for a in aliases)))
        self._changed(wait)

    def clear(self, *, wait: bool) -> None:
        self.records = []
        self._changed(wait)

    def remove(self, name: str, ip: str | None = None, *, wait: bool) -> int:
        name = name.rstrip(".")
        kept = [r for r in self.records if not (r[0] == name and (ip is None or r[1] == ip))]
        removed = len(self.records) - len(kept)
        if removed:
            self.records = kept
            self._changed(wait)
        return removed

    def wait(self, timeout: float = 3.0) -> float:
        """Returns once CoreDNS has loaded the last change of every zone: the seconds it took."""
        began = time.monotonic()
        deadline = began + timeout
        while time.monotonic() < deadline:
            loaded = self._loaded_serials()
            if all(loaded.get(zone, 0) >= self.serial for zone in self.files):
                return time.monotonic() - began
            time.sleep(0.01)
        raise HarnessError(f"CoreDNS did not load serial {self.serial} of {list(self.files)} "
                           f"within {timeout}s")

    def started(self) -> None:
        """CoreDNS has just started: it read the files as they are now."""
        self.serial_at_start = self.serial

    def _in_domain(self, name: str) -> str:
        name = name.rstrip(".")
        if not name.endswith("." + self.domain):
            raise HarnessError(f"CoreDNS serves names under {self.domain} only, not {name!r}")
        return name

    def _changed(self, wait: bool) -> None:
        # A written file is loaded at CoreDNS's next tick if its serial differs from the last one
        # loaded; the initial files were loaded at start, with serial 1.
        self.serial += 1
        self._write()
        if wait:
            self.wait()

    def _write(self) -> None:
        for zone, text in ((self.domain, self._forward_zone()), (self.reverse_zone, self._reverse_zone())):
            path = self.files[zone]
            with open(path + ".tmp", "w") as f:
                f.write(self._soa(zone) + text)
            os.replace(path + ".tmp", path)   # CoreDNS never reads half a file

    def _soa(self, zone: str) -> str:
        # As the kubernetes plugin: ns.dns.<domain>, hostmaster.<domain>, refresh 7200, retry
        # 1800, expire 86400, minimum = TTL, so an NXDOMAIN may be cached for TTL seconds.
        return (f"$ORIGIN {zone}.\n"
                f"@ {TTL} IN SOA ns.dns.{self.domain}. hostmaster.{self.domain}. "
                f"{self.serial} 7200 1800 86400 {TTL}\n"
                f"@ {TTL} IN NS ns.dns.{self.domain}.\n")

    def _forward_zone(self) -> str:
        lines: dict[str, None] = {}   # ordered, without duplicates
        services: dict[str, list[str]] = {}
        for name, ip, aliases in self.records:
            rtype = "AAAA" if ":" in ip else "A"
            lines[f"{name}. {TTL} IN {rtype} {ip}"] = None
            for alias in aliases:
                lines[f"{alias}. {TTL} IN {rtype} {ip}"] = None
                services.setdefault(alias, []).append(name)
        port_name, protocol, port = NAMED_PORT
        for service, targets in services.items():
            if not re.fullmatch(rf"[^.]+\.[^.]+\.svc\.{re.escape(self.domain)}", service):
                continue   # an alias that is no Service name: no SRV
            weight = max(1, 100 // len(set(targets)))   # the kubernetes plugin's share of 100
            for target in dict.fromkeys(targets):
                lines[f"_{port_name}._{protocol}.{service}. {TTL} IN SRV 0 {weight} {port} {target}."] = None
        return "".join(line + "\n" for line in lines)

    def _reverse_zone(self) -> str:
        pointers: dict[str, str] = {}
        for name, ip, _ in self.records:
            reverse = ipaddress.ip_address(ip).reverse_pointer
            if reverse.endswith("." + self.reverse_zone):
                pointers.setdefault(reverse, name)
        return "".join(f"{reverse}. {TTL} IN PTR {name}.\n" for reverse, name in pointers.items())

    def _loaded_serials(self) -> dict[str, int]:
        # "Successfully reloaded zone "cluster.local." in "/path" with 7 SOA serial"
        loaded = {zone: self.serial_at_start for zone in self.files}
        try:
            with open(self.log, errors="replace") as f:
                for match in re.finditer(r'reloaded zone "([^"]+)\." in "[^"]*" with (\d+) SOA serial', f.read()):
                    zone = match.group(1)
                    loaded[zone] = max(loaded.get(zone, 0), int(match.group(2)))
        except OSError:
            pass
        return loaded


class CoreDnsServer(DnsServer):
    def __init__(self, *, ns: str, ip: str, port: int, workdir: str, processes: ProcessSet,
                 domain: str, zones: Iterable[str], log_queries: bool = True):
        super().__init__(ns=ns, ip=ip, port=port, workdir=workdir, processes=processes,
                         zones=zones, log_queries=log_queries)
        self.domain = domain.strip(".")
        self.stderr_path = self.log   # CoreDNS logs queries and zone reloads on stdout
        self.records = KubernetesZones(os.path.join(workdir, "zones"), self.log, self.domain,
                                       reverse_zone_of(ip))
        self.corefile_path = os.path.join(workdir, "Corefile")

    def _argv(self) -> list[str]:
        if self.failure is not None:
            return super()._argv()   # the failing responder
        reason = missing_reason()
        if reason:
            raise HarnessError(reason)
        with open(self.corefile_path, "w") as f:
            f.write(corefile(ip=self.ip, port=self.port, domain=self.domain,
                             reverse_zone=self.records.reverse_zone, zone_files=self.records.files,
                             other_zones=self.zones, log_queries=self.log_queries))
        return [COREDNS, "-conf", self.corefile_path, "-quiet"]

    def start(self) -> None:
        was_serving = self.dnsmasq_running
        super().start()
        if not was_serving and self.dnsmasq_running:
            self.records.started()

    def queries(self) -> list[tuple[str, str, str]]:
        if not self.log_queries:
            raise HarnessError("query logging is off (log_queries=False)")
        queries = []
        try:
            with open(self.log, errors="replace") as f:
                for line in f:
                    match = _LOG_LINE.search(line)
                    if match:
                        queries.append((match.group(2), match.group(3).rstrip("."), match.group(1)))
                        continue
                    match = _RESPONDER_LINE.search(line)
                    if match:
                        queries.append((match.group(1), match.group(2), match.group(3)))
        except OSError:
            pass
        return queries

    def metrics(self) -> dict[str, int]:
        if not self.running or self.failure is not None:
            raise HarnessError("CoreDNS is not running")
        url = f"http://{self.ip}:{METRICS_PORT}/metrics"
        text = in_netns(self.ns, lambda: urllib.request.urlopen(url, timeout=5).read().decode())
        totals = {"requests": 0, "cache_hits": 0, "cache_misses": 0}
        names = {"coredns_dns_requests_total": "requests", "coredns_cache_hits_total": "cache_hits",
                 "coredns_cache_misses_total": "cache_misses"}
        for line in text.splitlines():
            metric = line.split("{", 1)[0].split(" ", 1)[0]
            if metric in names:
                totals[names[metric]] += int(float(line.rsplit(" ", 1)[1]))
        return totals

    def cpu_seconds(self) -> float:
        if not self.running:
            raise HarnessError("the DNS server is not running")
        return cpu_seconds(self.pid)
