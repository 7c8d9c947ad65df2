"""A job of 2,000 tasks starts (docs/supervision.md: Job supervision; launcher/control/protocol/messages.h).

One real tfboot coordinator, worker:0 of `--cluster worker=2000`, supervised (`--init`); 1,998
fake tasks, worker:1..1998, in this process (asyncio), speaking the control channel's protocol on
loopback as a real task does; then one real tfboot task, worker:1999, joining last. Every task must
get `start` (not `abort`, not a closed or silent connection) soon after the last hello, stay
connected with heartbeats while the coordinator's command runs, and get `done` when it ends.

The start is one message, the same for every task. Built again for every task, in one loop
without heartbeats and each time holding every task's entry (O(N) work per task, O(N^2) in all),
it keeps the coordinator quiet for seconds at a few thousand tasks: the last tasks, hearing
nothing for 10 s, drop the connection as a real task does and are refused when they come back
("job already started").

Names: `--peer-template scale-{index}` and `--wait 0` on both real tfboots, so the coordinator
resolves no name at all (docs/supervision.md: "A coordinator running with `--wait 0` resolves nothing") and the
real task waits for none. The one name a task must still resolve, the coordinator's (worker:1999
asks it before each connection), is answered by a tiny DNS responder on loopback given with
`--dns-server`. That needs no root, no namespace and no private /etc/hosts (which would need a
mount namespace, hence root), so the test runs in every integration run: scripts/check's
`-m "not root"` as well as scripts/test.

The fakes report the fingerprint a real tfboot task reports here, taken from a two-task warm-up
job run first with the same environment, so the environment check finds no difference.
"""

import asyncio
import collections
import json
import os
import re
import resource
import secrets
import selectors
import socket
import statistics
import threading
import time

import dns.exception
import dns.flags
import dns.message
import dns.rdatatype
import dns.rrset
import pytest

TASKS = 2000
FAKES = list(range(1, TASKS - 1))  # worker:1 .. worker:1998
REAL_TASK = TASKS - 1              # worker:1999, the last to join
TEMPLATE = "scale-{index}"

# docs/supervision.md: heartbeats every 2 s; a peer silent for 10 s is dropped (both ways).
HEARTBEAT = 2.0
SILENT_AFTER = 10.0
# The last fake must hear the start this soon after the last hello was accepted. The start is
# the same message for every task: built once, handing it to 1,998 sockets takes well under a
# second here (at most a few hundred KB each, even with one entry per task). Built again for
# every task (the bug), it is N times the work before the last task hears anything, and seconds
# pass without a heartbeat. 5 s is half the silence limit: a failure means the design lets a
# task's silence limit come near at this size, not that the machine is slow.
START_WITHIN = 5.0
# Every wait of the test ends by then; then every process is stopped (SIGTERM, SIGKILL 3 s later).
GLOBAL_DEADLINE = 120.0
# The coordinator accepts at most 2 x tasks + 16 connections and has one descriptor per
# connection; this process holds one per fake. The soft limit is raised to the hard one (and
# inherited by the tfboots); a hard limit below this cannot hold the job.
NEEDED_NOFILE = 2 * TASKS + 200
# Hellos in flight at once: a job's pods do not all connect in the same millisecond either.
HANDSHAKES_AT_ONCE = 64
# After every task got the start, the coordinator's command keeps running this long, so that
# heartbeats flow both ways after the start before the job ends.
HOLD_AFTER_START = 2.5 * HEARTBEAT

PING = b'{"type":"ping"}\n'
MESSAGE_TYPE = re.compile(rb'\{"type":"([a-z]+)"')


@pytest.fixture
def nofile_raised():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < NEEDED_NOFILE:
        pytest.skip(f"RLIMIT_NOFILE hard limit {hard} < {NEEDED_NOFILE}: a job of {TASKS} tasks needs a "
                    f"descriptor per connection in the coordinator and per fake task in this process")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def free_tcp_port() -> int:
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        return s.getsockname()[1]


class LoopbackDns:
    """Answers every A query with 127.0.0.1 (and every other query with no records), on a UDP
    port of 127.0.0.1, from a thread; stops when the `with` block ends."""

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
                    response.answer.append(dns.rrset.from_text(question.name, 5, "IN", "A", "127.0.0.1"))
                try:
                    self.sock.sendto(response.to_wire(), client)
                except OSError:
                    pass

    def __exit__(self, *exc):
        self.stopping.set()
        self.thread.join(timeout=5)
        self.sock.close()


class Tfboot:
    """A tfboot process with its log (stderr) read line by line, each line with the time it came."""

    def __init__(self, name: str):
        self.name = name
        self.proc = None
        self.lines: list[tuple[float, str]] = []
        self.reader = None
        self.spawned_at = None

    async def start(self, argv, env, cwd):
        self.proc = await asyncio.create_subprocess_exec(
            *argv, env=env, cwd=cwd, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE, limit=1 << 20)
        self.spawned_at = time.monotonic()
        self.reader = asyncio.create_task(self._read())

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


