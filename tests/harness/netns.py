"""A simulated Kubernetes cluster network for tfboot's integration tests (stdlib only, needs root).

Everything lives in network namespaces created for one run; nothing is created in, and no
traffic goes to or from, the root network namespace::

    <prefix>net   bridge br0 (10.213.0.1/16, the "probe" address the harness queries DNS from)
    <prefix>dns   eth0 10.213.0.2/16  real dnsmasq on 10.213.0.2:53 (udp+tcp), or the failure responder
    <prefix>p<i>-<pod name>  eth0 10.213.<1+i//200>.<10+i%200>/16, lo up   (one per add_pod)

Each namespace's eth0 is one end of a veth pair created inside ``<prefix>net`` (``ip link add
vX type veth peer name eth0 netns <ns>``), the other end enslaved to br0. ``<prefix>`` is
``tfbt<pid>-<n>-`` (pid of the test process, n counts networks in that process), so parallel runs
never collide and :func:`cleanup_stale` can remove whatever a dead run left (it is also called by
every :meth:`ClusterNetwork.start`). The per-run files (hosts/resolv.conf of pods, dnsmasq's
hostsdir, logs) live in a temp dir ``/tmp/tfbt<pid>-<n>-*``.

API
---
::

    from harness.netns import ClusterNetwork, cleanup_stale, DnsResult

    with ClusterNetwork(service="mnist", namespace="default", cluster_domain="cluster.local",
                        *, subnet="10.213", local_zones=("#",), log_queries=True,
                        service_records=True) as net:
        # dnsmasq answers only from its records: --local for the cluster domain, in-addr.arpa,
        # ip6.arpa and local_zones; the default "#" (= every name) makes any unknown name
        # NXDOMAIN (compose-style bare names included). local_zones=() -> names outside the
        # cluster domain get REFUSED (dnsmasq has no upstream: --no-resolv).
        net.dns_ip / net.bridge_ip / net.service_fqdn / net.tmpdir / net.pods (name -> Pod)

        pod = net.add_pod(name, *, hostname=None, service=<net.service>, ip=None,
                          hosts=None, resolv=None)                                    -> Pod
            # hostname defaults to name; service="" means "no subdomain" (no FQDN, hosts line
            # "<ip>\\t<hostname>"); hosts/resolv: full file text replacing the generated one.
            # Generated /etc/hosts (kubelet format):
            #   # Kubernetes-managed hosts file.
            #   127.0.0.1\\tlocalhost / ::1 and fe00:: lines
            #   <ip>\\t<host>.<service>.<ns>.svc.<domain>\\t<host>
            # Generated /etc/resolv.conf (kubelet ClusterFirst format):
            #   search <ns>.svc.<domain> svc.<domain> <domain>
            #   nameserver <dns ip>
            #   options ndots:5
        pod.set_hosts(text) / pod.set_resolv(text)   # rewrite in place (visible to running pods too)
        pod.name, .hostname, .ip, .fqdn (None without service), .netns, .hosts_path, .resolv_path

        net.publish(pod_or_name, *, ip=None, fqdn=None, service_record=None, wait=True) -> fqdn
            # A record <fqdn> -> ip (default: the pod's FQDN and IP), plus PTR ip -> fqdn, plus
            # (service_records) the headless Service name <service>.<ns>.svc.<domain> -> ip,
            # like kube-dns for a headless Service.
        net.publish_name(name, ip, *aliases, wait=True)
            # any A (IPv4) or AAAA (IPv6) record: one hosts line "ip name aliases..."; the PTR of
            # ip answers `name` (compose style: publish_name("proj-worker-1.proj_default", ip,
            # "proj-worker-1", "worker")). Publishing a name twice with different IPs gives an
            # RRset with both. For one IP, the PTR comes from the first record dnsmasq read.
        net.unpublish(pod_or_name, ip=None, *, wait=True)   # remove a record (all IPs unless ip)
            # publish/unpublish are live: a file per record in dnsmasq's --hostsdir (written as a
            # dot file, then renamed), picked up by inotify, typically within a few ms.
            # wait=True blocks (<= 2 s, raises otherwise) until dnsmasq logged that it read /
            # flushed that file; wait=False for "appears while the client waits" tests. Records
            # can be changed while the server is stopped or failing; dnsmasq reads them on start.

        proc = net.run(pod, argv, *, env=None, pid1=True, hostname=None, cwd=None,
                       stdin=DEVNULL, stdout=PIPE, stderr=PIPE, text=True,
                       wait_exec=True, extra_mounts=())                     -> PodProcess
            # setpriv --pdeathsig KILL -- ip netns exec <pod ns> \
            #     unshare --uts --mount --propagation private [--pid] python3 -I -S -c <shim> ...
            # The shim sets the hostname (default pod.hostname), bind-mounts the pod's hosts,
            # resolv.conf and an nsswitch.conf with "hosts: files dns" over /etc (private mount
            # namespace: the host's files are untouched), then execve()s argv with EXACTLY `env`
            # (plus PATH if env has none; env=None means {PATH} only; check /proc/self/environ:
            # Python itself may add LC_CTYPE to its os.environ).
            # pid1=True: the shim forks; the child is PID 1 of the new PID namespace, mounts a
            # fresh /proc and execve()s argv (no shell, no shim left as PID 1); the shim parent
            # stays outside as proc.pid, relays HUP/INT/QUIT/TERM/USR1/USR2 to it and exits the
            # way it exited (code, or same signal -> returncode == -S like a plain Popen).
            # wait_exec=True returns only once argv has been exec'd (so a signal sent next
            # reaches the program, not the shim). Exec failure: exit 127 (not found)/126, message
            # on stderr. extra_mounts: [(host_path, path_inside)] more bind mounts.
            # stdout/stderr are pipes by default: read them (communicate) or pass files for
            # chatty programs, a full pipe blocks the program.
        proc.program_pid      # host pid of argv's process (the PID 1 inside when pid1=True)
        proc.nspid()          # [host pid, pid inside] from /proc/<pid>/status NSpid
        proc.wait_exec(timeout=10)
        proc.send_signal(sig) / proc.terminate() / proc.kill()
        net.signal(proc, sig) # same: delivered straight to program_pid (PID 1 inside). A signal
            # sent to proc.pid by other means is relayed to it too.
            # NB kernel rule: PID 1 only receives signals it has a handler for (SIGKILL aside),
            # from outside and from itself; a SIGTERM before the program installed its handler is
            # lost. Tests should wait for a sign of life (a log line) before signalling.
        net.exec_in_pod(pod, argv, *, env=None, timeout=10, input=None, pid1=False, check=False)
                                                        -> subprocess.CompletedProcess (text)
        net.run_in_dns_ns(argv, *, timeout=10, check=False) -> CompletedProcess (text)

        # DNS client (stdlib, in-process: a short-lived thread setns()es into a netns, so it is fast)
        net.dns_query(name, qtype="A", *, pod=None, server=None, port=53, timeout=1.0,
                      tcp=False)                                           -> DnsResult
        net.dns_query_many([(name, qtype), ...], *, pod=None, ...)        -> [DnsResult]
            # sent concurrently (one UDP socket each) from pod's netns, or from the bridge
            # namespace (source 10.213.0.1) when pod is None.
            # DnsResult: name, qtype, rcode ("NOERROR","NXDOMAIN","SERVFAIL","REFUSED",...,
            # "TIMEOUT", "ECONNREFUSED" = ICMP port unreachable), answers [{name,type,ttl,value}],
            # elapsed; .addresses, .values, .nodata, .timed_out

        # failure modes
        net.drop_dns_packets(percent)       # 0..100; iptables -m statistic --mode random DROP of
                                            # udp+tcp dport 53 in the DNS namespace's INPUT; 0 = off
        net.set_dns_failure("servfail" | "refused" | "nxdomain" | None)
            # dnsmasq is stopped and a stdlib Python responder bound to the same address answers
            # EVERY query (udp+tcp) with that rcode; None restores dnsmasq (same records).
        net.stop_dns() / net.start_dns()    # server gone (clients get ICMP port unreachable /
                                            # TCP RST, i.e. ECONNREFUSED; glibc then retries for
                                            # its 5 s timeout) / back (<= 5 s until it listens)
        net.dns_running -> bool
        net.dns_queries() -> [(qtype, name, client_ip)]   # every query received, from the log
            # (dnsmasq --log-queries --log-facility=<file>, the responder writes the same
            # format); dropped packets never reach the server and are not counted
        net.dns_query_count() -> int                      # since start or the last reset
        net.reset_dns_query_count()
            # log_queries=False turns dnsmasq's --log-queries off (then these raise)

        net.close()   # also on __exit__, on failure in start(), and atexit

Teardown kills every process started (each in its own session/process group; processes still
inside one of our namespaces are found with ``ip netns pids`` and SIGKILLed), deletes the
namespaces and removes the temp dir. All waits are bounded. Every process started also gets
PR_SET_PDEATHSIG=SIGKILL (via ``setpriv --pdeathsig``), so a SIGKILLed test run does not leak
dnsmasq; the namespaces it leaves are removed by the next run's :func:`cleanup_stale`.

The module is also a script (used by the harness itself, inside namespaces)::

    python3 netns.py responder --ip IP --port 53 --rcode servfail --log FILE
    python3 netns.py query --server IP [--tcp] [--timeout S] NAME[:TYPE] ...   (JSON on stdout)
"""

