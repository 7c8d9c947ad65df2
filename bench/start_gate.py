"""Holds a pod's program until the benchmark opens the gate, so that every pod of a job starts at
the same moment (spawning P pods one by one takes seconds), then execs it: the program keeps
the gate's PID, PID 1 of the pod.

    python -I -S start_gate.py SOCKET -- PROGRAM ARGS...

Connects to the benchmark's Unix socket SOCKET (a path: it is reached from any network
namespace), waits until the benchmark sends one byte (or closes), then execs PROGRAM. Standard
library only; exit 125 with the reason on stderr if the gate cannot be reached.

The benchmarks' side (jobbench.py, torchbench.py) is ``StartGate`` below: it listens on SOCKET,
puts ``gate.argv()`` before each pod's program and ``gate.open(count)`` lets them all go.
"""

import os
import socket
import sys
import time

GATE = os.path.abspath(__file__)


class StartGate:
    """The benchmark's side: a Unix socket the gated pods connect to; ``open()`` releases every
    one at once and returns the time it did."""

    def __init__(self, path: str):
        self.path = path
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        self.listener.listen(1024)
        self.waiting: list[socket.socket] = []

    def argv(self) -> list[str]:
        return [sys.executable, "-I", "-S", GATE, self.path, "--"]

    def open(self, count: int, timeout: float = 60) -> float:
        """Waits until count pods wait at the gate, then lets them all go."""
        self.listener.settimeout(timeout)
        while len(self.waiting) < count:
            self.waiting.append(self.listener.accept()[0])
        opened = time.time()
        for connection in self.waiting:
            connection.sendall(b"g")
        return opened

    def close(self) -> None:
        for connection in self.waiting:
            connection.close()
        self.listener.close()
        os.unlink(self.path)


def main(args: list[str]) -> None:
    if len(args) < 3 or args[1] != "--":
        sys.stderr.write("usage: start_gate.py SOCKET -- PROGRAM ARGS...\n")
        os._exit(125)
    path, program = args[0], args[2:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as gate:
            gate.connect(path)
            gate.recv(1)
    except OSError as e:
        sys.stderr.write(f"start_gate: {path}: {e.strerror}\n")
        os._exit(125)
    os.execv(program[0], program)


if __name__ == "__main__":
    main(sys.argv[1:])
