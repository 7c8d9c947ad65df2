"""Many imitated tfboot tasks in one asyncio process, speaking the control channel's protocol to a
real coordinator (launcher/control/protocol/messages.h): challenge, hello (protocol 3, a
fingerprint), accepted, waiting... until start or abort; pings both ways; after the start exit,
done, stop, restart (then a fresh hello to the restart's barrier).

Shared by tests/integration/test_scale.py (a job of 2,000 tasks) and bench/imitated_scale.py
(`scripts/bench scale`, up to ~100,000 tasks on one machine). Built to hold that many: each task is
an asyncio.Protocol (no stream, no coroutine of its own); one ticker sends every task's heartbeat
and applies a real task's silence rule; a fixed pool of workers makes the connections, a few at a
time, as a job's pods do not all connect in the same millisecond either. Connections leave from
many loopback source addresses (127.0.0.0/8 is all local on Linux): one source address has only
the ephemeral port range (~28k ports) towards one coordinator port.

Times are time.monotonic(), the system-wide CLOCK_MONOTONIC, so they compare with other processes'.
"""

import asyncio
import collections
import errno
import json
import os
import random
import re
import selectors
import socket
import threading
import time

import dns.exception
import dns.flags
import dns.message
import dns.rdatatype
import dns.rrset

PROTOCOL = 3            # the control channel's version (CHANGELOG.md), in challenge and hello
HEARTBEAT = 2.0         # docs/supervision.md: heartbeats every 2 s,
SILENT_AFTER = 10.0     # and a peer silent for 10 s is dropped (both ways)
PING = b'{"type":"ping"}\n'
MESSAGE_TYPE = re.compile(rb'\{"type":"([a-z]+)"')
MAX_LINE = 8 * 1024 * 1024  # max_coordinator_message


def message_type(line: bytes) -> str:
    match = MESSAGE_TYPE.match(line)
    return match.group(1).decode() if match else "?"


def source_address(index: int, per_source: int) -> str:
    """The loopback address task `index` connects from: per_source tasks each, from 127.1.0.1 on."""
    block = index // per_source
    return f"127.1.{block // 250}.{block % 250 + 1}"


# The start tree (launcher/control/protocol/tree.h; docs/supervision.md: The start tree), with worker:0 the coordinator:
# above STAR_LIMIT tasks, worker:N joins through the relay worker:(N // RELAY_GROUP * RELAY_GROUP),
# except the coordinator's own group (N < RELAY_GROUP) and the relays themselves, which join the
# coordinator. Real relays listen on addresses of their own, which their names resolve to.
STAR_LIMIT = 128
RELAY_GROUP = 128


def relay_of(index: int, tasks: int):
    """The index of the relay worker:index joins through, or None for the coordinator itself."""
    if tasks <= STAR_LIMIT:
        return None
    first = index // RELAY_GROUP * RELAY_GROUP
    return None if first in (0, index) else first


def relays(tasks: int):
    return [i for i in range(RELAY_GROUP, tasks, RELAY_GROUP)] if tasks > STAR_LIMIT else []


def relay_address(index: int) -> str:
    """The loopback address the relay worker:index listens on (its name resolves to it)."""
    group = index // RELAY_GROUP
    return f"127.3.{group // 250}.{group % 250 + 1}"


def task_ranges(indices, task_type: str = "worker") -> str:
    """[3, 4, 5, 9] -> "worker:3..5,9"."""
    indices = sorted(indices)
    parts = []
    i = 0
    while i < len(indices):
        j = i
        while j + 1 < len(indices) and indices[j + 1] == indices[j] + 1:
            j += 1
        parts.append(f"{indices[i]}..{indices[j]}" if j > i else f"{indices[i]}")
        i = j + 1
    return f"{task_type}:" + ",".join(parts) if parts else "none"


