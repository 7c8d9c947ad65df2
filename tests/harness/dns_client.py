"""A DNS client for the tests' own checks of the cluster DNS (dnspython builds and reads messages).

Offers:

* ``query_many(server, [(name, qtype), ...], port=53, timeout=1.0, tcp=False)`` -> [DnsResult]:
  over UDP every query at once, each from a socket of its own, waiting at most ``timeout`` for
  all; over TCP one after the other, ``timeout`` each. The sockets are opened in the calling
  thread's network namespace (see ``namespaces.in_netns``). UDP sockets are connected, so an
  ICMP port unreachable (no server) shows as ``ECONNREFUSED`` rather than a timeout.
* ``DnsResult``: ``name``, ``qtype``, ``rcode`` (``NOERROR``, ``NXDOMAIN``, ``SERVFAIL``,
  ``REFUSED``, ... as dnspython names them, or ``TIMEOUT``, ``ECONNREFUSED``, ``ERROR`` with
  ``error`` telling why), ``answers`` [{name, type, ttl, value}] from the answer section
  (names without the final dot; value: the address, the target name of PTR/CNAME/NS, else the
  record's text), ``elapsed`` seconds; ``.addresses`` (A/AAAA values), ``.values``,
  ``.nodata`` (NOERROR without answers), ``.timed_out``.
* ``reverse_name(ip)``: ``10.213.1.10`` -> ``10.1.213.10.in-addr.arpa`` (ip6.arpa for IPv6).

Usage::

    [a, aaaa] = query_many("10.213.0.2", [("w-0.svc.cluster.local", "A"),
                                          ("w-0.svc.cluster.local", "AAAA")])
    assert a.addresses == ["10.213.1.10"] and aaaa.nodata
"""

from __future__ import annotations

import ipaddress
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Sequence

import dns.exception
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype


def reverse_name(ip: str) -> str:
    return ipaddress.ip_address(ip).reverse_pointer


@dataclass
class DnsResult:
    name: str
    qtype: str
    rcode: str
    answers: list = field(default_factory=list)
    elapsed: float = 0.0
    error: str = ""

    @property
    def values(self) -> list[str]:
        return [answer["value"] for answer in self.answers]

    @property
    def addresses(self) -> list[str]:
        return [answer["value"] for answer in self.answers if answer["type"] in ("A", "AAAA")]

    @property
    def nodata(self) -> bool:
        return self.rcode == "NOERROR" and not self.answers

    @property
    def timed_out(self) -> bool:
        return self.rcode == "TIMEOUT"


def _record_value(rdata) -> str:
    if rdata.rdtype in (dns.rdatatype.A, dns.rdatatype.AAAA):
        return rdata.address
    if rdata.rdtype in (dns.rdatatype.PTR, dns.rdatatype.CNAME, dns.rdatatype.NS):
        return rdata.target.to_text(omit_final_dot=True)
    return rdata.to_text()


def _result(name: str, qtype: str, response: dns.message.Message, started: float) -> DnsResult:
    answers = [{"name": rrset.name.to_text(omit_final_dot=True),
                "type": dns.rdatatype.to_text(rrset.rdtype), "ttl": rrset.ttl,
                "value": _record_value(rdata)}
               for rrset in response.answer for rdata in rrset]
    return DnsResult(name, qtype, dns.rcode.to_text(response.rcode()), answers,
                     time.monotonic() - started)


def _ask(name: str, qtype: str, send, started: float) -> DnsResult:
    """send(query) -> response; exceptions become the TIMEOUT / ECONNREFUSED / ERROR results."""
    try:
        return _result(name, qtype, send(dns.message.make_query(name, qtype)), started)
    except dns.exception.Timeout:
        return DnsResult(name, qtype, "TIMEOUT", elapsed=time.monotonic() - started)
    except ConnectionRefusedError:
        return DnsResult(name, qtype, "ECONNREFUSED", elapsed=time.monotonic() - started)
    except (OSError, EOFError, ValueError, dns.exception.DNSException) as e:
        return DnsResult(name, qtype, "ERROR", elapsed=time.monotonic() - started, error=str(e))


def _connected_udp_socket(server: str, port: int) -> socket.socket | OSError:
    sock = socket.socket(socket.AF_INET6 if ":" in server else socket.AF_INET, socket.SOCK_DGRAM)
    sock.setblocking(False)   # dnspython waits with its own deadline
    try:
        sock.connect((server, port))
    except OSError as e:
        sock.close()
        return e
    return sock


def query_many(server: str, queries: Sequence[tuple[str, str]], *, port: int = 53,
               timeout: float = 1.0, tcp: bool = False) -> list[DnsResult]:
    if tcp:
        return [_ask(name, qtype, lambda q: dns.query.tcp(q, server, timeout=timeout, port=port),
                     time.monotonic())
                for name, qtype in queries]
    if not queries:
        return []
    started = time.monotonic()
    sockets = [_connected_udp_socket(server, port) for _ in queries]

    def ask(i: int) -> DnsResult:
        name, qtype = queries[i]
        sock = sockets[i]
        if isinstance(sock, OSError):
            return DnsResult(name, qtype, "ERROR", error=str(sock))
        left = max(0.001, timeout - (time.monotonic() - started))
        return _ask(name, qtype, lambda q: dns.query.udp(q, server, timeout=left, port=port,
                                                         sock=sock, ignore_errors=True),
                    started)

    try:
        with ThreadPoolExecutor(max_workers=len(queries)) as pool:
            return list(pool.map(ask, range(len(queries))))
    finally:
        for sock in sockets:
            if isinstance(sock, socket.socket):
                sock.close()