class Silent(Exception):
    pass


class Closed(Exception):
    pass


class Channel:
    """One connection to the coordinator: lines in, with a real task's silence rule (any byte
    heard resets it)."""

    def __init__(self, reader, writer):
        self.reader, self.writer = reader, writer
        self.buffer = bytearray()
        self.scanned = 0
        self.last_heard = time.monotonic()

    async def line(self) -> bytes:
        while True:
            end = self.buffer.find(b"\n", self.scanned)
            if end >= 0:
                line = bytes(self.buffer[:end])
                del self.buffer[:end + 1]
                self.scanned = 0
                return line
            self.scanned = len(self.buffer)
            left = self.last_heard + SILENT_AFTER - time.monotonic()
            if left <= 0:
                raise Silent(f"the coordinator was silent for {SILENT_AFTER:.0f} s")
            try:
                chunk = await asyncio.wait_for(self.reader.read(1 << 20), left)
            except asyncio.TimeoutError:
                raise Silent(f"the coordinator was silent for {SILENT_AFTER:.0f} s") from None
            if not chunk:
                raise Closed("the coordinator closed the connection")
            self.last_heard = time.monotonic()
            self.buffer += chunk


def message_type(line: bytes) -> str:
    match = MESSAGE_TYPE.match(line)
    return match.group(1).decode() if match else "?"


class Job:
    """What the fakes share: the port, the fingerprint, the start as the first fake got it."""

    def __init__(self, port: int, fingerprint: dict, deadline: float):
        self.port = port
        self.fingerprint = fingerprint
        self.deadline = deadline
        self.handshakes = asyncio.Semaphore(HANDSHAKES_AT_ONCE)
        self.start_line = None       # the first start received, kept whole
        self.different_starts = 0    # starts that are not byte for byte that one

    def note_start(self, line: bytes):
        if self.start_line is None:
            self.start_line = line
        elif line != self.start_line:
            self.different_starts += 1


class Fake:
    """worker:N in this process: challenge, hello, accepted, waiting..., start, pings, done."""

    def __init__(self, index: int):
        self.index = index
        self.task = f"worker:{index}"
        self.accepted = False
        self.outcome = None      # how the barrier ended for it: start, abort, closed, silent, refused, error
        self.detail = ""
        self.ended_at = None     # when that outcome came
        self.start_at = None
        self.after = None        # after the start: done, stop, closed, silent, error
        self.pings_after_start = 0

    def end(self, what: str, detail: str = ""):
        if self.outcome is None:
            self.outcome, self.detail, self.ended_at = what, detail, time.monotonic()
        elif self.after is None:
            self.after, self.detail = what, detail

    async def connect(self, job: Job):
        while True:
            try:
                return await asyncio.open_connection("127.0.0.1", job.port, limit=1 << 20)
            except ConnectionRefusedError:  # the coordinator is not listening yet
                if time.monotonic() > job.deadline:
                    raise
                await asyncio.sleep(0.1)

    async def run(self, job: Job):
        writer = None
        pinger = None
        try:
            async with job.handshakes:
                reader, writer = await self.connect(job)
                channel = Channel(reader, writer)
                challenge = json.loads(await channel.line())
                if challenge.get("type") != "challenge":
                    return self.end("error", f"first message {challenge.get('type')!r}, not a challenge")
                hello = {"type": "hello", "job": challenge["job"], "task": self.task, "host": f"scale-{self.index}",
                         "instance": secrets.token_hex(8), "supervised": True, "name": TEMPLATE.format(index=self.index),
                         "addresses": ["127.0.0.1"], "fingerprint": job.fingerprint, "nonce": "", "proof": ""}
                writer.write(json.dumps(hello, separators=(",", ":")).encode() + b"\n")
                answer = json.loads(await channel.line())
                if answer.get("type") == "refused":
                    return self.end("refused", answer.get("reason", ""))
                if answer.get("type") != "accepted":
                    return self.end("error", f"{answer.get('type')!r} after hello")
                self.accepted = True
            pinger = asyncio.create_task(self.ping(writer))
            while True:  # the barrier: waiting (every 2 s) until start or abort
                line = await channel.line()
                kind = message_type(line)
                if kind in ("waiting", "ping"):
                    continue
                if kind == "start":
                    self.end("start")
                    self.start_at = self.ended_at
                    job.note_start(line)
                    break
                if kind == "abort":
                    return self.end("abort", json.loads(line).get("message", "")[:200])
                return self.end("error", f"an unexpected {kind!r} before the start")
            while True:  # after the start: pings until done (or stop)
                line = await channel.line()
                kind = message_type(line)
                if kind == "ping":
                    self.pings_after_start += 1
                elif kind == "done":
                    return self.end("done")
                elif kind == "stop":
                    return self.end("stop", json.loads(line).get("message", "")[:200])
                else:
                    return self.end("error", f"an unexpected {kind!r} after the start")
        except Silent as why:
            self.end("silent", str(why))
        except (Closed, ConnectionError) as why:
            self.end("closed", str(why))
        except (OSError, ValueError, KeyError) as why:
            self.end("error", repr(why))
        finally:
            if pinger:
                pinger.cancel()
            if writer:
                writer.close()

    async def ping(self, writer):
        while True:
            await asyncio.sleep(HEARTBEAT)
            writer.write(PING)