class ImitatedTask(asyncio.Protocol):
    """One task, e.g. worker:N, as its tfboot speaks on the control channel (supervised, --init).

    Per barrier round (the first start, then one per restart in place): accepted, and how the
    barrier ended. `outcome` (start, abort, refused, closed, silent, error) and `after` (done,
    stop, restart, closed, silent, error) are the first round's, as tests read them; `starts`
    holds every round's start time."""

    def __init__(self, fleet: "Fleet", index: int):
        self.fleet = fleet
        self.index = index
        self.task = f"{fleet.task_type}:{index}"
        self.fingerprint = fleet.fingerprint
        self.transport = None
        self.buffer = bytearray()
        self.state = "idle"        # connecting, challenged, barrier, started, ended
        self.round = 0
        self.accepted = False
        self.handshake = None      # a future: the hello's answer came (or the connection ended)
        self.last_heard = 0.0
        self.hello_at = None       # when the last hello was written
        self.outcome = None
        self.detail = ""
        self.ended_at = None
        self.start_at = None
        self.starts = []           # every round's start, in order
        self.after = None
        self.after_at = None
        self.pings_after_start = 0
        self.connected_to = None   # (host, port) of its last connection: the coordinator or its relay
        self.closed_for_rejoin = 0  # connections closed to rejoin whose connection_lost is still to come
        self.failures = 0          # attempts in a row that were refused or closed: the backoff's count
        self.abort_line = None     # the abort or stop as it came; parsed when read (a stop at 100,000
        self.stop_line = None      # tasks is 100,000 lines this process must read quickly)
        self.last = None           # the latest of these, in any round: (what, detail, when)

    # ---- what happened

    def end(self, what: str, detail: str = ""):
        now = time.monotonic()
        self.last = (what, detail, now)
        if self.outcome is None:
            self.outcome, self.detail, self.ended_at = what, detail, now
        elif self.after is None:
            self.after, self.detail, self.after_at = what, detail, now
        if what != "restart":
            self.state = "ended"
        if self.handshake and not self.handshake.done():
            self.handshake.set_result(False)
        if what not in ("start", "restart") and self.transport:
            self.transport.close()

    # ---- asyncio.Protocol

    def connection_made(self, transport):
        self.transport = transport
        # What the old connection still held behind a restart (a ping in the same read) is not this one's.
        self.buffer = bytearray()
        self.last_heard = time.monotonic()
        self.state = "connecting"

    def data_received(self, data):
        self.last_heard = time.monotonic()
        # The common case first, cheaply: one whole heartbeat (a `waiting` before the start, a
        # `ping`), which at 100,000 tasks comes 50,000 times a second.
        if not self.buffer and data.endswith(b"\n") and data.count(b"\n") == 1:
            if self.state == "barrier" and (data.startswith(b'{"type":"waiting"') or data == PING):
                return
            if self.state == "started" and data == PING:
                self.pings_after_start += 1
                return
        self.buffer += data
        while True:
            end = self.buffer.find(b"\n")
            if end < 0:
                if len(self.buffer) > MAX_LINE:
                    self.end("error", "a line over 8 MiB")
                return
            line = bytes(self.buffer[:end])
            del self.buffer[:end + 1]
            try:
                self.on_line(line)
            except (ValueError, KeyError) as why:
                self.end("error", repr(why))
            if self.state == "ended" or self.transport is None or self.transport.is_closing():
                return

    def connection_lost(self, exc):
        if self.closed_for_rejoin:
            # The old connection of a rejoin, which may end after the new one began: not this one's end.
            self.closed_for_rejoin -= 1
            return
        self.transport = None
        if self.state == "connecting" and self.round > 0 and time.monotonic() < self.fleet.deadline:
            # Closed before the challenge: the restart's barrier was not listening yet (the old
            # listener's queue is reset). A real task connects again, and so does this one.
            self.state = "rejoining"
            self.fleet.retry_later(self)
            return
        if self.state not in ("ended", "rejoining"):
            self.end("closed", f"the coordinator closed the connection{f' ({exc})' if exc else ''}")

    # ---- the protocol

    def send(self, message: dict):
        if self.transport and not self.transport.is_closing():
            self.transport.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")

    def on_line(self, line: bytes):
        kind = message_type(line)
        if self.state == "connecting":
            challenge = json.loads(line)
            if kind == "refused" and self.round > 0:
                # Refused before the challenge in a restart (the old barrier's "job already
                # started"): a real task tries again, and so does this one.
                self.state = "rejoining"
                self.close_to_rejoin()
                return self.fleet.retry_later(self)
            if kind != "challenge":
                return self.end("error", f"first message {kind!r}, not a challenge")
            if challenge.get("protocol") != PROTOCOL:
                return self.end("error", f"a challenge of protocol {challenge.get('protocol')!r}, not {PROTOCOL}")
            source = self.transport.get_extra_info("sockname")[0]
            # The fingerprint, the hello's bulk, is encoded once for every task that reports it.
            self.transport.write(b"".join((
                json.dumps({"type": "hello", "job": challenge["job"], "task": self.task, "host": f"scale-{self.index}",
                            "instance": f"{random.getrandbits(64):016x}", "supervised": True,
                            "name": self.fleet.template.format(index=self.index), "addresses": [source],
                            "nonce": "", "proof": "", "protocol": PROTOCOL, "tfboot": "imitation"},
                           separators=(",", ":")).encode()[:-1],
                b',"fingerprint":', self.fleet.encoded(self.fingerprint), b"}\n")))
            self.hello_at = time.monotonic()
            self.state = "challenged"
        elif self.state == "challenged":
            if kind == "refused":
                return self.end("refused", json.loads(line).get("reason", ""))
            if kind != "accepted":
                return self.end("error", f"{kind!r} after hello")
            self.accepted = True
            self.failures = 0
            self.state = "barrier"
            if self.handshake and not self.handshake.done():
                self.handshake.set_result(True)
        elif self.state == "barrier":
            if kind in ("waiting", "ping"):
                return
            if kind == "start":
                self.starts.append(time.monotonic())
                if self.round == 0:
                    self.start_at = self.starts[-1]
                    self.fleet.note_start(line)
                    self.end("start")
                self.state = "started"
                return
            if kind == "abort":
                self.abort_line = line
                return self.end("abort", line[:200].decode(errors="replace"))
            return self.end("error", f"an unexpected {kind!r} before the start")
        elif self.state == "started":
            if kind == "ping":
                self.pings_after_start += 1
            elif kind == "done":
                self.end("done")
            elif kind == "stop":
                self.stop_line = line
                self.end("stop", line[:200].decode(errors="replace"))
            elif kind == "restart":
                self.end("restart")
                self.rejoin()
            else:
                self.end("error", f"an unexpected {kind!r} after the start")

    @property
    def abort_message(self):
        return json.loads(self.abort_line).get("message", "") if self.abort_line else None

    @property
    def stop_message(self):
        return json.loads(self.stop_line).get("message", "") if self.stop_line else None

    def exit(self, status: int, detail: str = ""):
        """The task's command ended: exit{status, detail} to the coordinator."""
        message = {"type": "exit", "status": status}
        if detail:
            message["detail"] = detail
        self.send(message)
        return time.monotonic()

    def rejoin(self):
        """A restart in place: the command stops at once, the connection closes, and a fresh hello
        goes to the restart's barrier (queued behind the fleet's other connections)."""
        self.state = "rejoining"
        self.round += 1
        self.accepted = False
        self.close_to_rejoin()
        self.fleet.queue_join([self])

    def close_to_rejoin(self):
        if self.transport and not self.transport.is_closing():
            self.closed_for_rejoin += 1
            self.transport.close()
        self.transport = None

    def heartbeat(self, now: float):
        if self.transport is None or self.state not in ("connecting", "challenged", "barrier", "started"):
            return
        if now - self.last_heard > SILENT_AFTER:
            return self.end("silent", f"the coordinator was silent for {SILENT_AFTER:.0f} s")
        if self.state in ("barrier", "started"):
            self.transport.write(PING)


