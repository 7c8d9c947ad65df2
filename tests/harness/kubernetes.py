"""A real single-node Kubernetes in a network namespace of its own, for the Kubernetes tier.

The binaries are the real ones, built once by ``scripts/setup-kubernetes`` into the test cache
(``$TFBOOT_TEST_CACHE``, default /var/cache/tfboot-test, ``kubernetes-1.37.2/``; or
``TFBOOT_KUBERNETES_DIR``): etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
kubelet, with Debian's containerd, runc and CNI plugins (bridge + host-local), and CoreDNS 1.11.3
(``scripts/setup-coredns``) with its ``kubernetes`` plugin as the cluster DNS: pod and Service
records come from the API's EndpointSlices, as in any cluster. Its ``cache`` is left out: the
tests delete and recreate objects, and a cache would serve the old pod addresses for 30 s. With
no upstream, other names get NXDOMAIN. No kube-proxy: the tier uses headless Services only.

The JobSet controller (``sigs.k8s.io/jobset``, built by ``scripts/setup-kubernetes`` into
``jobset-<version>/`` of the test cache with its CRD and webhook manifests) runs beside them: its
CRD applied server-side (too large for a client-side apply's annotation), its webhooks served on
``NODE_IP:9443`` with a certificate from the cluster's CA, and its webhook configurations pointed
there by URL: the API server shares the namespace and there is no kube-proxy to reach a Service.
Its own certificate management is off (it would write a fixed host path and name a Service).

Every daemon runs in the network namespace ``tfbt<pid>-<n>-k8s`` (``nsenter --net``, not ``ip
netns exec``, which would give each its own mount namespace: kubelet and containerd must see each
other's volume mounts), whose loopback holds the node's address (``NODE_IP``) and the cluster
DNS address (``DNS_IP``); the pods hang off the CNI bridge (``POD_CIDR``). Pods' cgroups live
under a cgroup root of the cluster's own (``/tfbt<pid>-<n>-k8s`` in every hierarchy); state, logs,
certificates and the hostPath directories under one temporary directory of the same name.

What this machine needs (no CAP_SYS_RESOURCE, cgroup v1, PID 1 not systemd): containerd's CRI
with ``restrict_oom_score_adj`` and the kubelet with ``oomScoreAdj: 0`` (else runc cannot set a
pod's oom_score_adj and every pod fails to start), the ``cgroupfs`` driver, ``failCgroupV1:
false``.

Offers:

* ``missing_reason()`` -> why the cluster cannot run here, or None.
* ``KubernetesCluster(images=[tarball, ...], sandbox_image=NAME)``: ``up()`` (about 10 s), then
  ``kubectl(*args, input=, timeout=, check=)`` -> CompletedProcess (kubectl run in the cluster's
  namespace), ``get(kind, name=None, namespace=)`` -> the object (or list's ``items``) as JSON,
  ``apply(objects)``, ``wait_for(what, predicate, timeout)`` (a bounded poll that says what it
  waited for), ``logs(pod, container=None)``, ``host_dir(name)`` (a directory for a hostPath
  volume, the single node's stand-in for a ReadWriteMany claim), ``reset()`` (deletes what the
  tests created in namespace default, waits until its pods are gone), ``down()`` (everything
  goes: pods, processes, mounts, network namespaces, cgroups, files; returns the problems met
  on the way, never stops at the first). ``up_seconds``, ``down_seconds``: what each took.
* ``cleanup_stale()``: what a SIGKILLed run left (its daemons, containers, mounts, cgroups).

Usage::

    cluster = KubernetesCluster(images=[trainer_tar, pause_tar], sandbox_image=PAUSE)
    try:
        cluster.up()
        cluster.apply(objects)
        cluster.wait_for("2 pods Running", lambda: ..., timeout=60)
    finally:
        problems = cluster.down()
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request
from typing import Callable, Iterable

import yaml

from harness import coredns
from harness.dns_client import query_many
from harness.namespaces import add_netns, delete_netns, in_netns, new_prefix, PREFIX
from harness.processes import HarnessError, ProcessSet, gone, kill_and_reap_pids, pid_alive, run_command

VERSION = "1.37.2"
CACHE_DIR = os.environ.get("TFBOOT_TEST_CACHE", "/var/cache/tfboot-test")
BIN_DIR = os.environ.get("TFBOOT_KUBERNETES_DIR") or os.path.join(CACHE_DIR, f"kubernetes-{VERSION}")
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kubectl")
JOBSET_VERSION = "0.10.1"
JOBSET_DIR = os.environ.get("TFBOOT_JOBSET_DIR") or os.path.join(CACHE_DIR, f"jobset-{JOBSET_VERSION}")
JOBSET_FILES = ("manager", "crd.yaml", "webhooks.yaml")
JOBSET_WEBHOOK_PORT = 9443
JOBSET_PROBE_ADDRESS = "127.0.0.1:8081"
KUBECTL = os.path.join(BIN_DIR, "kubectl")
CNI_BIN_DIR = "/usr/lib/cni"          # Debian's containernetworking-plugins
NODE_IP = "10.242.0.2"
NODE_NAME = "tfboot-node"
DNS_IP = "10.96.0.10"                 # kubeadm's: the tenth address of the Service range
SERVICE_CIDR = "10.96.0.0/16"
POD_CIDR = "10.244.0.0/24"
DOMAIN = "cluster.local"
API_PORT = 6443
CGROUP_ROOT = "/sys/fs/cgroup"
# Host paths the kubelet and containerd write whatever they are told (checked by down()).
FIXED_PATHS = ("/var/log/containers", "/var/lib/kubelet/device-plugins", "/var/lib/kubelet",
               "/var/lib/cni/results", "/var/lib/cni", "/run/containerd/s", "/run/containerd")
# Host-wide kernel settings the kubelet sets at start (vm.overcommit_memory=1, kernel.panic=10,
# kernel.panic_on_oops=1, ...); down() puts back what up() found.
KERNEL_TUNABLES = ("vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
                   "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes")
# Where containerd-shim mounts a task's root filesystem when it is not under the state dir; a
# containerd of the host may have its own there, so down() unmounts only what appeared after up().
SHIM_TASKS = "/run/containerd/io.containerd.runtime.v2.task/k8s.io"
_STALE = re.compile(rf"^{PREFIX}(\d+)-\d+-k8s")
_NO_PROXY_ENV = {"http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "no_proxy", "NO_PROXY"}


def missing_reason() -> str | None:
    for name in BINARIES:
        if not os.access(os.path.join(BIN_DIR, name), os.X_OK):
            return f"{name} is not built at {BIN_DIR} (scripts/setup-kubernetes builds it)"
    for name in JOBSET_FILES:
        if not os.path.exists(os.path.join(JOBSET_DIR, name)):
            return f"the JobSet controller's {name} is not at {JOBSET_DIR} (scripts/setup-kubernetes builds it)"
    for program in ("containerd", "containerd-shim-runc-v2", "runc", "ctr", "nsenter", "openssl"):
        if not shutil.which(program):
            return f"{program} is not installed (scripts/setup-kubernetes installs it)"
    if not os.access(os.path.join(CNI_BIN_DIR, "bridge"), os.X_OK):
        return f"no CNI bridge plugin in {CNI_BIN_DIR} (scripts/setup-kubernetes installs it)"
    if os.path.exists(os.path.join(CGROUP_ROOT, "cgroup.controllers")):
        return (f"{CGROUP_ROOT} is cgroup v2 (unified); this harness makes the cluster's cgroup root in "
                "each cgroup v1 hierarchy and runs only on a cgroup v1 host")
    if not os.path.isdir(os.path.join(CGROUP_ROOT, "memory")):
        return f"no cgroup v1 memory hierarchy at {CGROUP_ROOT}/memory: the kubelet needs one"
    return coredns.missing_reason()


def _daemon_env() -> dict[str, str]:
    # No proxy: every address the daemons talk to is in the cluster's own namespace.
    return {k: v for k, v in os.environ.items() if k not in _NO_PROXY_ENV}


class KubernetesCluster:
    def __init__(self, *, images: Iterable[str], sandbox_image: str):
        self.images = list(images)
        self.sandbox_image = sandbox_image
        prefix = new_prefix()
        self.name = prefix + "k8s"
        self.ns = self.name
        self.workdir = ""
        self.cgroup = "/" + self.name
        self.processes = ProcessSet()
        self.daemons: dict[str, subprocess.Popen] = {}
        self.up_seconds = 0.0
        self.down_seconds = 0.0
        self._fixed_paths_before: dict[str, set[str] | None] = {}
        self._netns_before: set[str] = set()
        self._tunables_before: dict[str, str] = {}
        self._shim_mounts_before: set[str] = set()

    # -- bringing it up -------------------------------------------------------------------------

    def up(self) -> None:
        reason = missing_reason()
        if reason:
            raise HarnessError(reason)
        began = time.monotonic()
        self._fixed_paths_before = {path: _entries(path) for path in FIXED_PATHS}
        self._netns_before = set(_entries("/run/netns") or ())
        self._tunables_before = _read_tunables()
        self._shim_mounts_before = set(_mounts_under(SHIM_TASKS))
        self.workdir = tempfile.mkdtemp(prefix=self.name + ".")
        for sub in ("pki", "etcd", "logs", "kubelet", "pod-logs", "cni/net.d", "cni/ipam", "containerd",
                    "hostpath", "jobset-certs"):
            os.makedirs(os.path.join(self.workdir, sub), exist_ok=True)
        self._network()
        self._cgroups()
        self._certificates()
        self._write_configs()
        self._start("etcd", [os.path.join(BIN_DIR, "etcd"), "--name", "node",
                             "--data-dir", self._path("etcd"),
                             "--listen-client-urls", "http://127.0.0.1:2379",
                             "--advertise-client-urls", "http://127.0.0.1:2379",
                             "--listen-peer-urls", "http://127.0.0.1:2380",
                             "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
                             "--initial-cluster", "node=http://127.0.0.1:2380",
                             "--unsafe-no-fsync", "--log-level", "warn"])
        self._start("kube-apiserver", self._apiserver_argv())
        self._start("containerd", ["containerd", "--config", self._path("containerd.toml")])
        self.wait_for("the API server's /readyz", self._api_ready, timeout=60)
        kubeconfig = self._path("pki/admin.kubeconfig")
        self._start("kube-controller-manager", [
            os.path.join(BIN_DIR, "kube-controller-manager"), "--kubeconfig", kubeconfig,
            "--authentication-kubeconfig", kubeconfig, "--authorization-kubeconfig", kubeconfig,
            "--leader-elect=false", "--bind-address", "127.0.0.1",
            "--service-account-private-key-file", self._path("pki/sa.key"),
            "--root-ca-file", self._path("pki/ca.crt"), "--use-service-account-credentials=false",
            "--service-cluster-ip-range", SERVICE_CIDR, "--cluster-name", "tfboot-test"])
        self._start("kube-scheduler", [
            os.path.join(BIN_DIR, "kube-scheduler"), "--kubeconfig", kubeconfig,
            "--authentication-kubeconfig", kubeconfig, "--authorization-kubeconfig", kubeconfig,
            "--leader-elect=false", "--bind-address", "127.0.0.1"])
        self._start("coredns", [coredns.COREDNS, "-conf", self._path("Corefile")])
        self._start_jobset(kubeconfig)
        self.wait_for("containerd's socket", lambda: os.path.exists(self._path("containerd/containerd.sock")),
                      timeout=30)
        for tarball in self.images:
            self.ctr("images", "import", tarball, timeout=120)
        self._start("kubelet", [os.path.join(BIN_DIR, "kubelet"), "--config", self._path("kubelet.yaml"),
                                "--kubeconfig", kubeconfig, "--root-dir", self._path("kubelet"),
                                "--hostname-override", NODE_NAME, "--node-ip", NODE_IP, "--v", "1"])
        self.wait_for("the node Ready", self._node_ready, timeout=60)
        self.wait_for("the ServiceAccount default", lambda: self.kubectl(
            "get", "serviceaccount", "default", check=False).returncode == 0, timeout=60)
        self.wait_for("the cluster DNS", self._dns_ready, timeout=30)
        self.up_seconds = time.monotonic() - began

    def _start_jobset(self, kubeconfig: str) -> None:
        """The JobSet CRD, its controller, and once its webhooks serve, their configurations."""
        self.kubectl("apply", "--server-side", "-f", os.path.join(JOBSET_DIR, "crd.yaml"), timeout=120)
        config = {"apiVersion": "config.jobset.x-k8s.io/v1alpha1", "kind": "Configuration",
                  "leaderElection": {"leaderElect": False}, "internalCertManagement": {"enable": False},
                  "webhook": {"host": NODE_IP, "port": JOBSET_WEBHOOK_PORT, "certDir": self._path("jobset-certs")},
                  "health": {"healthProbeBindAddress": JOBSET_PROBE_ADDRESS}, "metrics": {"bindAddress": "0"}}
        with open(self._path("jobset.yaml"), "w") as f:
            json.dump(config, f)
        self._start("jobset-controller", [os.path.join(JOBSET_DIR, "manager"), "--config", self._path("jobset.yaml"),
                                          "--kubeconfig", kubeconfig, "--metrics-bind-address", "0"])
        self.wait_for("the JobSet controller's /readyz", self._jobset_ready, timeout=60)
        with open(self._path("pki/ca.crt"), "rb") as f:
            ca_bundle = base64.b64encode(f.read()).decode()
        with open(os.path.join(JOBSET_DIR, "webhooks.yaml")) as f:
            configurations = [o for o in yaml.safe_load_all(f) if o]
        for configuration in configurations:
            configuration["metadata"]["name"] = "jobset-" + configuration["metadata"]["name"]
            for webhook in configuration["webhooks"]:
                path = webhook["clientConfig"]["service"]["path"]
                webhook["clientConfig"] = {"url": f"https://{NODE_IP}:{JOBSET_WEBHOOK_PORT}{path}",
                                           "caBundle": ca_bundle}
        self.apply(configurations)
        self.wait_for("the JobSet CRD established", lambda: self.kubectl(
            "wait", "--for=condition=Established", "crd/jobsets.jobset.x-k8s.io", "--timeout=5s",
            check=False, timeout=30).returncode == 0, timeout=60)

    def _jobset_ready(self) -> bool:
        def probe() -> bool:
            opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))   # no proxy: our own namespace
            try:
                with opener.open(f"http://{JOBSET_PROBE_ADDRESS}/readyz", timeout=2) as response:
                    return response.status == 200
            except OSError:
                return False
        return in_netns(self.ns, probe)

    def _path(self, *parts: str) -> str:
        return os.path.join(self.workdir, *parts)

    def _network(self) -> None:
        add_netns(self.ns)
        for args in (["link", "set", "lo", "up"], ["addr", "add", f"{NODE_IP}/32", "dev", "lo"],
                     ["addr", "add", f"{DNS_IP}/32", "dev", "lo"]):
            run_command(["ip", "-n", self.ns, *args])

    def _cgroups(self) -> None:
        # The kubelet checks that its cgroup root exists in every hierarchy it uses.
        for hierarchy in _hierarchies():
            os.makedirs(os.path.join(CGROUP_ROOT, hierarchy, self.cgroup.lstrip("/")), exist_ok=True)

    def _certificates(self) -> None:
        pki = self._path("pki")

        def openssl(*args: str) -> None:
            run_command(["openssl", *args], timeout=30)

        def key(name: str) -> None:
            openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
                    "-out", f"{pki}/{name}.key")

        key("ca")
        openssl("req", "-x509", "-new", "-key", f"{pki}/ca.key", "-subj", "/CN=tfboot-test-ca",
                "-days", "2", "-out", f"{pki}/ca.crt")
        for name, subject, extensions in (
                ("apiserver", "/CN=kube-apiserver",
                 f"subjectAltName=IP:{NODE_IP},IP:10.96.0.1,IP:127.0.0.1,DNS:kubernetes,"
                 f"DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.{DOMAIN}\n"
                 "extendedKeyUsage=serverAuth\n"),
                # One identity for every client: in system:masters, which no authorizer refuses.
                ("admin", "/O=system:masters/CN=admin", "extendedKeyUsage=clientAuth\n"),
                # The JobSet controller's webhooks, which the API server calls at NODE_IP.
                ("jobset-webhook", "/CN=jobset-webhook",
                 f"subjectAltName=IP:{NODE_IP}\nextendedKeyUsage=serverAuth\n")):
            key(name)
            openssl("req", "-new", "-key", f"{pki}/{name}.key", "-subj", subject, "-out", f"{pki}/{name}.csr")
            with open(f"{pki}/{name}.ext", "w") as f:
                f.write(extensions)
            openssl("x509", "-req", "-in", f"{pki}/{name}.csr", "-CA", f"{pki}/ca.crt", "-CAkey",
                    f"{pki}/ca.key", "-CAcreateserial", "-days", "2", "-extfile", f"{pki}/{name}.ext",
                    "-out", f"{pki}/{name}.crt")
        for name, target in (("crt", "tls.crt"), ("key", "tls.key")):
            shutil.copy(f"{pki}/jobset-webhook.{name}", self._path("jobset-certs", target))
        openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", f"{pki}/sa.key")
        openssl("pkey", "-in", f"{pki}/sa.key", "-pubout", "-out", f"{pki}/sa.pub")

        def data(name: str) -> str:
            with open(f"{pki}/{name}", "rb") as f:
                return base64.b64encode(f.read()).decode()

        kubeconfig = {
            "apiVersion": "v1", "kind": "Config", "current-context": "test",
            "clusters": [{"name": "test", "cluster": {"server": f"https://{NODE_IP}:{API_PORT}",
                                                      "certificate-authority-data": data("ca.crt")}}],
            "users": [{"name": "admin", "user": {"client-certificate-data": data("admin.crt"),
                                                 "client-key-data": data("admin.key")}}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": "admin"}}],
        }
        with open(f"{pki}/admin.kubeconfig", "w") as f:
            json.dump(kubeconfig, f)

    def _apiserver_argv(self) -> list[str]:
        pki = self._path("pki")
        return [os.path.join(BIN_DIR, "kube-apiserver"),
                "--etcd-servers", "http://127.0.0.1:2379",
                "--advertise-address", NODE_IP, "--bind-address", "0.0.0.0", "--secure-port", str(API_PORT),
                "--service-cluster-ip-range", SERVICE_CIDR,
                "--client-ca-file", f"{pki}/ca.crt",
                "--tls-cert-file", f"{pki}/apiserver.crt", "--tls-private-key-file", f"{pki}/apiserver.key",
                "--kubelet-preferred-address-types", "InternalIP",   # its name resolves nowhere
                "--kubelet-client-certificate", f"{pki}/admin.crt", "--kubelet-client-key", f"{pki}/admin.key",
                "--service-account-issuer", f"https://kubernetes.default.svc.{DOMAIN}",
                "--service-account-key-file", f"{pki}/sa.pub",
                "--service-account-signing-key-file", f"{pki}/sa.key",
                "--authorization-mode", "AlwaysAllow", "--allow-privileged=true",
                "--cert-dir", self._path("apiserver"), "--profiling=false"]

    def _write_configs(self) -> None:
        containerd_dir = self._path("containerd")
        with open(self._path("containerd.toml"), "w") as f:
            f.write(f"""\
