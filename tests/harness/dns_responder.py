"""A DNS server that fails on purpose: it answers every query with one error rcode.

Stands in for dnsmasq on the same address while a test wants the cluster DNS to fail
(``ClusterNetwork.set_dns_failure``): each query over UDP or TCP gets the same question back with
the chosen rcode (SERVFAIL, REFUSED, NXDOMAIN, ... any name dnspython knows) and no records.
Each query is logged in dnsmasq's ``--log-queries`` format (``query[A] name from client``), so
the harness counts queries the same way whichever server ran.

It runs as its own process inside the DNS namespace, started by the harness, and so needs
nothing but the standard library and dnspython (it is run as ``python -I``, without the
harness on its path)::

    argv = responder_argv(python, ip="10.213.0.2", port=53, rcode="servfail", log="dns.log")
    # -> python -I .../dns_responder.py --ip 10.213.0.2 --port 53 --rcode servfail --log dns.log

It stops on SIGTERM (or SIGKILL); everything it does is bounded by the process's life.
"""

from __future__ import annotations

import argparse
import os
import selectors
import signal
import socket
import sys
import threading
import time

import dns.exception
import dns.flags
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype


def responder_argv(python: str, *, ip: str, port: int, rcode: str, log: str | None) -> list[str]:
    argv = [python, "-I", os.path.abspath(__file__), "--ip", ip, "--port", str(port),
            "--rcode", rcode]
    return argv + (["--log", log] if log else [])


class Responder:
    def __init__(self, rcode: dns.rcode.Rcode, log_path: str | None):
        self.rcode = rcode
        self.log = open(log_path, "a") if log_path else None
        self.log_lock = threading.Lock()   # TCP connections are served by threads

    def reply(self, query: dns.message.Message, client: str) -> dns.message.Message | None:
        """The failure answer to one query; None for what is not a query (ignored)."""
        if query.flags & dns.flags.QR:
            return None
        self.log_query(query, client)
        response = dns.message.make_response(query, recursion_available=True)
        response.set_rcode(self.rcode)
        return response

    def log_query(self, query: dns.message.Message, client: str) -> None:
        if self.log is None:
            return
        if query.question:
            question = query.question[0]
            qtype = dns.rdatatype.to_text(question.rdtype)
            qname = question.name.to_text(omit_final_dot=True)
        else:
            qtype, qname = "?", "?"
        with self.log_lock:
            self.log.write(f"{time.strftime('%b %d %H:%M:%S')} tfbt-responder[{os.getpid()}]: "
                           f"query[{qtype}] {qname} from {client} -> "
                           f"{dns.rcode.to_text(self.rcode)}\n")
            self.log.flush()

    def serve_udp(self, udp: socket.socket) -> None:
        try:
            query, _, address = dns.query.receive_udp(udp)
        except (OSError, dns.exception.DNSException):
            return   # not a DNS message: dropped, like dnsmasq does
        response = self.reply(query, address[0])
        if response is not None:
            dns.query.send_udp(udp, response, address)

    def serve_tcp_connection(self, connection: socket.socket, client: str) -> None:
        connection.settimeout(5)   # an idle client is dropped, like dnsmasq does
        try:
            while True:
                query, _ = dns.query.receive_tcp(connection)
                response = self.reply(query, client)
                if response is not None:
                    dns.query.send_tcp(connection, response)
        except (OSError, EOFError, dns.exception.DNSException):
            pass
        finally:
            connection.close()


def serve(ip: str, port: int, responder: Responder) -> None:
    family = socket.AF_INET6 if ":" in ip else socket.AF_INET
    udp = socket.socket(family, socket.SOCK_DGRAM)
    tcp = socket.socket(family, socket.SOCK_STREAM)
    for sock in (udp, tcp):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((ip, port))
    tcp.listen(64)
    selector = selectors.DefaultSelector()
    selector.register(udp, selectors.EVENT_READ, "udp")
    selector.register(tcp, selectors.EVENT_READ, "tcp")
    while True:
        for key, _ in selector.select():
            if key.data == "udp":
                responder.serve_udp(udp)
            else:
                connection, address = tcp.accept()
                threading.Thread(target=responder.serve_tcp_connection,
                                 args=(connection, address[0]), daemon=True).start()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="dns_responder.py")
    parser.add_argument("--ip", required=True)
    parser.add_argument("--port", type=int, default=53)
    parser.add_argument("--rcode", required=True, help="servfail, refused, nxdomain, ...")
    parser.add_argument("--log", help="append a dnsmasq-style line per query to this file")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    serve(args.ip, args.port, Responder(dns.rcode.from_text(args.rcode.upper()), args.log))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