class Fleet:
    """Tasks imitated in this process, all of one job: the coordinator's port, the fingerprint they
    report, where they connect from; the start as the first task got it."""

    def __init__(self, port: int, fingerprint: dict, indices, deadline: float, task_type: str = "worker",
                 template: str = "scale-{index}", per_source: int = 2048, handshakes_at_once: int = 64,
                 host: str = "127.0.0.1", tasks: int = 0, relay_port: int = 0, targets=None):
        self.port = port
        self.host = host
        self.targets = targets or {}   # index -> (host, port): where a task connects instead (a wrong way)
        self.job_size = tasks          # > STAR_LIMIT with a relay_port: each task joins through its relay
        self.relay_port = relay_port
        self.fingerprint = fingerprint
        self.deadline = deadline
        self.task_type = task_type
        self.template = template
        self.per_source = per_source
        self.tasks = {i: ImitatedTask(self, i) for i in indices}
        self.start_line = None       # the first start received, kept whole
        self.different_starts = 0    # starts that are not byte for byte that one
        self.connect_errors = collections.Counter()
        self._encoded = {}           # id(fingerprint) -> (fingerprint, its JSON)
        self.queue = collections.deque()
        self.queued = asyncio.Event()
        self.workers = [asyncio.create_task(self._connector()) for _ in range(handshakes_at_once)]
        self.ticker = asyncio.create_task(self._tick())

    def __iter__(self):
        return iter(self.tasks.values())

    def encoded(self, fingerprint: dict) -> bytes:
        key = id(fingerprint)
        if key not in self._encoded:
            self._encoded[key] = (fingerprint, json.dumps(fingerprint, separators=(",", ":")).encode())
        return self._encoded[key][1]

    def note_start(self, line: bytes):
        if self.start_line is None:
            self.start_line = line
        elif line != self.start_line:
            self.different_starts += 1

    def target(self, index: int):
        """Where worker:index connects: its relay, or the coordinator."""
        if index in self.targets:
            return self.targets[index]
        relay = relay_of(index, self.job_size) if self.relay_port else None
        return (self.host, self.port) if relay is None else (relay_address(relay), self.relay_port)

    def queue_join(self, tasks):
        self.queue.extend(tasks)
        self.queued.set()

    def join(self, indices):
        self.queue_join([self.tasks[i] for i in indices])

    def retry_later(self, task):
        """Refused or closed before the challenge: queued again after the backoff a real task
        waits (100 ms doubling up to 2 s, the second half of each step at random), so that the
        tasks a restart's barrier is not ready for do not try again in a loop. The handshake
        that was awaited ends: the connector goes on to the next task."""
        if task.handshake and not task.handshake.done():
            task.handshake.set_result(False)
        task.failures += 1
        delay = min(0.1 * 2 ** (task.failures - 1), 2.0)
        asyncio.get_running_loop().call_later(delay / 2 + random.uniform(0, delay / 2), self.queue_join, [task])

    async def _connector(self):
        loop = asyncio.get_running_loop()
        while True:
            while not self.queue:
                self.queued.clear()
                await self.queued.wait()
            task = self.queue.popleft()
            task.handshake = loop.create_future()
            source = source_address(task.index, self.per_source)
            try:
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                sock.setblocking(False)
                try:
                    sock.bind((source, 0))
                    task.connected_to = self.target(task.index)
                    await loop.sock_connect(sock, task.connected_to)
                except BaseException:
                    sock.close()
                    raise
                await loop.create_connection(lambda: task, sock=sock)
            except OSError as why:
                if why.errno not in (errno.ECONNREFUSED, errno.ECONNRESET):
                    self.connect_errors[why.strerror or repr(why)] += 1
                    task.end("error", f"connect from {source}: {why!r}")
                elif time.monotonic() > self.deadline:
                    task.end("error", "connection refused until the deadline")
                else:  # the coordinator (or the restart's barrier) is not listening yet
                    self.retry_later(task)
            # The ticker ends a handshake that hears nothing for SILENT_AFTER (no timer per task).
            await task.handshake

    async def _tick(self):
        """Every task's heartbeat, in slices so that no reading waits long behind the writing."""
        while True:
            began = time.monotonic()
            tasks = list(self.tasks.values())
            for first in range(0, len(tasks), 1024):
                now = time.monotonic()
                for task in tasks[first:first + 1024]:
                    task.heartbeat(now)
                await asyncio.sleep(0)
            await asyncio.sleep(max(0.05, HEARTBEAT - (time.monotonic() - began)))

    def count(self, predicate) -> int:
        return sum(1 for task in self.tasks.values() if predicate(task))

    async def close(self):
        for worker in [*self.workers, self.ticker]:
            worker.cancel()
        await asyncio.gather(*self.workers, self.ticker, return_exceptions=True)
        for task in self.tasks.values():
            if task.transport:
                task.state = "ended"
                task.transport.abort()