version = 2
root = "{containerd_dir}/root"
state = "{containerd_dir}/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
                    "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]
[grpc]
  address = "{containerd_dir}/containerd.sock"
[ttrpc]
  address = "{containerd_dir}/containerd.sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{self.sandbox_image}"
  # No CAP_SYS_RESOURCE here: runc could not lower a pod's oom_score_adj below tfboot's own.
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_BIN_DIR}"
    conf_dir = "{self._path('cni/net.d')}"
""")
        with open(self._path("cni/net.d/10-bridge.conflist"), "w") as f:
            json.dump({"cniVersion": "0.4.0", "name": "tfboot-test", "plugins": [
                {"type": "bridge", "bridge": "cni0", "isGateway": True, "ipMasq": False, "hairpinMode": True,
                 "ipam": {"type": "host-local", "dataDir": self._path("cni/ipam"),
                          "ranges": [[{"subnet": POD_CIDR}]], "routes": [{"dst": "0.0.0.0/0"}]}},
                {"type": "loopback"}]}, f)
        with open(self._path("resolv.conf"), "w") as f:
            f.write("")   # the node's own resolver has no place in the pods' resolv.conf
        kubelet = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
            "cgroupDriver": "cgroupfs", "cgroupRoot": self.cgroup, "failCgroupV1": False,
            "failSwapOn": False, "oomScoreAdj": 0,
            "containerRuntimeEndpoint": f"unix://{containerd_dir}/containerd.sock",
            "clusterDNS": [DNS_IP], "clusterDomain": DOMAIN, "resolvConf": self._path("resolv.conf"),
            "address": NODE_IP, "readOnlyPort": 0, "healthzPort": 0,
            "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": False},
                               "x509": {"clientCAFile": self._path("pki/ca.crt")}},
            "authorization": {"mode": "AlwaysAllow"},
            "podLogsDir": self._path("pod-logs"),
            # The machine's disk is shared: evict nothing, collect no image of the test's.
            "evictionHard": {"memory.available": "1Mi", "nodefs.available": "1%", "imagefs.available": "1%",
                             "nodefs.inodesFree": "1%"},
            "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
            "serializeImagePulls": False, "registerNode": True,
        }
        with open(self._path("kubelet.yaml"), "w") as f:
            json.dump(kubelet, f)
        with open(self._path("Corefile"), "w") as f:
            f.write(f"""\
{DOMAIN}:53 in-addr.arpa:53 ip6.arpa:53 {{
    bind {DNS_IP}
    errors
    kubernetes {DOMAIN} in-addr.arpa ip6.arpa {{
        kubeconfig {self._path('pki/admin.kubeconfig')}
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }}
}}
.:53 {{
    bind {DNS_IP}
    errors
    template ANY ANY {{
        rcode NXDOMAIN
    }}
}}
""")

    def _start(self, name: str, argv: list[str]) -> None:
        log = open(self._path("logs", f"{name}.log"), "ab")
        try:
            self.daemons[name] = self.processes.spawn(
                ["nsenter", f"--net=/run/netns/{self.ns}", *argv], stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, env=_daemon_env(), cwd=self.workdir)
        finally:
            log.close()

    def _check_daemons(self) -> None:
        for name, process in self.daemons.items():
            if process.poll() is not None:
                raise HarnessError(f"{name} exited with {process.returncode}:\n{self.log_tail(name)}")

    def log_tail(self, name: str, chars: int = 3000) -> str:
        try:
            with open(self._path("logs", f"{name}.log"), errors="replace") as f:
                return f.read()[-chars:]
        except OSError as e:
            return f"(no log: {e})"

    def _api_ready(self) -> bool:
        try:   # an apiserver still starting may hold the connection open: asked again
            return self.kubectl("get", "--raw", "/readyz", check=False, timeout=10).returncode == 0
        except HarnessError:
            return False

    def _node_ready(self) -> bool:
        node = self.kubectl("get", "node", NODE_NAME, "-o", "json", check=False)
        if node.returncode != 0:
            return False
        conditions = json.loads(node.stdout)["status"].get("conditions", [])
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    def _dns_ready(self) -> bool:
        [answer] = in_netns(self.ns, lambda: query_many(DNS_IP, [(f"kubernetes.default.svc.{DOMAIN}", "A")]))
        return answer.addresses == ["10.96.0.1"]

    # -- using it -------------------------------------------------------------------------------

    def kubectl(self, *args: str, input: str | None = None, timeout: float = 60,
                check: bool = True) -> subprocess.CompletedProcess:
        argv = ["nsenter", f"--net=/run/netns/{self.ns}", KUBECTL,
                "--kubeconfig", self._path("pki/admin.kubeconfig"), *args]
        try:
            done = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout,
                                  env=_daemon_env(), stdin=None if input is not None else subprocess.DEVNULL)
        except subprocess.TimeoutExpired as e:
            raise HarnessError(f"timed out after {timeout}s: kubectl {' '.join(args)}") from e
        if check and done.returncode != 0:
            raise HarnessError(f"kubectl {' '.join(args)} failed (exit {done.returncode}): {done.stderr.strip()}")
        return done

    def ctr(self, *args: str, timeout: float = 60) -> str:
        return run_command(["ctr", "--address", self._path("containerd/containerd.sock"), "-n", "k8s.io", *args],
                           timeout=timeout).stdout

    def apply(self, objects: Iterable[dict]) -> None:
        """kubectl apply of the objects, as a user applies a file (one List)."""
        self.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                           "items": list(objects)}))

    def get(self, kind: str, name: str | None = None, *, selector: str | None = None) -> dict | list:
        args = ["get", kind, *([name] if name else []), *(["-l", selector] if selector else []), "-o", "json"]
        got = json.loads(self.kubectl(*args).stdout)
        return got if name else got["items"]

    def logs(self, pod: str, container: str | None = None) -> str:
        return self.kubectl("logs", pod, *(["-c", container] if container else [])).stdout

    def wait_for(self, what: str, predicate: Callable[[], object], timeout: float, interval: float = 0.25):
        """predicate()'s first true value, polled until timeout; HarnessError naming what, else."""
        deadline = time.monotonic() + timeout
        while True:
            self._check_daemons()
            value = predicate()
            if value:
                return value
            if time.monotonic() >= deadline:
                raise HarnessError(f"timed out after {timeout}s waiting for {what}")
            time.sleep(interval)

    def host_dir(self, name: str) -> str:
        path = self._path("hostpath", name)
        os.makedirs(path, exist_ok=True)
        return path

    def reset(self, timeout: float = 60) -> None:
        """Deletes every workload (JobSets too) and pod of namespace default, and the Services,
        NetworkPolicies and Secrets of the examples (their label app.kubernetes.io/name, or the
        control Secret), and waits until the pods are gone from the API, so the next test starts
        afresh."""
        self.kubectl("delete", "jobsets,jobs,statefulsets", "--all", "--cascade=background", "--wait=false", timeout=timeout)
        self.kubectl("delete", "services,networkpolicies", "-l", "app.kubernetes.io/name", "--wait=false",
                     timeout=timeout)
        self.kubectl("delete", "secret", "tfboot-control", "--ignore-not-found", "--wait=false", timeout=timeout)
        self.kubectl("delete", "pods", "--all", "--grace-period=0", "--force", "--wait=false", timeout=timeout)
        self.wait_for("namespace default without pods", lambda: not self.get("pods"), timeout=timeout)

    # -- taking it down ---------------------------------------------------------------------------

    def down(self) -> list[Exception]:
        """Everything up() made goes, whatever state it is in; returns the problems met."""
        began = time.monotonic()
        problems: list[Exception] = []

        def step(fn, *args) -> None:
            try:
                fn(*args)
            except Exception as e:   # every later step still runs
                problems.append(e)

        if self.workdir and self.daemons.get("kubelet") and self.daemons["kubelet"].poll() is None:
            step(self._stop_pods)
        problems += self.processes.kill_all()
        step(_kill_netns_processes, self.ns)
        step(_kill_cgroup_processes, self.cgroup)
        if self.workdir:
            step(_unmount_under, self.workdir)
            step(_unmount, [m for m in _mounts_under(SHIM_TASKS) if m not in self._shim_mounts_before])
        step(self._remove_pod_netns)
        step(_remove_cgroups, self.cgroup)
        step(delete_netns, self.ns)
        step(self._restore_fixed_paths)
        step(_write_tunables, self._tunables_before)
        if self.workdir:
            step(_remove_tree, self.workdir)
        self.down_seconds = time.monotonic() - began
        return problems

    def _stop_pods(self) -> None:
        """Every pod removed through the API, and the kubelet given a bounded time to stop their
        sandboxes (network teardown, the pods' network namespaces)."""
        self.kubectl("delete", "pods", "--all", "--all-namespaces", "--grace-period=0", "--force",
                     "--wait=false", check=False, timeout=30)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if not self.ctr("tasks", "ls", "-q").split():
                return
            time.sleep(0.25)

    def _remove_pod_netns(self) -> None:
        for name in set(_entries("/run/netns") or ()) - self._netns_before:
            if name.startswith("cni-"):
                path = os.path.join("/run/netns", name)
                subprocess.run(["umount", "-l", path], capture_output=True, timeout=10)
                try:
                    os.remove(path)
                except FileNotFoundError:
                    pass

    def _restore_fixed_paths(self) -> None:
        # Deepest first, so a parent created by the cluster is empty when its turn comes.
        for path in sorted(FIXED_PATHS, key=len, reverse=True):
            before = self._fixed_paths_before.get(path)
            now = _entries(path)
            if now is None:
                continue
            if before is None:
                _remove_tree(path)
                continue
            for entry in now - before:
                _remove_tree(os.path.join(path, entry))