def task_ranges(indices) -> str:
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
    return "worker:" + ",".join(parts) if parts else "none"


def job_size_in(start: dict):
    """The job's size as a start says it: `tasks` (a start without the table of every task's
    entry), else one `members` entry per task (the start as it was)."""
    if "tasks" in start:
        return start["tasks"]
    return len(start.get("members", []))


def tfboot_argv(tfboot, index, tasks, port, dns_address, log_root, command):
    return [tfboot, "--init", "--task-type", "worker", "--task-index", str(index), "--cluster", f"worker={tasks}",
            "--peer-template", TEMPLATE, "--wait", "0", "--dns-server", dns_address, "--control-port", str(port),
            "--start-timeout", "90s", "--stop-grace", "5s", "--log-root", str(log_root), "--", *command]


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
    assert codes == [0, 0], "the two-task warm-up job failed:\n" + "\n".join(proc.report() for proc in procs)
    startup = json.loads((log_root / "worker_1" / "startup.json").read_text())
    return startup["job"]["fingerprint"]


async def wait_until(predicate, until: float):
    while not predicate() and time.monotonic() < until:
        await asyncio.sleep(0.1)
    return predicate()


async def run_the_job(tfboot, tmp_path):
    deadline = time.monotonic() + GLOBAL_DEADLINE
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    result = {"fakes": [Fake(i) for i in FAKES], "coordinator": Tfboot("coordinator worker:0"),
              "task": Tfboot(f"real task worker:{REAL_TASK}"), "phase": "warm-up"}
    with LoopbackDns() as dns_server:
        fingerprint = await fingerprint_of_a_real_task(tfboot, env, dns_server.address, tmp_path)
        result["fingerprint"] = fingerprint
        port = free_tcp_port()
        log_root = tmp_path / "logs"
        release = tmp_path / "release"       # the coordinator's command ends once this exists
        tf_config = tmp_path / "tf_config.json"  # what the real task's command got
        # Bounded by itself too: 120 s at most, then exit 1.
        hold = ["sh", "-c", 'i=0; while [ ! -e "$1" ] && [ "$i" -lt 1200 ]; do sleep 0.1; i=$((i+1)); done; [ -e "$1" ]',
                "sh", str(release)]
        write_tf_config = ["sh", "-c", 'printf %s "$TF_CONFIG" > "$1"', "sh", str(tf_config)]
        coordinator, task, fakes = result["coordinator"], result["task"], result["fakes"]
        job = result["job"] = Job(port, fingerprint, deadline)
        runners = []
        try:
            result["phase"] = "hellos"
            await coordinator.start(tfboot_argv(tfboot, 0, TASKS, port, dns_server.address, log_root, hold), env, tmp_path)
            runners = [asyncio.create_task(fake.run(job)) for fake in fakes]
            await wait_until(lambda: all(f.accepted or f.outcome for f in fakes) or coordinator.returncode is not None,
                             min(deadline, time.monotonic() + 60))
            result["accepted"] = sum(f.accepted for f in fakes)
            result["hellos_took"] = time.monotonic() - coordinator.spawned_at
            if result["accepted"] < len(fakes):
                return result

            # Every fake is present: the last task joins.
            result["phase"] = "start"
            await task.start(tfboot_argv(tfboot, REAL_TASK, TASKS, port, dns_server.address, log_root, write_tf_config),
                             env, tmp_path)
            # Twice the silence limit and more: time enough to see every fake's fate (start, or
            # silent after 10 s, or closed) and the real task's command run (it then waits for the
            # job's outcome) or its exit, whatever the binary does.
            await wait_until(lambda: all(f.outcome for f in fakes) and (tf_config.exists() or task.returncode is not None),
                             min(deadline, time.monotonic() + 3 * SILENT_AFTER))
            accepted = task.first("accepted us")
            if accepted:
                result["reference"], result["reference_what"] = accepted[0], "the last task's hello was accepted"
            else:
                result["reference"], result["reference_what"] = task.spawned_at, "the last task was started"
            if not all(f.outcome == "start" for f in fakes) or task.returncode not in (None, 0):
                return result

            # Heartbeats after the start, then the coordinator's command ends: done for everyone.
            result["phase"] = "done"
            await asyncio.sleep(HOLD_AFTER_START)
            release.touch()
            await wait_until(lambda: all(f.after for f in fakes) and coordinator.returncode is not None
                             and task.returncode is not None, min(deadline, time.monotonic() + 30))
            result["phase"] = "finished"
            result["tf_config"] = tf_config.read_text() if tf_config.exists() else None
            return result
        finally:
            release.touch()  # a command left behind ends within 0.1 s
            for runner in runners:
                runner.cancel()
            await asyncio.gather(*runners, return_exceptions=True)
            await task.stop()
            await coordinator.stop()
            result["startup"] = None
            startup = log_root / "worker_0" / "startup.json"
            if startup.exists():
                result["startup"] = json.loads(startup.read_text())


