"""The benchmark's cluster network: tests/harness/cluster.py's ClusterNetwork plus what a benchmark
needs on top (the harness itself is shared with the integration tests and stays as it is).

* :meth:`BenchNetwork.load_peer_records` publishes thousands of records at once: one file in
  dnsmasq's hostsdir with a line per peer, read when dnsmasq (re)starts, instead of one file per
  record with an inotify round trip each (the harness's ``publish``); with
  ``dns_server="coredns"`` CoreDNS's zone file, read as it starts.
* :meth:`BenchNetwork.set_query_logging` turns dnsmasq's ``--log-queries`` on (to count queries)
  or off (for timing: logging every query costs dnsmasq a write per query) by restarting it.
* :meth:`BenchNetwork.wait_records_loaded`: dnsmasq listens before it has read its hostsdir, and
  reading a file whose every line repeats the Service alias is quadratic (~5 s for 4096 lines), so
  every (re)start waits until the first and the last name answer;
  :meth:`BenchNetwork.restart_dns_unready` restarts without that wait (a stalled server).
* :meth:`BenchNetwork.dns_server_cpu_seconds` tells how busy dnsmasq was during a run (near the
  wall time: the server is the bottleneck).
* :func:`udp_counters` reads the kernel's UDP counters of a namespace, so datagrams received and
  dropped (full socket buffers) are seen even while query logging is off.
"""

from __future__ import annotations

import os
import subprocess
import time

from harness.cluster import ClusterNetwork, HarnessError
from harness.coredns import cpu_seconds

PEERS_FILE = "bench-peers"


def peer_ip(subnet: str, index: int) -> str:
    """The IP the harness's add_pod would give the index-th pod (so worker 0 is the first pod)."""
    return f"{subnet}.{1 + index // 200}.{10 + index % 200}"


def udp_counters(netns: str) -> dict[str, int]:
    """The ``Udp:`` line of /proc/net/snmp inside netns, e.g. {"InDatagrams": 12, "RcvbufErrors": 0}."""
    cp = subprocess.run(["ip", "netns", "exec", netns, "cat", "/proc/net/snmp"], capture_output=True,
                        text=True, timeout=10, check=True)
    rows = [line.split()[1:] for line in cp.stdout.splitlines() if line.startswith("Udp:")]
    if len(rows) < 2:
        raise HarnessError(f"no Udp: counters in {netns}'s /proc/net/snmp")
    return {key: int(value) for key, value in zip(rows[0], rows[1])}


def process_cpu_seconds(pid: int) -> float:
    """CPU time a (single-threaded) process has run: /proc/<pid>/schedstat in ns, else the
    10 ms ticks of utime + stime in /proc/<pid>/stat."""
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            return int(f.read().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class BenchNetwork(ClusterNetwork):
    """A ClusterNetwork whose DNS server holds a whole job's records from one file (dnsmasq: a
    hosts file; CoreDNS, ``dns_server="coredns"``: its zone file, read as it starts)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("log_queries", False)
        super().__init__(*args, **kwargs)

    def dns_server_pid(self) -> int:
        """The pid of the dnsmasq running in the DNS namespace."""
        cp = subprocess.run(["ip", "netns", "pids", self.dns_ns], capture_output=True, text=True, timeout=10)
        for pid in (int(p) for p in cp.stdout.split() if p.isdigit()):
            try:
                with open(f"/proc/{pid}/comm") as f:
                    if f.read().strip() == "dnsmasq":
                        return pid
            except OSError:
                continue
        raise HarnessError(f"no dnsmasq in {self.dns_ns}")

    def dns_server_cpu_seconds(self) -> float:
        """CPU time the DNS server has used so far."""
        if self.dns_server == "coredns":   # several threads
            return cpu_seconds(self.dns.pid)
        if getattr(self, "_server_pid", None) is None or not os.path.exists(f"/proc/{self._server_pid}"):
            self._server_pid = self.dns_server_pid()
        return process_cpu_seconds(self._server_pid)

    def restart_dns_unready(self) -> None:
        """Restart dnsmasq and return as soon as it listens, before it has read its records."""
        self._server_pid = None
        self.stop_dns()
        self.start_dns()

    def set_query_logging(self, enabled: bool) -> None:
        """Restart dnsmasq with or without --log-queries; returns once it answers for the records
        again (it re-reads them after it starts listening)."""
        if self.log_queries == enabled and self.dns_running:
            return
        self.log_queries = enabled
        self.restart_dns_unready()
        self.wait_records_loaded()
        if enabled:
            self.reset_dns_query_count()

    def load_peer_records(self, records: list[tuple[str, str]], *, service_alias: bool = True) -> None:
        """Make dnsmasq answer exactly these (fqdn, ip) A records (plus their PTRs and, like
        kube-dns for a headless Service, the Service name with every IP), replacing earlier ones.

        dnsmasq is restarted on a hostsdir holding one file with a line per record; returns once
        the first and the last name answer (bounded: 10 s)."""
        self._check_open()
        if self.dns_server == "coredns":   # one zone file, read as CoreDNS starts
            self.stop_dns()
            self.dns.records.clear(wait=False)
            aliases = (self.service_fqdn,) if service_alias and self.service else ()
            self.dns.records.add_many([(fqdn, ip, aliases) for fqdn, ip in records], wait=False)
            self._loaded = (len(records), [records[0], records[-1]] if records else [])
            self.start_dns()
            self.wait_records_loaded()
            return
        alias = f"\t{self.service_fqdn}" if service_alias and self.service else ""
        self.stop_dns()
        for entry in os.listdir(self.hostsdir):   # this network's own temp dir: only our records
            os.unlink(os.path.join(self.hostsdir, entry))
        tmp = os.path.join(self.hostsdir, f".{PEERS_FILE}.tmp")
        with open(tmp, "w") as f:
            f.writelines(f"{ip}\t{fqdn}{alias}\n" for fqdn, ip in records)
        os.replace(tmp, os.path.join(self.hostsdir, PEERS_FILE))
        self._loaded = (len(records), [records[0], records[-1]] if records else [])
        self._server_pid = None
        self.start_dns()
        self.wait_records_loaded()

    def wait_records_loaded(self, timeout: float = 30) -> None:
        # dnsmasq listens before it has read the hostsdir; queries sent meanwhile queue up (and
        # overflow its socket buffer). Reading is slow with the Service alias on every line
        # (quadratic: ~5 s for 4096 lines), so wait until the first and last names answer.
        count, checks = getattr(self, "_loaded", (0, []))
        pending = set(checks)
        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            for fqdn, ip in list(pending):
                if ip in self.dns_query(fqdn, "A", timeout=0.5).addresses:
                    pending.discard((fqdn, ip))
            if pending:
                time.sleep(0.05)
        if pending:
            raise HarnessError(f"dnsmasq does not answer {sorted(pending)} {timeout}s after loading {count} records")