def _entries(path: str) -> set[str] | None:
    try:
        return set(os.listdir(path))
    except FileNotFoundError:
        return None


def _hierarchies() -> list[str]:
    """The cgroup v1 hierarchies to make the root in (the kubelet and runc use each of these)."""
    return sorted(name for name in os.listdir(CGROUP_ROOT)
                  if os.path.isdir(os.path.join(CGROUP_ROOT, name)) and not os.path.islink(os.path.join(CGROUP_ROOT, name)))


def _cgroup_dirs(cgroup: str) -> list[str]:
    """Every directory of cgroup in every hierarchy, deepest first."""
    found = []
    for hierarchy in _hierarchies():
        top = os.path.join(CGROUP_ROOT, hierarchy, cgroup.lstrip("/"))
        for directory, _, _ in os.walk(top):
            found.append(directory)
    return sorted(found, key=lambda d: d.count("/"), reverse=True)


def _kill_cgroup_processes(cgroup: str) -> None:
    for _ in range(20):   # bounded: a forking process may add one while we read
        pids = set()
        for directory in _cgroup_dirs(cgroup):
            try:
                with open(os.path.join(directory, "cgroup.procs")) as f:
                    pids.update(int(x) for x in f.read().split())
            except OSError:
                pass
        pids = {pid for pid in pids if not gone(pid)}
        if not pids:
            return
        kill_and_reap_pids(pids)
    raise HarnessError(f"processes still in cgroup {cgroup}")


