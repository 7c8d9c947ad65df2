"""Imitated tasks in several processes (`scripts/bench scale` past ~16,000 tasks): each worker
process runs a Fleet of tests/harness/imitated_tasks.py (the same imitation as the 2,000-task
test) for its share of the tasks, and answers its parent's commands, one JSON line each, on
stdin/stdout. One process cannot hold 100,000 connections under a descriptor limit of 20,000;
several can. Times are CLOCK_MONOTONIC, the same in every process.

    python3 -m harness.fleet_pool   (a worker; the parent is FleetPool)
"""

import asyncio
import collections
import json
import os
import resource
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def summary(fleet, exclude=()) -> dict:
    """What the parent's waits and figures need, over this worker's tasks but `exclude`."""
    tasks = [t for t in fleet if t.index not in exclude]
    first_stop = next((t for t in tasks if t.stop_line), None)
    first_abort = next((t for t in tasks if t.abort_line), None)

    def latest(values):
        values = [v for v in values if v is not None]
        return max(values) if values else None
    return {
        "n": len(tasks),
        "accepted_or_ended": sum(1 for t in tasks if t.accepted or t.outcome),
        "accepted": sum(1 for t in tasks if t.accepted),
        "outcome": collections.Counter(t.outcome or "nothing yet" for t in tasks),
        "after": collections.Counter(t.after or "nothing yet" for t in tasks),
        "last": collections.Counter((t.last[0] if t.last else "nothing yet") for t in tasks),
        "latest_start": latest(t.start_at for t in tasks),
        "latest_after": latest(t.after_at for t in tasks),
        "latest_ended": latest(t.ended_at for t in tasks),
        "released_again": sum(1 for t in tasks if len(t.starts) >= 2),
        "latest_second_start": latest(t.starts[1] for t in tasks if len(t.starts) >= 2),
        "ended_otherwise": sum(1 for t in tasks if len(t.starts) < 2 and t.last and t.last[0] not in ("start", "restart")),
        "stop_message": first_stop.stop_message if first_stop else None,
        "abort_message": first_abort.abort_message if first_abort else None,
        "start_line": fleet.start_line.decode(errors="replace") if fleet.start_line else None,
        "different_starts": fleet.different_starts,
        "connect_errors": dict(fleet.connect_errors),
        "error_detail": next((t.last[1] for t in tasks if t.last and t.last[0] in ("error", "closed", "silent")), None),
    }


async def worker():
    from harness.imitated_tasks import Fleet
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 26)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    fleet = None

    def answer(value):
        sys.stdout.write(json.dumps(value) + "\n")
        sys.stdout.flush()
    while line := await reader.readline():
        command = json.loads(line)
        what = command["do"]
        if what == "fleet":
            fleet = Fleet(command["port"], command["fingerprint"], command["indices"], command["deadline"],
                          per_source=command["per_source"], handshakes_at_once=command["handshakes"], tasks=command["tasks"],
                          relay_port=command["relay_port"])
            for index in command.get("odd", []):
                fleet.tasks[index].fingerprint = command["odd_fingerprint"]
            answer({"ok": True})
        elif what == "join":
            fleet.join(command["indices"])
            answer({"ok": True})
        elif what == "summary":
            answer(summary(fleet, set(command.get("exclude", []))))
        elif what == "task":
            task = fleet.tasks[command["index"]]
            answer({"hello_at": task.hello_at, "outcome": task.outcome})
        elif what == "after_times":  # when each task but `exclude` heard what came after its start
            exclude = set(command.get("exclude", []))
            answer([t.after_at for t in fleet if t.index not in exclude and t.after_at is not None])
        elif what == "starts":  # every task's first start, by index
            answer({str(t.index): t.start_at for t in fleet})
        elif what == "exit":
            answer({"sent": fleet.tasks[command["index"]].exit(command["status"], command.get("detail", ""))})
        elif what == "close":
            await fleet.close()
            answer({"ok": True})
            return