from __future__ import annotations

import atexit
import ctypes
import ipaddress
import itertools
import json
import os
import re
import selectors
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Iterable, Sequence

PREFIX = "tfbt"
_STALE_RE = re.compile(r"^tfbt(\d+)-")
DNSMASQ = "/usr/sbin/dnsmasq"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SHIM_MARKER = "tfbt-shim"
_HERE = os.path.abspath(__file__)
_counter = itertools.count()
_live: "set[ClusterNetwork]" = set()

QTYPES = {"A": 1, "NS": 2, "CNAME": 5, "SOA": 6, "PTR": 12, "MX": 15, "TXT": 16, "AAAA": 28,
          "SRV": 33, "ANY": 255}
QTYPE_NAMES = {v: k for k, v in QTYPES.items()}
RCODES = {"NOERROR": 0, "FORMERR": 1, "SERVFAIL": 2, "NXDOMAIN": 3, "NOTIMP": 4, "REFUSED": 5}
RCODE_NAMES = {v: k for k, v in RCODES.items()}


class HarnessError(RuntimeError):
    pass


# --------------------------------------------------------------------------------------------
# small process helpers


def _sh(argv: Sequence[str], *, timeout: float = 10, check: bool = True, input: str | None = None,
        env: dict | None = None) -> subprocess.CompletedProcess:
    try:
        cp = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                            input=input, env=env, stdin=None if input is not None else subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        raise HarnessError(f"timed out after {timeout}s: {' '.join(argv)}") from e
    if check and cp.returncode != 0:
        raise HarnessError(f"failed (rc={cp.returncode}): {' '.join(argv)}\n{cp.stderr.strip()}")
    return cp


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _is_zombie_or_gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return True
    return stat[stat.rindex(b")") + 2:stat.rindex(b")") + 3] in (b"Z", b"X")


def _netns_list() -> list[str]:
    cp = _sh(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in cp.stdout.splitlines() if line.strip()]


def _netns_pids(ns: str) -> list[int]:
    cp = _sh(["ip", "netns", "pids", ns], check=False)
    return [int(x) for x in cp.stdout.split() if x.isdigit()]


def _kill_pids(pids: Iterable[int], timeout: float = 3.0) -> None:
    pids = [p for p in pids if p != os.getpid()]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not all(_is_zombie_or_gone(p) for p in pids):
        time.sleep(0.01)


def _delete_netns(ns: str) -> None:
    # kill whatever still runs inside (bounded), then delete; retry a few times (EBUSY races)
    for _ in range(3):
        pids = _netns_pids(ns)
        if pids:
            _kill_pids(pids)
        cp = _sh(["ip", "netns", "delete", ns], check=False)
        if cp.returncode == 0 or ns not in _netns_list():
            return
        time.sleep(0.05)


def cleanup_stale() -> list[str]:
    """Remove namespaces and temp dirs named ``tfbt<pid>-...`` whose pid is no longer alive
    (left by a crashed or SIGKILLed run). Returns the names of removed namespaces."""
    removed = []
    for ns in _netns_list():
        m = _STALE_RE.match(ns)
        if m and not _pid_alive(int(m.group(1))):
            _delete_netns(ns)
            removed.append(ns)
    tmp = tempfile.gettempdir()
    try:
        entries = os.listdir(tmp)
    except OSError:
        entries = []
    for entry in entries:
        m = _STALE_RE.match(entry)
        if m and not _pid_alive(int(m.group(1))):
            shutil.rmtree(os.path.join(tmp, entry), ignore_errors=True)
    return removed


