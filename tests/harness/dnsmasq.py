"""dnsmasq as the cluster DNS: its command line, its records, and its log.

dnsmasq answers only from records the harness gives it, one hosts-format file per record in a
directory it watches (``--hostsdir``, inotify), so records change while it runs, typically
within a few ms; it forwards nothing. Its log file tells when it has read a record file, and
with ``--log-queries`` every query it received.

Offers:

* ``dnsmasq_argv(ip=, port=, hostsdir=, log=, pid_file=, zones=, log_queries=)``: the command
  that serves ip:port (udp+tcp) from the records in hostsdir only, answering NXDOMAIN/NODATA for
  any other name in ``zones`` (a zone "#" means every name) and REFUSED outside them.
* ``HostsDir(path, log)``: the records. ``add(name, ip, aliases, wait=)`` publishes the A (IPv4)
  or AAAA (IPv6) record name -> ip (and the aliases), and the PTR ip -> name;
  ``remove(name, ip=None, wait=)`` removes the records of name (all its IPs unless ip) and
  returns how many. With wait, each returns once dnsmasq has logged that it (re)read or
  dropped the file (<= 2 s, else HarnessError): pass wait only while dnsmasq runs.
  Publishing a name twice with different IPs gives an RRset with both; for one IP, the PTR
  comes from the first record dnsmasq read.
* ``read_query_log(log)`` -> [(qtype, name, client ip)]: every ``query[...]`` line of the log.

Usage::

    records = HostsDir(os.path.join(tmp, "hosts.d"), log)
    spawn(dnsmasq_argv(ip="10.213.0.2", port=53, hostsdir=records.path, log=log, ...))
    records.add("w-0.svc.cluster.local", "10.213.1.10", ("svc.cluster.local",), wait=True)
"""

from __future__ import annotations

import ipaddress
import os
import re
import time
from typing import Iterable

from harness.processes import HarnessError

DNSMASQ = "/usr/sbin/dnsmasq"
_QUERY_LINE = re.compile(r"query\[([^\]]+)\] (\S+) from (\S+)")


def dnsmasq_argv(*, ip: str, port: int, hostsdir: str, log: str, pid_file: str,
                 zones: Iterable[str], log_queries: bool) -> list[str]:
    # --keep-in-foreground: our child, so it can be stopped and killed; --conf-file=/dev/null:
    # not the host's /etc/dnsmasq.conf; an own pid file: the default /run/dnsmasq.pid would
    # collide; --user/--group root: no privilege drop (the default group "dip" may not exist);
    # --no-resolv without --server: nothing is ever forwarded; --no-hosts + --hostsdir: only our
    # records; --no-poll: no resolv.conf polling; --bind-interfaces: only ip:port;
    # --local=/zone/: answer from the records only; --no-negcache, --local-ttl=0: a change is
    # seen by the next query.
    argv = [DNSMASQ, "--keep-in-foreground", "--conf-file=/dev/null", f"--pid-file={pid_file}",
            "--user=root", "--group=root", "--no-resolv", "--no-hosts", "--no-poll",
            f"--hostsdir={hostsdir}", f"--listen-address={ip}", "--bind-interfaces",
            f"--port={port}", "--no-negcache", "--local-ttl=0", f"--log-facility={log}",
            *[f"--local=/{zone}/" for zone in zones]]
    if log_queries:
        argv.append("--log-queries")
    return argv


def read_query_log(log: str) -> list[tuple[str, str, str]]:
    queries = []
    try:
        with open(log, errors="replace") as f:
            for line in f:
                match = _QUERY_LINE.search(line)
                if match:
                    queries.append((match.group(1), match.group(2), match.group(3)))
    except OSError:
        pass
    return queries


def _file_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._@:-]", "_", text).lstrip(".") or "_"


class HostsDir:
    def __init__(self, path: str, log: str):
        self.path = path
        self.log = log
        self.records: dict[str, tuple[str, str, tuple[str, ...]]] = {}  # file -> name, ip, aliases
        os.makedirs(path, exist_ok=True)

    def add(self, name: str, ip: str, aliases: Iterable[str] = (), *, wait: bool) -> None:
        ipaddress.ip_address(ip)  # a ValueError here rather than a line dnsmasq skips
        name = name.rstrip(".")
        aliases = tuple(alias.rstrip(".") for alias in aliases)
        key = _file_name(f"{name}@{ip}")
        self.records[key] = (name, ip, aliases)
        self._write(key, "\t".join((ip, name, *aliases)) + "\n", wait)

    def remove(self, name: str, ip: str | None = None, *, wait: bool) -> int:
        name = name.rstrip(".")
        keys = [key for key, (n, i, _) in self.records.items()
                if n == name and (ip is None or i == ip)]
        for key in keys:
            del self.records[key]
            self._write(key, None, wait)
        return len(keys)

    def _write(self, key: str, line: str | None, wait: bool) -> None:
        path = os.path.join(self.path, key)
        before = self._reads_logged(path, removed=line is None) if wait else 0
        if line is None:
            try:
                os.unlink(path)
            except FileNotFoundError:
                return
        else:
            tmp = os.path.join(self.path, f".{key}.tmp")   # dnsmasq ignores dot files
            with open(tmp, "w") as f:
                f.write(line)
            os.replace(tmp, path)                          # one inotify event for the whole file
        if wait:
            self._wait_read(path, before, removed=line is None)

    def _reads_logged(self, path: str, removed: bool) -> int:
        # dnsmasq logs "read <path> - N names" after (re)reading a hostsdir file and
        # "inotify: flushed N names read from <path>" after dropping a removed one
        pattern = f"names read from {path}\n" if removed else f"read {path} - "
        try:
            with open(self.log, errors="replace") as f:
                return sum(1 for line in f if pattern in line)
        except OSError:
            return 0

    def _wait_read(self, path: str, before: int, removed: bool) -> None:
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            if self._reads_logged(path, removed) > before:
                return
            time.sleep(0.005)
        raise HarnessError(f"dnsmasq did not {'drop' if removed else 'read'} {path} within 2s")