async def wait_until(predicate, until: float, step: float = 0.05):
    while not predicate() and time.monotonic() < until:
        await asyncio.sleep(step)
    return predicate()


# ---- the real tfboots beside the imitation: the coordinator, a warm-up job for the fingerprint

TEMPLATE = "scale-{index}"


_handed_out: set[int] = set()  # by free_tcp_port: no port twice in one process


def free_tcp_port() -> int:
    """A port free now and below the kernel's ephemeral range: thousands of imitated tasks (and the
    relays) connect from many loopback addresses, and a port the kernel may hand one of them as its
    source port would later refuse a relay's listen on that address (EADDRINUSE)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    for _ in range(200):
        port = random.randrange(10000, max(10001, low))
        if port in _handed_out:
            continue
        with socket.socket() as s:
            try:
                s.bind(("0.0.0.0", port))
            except OSError:
                continue
            _handed_out.add(port)
            return port
    raise RuntimeError(f"no free TCP port in 10000..{low - 1} after 200 tries")


class LoopbackDns:
    """Answers every A query with 127.0.0.1, or what `address_of(name)` gives for it (and every other
    query with no records), on a UDP port of 127.0.0.1, from a thread; stops when the `with` block ends."""

    def __init__(self, address_of=None):
        self.address_of = address_of or (lambda name: None)

    def __enter__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.setblocking(False)
        self.address = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()
        return self

    def serve(self):
        # Ahead of the imitation (nice -10) and the relays: a relay asks for its own name with a 2 s
        # deadline while hundreds start on 2 cores, and one unanswered listens on every address.
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), -15)
        except OSError:
            pass  # not root: the default priority
        with selectors.DefaultSelector() as selector:
            selector.register(self.sock, selectors.EVENT_READ)
            while not self.stopping.is_set():
                if not selector.select(timeout=0.2):
                    continue
                try:
                    data, client = self.sock.recvfrom(4096)
                    query = dns.message.from_wire(data)
                except (OSError, dns.exception.DNSException):
                    continue
                if query.flags & dns.flags.QR or not query.question:
                    continue
                response = dns.message.make_response(query, recursion_available=True)
                question = query.question[0]
                if question.rdtype == dns.rdatatype.A:
                    name = question.name.to_text(omit_final_dot=True)
                    address = self.address_of(name) or "127.0.0.1"
                    response.answer.append(dns.rrset.from_text(question.name, 5, "IN", "A", address))
                try:
                    self.sock.sendto(response.to_wire(), client)
                except OSError:
                    pass

    def __exit__(self, *exc):
        self.stopping.set()
        self.thread.join(timeout=5)
        self.sock.close()


class Tfboot:
    """A tfboot process with its log (stderr) read line by line, each line with the time it came;
    or, with `log_file`, written there (a coordinator of 100,000 tasks logs as many lines) and read
    by read_log(), without times."""

    def __init__(self, name: str, log_file=None):
        self.name = name
        self.proc = None
        self.lines: list[tuple[float, str]] = []
        self.reader = None
        self.spawned_at = None
        self.log_file = log_file

    async def start(self, argv, env, cwd):
        stderr = open(self.log_file, "wb") if self.log_file else asyncio.subprocess.PIPE
        try:
            self.proc = await asyncio.create_subprocess_exec(
                *argv, env=env, cwd=cwd, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
                stderr=stderr, limit=1 << 20)
        finally:
            if self.log_file:
                stderr.close()
        self.spawned_at = time.monotonic()
        if not self.log_file:
            self.reader = asyncio.create_task(self._read())

    def read_log(self):
        if self.log_file:
            with open(self.log_file, errors="replace") as f:
                self.lines = [(0.0, line.rstrip("\n")) for line in f]
        return self.lines

    async def _read(self):
        try:
            while line := await self.proc.stderr.readline():
                self.lines.append((time.monotonic(), line.decode(errors="replace").rstrip("\n")))
        except (ValueError, OSError) as error:  # a line over 1 MiB, or the pipe gone
            self.lines.append((time.monotonic(), f"(test: stopped reading the log: {error!r})"))

    @property
    def returncode(self):
        return self.proc.returncode if self.proc else None

    def first(self, needle: str):
        return next(((at, line) for at, line in self.lines if needle in line), None)

    def text(self) -> str:
        return "\n".join(line for _, line in self.lines)

    async def wait(self, timeout: float):
        try:
            await asyncio.wait_for(self.proc.wait(), max(0.0, timeout))
        except asyncio.TimeoutError:
            pass
        return self.proc.returncode

    async def stop(self):
        """SIGTERM (tfboot passes it on to its command), SIGKILL 3 s later; then the log's end."""
        if self.proc is None:
            return
        if self.proc.returncode is None:
            self.proc.terminate()
            if await self.wait(3) is None:
                self.proc.kill()
                await self.wait(5)
        if self.reader:
            try:
                await asyncio.wait_for(self.reader, 5)
            except asyncio.TimeoutError:
                self.reader.cancel()

    def report(self, tail: int = 12) -> str:
        notable = [line for _, line in self.lines if " warning " in line or " error " in line][:10]
        last = [line for _, line in self.lines[-tail:]]
        return (f"{self.name}: exit {self.returncode}\n  warnings and errors:\n    " + "\n    ".join(notable or ["(none)"]) +
                f"\n  last {len(last)} log lines:\n    " + "\n    ".join(last))


