#!/usr/bin/env python3
"""The entrypoint a user writes when there is no tfboot: the benchmark's baseline.

Written the way a competent user would, for a StatefulSet ``<prefix>-worker`` behind a headless
Service: the task index comes from the hostname (``mnist-worker-3``), the peers' names are the
fully qualified names Kubernetes gives the pods (the Service, namespace and cluster domain come
from the pod's own FQDN, which the kubelet writes into /etc/hosts), every peer is resolved in turn
with ``socket.getaddrinfo`` the way TensorFlow/gRPC will (AF_UNSPEC, i.e. A and AAAA), a peer that
does not resolve yet is retried every second until a deadline, then TF_CONFIG is printed and, if a
command is given, exec'd with TF_CONFIG in its environment.

    NUM_WORKERS=4 python3 baseline_entrypoint.py [COMMAND ARG...]
"""

import json
import os
import re
import socket
import sys
import time

PORT = 2222
DEADLINE_SECONDS = 15 * 60
RETRY_SECONDS = 1.0


def main() -> int:
    hostname = socket.gethostname()
    match = re.fullmatch(r"(?P<prefix>.+)-(?P<type>chief|worker|ps|evaluator)-(?P<index>\d+)", hostname)
    if not match:
        print(f"entrypoint: cannot parse task from hostname {hostname!r}", file=sys.stderr)
        return 2
    prefix, task_type, index = match["prefix"], match["type"], int(match["index"])
    workers = int(os.environ["NUM_WORKERS"])

    # "mnist-worker-3.mnist.default.svc.cluster.local" -> ".mnist.default.svc.cluster.local"
    fqdn = socket.getfqdn()
    suffix = fqdn[len(hostname):] if fqdn.startswith(hostname + ".") else ""
    hosts = [f"{prefix}-worker-{i}{suffix}" for i in range(workers)]

    deadline = time.monotonic() + DEADLINE_SECONDS
    for host in hosts:
        while True:
            try:
                socket.getaddrinfo(host, PORT, type=socket.SOCK_STREAM)
                break
            except socket.gaierror as error:
                if time.monotonic() > deadline:
                    print(f"entrypoint: {host} did not resolve: {error}", file=sys.stderr)
                    return 3
                time.sleep(RETRY_SECONDS)

    tf_config = json.dumps({"cluster": {"worker": [f"{host}:{PORT}" for host in hosts]},
                            "task": {"type": task_type, "index": index}})
    print(tf_config, flush=True)
    if len(sys.argv) > 1:
        os.environ["TF_CONFIG"] = tf_config
        os.execvp(sys.argv[1], sys.argv[1:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