def summary(result) -> str:
    fakes = result["fakes"]
    lines = [f"phase reached: {result['phase']}",
             f"fakes accepted: {sum(f.accepted for f in fakes)}/{len(fakes)}"
             + (f" ({result['hellos_took']:.1f} s from the coordinator's start)" if "hellos_took" in result else ""),
             "fakes at the start barrier: " + ", ".join(f"{what} {count}" for what, count in
                                                        collections.Counter(f.outcome or "nothing yet" for f in fakes).most_common())]
    reference = result.get("reference")
    if reference is not None:
        starts = sorted(f.start_at - reference for f in fakes if f.start_at is not None)
        if starts:
            lines.append(f"start heard, after {result['reference_what']}: first {starts[0]:.2f} s, "
                         f"median {statistics.median(starts):.2f} s, last {starts[-1]:.2f} s")
        by_outcome = collections.defaultdict(list)
        for f in fakes:
            if f.outcome != "start":
                by_outcome[f.outcome or "nothing yet"].append(f)
        for what, group in by_outcome.items():
            times = [f.ended_at - reference for f in group if f.ended_at is not None]
            when = f" at {min(times):.1f}..{max(times):.1f} s" if times else ""
            lines.append(f"no start, {what}{when}: {task_ranges(f.index for f in group)} "
                         f"({group[0].detail or 'no detail'})")
    if any(f.after for f in fakes):
        lines.append("fakes after the start: " + ", ".join(
            f"{what} {count}" for what, count in collections.Counter(f.after or "nothing yet" for f in fakes if f.outcome == "start").most_common()))
    lines.append(result["task"].report())
    lines.append(result["coordinator"].report())
    return "\n".join(lines)


def test_a_job_of_2000_tasks_starts_and_ends(tfboot, tmp_path, nofile_raised):
    result = asyncio.run(run_the_job(tfboot, tmp_path))
    fakes, coordinator, task = result["fakes"], result["coordinator"], result["task"]
    report = summary(result)
    print(report)  # shown with -rP, and on a failure

    # Every task is present, and every one gets the start: no abort, no closed or silent connection.
    assert result.get("accepted") == len(fakes), report
    assert [f.task for f in fakes if f.outcome != "start"] == [], report
    # Soon: the last fake within START_WITHIN of the last hello's acceptance (see START_WITHIN).
    latest = max(f.start_at for f in fakes) - result["reference"]
    assert latest < START_WITHIN, f"the last fake heard the start {latest:.2f} s after {result['reference_what']}\n" + report
    # The real task, last to join, started too, and its command ran with the whole cluster.
    assert task.returncode == 0, report
    assert task.first("the coordinator says start"), report
    assert result.get("tf_config"), report
    tf_config = json.loads(result["tf_config"])
    assert tf_config["task"] == {"type": "worker", "index": REAL_TASK}
    assert len(tf_config["cluster"]["worker"]) == TASKS

    # One start for everyone, the same bytes, for the whole job, with no environment difference
    # (the fakes report what a real task does here).
    job = result["job"]
    assert job.different_starts == 0, f"{job.different_starts} fakes got a start unlike the first one's"
    start = json.loads(job.start_line)
    assert start["supervised"] is True
    assert job_size_in(start) == TASKS, {key: value for key, value in start.items() if key != "members"}
    assert start["environment_differences"] == [], start["environment_differences"]

    # After the start the fakes stayed connected, heard heartbeats, and got done when the
    # coordinator's command ended; the coordinator exits 0.
    assert all(f.after == "done" for f in fakes), report
    assert all(f.pings_after_start >= 1 for f in fakes), report
    assert coordinator.returncode == 0, report
    assert result["startup"]["job"]["tasks_present"] == TASKS, report
    assert result["startup"]["job"]["environment_differences"] == [], report
