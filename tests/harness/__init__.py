"""Test harnesses for tfboot's tests: a simulated Kubernetes cluster network (needs root).

Start with ``harness.cluster.ClusterNetwork``; the modules under it, one concept each:

    cluster.py        ClusterNetwork: namespaces, pods, records, DNS faults, as one object
    pods.py           Pod, kubelet-style /etc files, PodProcess (a program run in a pod)
    pod_shim.py       the script that becomes a pod's program (hostname, /etc mounts, PID 1)
    namespaces.py     network namespaces: names, bridge and veths, removal, code run inside one
    dns_server.py     the cluster DNS process: dnsmasq or the failing responder, faults, query log
    coredns.py        CoreDNS as a Kubernetes cluster DNS (file zones, cache 30), on the same API
    dnsmasq.py        dnsmasq's command line, its records (hosts files), its log
    dns_responder.py  the DNS server that fails on purpose (SERVFAIL, REFUSED, NXDOMAIN)
    dns_client.py     the tests' DNS client (DnsResult)
    processes.py      starting, tracking and killing processes; /proc readers; HarnessError
    pod_job.py        PodJob: a job of pods with tfboot as PID 1, each pod's output in a file
    exit_codes.py     tfboot's exit codes by name (docs/supervision.md)

Beside the simulation, the real thing, for the Kubernetes tier (tests/kubernetes):

    kubernetes.py     a real single-node Kubernetes (etcd, control plane, kubelet, containerd,
                      CoreDNS's kubernetes plugin) in a network namespace of its own

DNS messages are built and read with dnspython (requirements-test.txt).
"""