def _kill_netns_processes(ns: str) -> None:
    """containerd's shims leave their parent's session: whatever still runs in the namespace."""
    listed = run_command(["ip", "netns", "pids", ns], check=False)
    pids = [int(x) for x in listed.stdout.split() if x.isdigit()]
    if pids:
        kill_and_reap_pids(pids)


def _remove_cgroups(cgroup: str) -> None:
    left = []
    for directory in _cgroup_dirs(cgroup):
        for _ in range(50):   # a cgroup whose last process just died may be busy for a moment
            try:
                os.rmdir(directory)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.02)
        else:
            left.append(directory)
    if left:
        raise HarnessError(f"cgroups left behind: {left[:5]}")


def _mounts_under(top: str) -> list[str]:
    """Every mount point at or below top."""
    top = os.path.realpath(top)
    mounts = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4].encode().decode("unicode_escape")
            if point == top or point.startswith(top + "/"):
                mounts.append(point)
    return mounts


def _unmount(mounts: list[str]) -> None:
    """Deepest first; lazily, so one still busy does not stop the others."""
    for point in sorted(set(mounts), key=len, reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True, timeout=10)


def _unmount_under(top: str) -> None:
    """Every mount at or below top (overlay root filesystems, the kubelet's tmpfs volumes)."""
    _unmount(_mounts_under(top))