# --------------------------------------------------------------------------------------------
# in-process netns access: a dedicated thread setns()es into the namespace (network namespaces
# are per thread), runs fn and ends.

_libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNET = 0x40000000


def _in_netns(ns: str, fn, timeout: float = 30.0):
    result: dict = {}

    def body():
        try:
            fd = os.open(f"/run/netns/{ns}", os.O_RDONLY)
            try:
                if _libc.setns(fd, CLONE_NEWNET) != 0:
                    err = ctypes.get_errno()
                    raise OSError(err, f"setns({ns}): {os.strerror(err)}")
            finally:
                os.close(fd)
            result["value"] = fn()
        except BaseException as e:  # re-raised in the caller
            result["error"] = e

    t = threading.Thread(target=body, name=f"netns-{ns}", daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        raise HarnessError(f"in-netns call in {ns} did not finish within {timeout}s")
    if "error" in result:
        raise result["error"]
    return result.get("value")


# --------------------------------------------------------------------------------------------
# DNS wire format (client and responder)


def _encode_name(name: str) -> bytes:
    out = bytearray()
    name = name.rstrip(".")
    if name:
        for label in name.split("."):
            raw = label.encode("ascii")
            if not 0 < len(raw) < 64:
                raise ValueError(f"bad DNS label in {name!r}")
            out += bytes([len(raw)]) + raw
    return bytes(out + b"\0")


def _read_name(msg: bytes, off: int) -> tuple[str, int]:
    labels, end, hops = [], None, 0
    while True:
        length = msg[off]
        if length & 0xC0 == 0xC0:
            if end is None:
                end = off + 2
            off = ((length & 0x3F) << 8) | msg[off + 1]
            hops += 1
            if hops > 64:
                raise ValueError("DNS name compression loop")
            continue
        off += 1
        if length == 0:
            break
        labels.append(msg[off:off + length].decode("ascii", "replace"))
        off += length
    return ".".join(labels), (end if end is not None else off)


def reverse_name(ip: str) -> str:
    """``10.213.1.10`` -> ``10.1.213.10.in-addr.arpa`` (and ip6.arpa for IPv6)."""
    return ipaddress.ip_address(ip).reverse_pointer


def build_query(qid: int, name: str, qtype: str | int = "A", rd: bool = True) -> bytes:
    qt = QTYPES[qtype.upper()] if isinstance(qtype, str) else int(qtype)
    return (struct.pack("!HHHHHH", qid, 0x0100 if rd else 0, 1, 0, 0, 0)
            + _encode_name(name) + struct.pack("!HH", qt, 1))


def parse_message(msg: bytes) -> dict:
    qid, flags, qd, an, _ns, _ar = struct.unpack("!HHHHHH", msg[:12])
    off, questions = 12, []
    for _ in range(qd):
        qname, off = _read_name(msg, off)
        qt, _qc = struct.unpack("!HH", msg[off:off + 4])
        off += 4
        questions.append((qname, QTYPE_NAMES.get(qt, str(qt))))
    answers = []
    for _ in range(an):
        rname, off = _read_name(msg, off)
        rtype, _rclass, ttl, rdlen = struct.unpack("!HHIH", msg[off:off + 10])
        off += 10
        rdata = msg[off:off + rdlen]
        if rtype == 1 and rdlen == 4:
            value = socket.inet_ntop(socket.AF_INET, rdata)
        elif rtype == 28 and rdlen == 16:
            value = socket.inet_ntop(socket.AF_INET6, rdata)
        elif rtype in (2, 5, 12):
            value = _read_name(msg, off)[0]
        else:
            value = rdata.hex()
        off += rdlen
        answers.append({"name": rname, "type": QTYPE_NAMES.get(rtype, str(rtype)), "ttl": ttl,
                        "value": value})
    return {"id": qid, "qr": bool(flags & 0x8000), "aa": bool(flags & 0x0400),
            "tc": bool(flags & 0x0200), "rcode": RCODE_NAMES.get(flags & 0xF, str(flags & 0xF)),
            "questions": questions, "answers": answers}


@dataclass
class DnsResult:
    name: str
    qtype: str
    rcode: str                      # NOERROR NXDOMAIN SERVFAIL REFUSED ... TIMEOUT ECONNREFUSED ERROR
    answers: list = field(default_factory=list)
    elapsed: float = 0.0
    error: str = ""

    @property
    def values(self) -> list[str]:
        return [a["value"] for a in self.answers]

    @property
    def addresses(self) -> list[str]:
        return [a["value"] for a in self.answers if a["type"] in ("A", "AAAA")]

    @property
    def nodata(self) -> bool:
        return self.rcode == "NOERROR" and not self.answers

    @property
    def timed_out(self) -> bool:
        return self.rcode == "TIMEOUT"


def query_many(server: str, queries: Sequence[tuple[str, str]], *, port: int = 53,
               timeout: float = 1.0, tcp: bool = False) -> list[DnsResult]:
    """Send every (name, qtype) query, concurrently over UDP (a socket each) or one after the
    other over TCP, and wait at most `timeout` (per query for TCP, overall for UDP)."""
    results: list[DnsResult | None] = [None] * len(queries)
    base = int.from_bytes(os.urandom(2), "big")
    if tcp:
        for i, (name, qtype) in enumerate(queries):
            t0 = time.monotonic()
            qid = (base + i) & 0xFFFF
            try:
                with socket.create_connection((server, port), timeout=timeout) as s:
                    s.settimeout(max(0.001, timeout - (time.monotonic() - t0)))
                    q = build_query(qid, name, qtype)
                    s.sendall(struct.pack("!H", len(q)) + q)
                    buf = b""
                    while len(buf) < 2 or len(buf) < 2 + struct.unpack("!H", buf[:2])[0]:
                        chunk = s.recv(65535)
                        if not chunk:
                            raise ConnectionError("connection closed")
                        buf += chunk
                msg = parse_message(buf[2:2 + struct.unpack("!H", buf[:2])[0]])
                results[i] = DnsResult(name, qtype, msg["rcode"], msg["answers"], time.monotonic() - t0)
            except socket.timeout:
                results[i] = DnsResult(name, qtype, "TIMEOUT", elapsed=time.monotonic() - t0)
            except ConnectionRefusedError:
                results[i] = DnsResult(name, qtype, "ECONNREFUSED", elapsed=time.monotonic() - t0)
            except (OSError, ValueError, IndexError, struct.error) as e:
                results[i] = DnsResult(name, qtype, "ERROR", elapsed=time.monotonic() - t0, error=str(e))
        return results  # type: ignore[return-value]

    sel = selectors.DefaultSelector()
    t0 = time.monotonic()
    socks = []
    try:
        for i, (name, qtype) in enumerate(queries):
            s = socket.socket(socket.AF_INET6 if ":" in server else socket.AF_INET, socket.SOCK_DGRAM)
            socks.append(s)
            s.setblocking(False)
            qid = (base + i) & 0xFFFF
            try:
                s.connect((server, port))
                s.send(build_query(qid, name, qtype))
            except OSError as e:
                results[i] = DnsResult(name, qtype, "ERROR", error=str(e))
                continue
            sel.register(s, selectors.EVENT_READ, (i, qid))
        deadline = t0 + timeout
        while sel.get_map() and (left := deadline - time.monotonic()) > 0:
            for key, _ in sel.select(left):
                i, qid = key.data
                name, qtype = queries[i]
                try:
                    data = key.fileobj.recv(65535)
                except ConnectionRefusedError:
                    results[i] = DnsResult(name, qtype, "ECONNREFUSED", elapsed=time.monotonic() - t0)
                    sel.unregister(key.fileobj)
                    continue
                except OSError as e:
                    results[i] = DnsResult(name, qtype, "ERROR", elapsed=time.monotonic() - t0, error=str(e))
                    sel.unregister(key.fileobj)
                    continue
                try:
                    msg = parse_message(data)
                except (ValueError, IndexError, struct.error):
                    continue
                if msg["id"] != qid or not msg["qr"]:
                    continue
                results[i] = DnsResult(name, qtype, msg["rcode"], msg["answers"], time.monotonic() - t0)
                sel.unregister(key.fileobj)
    finally:
        sel.close()
        for s in socks:
            s.close()
    return [r if r is not None else DnsResult(q[0], q[1], "TIMEOUT", elapsed=timeout)
            for r, q in zip(results, queries)]


# --------------------------------------------------------------------------------------------
# the failure responder (run as `python3 netns.py responder ...` inside the DNS namespace)


def _responder_reply(query: bytes, rcode: int) -> bytes | None:
    if len(query) < 12:
        return None
    qid, flags, qd = struct.unpack("!HHH", query[:6])
    if flags & 0x8000:
        return None
    off = 12
    question = b""
    if qd >= 1:
        try:
            _, off2 = _read_name(query, off)
            question = query[off:off2 + 4]
        except (IndexError, ValueError):
            question = b""
    out_flags = 0x8000 | (flags & 0x7800) | (flags & 0x0100) | 0x0080 | (rcode & 0xF)
    return struct.pack("!HHHHHH", qid, out_flags, 1 if question else 0, 0, 0, 0) + question


def _responder_log(log, query: bytes, client: str, rcode_name: str) -> None:
    if log is None:
        return
    try:
        msg = parse_message(query)
        qname, qtype = msg["questions"][0] if msg["questions"] else ("?", "?")
    except (IndexError, ValueError, struct.error):
        qname, qtype = "?", "?"
    log.write(f"{time.strftime('%b %d %H:%M:%S')} tfbt-responder[{os.getpid()}]: "
              f"query[{qtype}] {qname} from {client} -> {rcode_name}\n")
    log.flush()


def _responder_main(ip: str, port: int, rcode_name: str, log_path: str | None) -> int:
    rcode = RCODES[rcode_name.upper()]
    log = open(log_path, "a") if log_path else None
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    fam = socket.AF_INET6 if ":" in ip else socket.AF_INET
    udp = socket.socket(fam, socket.SOCK_DGRAM)
    udp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    udp.bind((ip, port))
    tcp = socket.socket(fam, socket.SOCK_STREAM)
    tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    tcp.bind((ip, port))
    tcp.listen(64)
    lock = threading.Lock()

    def serve_tcp(conn: socket.socket, client: str) -> None:
        conn.settimeout(5)
        try:
            while True:
                hdr = conn.recv(2, socket.MSG_WAITALL)
                if len(hdr) < 2:
                    return
                n = struct.unpack("!H", hdr)[0]
                q = conn.recv(n, socket.MSG_WAITALL)
                if len(q) < n:
                    return
                with lock:
                    _responder_log(log, q, client, rcode_name.upper())
                reply = _responder_reply(q, rcode)
                if reply:
                    conn.sendall(struct.pack("!H", len(reply)) + reply)
        except OSError:
            pass
        finally:
            conn.close()

    sel = selectors.DefaultSelector()
    sel.register(udp, selectors.EVENT_READ, "udp")
    sel.register(tcp, selectors.EVENT_READ, "tcp")
    while True:
        for key, _ in sel.select():
            if key.data == "udp":
                q, addr = udp.recvfrom(65535)
                with lock:
                    _responder_log(log, q, addr[0], rcode_name.upper())
                reply = _responder_reply(q, rcode)
                if reply:
                    udp.sendto(reply, addr)
            else:
                conn, addr = tcp.accept()
                threading.Thread(target=serve_tcp, args=(conn, addr[0]), daemon=True).start()


# --------------------------------------------------------------------------------------------
# the exec shim, run by `unshare --uts --mount --propagation private [--pid]` inside the pod's
# netns. argv: -c tfbt-shim <hostname> <mounts json> <env json> <pid1|plain> -- program args...
# plain: set hostname, bind-mount, execve(argv).
# pid1:  same, then fork: the child is PID 1 of the new PID namespace (unshare --pid without
#        --fork), mounts a fresh /proc, gets PDEATHSIG=SIGKILL and execve()s argv; the parent
#        relays HUP/INT/QUIT/TERM/USR1/USR2 to it and ends the way it ended (same exit code, or
#        killed by the same signal). We do not use `unshare --fork`: util-linux 2.38 exits 1
#        ("sigprocmask unblock failed") instead of dying by SIGKILL when its child was SIGKILLed.

_SHIM = r"""
import ctypes, json, os, signal, socket, sys
a = sys.argv
host, mounts, env, pid1, argv = a[2], json.loads(a[3]), json.loads(a[4]), a[5] == "pid1", a[7:]
libc = ctypes.CDLL(None, use_errno=True)
def die(code, msg):
    os.write(2, ("tfbt-shim: " + msg + "\n").encode())
    os._exit(code)
def mount(src, dst, fstype, flags):
    if libc.mount(src.encode(), dst.encode(), fstype, flags, None) != 0:
        die(125, "mount %s on %s: %s" % (src, dst, os.strerror(ctypes.get_errno())))
def run():
    try:
        os.execvpe(argv[0], argv, env)
    except FileNotFoundError as e:
        die(127, "exec %s: %s" % (argv[0], e.strerror))
    except OSError as e:
        die(126, "exec %s: %s" % (argv[0], e.strerror))
if host:
    socket.sethostname(host)
for src, dst in mounts:
    mount(src, dst, None, 4096 | 16384)                       # MS_BIND | MS_REC
if not pid1:
    run()
RELAY = (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2)
child = 0
def relay(sig, frame):
    if child > 0:
        try:
            os.kill(child, sig)
        except OSError:
            pass
for s in RELAY:
    signal.signal(s, relay)
child = os.fork()
if child == 0:
    for s in RELAY:
        signal.signal(s, signal.SIG_DFL)
    libc.prctl(1, 9)                                          # PR_SET_PDEATHSIG, SIGKILL
    mount("none", "/proc", None, 262144 | 16384)              # MS_PRIVATE | MS_REC
    mount("proc", "/proc", b"proc", 2 | 4 | 8)                # nosuid, nodev, noexec
    run()
_, status = os.waitpid(child, 0)
if os.WIFSIGNALED(status):
    sig = os.WTERMSIG(status)
    if sig not in (signal.SIGKILL, signal.SIGSTOP):
        signal.signal(sig, signal.SIG_DFL)
    os.kill(os.getpid(), sig)
    os._exit(128 + sig)
os._exit(os.waitstatus_to_exitcode(status))
"""


def _proc_children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        pass
    kids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    stat = f.read()
                if int(stat[stat.rindex(b")") + 2:].split()[1]) == pid:
                    kids.append(int(entry))
            except (OSError, ValueError, IndexError):
                pass
    return kids


def _cmdline(pid: int) -> bytes | None:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return None


class PodProcess(subprocess.Popen):
    """A Popen whose signals go to the program run in the pod (PID 1 inside with pid1=True).

    ``pid`` is the outer process (the shim parent outside the new PID namespace with
    pid1=True, else the program itself); ``program_pid`` is the host pid of the program."""

    pod: "Pod"
    pid1: bool
    argv: list

    def _find_program_pid(self) -> int | None:
        if not self.pid1:
            return self.pid
        kids = _proc_children(self.pid)
        return kids[0] if kids else None

    @property
    def program_pid(self) -> int | None:
        if getattr(self, "_program_pid", None) is None:
            self._program_pid = self._find_program_pid()
        return self._program_pid

    def wait_exec(self, timeout: float = 10.0) -> bool:
        """Wait until the shim has exec'd argv (True), or the process ended first (False)."""
        deadline = time.monotonic() + timeout
        marker = b"\0" + SHIM_MARKER.encode() + b"\0"
        while time.monotonic() < deadline:
            if self.poll() is not None:
                return False
            pid = self.program_pid
            if pid is not None:
                cmd = _cmdline(pid)
                if cmd is None or cmd == b"":   # gone or zombie
                    return False
                if marker not in cmd:
                    return True
            time.sleep(0.002)
        raise HarnessError(f"program {self.argv!r} did not start within {timeout}s")

    def send_signal(self, sig: int) -> None:
        self.poll()
        if self.returncode is not None:
            return
        pid = self.program_pid
        if pid is None:       # not forked yet: fall back to the outer process group
            os.killpg(self.pid, sig)
            return
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass

    def nspid(self) -> list[int]:
        """The program's pid in each nested PID namespace (``NSpid:`` of /proc/<pid>/status)."""
        pid = self.program_pid
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("NSpid:"):
                    return [int(x) for x in line.split()[1:]]
        return []


# --------------------------------------------------------------------------------------------


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
        _rewrite_in_place(self.hosts_path, text)

    def set_resolv(self, text: str) -> None:
        _rewrite_in_place(self.resolv_path, text)


def _rewrite_in_place(path: str, text: str) -> None:
    # in place (not rename): bind mounts of running pods keep pointing at the same inode
    with open(path, "r+" if os.path.exists(path) else "w") as f:
        f.seek(0)
        f.truncate()
        f.write(text)


def _safe(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9._@:-]", "_", s).lstrip(".") or "_"


def _proc_listening(pid: int, ip: str, port: int) -> bool:
    """Is there a UDP socket and a listening TCP socket on ip:port in pid's network namespace?"""
    if ":" in ip:
        files, raw = ("udp6", "tcp6"), socket.inet_pton(socket.AF_INET6, ip)
        addr = "".join("%08X" % struct.unpack("<I", raw[i:i + 4])[0] for i in range(0, 16, 4))
    else:
        files, addr = ("udp", "tcp"), "%08X" % struct.unpack("<I", socket.inet_aton(ip))[0]
    local = f"{addr}:{port:04X}"
    found = {}
    for proto, state in zip(files, ("07", "0A")):
        try:
            with open(f"/proc/{pid}/net/{proto}") as f:
                next(f)
                found[proto] = any(line.split()[1] == local and line.split()[3] == state for line in f)
        except (OSError, StopIteration):
            found[proto] = False
    return all(found.values())


class ClusterNetwork:
    """See the module docstring."""

    def __init__(self, service: str = "mnist", namespace: str = "default",
                 cluster_domain: str = "cluster.local", *, subnet: str = "10.213",
                 local_zones: Iterable[str] = ("#",), log_queries: bool = True,
                 service_records: bool = True):
        self.service = service
        self.namespace = namespace
        self.cluster_domain = cluster_domain.strip(".")
        self.subnet = subnet
        self.local_zones = [z.strip(".") for z in local_zones]
        self.log_queries = log_queries
        self.service_records = service_records
        self.prefix = f"{PREFIX}{os.getpid()}-{next(_counter)}-"
        self.net_ns = self.prefix + "net"
        self.dns_ns = self.prefix + "dns"
        self.bridge_ip = f"{subnet}.0.1"
        self.dns_ip = f"{subnet}.0.2"
        self.dns_port = 53
        self.pods: dict[str, Pod] = {}
        self.tmpdir: str | None = None
        self._namespaces: list[str] = []
        self._procs: list[subprocess.Popen] = []
        self._dns_proc: subprocess.Popen | None = None
        self._failure: str | None = None
        self._drop_percent = 0.0
        self._dns_wanted = False
        self._records: dict[str, tuple[str, str, tuple[str, ...]]] = {}  # file -> (name, ip, aliases)
        self._query_baseline = 0
        self._started = False
        self._closed = False

    # ---- properties

    @property
    def service_fqdn(self) -> str:
        return f"{self.service}.{self.namespace}.svc.{self.cluster_domain}"

    @property
    def hostsdir(self) -> str:
        return os.path.join(self.tmpdir, "hosts.d")

    @property
    def dns_log(self) -> str:
        return os.path.join(self.tmpdir, "dns.log")

    @property
    def dns_running(self) -> bool:
        return self._dns_proc is not None and self._dns_proc.poll() is None

    # ---- lifecycle

    def __enter__(self) -> "ClusterNetwork":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self) -> "ClusterNetwork":
        if self._started:
            return self
        if os.geteuid() != 0:
            raise HarnessError("ClusterNetwork needs root (network/mount/PID namespaces)")
        self._started = True
        _live.add(self)
        try:
            cleanup_stale()
            self.tmpdir = tempfile.mkdtemp(prefix=self.prefix)
            os.makedirs(self.hostsdir)
            open(self.dns_log, "a").close()
            self._add_ns(self.net_ns)
            n = self.net_ns
            _sh(["ip", "-n", n, "link", "set", "lo", "up"])
            _sh(["ip", "-n", n, "link", "add", "br0", "type", "bridge"])
            _sh(["ip", "-n", n, "addr", "add", f"{self.bridge_ip}/16", "dev", "br0"])
            _sh(["ip", "-n", n, "link", "set", "br0", "up"])
            self._add_ns(self.dns_ns)
            self._attach(self.dns_ns, "vdns", self.dns_ip)
            self.start_dns()
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        if self._closed or not self._started:
            self._closed = True
            return
        self._closed = True
        _live.discard(self)
        errors = []
        # 1. every process we started: SIGKILL the program and the whole process group
        for p in self._procs:
            try:
                if p.poll() is None:
                    if isinstance(p, PodProcess) and p.program_pid:
                        try:
                            os.kill(p.program_pid, signal.SIGKILL)
                        except ProcessLookupError:
                            pass
                    try:
                        os.killpg(p.pid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
            except Exception as e:  # keep tearing down
                errors.append(e)
        for p in self._procs:
            try:
                p.wait(timeout=3)
            except subprocess.TimeoutExpired:
                errors.append(HarnessError(f"pid {p.pid} did not exit"))
            for stream in (p.stdin, p.stdout, p.stderr):
                if stream is not None:
                    try:
                        stream.close()
                    except OSError:
                        pass
        # 2. namespaces (pods first, then dns, then the bridge namespace); stray processes
        #    still inside are found with `ip netns pids` and killed
        for ns in reversed(self._namespaces):
            try:
                _delete_netns(ns)
            except Exception as e:
                errors.append(e)
        # 3. files
        if self.tmpdir:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
        left = [ns for ns in _netns_list() if ns.startswith(self.prefix)]
        if left:
            errors.append(HarnessError(f"namespaces left behind: {left}"))
        if errors:
            raise HarnessError(f"teardown problems: {errors}")

    def _add_ns(self, ns: str) -> None:
        _sh(["ip", "netns", "add", ns])
        self._namespaces.append(ns)

    def _attach(self, ns: str, host_if: str, ip: str) -> None:
        n = self.net_ns
        _sh(["ip", "-n", n, "link", "add", host_if, "type", "veth", "peer", "name", "eth0",
             "netns", ns])
        _sh(["ip", "-n", n, "link", "set", host_if, "master", "br0", "up"])
        _sh(["ip", "-n", ns, "addr", "add", f"{ip}/16", "dev", "eth0"])
        _sh(["ip", "-n", ns, "link", "set", "eth0", "up"])
        _sh(["ip", "-n", ns, "link", "set", "lo", "up"])

    def _popen(self, argv: Sequence[str], cls=subprocess.Popen, **kw) -> subprocess.Popen:
        # setpriv: PR_SET_PDEATHSIG=SIGKILL survives the execs (ip -> unshare -> ...), so a dead
        # test process takes its servers along; start_new_session: own process group.
        self._procs = [q for q in self._procs if q.returncode is None]   # forget reaped ones
        p = cls(["setpriv", "--pdeathsig", "KILL", "--", *argv], start_new_session=True, **kw)
        self._procs.append(p)
        return p

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
        fqdn = f"{hostname}.{service}.{self.namespace}.svc.{self.cluster_domain}" if service else None
        ns = f"{self.prefix}p{i}-{_safe(name)}"[:200]
        pdir = os.path.join(self.tmpdir, f"pod-{i}")
        os.makedirs(pdir)
        pod = Pod(name=name, hostname=hostname, ip=ip, fqdn=fqdn, netns=ns, dir=pdir,
                  hosts_path=os.path.join(pdir, "hosts"),
                  resolv_path=os.path.join(pdir, "resolv.conf"),
                  nsswitch_path=os.path.join(pdir, "nsswitch.conf"))
        if hosts is None:
            hosts = ("# Kubernetes-managed hosts file.\n"
                     "127.0.0.1\tlocalhost\n"
                     "::1\tlocalhost ip6-localhost ip6-loopback\n"
                     "fe00::0\tip6-localnet\n"
                     "fe00::0\tip6-mcastprefix\n"
                     "fe00::1\tip6-allnodes\n"
                     "fe00::2\tip6-allrouters\n"
                     + (f"{ip}\t{fqdn}\t{hostname}\n" if fqdn else f"{ip}\t{hostname}\n"))
        if resolv is None:
            d, nsd = self.cluster_domain, self.namespace
            resolv = (f"search {nsd}.svc.{d} svc.{d} {d}\n"
                      f"nameserver {self.dns_ip}\n"
                      "options ndots:5\n")
        _rewrite_in_place(pod.hosts_path, hosts)
        _rewrite_in_place(pod.resolv_path, resolv)
        _rewrite_in_place(pod.nsswitch_path, self._nsswitch())
        self._add_ns(ns)
        self._attach(ns, f"vp{i}", ip)
        self.pods[name] = pod
        return pod

    @staticmethod
    def _nsswitch() -> str:
        # the host's nsswitch.conf with "hosts: files dns", like a container image: no
        # systemd-resolved / mdns / myhostname path that could leave the pod's namespaces
        try:
            with open("/etc/nsswitch.conf") as f:
                lines = [ln for ln in f.read().splitlines() if not re.match(r"\s*hosts\s*:", ln)]
        except OSError:
            lines = ["passwd: files", "group: files"]
        return "\n".join(lines + ["hosts: files dns"]) + "\n"

    def _pod(self, pod: "Pod | str") -> Pod:
        if isinstance(pod, Pod):
            return pod
        try:
            return self.pods[pod]
        except KeyError:
            raise HarnessError(f"no pod named {pod!r}") from None

    # ---- running programs in pods

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
        env = dict(env or {})
        env.setdefault("PATH", DEFAULT_PATH)
        mounts = [(pod.hosts_path, "/etc/hosts"), (pod.resolv_path, "/etc/resolv.conf"),
                  (pod.nsswitch_path, "/etc/nsswitch.conf"), *[tuple(m) for m in extra_mounts]]
        unshare = ["unshare", "--uts", "--mount", "--propagation", "private"]
        if pid1:
            unshare.append("--pid")
        cmd = ["ip", "netns", "exec", pod.netns, *unshare,
               sys.executable, "-I", "-S", "-c", _SHIM, SHIM_MARKER,
               hostname if hostname is not None else pod.hostname,
               json.dumps(mounts), json.dumps(env), "pid1" if pid1 else "plain", "--", *argv]
        p = self._popen(cmd, cls=PodProcess, env={"PATH": DEFAULT_PATH}, cwd=cwd, stdin=stdin,
                        stdout=stdout, stderr=stderr, text=text)
        p.pod, p.pid1, p.argv = pod, pid1, argv
        if wait_exec:
            p.wait_exec()
        return p  # type: ignore[return-value]

    def signal(self, proc: PodProcess, sig: int = signal.SIGTERM) -> None:
        """Deliver sig to the program started by :meth:`run` (PID 1 inside with pid1=True)."""
        proc.send_signal(sig)

    def exec_in_pod(self, pod: "Pod | str", argv: Sequence[str], *, env: dict | None = None,
                    timeout: float = 10, input: str | None = None, pid1: bool = False,
                    check: bool = False) -> subprocess.CompletedProcess:
        p = self.run(pod, argv, env=env, pid1=pid1,
                     stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                     wait_exec=False)
        try:
            out, err = p.communicate(input=input, timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.communicate(timeout=5)
            raise HarnessError(f"{argv!r} in pod {self._pod(pod).name} timed out after {timeout}s")
        cp = subprocess.CompletedProcess(list(argv), p.returncode, out, err)
        if check:
            cp.check_returncode()
        return cp

    def run_in_dns_ns(self, argv: Sequence[str], *, timeout: float = 10,
                      check: bool = False) -> subprocess.CompletedProcess:
        self._check_open()
        p = self._popen(["ip", "netns", "exec", self.dns_ns, *argv], stdin=subprocess.DEVNULL,
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.communicate(timeout=5)
            raise HarnessError(f"{argv!r} in the DNS namespace timed out after {timeout}s")
        cp = subprocess.CompletedProcess(list(argv), p.returncode, out, err)
        if check:
            cp.check_returncode()
        return cp

    # ---- DNS records

    def _dnsmasq_reads(self, path: str, removed: bool = False) -> int:
        # dnsmasq logs "read <path> - N names" after (re)reading a hostsdir file and
        # "inotify: flushed N names read from <path>" after dropping a removed one
        pattern = f"names read from {path}\n" if removed else f"read {path} - "
        try:
            with open(self.dns_log, errors="replace") as f:
                return sum(1 for line in f if pattern in line)
        except OSError:
            return 0

    def _write_record(self, key: str, line: str | None, wait: bool) -> None:
        path = os.path.join(self.hostsdir, key)
        wait = wait and self.dns_running and self._failure is None
        before = self._dnsmasq_reads(path, removed=line is None) if wait else 0
        if line is None:
            try:
                os.unlink(path)
            except FileNotFoundError:
                return
        else:
            tmp = os.path.join(self.hostsdir, f".{key}.tmp")   # dnsmasq ignores dot files
            with open(tmp, "w") as f:
                f.write(line)
            os.replace(tmp, path)
        if wait:
            self._wait_dnsmasq_read(path, before, removed=line is None)

    def _wait_dnsmasq_read(self, path: str, before: int, removed: bool) -> None:
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            if self._dnsmasq_reads(path, removed) > before:
                return
            time.sleep(0.005)
        raise HarnessError(f"dnsmasq did not {'drop' if removed else 'read'} {path} within 2s")

    def publish_name(self, name: str, ip: str, *aliases: str, wait: bool = True) -> None:
        self._check_open()
        ipaddress.ip_address(ip)  # validate
        name = name.rstrip(".")
        aliases = tuple(a.rstrip(".") for a in aliases)
        key = _safe(f"{name}@{ip}")
        self._records[key] = (name, ip, aliases)
        self._write_record(key, "\t".join((ip, name, *aliases)) + "\n", wait)

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

    def unpublish(self, name: "Pod | str", ip: str | None = None, *, wait: bool = True) -> int:
        """Remove the records of a pod (its FQDN) or of a name; returns how many were removed."""
        self._check_open()
        if isinstance(name, Pod) or name in self.pods:
            name = self._pod(name).fqdn or ""
        name = name.rstrip(".")
        keys = [k for k, (n, i, _a) in self._records.items() if n == name and (ip is None or i == ip)]
        for k in keys:
            del self._records[k]
            self._write_record(k, None, wait)
        return len(keys)

    # ---- the DNS server

    def _dnsmasq_argv(self) -> list[str]:
        # -k: foreground (our child, so it can be stopped/killed); -C /dev/null: no
        # /etc/dnsmasq.conf; own pid file (the default /run/dnsmasq.pid would collide);
        # -u/-g root: no privilege drop (default group "dip" may not exist); --no-resolv and no
        # --server: nothing is ever forwarded; --no-hosts + --hostsdir: only our records, re-read
        # through inotify (--no-poll: no resolv.conf polling); --listen-address + --bind-interfaces:
        # only 10.213.0.2:53; --local=/zone/: answer from records only, NXDOMAIN/NODATA otherwise.
        zones = [self.cluster_domain, "in-addr.arpa", "ip6.arpa", *self.local_zones]
        argv = [DNSMASQ, "--keep-in-foreground", "--conf-file=/dev/null",
                f"--pid-file={os.path.join(self.tmpdir, 'dnsmasq.pid')}",
                "--user=root", "--group=root",
                "--no-resolv", "--no-hosts", "--no-poll", f"--hostsdir={self.hostsdir}",
                f"--listen-address={self.dns_ip}", "--bind-interfaces", f"--port={self.dns_port}",
                "--no-negcache", "--local-ttl=0", f"--log-facility={self.dns_log}",
                *[f"--local=/{z}/" for z in zones]]
        if self.log_queries:
            argv.append("--log-queries")
        return argv

    def start_dns(self) -> None:
        """Start the DNS server on dns_ip:53 (dnsmasq, or the failure responder while a failure
        mode is set); returns once it listens on udp and tcp (<= 5 s)."""
        self._check_open()
        self._dns_wanted = True
        if self.dns_running:
            return
        if self._failure is None:
            argv = self._dnsmasq_argv()
        else:
            argv = [sys.executable, "-I", "-S", _HERE, "responder", "--ip", self.dns_ip,
                    "--port", str(self.dns_port), "--rcode", self._failure]
            if self.log_queries:
                argv += ["--log", self.dns_log]
        errpath = os.path.join(self.tmpdir, "dns.stderr")
        with open(errpath, "a") as err:
            self._dns_proc = self._popen(["ip", "netns", "exec", self.dns_ns, *argv],
                                         stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                                         env={"PATH": DEFAULT_PATH})
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            if self._dns_proc.poll() is not None:
                raise HarnessError(f"DNS server exited rc={self._dns_proc.returncode}: "
                                   f"{self._tail(errpath)} {self._tail(self.dns_log)}")
            if _proc_listening(self._dns_proc.pid, self.dns_ip, self.dns_port):
                return
            time.sleep(0.005)
        raise HarnessError("DNS server did not listen within 5s")

    @staticmethod
    def _tail(path: str, n: int = 2000) -> str:
        try:
            with open(path, errors="replace") as f:
                return f.read()[-n:]
        except OSError:
            return ""

    def stop_dns(self) -> None:
        """Stop the DNS server (bounded: SIGTERM, then SIGKILL after 3 s)."""
        self._dns_wanted = False
        self._stop_dns_proc()

    def _stop_dns_proc(self) -> None:
        p = self._dns_proc
        if p is None:
            return
        self._dns_proc = None
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout=3)
            except subprocess.TimeoutExpired:
                pass
        try:   # the rest of its group too: dnsmasq forks a child per TCP connection
            os.killpg(p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        p.wait(timeout=3)
        if p in self._procs:
            self._procs.remove(p)

    def set_dns_failure(self, mode: str | None) -> None:
        """Make the DNS server answer every query with SERVFAIL / REFUSED / NXDOMAIN (a stdlib
        responder replaces dnsmasq on the same address), or go back to dnsmasq (None)."""
        self._check_open()
        if mode is not None:
            mode = mode.lower()
            if mode not in ("servfail", "refused", "nxdomain"):
                raise ValueError(f"unknown DNS failure mode {mode!r}")
        if mode == self._failure and self.dns_running:
            return
        self._stop_dns_proc()
        self._failure = mode
        if self._dns_wanted:
            self.start_dns()

    def drop_dns_packets(self, percent: float) -> None:
        """Drop this share (0..100) of packets to udp/tcp port 53 in the DNS namespace, at
        random (iptables -m statistic --mode random); 0 removes the rules."""
        self._check_open()
        if not 0 <= percent <= 100:
            raise ValueError("percent must be within 0..100")
        ipt = ["ip", "netns", "exec", self.dns_ns, "iptables", "-w", "5"]
        _sh([*ipt, "-F", "INPUT"])   # our own namespace: only our rules live there
        if percent > 0:
            match = [] if percent >= 100 else ["-m", "statistic", "--mode", "random",
                                               "--probability", f"{percent / 100:.6f}"]
            for proto in ("udp", "tcp"):
                _sh([*ipt, "-A", "INPUT", "-p", proto, "--dport", str(self.dns_port), *match,
                     "-j", "DROP"])
        self._drop_percent = percent

    def dns_queries(self) -> list[tuple[str, str, str]]:
        """Every query the DNS server (dnsmasq or responder) received: (qtype, name, client)."""
        if not self.log_queries:
            raise HarnessError("query logging is off (log_queries=False)")
        out = []
        try:
            with open(self.dns_log, errors="replace") as f:
                for line in f:
                    m = re.search(r"query\[([^\]]+)\] (\S+) from (\S+)", line)
                    if m:
                        out.append((m.group(1), m.group(2), m.group(3)))
        except OSError:
            pass
        return out

    def dns_query_count(self) -> int:
        return len(self.dns_queries()) - self._query_baseline

    def reset_dns_query_count(self) -> None:
        self._query_baseline = len(self.dns_queries())

    # ---- DNS client

    def dns_query_many(self, queries: Sequence[tuple[str, str]], *, pod: "Pod | str | None" = None,
                       server: str | None = None, port: int | None = None, timeout: float = 1.0,
                       tcp: bool = False) -> list[DnsResult]:
        self._check_open()
        ns = self._pod(pod).netns if pod is not None else self.net_ns
        server = server or self.dns_ip
        port = port or self.dns_port
        return _in_netns(ns, lambda: query_many(server, list(queries), port=port, timeout=timeout,
                                                tcp=tcp), timeout=timeout * max(1, len(queries)) + 5)

    def dns_query(self, name: str, qtype: str = "A", **kw) -> DnsResult:
        return self.dns_query_many([(name, qtype)], **kw)[0]


@atexit.register
def _close_all() -> None:
    for net in list(_live):
        try:
            net.close()
        except Exception as e:  # pragma: no cover
            print(f"harness.netns: teardown at exit: {e}", file=sys.stderr)


# --------------------------------------------------------------------------------------------


def _main(argv: list[str]) -> int:
    import argparse
    ap = argparse.ArgumentParser(prog="netns.py")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("responder")
    r.add_argument("--ip", required=True)
    r.add_argument("--port", type=int, default=53)
    r.add_argument("--rcode", required=True)
    r.add_argument("--log")
    q = sub.add_parser("query")
    q.add_argument("--server", required=True)
    q.add_argument("--port", type=int, default=53)
    q.add_argument("--timeout", type=float, default=1.0)
    q.add_argument("--tcp", action="store_true")
    q.add_argument("names", nargs="+", help="NAME[:TYPE]")
    a = ap.parse_args(argv)
    if a.cmd == "responder":
        return _responder_main(a.ip, a.port, a.rcode, a.log)
    queries = [(n.rsplit(":", 1)[0], n.rsplit(":", 1)[1]) if ":" in n else (n, "A") for n in a.names]
    res = query_many(a.server, queries, port=a.port, timeout=a.timeout, tcp=a.tcp)
    print(json.dumps([r.__dict__ for r in res]))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
