"""The cluster DNS server in its own namespace, and the faults a test can inject into it.

One server process runs in the DNS namespace at a time: dnsmasq with the network's records, or,
while a failure mode is set, the failing responder (``dns_responder.py``) on the same address.
Both write the same query log, so queries are counted whichever runs.

Offers ``DnsServer(ns=, ip=, port=, workdir=, processes=, zones=, log_queries=)``:

* ``records``: the ``dnsmasq.HostsDir`` dnsmasq serves (kept while the server is stopped or
  failing; dnsmasq reads them when it starts again). ``dnsmasq_running``: records can be
  waited for.
* ``start()``: returns once the server listens on udp and tcp (<= 5 s, else HarnessError);
  ``stop()``: SIGTERM, SIGKILL after 3 s; clients then get ICMP port unreachable / TCP RST
  (ECONNREFUSED). ``running``, ``pid``.
* ``set_failure("servfail" | "refused" | "nxdomain" | None)``: every query gets that rcode;
  None brings dnsmasq back. The server is (re)started only if it was meant to run.
* ``drop_packets(percent)``: iptables in the DNS namespace drops that share (0..100, at random)
  of udp and tcp packets to the port; dropped queries never reach the server (not logged); 0 off.
* ``queries()`` -> [(qtype, name, client ip)] since the network started; ``query_count()``
  since the last ``reset_query_count()``. They need ``log_queries`` (HarnessError otherwise);
  it may be changed, taking effect at the next start.
* ``log``: the server's log file (dnsmasq's --log-facility); ``stderr_path``.

Usage::

    server = DnsServer(ns="tfbt1-0-dns", ip="10.213.0.2", port=53, workdir=tmp,
                       processes=processes, zones=["cluster.local", "in-addr.arpa"])
    server.start()
    server.set_failure("servfail"); ...; server.set_failure(None)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Iterable

from harness.dns_responder import responder_argv
from harness.dnsmasq import HostsDir, dnsmasq_argv, read_query_log
from harness.processes import DEFAULT_PATH, HarnessError, ProcessSet, listening, run_command

FAILURE_MODES = ("servfail", "refused", "nxdomain")


class DnsServer:
    def __init__(self, *, ns: str, ip: str, port: int, workdir: str, processes: ProcessSet,
                 zones: Iterable[str], log_queries: bool = True):
        self.ns = ns
        self.ip = ip
        self.port = port
        self.workdir = workdir
        self.processes = processes
        self.zones = list(zones)
        self.log_queries = log_queries
        self.log = os.path.join(workdir, "dns.log")
        self.stderr_path = os.path.join(workdir, "dns.stderr")
        open(self.log, "a").close()
        self.records = HostsDir(os.path.join(workdir, "hosts.d"), self.log)
        self.failure: str | None = None
        self.drop_percent = 0.0
        self._process: subprocess.Popen | None = None
        self._wanted = False   # started by the test (and not stopped since)
        self._query_baseline = 0

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def dnsmasq_running(self) -> bool:
        return self.running and self.failure is None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def _argv(self) -> list[str]:
        log = self.log if self.log_queries else None
        if self.failure is not None:
            return responder_argv(sys.executable, ip=self.ip, port=self.port, rcode=self.failure,
                                  log=log)
        return dnsmasq_argv(ip=self.ip, port=self.port, hostsdir=self.records.path,
                            log=self.log, pid_file=os.path.join(self.workdir, "dnsmasq.pid"),
                            zones=self.zones, log_queries=self.log_queries)

    def start(self) -> None:
        self._wanted = True
        if self.running:
            return
        with open(self.stderr_path, "a") as err:
            self._process = self.processes.spawn(["ip", "netns", "exec", self.ns, *self._argv()],
                                                 stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                                                 env={"PATH": DEFAULT_PATH})
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise HarnessError(f"DNS server exited rc={self._process.returncode}: "
                                   f"{_tail(self.stderr_path)} {_tail(self.log)}")
            if listening(self._process.pid, self.ip, self.port):
                return
            time.sleep(0.005)
        raise HarnessError("DNS server did not listen within 5s")

    def stop(self) -> None:
        self._wanted = False
        self._end_process()

    def _end_process(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=3)
            except subprocess.TimeoutExpired:
                pass
        try:   # the rest of its group too: dnsmasq forks a child per TCP connection
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        process.wait(timeout=3)
        self.processes.forget(process)

    def set_failure(self, mode: str | None) -> None:
        if mode is not None:
            mode = mode.lower()
            if mode not in FAILURE_MODES:
                raise ValueError(f"unknown DNS failure mode {mode!r}")
        if mode == self.failure and self.running:
            return
        self._end_process()
        self.failure = mode
        if self._wanted:
            self.start()

    def drop_packets(self, percent: float) -> None:
        if not 0 <= percent <= 100:
            raise ValueError("percent must be within 0..100")
        iptables = ["ip", "netns", "exec", self.ns, "iptables", "-w", "5"]
        run_command([*iptables, "-F", "INPUT"])   # our own namespace: only our rules live there
        if percent > 0:
            random = [] if percent >= 100 else ["-m", "statistic", "--mode", "random",
                                                "--probability", f"{percent / 100:.6f}"]
            for protocol in ("udp", "tcp"):
                run_command([*iptables, "-A", "INPUT", "-p", protocol, "--dport", str(self.port),
                             *random, "-j", "DROP"])
        self.drop_percent = percent

    def queries(self) -> list[tuple[str, str, str]]:
        if not self.log_queries:
            raise HarnessError("query logging is off (log_queries=False)")
        return read_query_log(self.log)

    def query_count(self) -> int:
        return len(self.queries()) - self._query_baseline

    def reset_query_count(self) -> None:
        self._query_baseline = len(self.queries())


def _tail(path: str, size: int = 2000) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read()[-size:]
    except OSError:
        return ""
