"""Instruction profile of tfboot's DNS wait and start-up (valgrind --tool=callgrind), run through
``scripts/bench profile``: the same pod and dnsmasq records as bench.py, an unstripped build of
the release code (build-bench/prof, -O3 like the release build, with -g).

Callgrind counts instructions, which repeat from run to run on a busy machine where wall times do
not. Writes build-bench/callgrind-<case>.out and prints the inclusive top of each
(callgrind_annotate); open the .out files with callgrind_annotate or kcachegrind for more.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from bench import DOMAIN, NAMESPACE, SERVICE, after_the_wait, fqdn
from netbench import BenchNetwork, peer_ip

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tfboot", default=os.path.join(REPO, "build-bench", "prof", "launcher", "tfboot"))
    ap.add_argument("--sizes", default="4096", help="peer counts for the DNS-wait profile")
    ap.add_argument("--startup-n", type=int, default=64)
    ap.add_argument("--top", type=int, default=40, help="lines of callgrind_annotate to show")
    ap.add_argument("--out", default=os.path.join(REPO, "build-bench"))
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("profile: needs root (network, mount and PID namespaces)", file=sys.stderr)
        return 2
    # The DNS wait, then TF_CONFIG printed by the command (--print is a dry run without lookups).
    cases = [(f"wait-{n}", n, after_the_wait("")[1:]) for n in (int(x) for x in args.sizes.split(","))]
    cases.append((f"wait0-{args.startup_n}", args.startup_n, ["--print", "--wait", "0"]))
    with BenchNetwork(service=SERVICE, namespace=NAMESPACE, cluster_domain=DOMAIN) as net:
        pod = net.add_pod("mnist-worker-0")
        for name, n, flags in cases:
            net.load_peer_records([(fqdn(i), peer_ip(net.subnet, i)) for i in range(n)])
            out = os.path.join(args.out, f"callgrind-{name}.out")
            cp = net.exec_in_pod(pod, ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                                       args.tfboot, *flags], env={"TFBOOT_CLUSTER": f"worker={n}"}, timeout=600)
            if cp.returncode != 0:
                print(f"profile: {name}: exit {cp.returncode}\n{cp.stderr[-2000:]}", file=sys.stderr)
                return 1
            annotate = subprocess.run(["callgrind_annotate", "--inclusive=yes", out], capture_output=True,
                                      text=True, timeout=120)
            rows = [line for line in annotate.stdout.splitlines() if "(" in line and "%)" in line]
            print(f"== {name}: tfboot {' '.join(flags)} with TFBOOT_CLUSTER=worker={n} ({out})")
            for line in rows[:args.top]:
                print(line[:200])
            print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