class FleetPool:
    """The parent's side: `indices` spread over `processes` workers, each a Fleet."""

    def __init__(self, indices, processes: int, niceness: int = 0):
        """`niceness`: the workers' nice value, set by nice(1) as the bench's relays are (below 0 needs root;
        without it nice warns and the workers stay at 0)."""
        indices = list(indices)
        self.niceness = niceness
        share = -(-len(indices) // processes)
        self.shares = [indices[i:i + share] for i in range(0, len(indices), share)]
        self.owner = {index: n for n, part in enumerate(self.shares) for index in part}
        self.procs = []
        self.lock = asyncio.Lock()

    async def start(self, **fleet):
        env = dict(os.environ, PYTHONPATH=os.path.dirname(HERE))
        for share in self.shares:
            niced = ["nice", "-n", str(self.niceness)] if self.niceness else []
            proc = await asyncio.create_subprocess_exec(*niced, sys.executable, "-m", "harness.fleet_pool", stdin=asyncio.subprocess.PIPE,
                                                        stdout=asyncio.subprocess.PIPE, env=env, limit=1 << 26)
            self.procs.append(proc)
        for proc, share in zip(self.procs, self.shares):
            odd = [i for i in fleet.get("odd", []) if i in set(share)]
            await self.ask(proc, {"do": "fleet", **{k: v for k, v in fleet.items() if k != "odd"}, "indices": share, "odd": odd})

    async def ask(self, proc, command: dict):
        proc.stdin.write((json.dumps(command) + "\n").encode())
        await proc.stdin.drain()
        line = await proc.stdout.readline()
        if not line:
            raise RuntimeError(f"an imitation worker ended (exit {await proc.wait()})")
        return json.loads(line)

    async def join(self, indices):
        by_worker = collections.defaultdict(list)
        for index in indices:
            by_worker[self.owner[index]].append(index)
        async with self.lock:
            for n, part in by_worker.items():
                await self.ask(self.procs[n], {"do": "join", "indices": part})

    async def summary(self, exclude=()) -> dict:
        async with self.lock:
            parts = [await self.ask(proc, {"do": "summary", "exclude": list(exclude)}) for proc in self.procs]
        merged = {"outcome": collections.Counter(), "after": collections.Counter(), "last": collections.Counter(),
                  "connect_errors": collections.Counter()}
        for part in parts:
            for key, value in part.items():
                if key in ("outcome", "after", "last", "connect_errors"):
                    merged[key].update(value)
                elif key.startswith("latest_"):
                    if value is not None:
                        merged[key] = max(value, merged.get(key) or value)
                    else:
                        merged.setdefault(key, None)
                elif key in ("stop_message", "abort_message", "start_line", "error_detail"):
                    merged[key] = merged.get(key) or value
                else:
                    merged[key] = merged.get(key, 0) + value
        return merged

    async def after_times(self, exclude=()) -> list[float]:
        async with self.lock:
            parts = [await self.ask(proc, {"do": "after_times", "exclude": list(exclude)}) for proc in self.procs]
        return sorted(t for part in parts for t in part)

    @property
    def pids(self) -> list[int]:
        return [proc.pid for proc in self.procs]

    async def task(self, index: int) -> dict:
        async with self.lock:
            return await self.ask(self.procs[self.owner[index]], {"do": "task", "index": index})

    async def exit(self, index: int, status: int, detail: str = "") -> float:
        async with self.lock:
            return (await self.ask(self.procs[self.owner[index]], {"do": "exit", "index": index, "status": status,
                                                                   "detail": detail}))["sent"]

    async def close(self):
        for proc in self.procs:
            try:
                await asyncio.wait_for(self.ask(proc, {"do": "close"}), 30)
            except (RuntimeError, asyncio.TimeoutError, BrokenPipeError, ConnectionResetError):
                pass
            if proc.returncode is None:
                proc.kill()
            await proc.wait()


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(HERE))
    asyncio.run(worker())