def _read_tunables() -> dict[str, str]:
    values = {}
    for name in KERNEL_TUNABLES:
        try:
            with open(os.path.join("/proc/sys", name)) as f:
                values[name] = f.read().strip()
        except OSError:   # not in this kernel: nothing to put back
            pass
    return values


def _write_tunables(values: dict[str, str]) -> None:
    changed = {name: value for name, value in values.items() if _read_tunables().get(name) != value}
    for name, value in changed.items():
        with open(os.path.join("/proc/sys", name), "w") as f:
            f.write(value)


def _remove_tree(path: str) -> None:
    _unmount_under(path)
    shutil.rmtree(path, ignore_errors=True)
    if os.path.lexists(path):
        raise HarnessError(f"could not remove {path}")


def leftovers(cluster: KubernetesCluster) -> list[str]:
    """What of the cluster is still there after down(): should be nothing."""
    left = []
    if cluster.ns in (_entries("/run/netns") or ()):
        left.append(f"netns {cluster.ns}")
    left += [f"netns {n}" for n in set(_entries("/run/netns") or ()) - cluster._netns_before if n.startswith("cni-")]
    left += [f"cgroup {d}" for d in _cgroup_dirs(cluster.cgroup)]
    if cluster.workdir and os.path.lexists(cluster.workdir):
        left.append(cluster.workdir)
    for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if cluster.workdir and cluster.workdir.encode() in f.read():
                    left.append(f"process {pid}")
        except OSError:
            pass
    for path, before in cluster._fixed_paths_before.items():
        now = _entries(path)
        if now is not None and (before is None or now - before):
            left.append(f"{path}: {sorted(now - (before or set()))}")
    now = _read_tunables()
    left += [f"/proc/sys/{name} {now.get(name)} (was {value})"
             for name, value in cluster._tunables_before.items() if now.get(name) != value]
    return left


def cleanup_stale() -> list[str]:
    """What a cluster of a dead test run left: its processes, mounts, cgroups, namespace, files."""
    removed = []
    for hierarchy in _hierarchies() if os.path.isdir(CGROUP_ROOT) else []:
        for name in os.listdir(os.path.join(CGROUP_ROOT, hierarchy)):
            match = _STALE.match(name)
            if match and not pid_alive(int(match.group(1))):
                _kill_cgroup_processes("/" + name)
                _remove_cgroups("/" + name)
                removed.append(f"cgroup {name}")
    for ns in (_entries("/run/netns") or ()):
        match = _STALE.match(ns)
        if match and not pid_alive(int(match.group(1))):
            _kill_netns_processes(ns)
            delete_netns(ns)
            removed.append(f"netns {ns}")
    tmp = tempfile.gettempdir()
    for name in (_entries(tmp) or ()):
        match = _STALE.match(name)
        if match and not pid_alive(int(match.group(1))):
            _remove_tree(os.path.join(tmp, name))
            removed.append(os.path.join(tmp, name))
    return removed
