"""A job of namespace pods with tfboot as PID 1 of each, for the framework tiers (tests/tensorflow,
tests/torch): each pod's output (stdout and stderr) in ``<directory>/<name>-<pod>.out``.

``PodJob(net, directory, name)``: ``start(pod, argv, env, cwd=None)``, ``text(pod)``,
``wait_for(pod, needle, timeout)`` (until the output holds needle), ``finish(timeout)`` ->
{pod name: Ended(code, text, at)} with ``at`` the monotonic time each one was seen to end.
"""

import subprocess
import time
from dataclasses import dataclass


@dataclass
class Ended:
    code: int
    text: str
    at: float


class PodJob:
    def __init__(self, net, directory, name):
        self.net, self.directory, self.name = net, directory, name
        self.procs = {}

    def path(self, pod):
        return self.directory / f"{self.name}-{pod.name}.out"

    def start(self, pod, argv, env, cwd=None):
        """Starts argv in pod; cwd is the working directory inside it (torchrun's workers write there)."""
        with open(self.path(pod), "w") as out:
            self.procs[pod.name] = self.net.run(pod, argv, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
        return self.procs[pod.name]

    def text(self, pod):
        return self.path(pod).read_text(errors="replace")

    def wait_for(self, pod, needle, timeout):
        deadline = time.monotonic() + timeout
        while needle not in self.text(pod):
            proc = self.procs[pod.name]
            assert proc.poll() is None, f"{pod.name} ended ({proc.returncode}) before {needle!r}:\n{self.text(pod)[-4000:]}"
            assert time.monotonic() < deadline, f"no {needle!r} from {pod.name} in {timeout}s:\n{self.text(pod)[-4000:]}"
            time.sleep(0.05)

    def finish(self, timeout):
        deadline = time.monotonic() + timeout
        ended = {}
        while len(ended) < len(self.procs):
            for name, proc in self.procs.items():
                if name not in ended and proc.poll() is not None:
                    ended[name] = Ended(proc.returncode, self.path(self.net.pods[name]).read_text(errors="replace"),
                                        time.monotonic())
            if time.monotonic() > deadline:
                for name, proc in self.procs.items():
                    if name not in ended:
                        proc.kill()
                        proc.wait(timeout=10)
                running = sorted(set(self.procs) - set(ended))
                raise AssertionError(f"{running} still running after {timeout}s:\n" +
                                     "\n".join(self.path(self.net.pods[n]).read_text()[-3000:] for n in running))
            time.sleep(0.05)
        return ended