def relay_names(template: str = "scale-{index}"):
    """LoopbackDns's answers for a tree: a relay's name resolves to its own address."""
    prefix = template.split("{index}")[0]

    def address_of(name: str):
        first = name.split(".")[0]
        if first.startswith(prefix) and first[len(prefix):].isdigit():
            index = int(first[len(prefix):])
            if index and index % RELAY_GROUP == 0:
                return relay_address(index)
        return None
    return address_of


def tfboot_argv(tfboot, index, tasks, port, dns_address, log_root, command, start_timeout="90s", extra=()):
    """worker:index of `--cluster worker=tasks`, supervised, resolving no name (`--wait 0`)."""
    return [tfboot, "--init", "--task-type", "worker", "--task-index", str(index), "--cluster", f"worker={tasks}",
            "--peer-template", TEMPLATE, "--wait", "0", "--dns-server", dns_address, "--control-port", str(port),
            "--start-timeout", start_timeout, "--stop-grace", "5s", "--log-root", str(log_root), *extra, "--", *command]


async def fingerprint_of_a_real_task(tfboot, env, dns_address, tmp_path) -> dict:
    """A two-task job on loopback: what a real tfboot task reports here (startup.json)."""
    port = free_tcp_port()
    log_root = tmp_path / "warm-up"
    procs = [Tfboot(f"warm-up worker:{i}") for i in range(2)]
    try:
        for i, proc in enumerate(procs):
            await proc.start(tfboot_argv(tfboot, i, 2, port, dns_address, log_root, ["true"]), env, tmp_path)
        codes = [await proc.wait(30) for proc in procs]
    finally:
        for proc in procs:
            await proc.stop()
    if codes != [0, 0]:
        raise RuntimeError("the two-task warm-up job failed:\n" + "\n".join(proc.report() for proc in procs))
    startup = json.loads((log_root / "worker_1" / "startup.json").read_text())
    return startup["job"]["fingerprint"]
