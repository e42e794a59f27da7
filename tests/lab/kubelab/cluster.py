"""The lab's Kubernetes cluster: real components built from their Go modules.

    control plane   one podman container, gpuops-lab-control-plane (10.89.0.10), running etcd,
                    kube-apiserver (published on 127.0.0.1:6443), kube-controller-manager,
                    kube-scheduler, kwok (simulated nodes) and Prometheus (127.0.0.1:9090) as
                    systemd units
    GPU nodes       the lab's nodes (tests/lab/lab: gpuops-lab-h100, gpuops-lab-l40s), each
                    running the real kubelet and kube-proxy on its own containerd, with a bridge
                    CNI network (Debian's containernetworking-plugins) for its pod subnet
    synthetic nodes Node objects that kwok keeps Ready, with the GPU capacity and labels of a
                    fake-NVML profile (`kube synthetic N PROFILE`)

Access: a bearer-token admin user (system:masters) in .build/kube/kubeconfig; requests without
a token get 401. RBAC and the Node authorizer are on; every component has its own identity.
Nothing here is known to the collection: roles and modules see an ordinary cluster.
"""

import base64
import json
import os
import re
import secrets
import subprocess
import time
import urllib.request

from . import images as imagelib
from . import manifests
from .pki import PKI
from .podman import LAB, REPO, LabError, copy, exists, inspect, log, podman, put, reachable, run, sh, state

BUILD = os.path.join(REPO, ".build", "kube")
KUBECONFIG = os.path.join(BUILD, "kubeconfig")
KUBECTL = os.path.join(REPO, ".venv", "bin", "kubectl")
GO_BINARIES = os.path.join(LAB, "go-binaries")

NETWORK = "gpuops-lab"
CP = "gpuops-lab-control-plane"
CP_IP = "10.89.0.10"
CP_LABEL = "org.gpuops.lab.kube"
API_PORT = 6443
PROMETHEUS_PORT = 9090
SERVICE_CIDR = "10.96.0.0/16"
SERVICE_IP = "10.96.0.1"
CLUSTER_CIDR = "10.244.0.0/16"
VERSION = "v1.37.2"
IMAGE = os.environ.get("GPUOPS_LAB_IMAGE_REPO", "localhost/gpuops-lab") + ":bookworm"

# lab node -> (address on the lab network, pod subnet); the addresses are tests/lab/lab's
NODES = {
    "gpuops-lab-h100": ("10.89.0.11", "10.244.1.0/24"),
    "gpuops-lab-l40s": ("10.89.0.12", "10.244.2.0/24"),
}
NODE_PACKAGES = "iptables conntrack containernetworking-plugins"
K8S_DIR = "/etc/kubernetes"
PKI_DIR = K8S_DIR + "/pki"


def go_dirs(*sets):
    res = run([GO_BINARIES, "--dir", *sets], timeout=7200)
    return dict(zip(sets, res.stdout.split()))


def kubeconfig(server, user, token=None, cert=None, key=None, ca_path=None, ca_data=None):
    """A kubeconfig as text: a token or a client certificate (files inside the container, or
    embedded data)."""
    cluster = {"server": server}
    if ca_data is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca_data).decode()
    else:
        cluster["certificate-authority"] = ca_path
    auth = {"token": token} if token else {"client-certificate": cert, "client-key": key}
    return json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "gpuops-lab",
        "clusters": [{"name": "gpuops-lab", "cluster": cluster}],
        "users": [{"name": user, "user": auth}],
        "contexts": [{"name": "gpuops-lab", "context": {"cluster": "gpuops-lab", "user": user}}],
    }, indent=2) + "\n"


HERE = os.path.dirname(os.path.abspath(__file__))


def unit(description, exec_start, after="network-online.target", extra=""):
    return (f"# gpuops lab cluster (tests/lab/kubelab)\n[Unit]\nDescription={description}\n"
            f"After={after}\nWants=network-online.target\n\n[Service]\nExecStart={exec_start}\n"
            f"Restart=always\nRestartSec=2\n{extra}\n[Install]\nWantedBy=multi-user.target\n")


def kubectl(*args, check=True, input=None, timeout=120):
    return run([KUBECTL, "--kubeconfig", KUBECONFIG, *args], check=check, input=input, timeout=timeout)


class Cluster:
    def __init__(self):
        os.makedirs(BUILD, exist_ok=True)
        self.pki = PKI(os.path.join(BUILD, "pki"))
        token_path = os.path.join(BUILD, "admin.token")
        if not os.path.exists(token_path):
            with open(os.open(token_path, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
                f.write(secrets.token_hex(24))
        with open(token_path) as f:
            self.token = f.read().strip()

    # ---- set-up ------------------------------------------------------------------------
    def up(self, with_nodes=True):
        t0 = time.time()
        if with_nodes:
            self.check_nodes()
        log(f"building or reusing Kubernetes {VERSION}, etcd, kwok and NVIDIA's components (tests/lab/go-binaries)")
        self.bins = go_dirs("kubernetes", "etcd", "kwok", "device-plugin", "nfd", "dcgm-exporter", "cuda-vectoradd",
                            "dra-driver")
        self.image_paths = imagelib.build_lab_images(os.path.join(BUILD, "images"), self.bins)
        self.certificates()
        self.control_plane()
        self.write_kubeconfig()
        self.wait_api()
        self.wait_prometheus()
        rbac = {"apiVersion": "v1", "kind": "List", "items": manifests.PROMETHEUS_RBAC}
        kubectl("apply", "-f", "-", input=json.dumps(rbac))
        if with_nodes:
            for node in NODES:
                self.join(node)
            self.wait_nodes_ready(list(NODES))
        log(f"lab cluster up in {time.time() - t0:.0f}s; export KUBECONFIG={KUBECONFIG}; "
            f"kubectl get nodes -L nvidia.com/gpu.product")

    def check_nodes(self):
        for node in NODES:
            if state(node) != "running":
                raise LabError(f"{node} is not running: start the lab's GPU nodes first (tests/lab/lab up)")
            nets = inspect(node)["NetworkSettings"].get("Networks") or {}
            if NETWORK not in nets:
                raise LabError(f"{node} was created by an older tests/lab/lab (not on the {NETWORK} network); "
                               "recreate the nodes: tests/lab/lab down && tests/lab/lab up")

    def certificates(self):
        p = self.pki
        p.issue("apiserver", "kube-apiserver", server=True, client=False,
                server_names=["kubernetes", "kubernetes.default", "kubernetes.default.svc",
                              "kubernetes.default.svc.cluster.local", CP, "localhost"],
                server_ips=["127.0.0.1", CP_IP, SERVICE_IP])
        p.issue("apiserver-kubelet-client", "kube-apiserver-kubelet-client", orgs=["system:masters"])
        p.issue("controller-manager", "system:kube-controller-manager")
        p.issue("scheduler", "system:kube-scheduler")
        p.issue("kube-proxy", "system:kube-proxy")
        p.issue("kwok", "gpuops-lab-kwok", orgs=["system:masters"])
        p.issue("prometheus", "gpuops-lab-prometheus")
        for node in NODES:
            p.issue(f"kubelet-{node}", f"system:node:{node}", orgs=["system:nodes"])
        p.service_account_keys()

    # ---- control plane -----------------------------------------------------------------
    def control_plane(self):
        st = state(CP)
        if st == "running" and not reachable(CP):
            # listed as running, its processes gone (the machine restarted under it): start afresh
            log(f"{CP}: listed as running but not reachable (stale, e.g. after a restart of the machine); recreating it")
            podman("rm", "-f", "-t", "0", CP)
            podman("volume", "rm", "-f", f"{CP}-var", check=False)
            st = ""
        if st == "":
            log(f"{CP}: creating ({CP_IP}; API on 127.0.0.1:{API_PORT}, Prometheus on 127.0.0.1:{PROMETHEUS_PORT})")
            # a /var left by a container removed by hand would claim packages the new /usr lacks
            podman("volume", "rm", "-f", f"{CP}-var", check=False)
            if podman("network", "exists", NETWORK, check=False).returncode != 0:
                podman("network", "create", "--subnet", "10.89.0.0/24", "--label", "org.gpuops.lab.node=network",
                       NETWORK)
            podman("run", "-d", "--name", CP, "--hostname", CP, "--label", f"{CP_LABEL}=control-plane",
                   "--network", NETWORK, "--ip", CP_IP, "-p", f"127.0.0.1:{API_PORT}:{API_PORT}",
                   "-p", f"127.0.0.1:{PROMETHEUS_PORT}:{PROMETHEUS_PORT}", "--cap-add", "NET_ADMIN",
                   "-v", f"{CP}-var:/var", "--systemd=always", IMAGE, "/sbin/init")
        elif st != "running":
            podman("start", CP)
        sh(CP, "timeout 60 systemctl is-system-running --wait >/dev/null 2>&1 || true")
        sh(CP, "dpkg -s prometheus prometheus-alertmanager iproute2 >/dev/null 2>&1 || { apt-get update -qq && "
               "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus "
               "prometheus-alertmanager iproute2 >/dev/null; }", timeout=900)
        changed = set()
        for name, path in (("kube-apiserver", "kubernetes"), ("kube-controller-manager", "kubernetes"),
                           ("kube-scheduler", "kubernetes"), ("etcd", "etcd"), ("kwok", "kwok")):
            if copy(CP, os.path.join(self.bins[path], name), f"/usr/local/bin/{name}"):
                changed.add(name)
        p = self.pki
        files = {f"{PKI_DIR}/{n}": p.path(n) for n in (
            "ca.crt", "ca.key", "apiserver.crt", "apiserver.key", "apiserver-kubelet-client.crt",
            "apiserver-kubelet-client.key", "controller-manager.crt", "controller-manager.key", "scheduler.crt",
            "scheduler.key", "kwok.crt", "kwok.key", "prometheus.crt", "prometheus.key", "sa.key", "sa.pub")}
        for dest, src in files.items():
            with open(src, "rb") as f:
                if put(CP, dest, f.read(), 0o600 if dest.endswith(".key") else 0o644):
                    changed.update({"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"})
        local = f"https://127.0.0.1:{API_PORT}"
        for comp, cert in (("controller-manager", "controller-manager"), ("scheduler", "scheduler"),
                           ("kwok", "kwok")):
            if put(CP, f"{K8S_DIR}/{comp}.conf", kubeconfig(local, comp, cert=f"{PKI_DIR}/{cert}.crt",
                                                            key=f"{PKI_DIR}/{cert}.key",
                                                            ca_path=f"{PKI_DIR}/ca.crt"), 0o600):
                changed.add("kube-" + comp if comp != "kwok" else "kwok")
        if put(CP, f"{K8S_DIR}/tokens.csv", f"{self.token},gpuops-lab-admin,gpuops-lab-admin,system:masters\n", 0o600):
            changed.add("kube-apiserver")
        for name, text in self.control_plane_units().items():
            if put(CP, f"/etc/systemd/system/{name}.service", text):
                changed.add(name)
        for name, text in manifests.kwok_stages().items():
            if put(CP, f"/etc/kwok/stages/{name}.yaml", text):
                changed.add("kwok")
        routes = "".join(f"ip route replace {subnet} via {ip}\n" for ip, subnet in NODES.values())
        put(CP, "/usr/local/sbin/gpuops-lab-routes", "#!/bin/sh\n# pod subnets of the lab nodes\n" + routes, 0o755)
        put(CP, "/etc/systemd/system/gpuops-lab-routes.service",
            "[Unit]\nDescription=gpuops lab: routes to the nodes' pod subnets\nAfter=network-online.target\n\n"
            "[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/usr/local/sbin/gpuops-lab-routes\n\n"
            "[Install]\nWantedBy=multi-user.target\n")
        if put(CP, "/etc/prometheus/prometheus.yml", manifests.prometheus_config()):
            changed.add("prometheus")
        with open(os.path.join(HERE, "prom_targets.py"), "rb") as f:
            if put(CP, "/usr/local/lib/gpuops-lab/prom_targets.py", f.read(), 0o644):
                changed.add("gpuops-lab-prom-targets")
        sh(CP, f"mkdir -p {manifests.PROMETHEUS_RULES} {os.path.dirname(manifests.PROMETHEUS_TARGETS)} && "
               f"{{ test -s {manifests.PROMETHEUS_TARGETS} || echo '[]' > {manifests.PROMETHEUS_TARGETS}; }}")
        if put(CP, "/etc/systemd/system/gpuops-lab-prom-targets.service",
               unit("gpuops lab: Prometheus targets of the DCGM exporters (EndpointSlices)",
                    f"/usr/bin/python3 /usr/local/lib/gpuops-lab/prom_targets.py https://127.0.0.1:{API_PORT} "
                    f"{manifests.PROMETHEUS_TARGETS}", after="kube-apiserver.service")):
            changed.add("gpuops-lab-prom-targets")
        if put(CP, "/etc/default/prometheus", 'ARGS="--web.listen-address=0.0.0.0:9090 '
               '--storage.tsdb.retention.time=2h"\n'):
            changed.add("prometheus")
        order = ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok",
                 "gpuops-lab-prom-targets"]
        sh(CP, "systemctl daemon-reload && systemctl enable -q --now gpuops-lab-routes.service "
               + " ".join(order) + " prometheus && systemctl restart gpuops-lab-routes.service")
        restart = [u for u in order + ["prometheus"] if u in changed]
        if restart:
            sh(CP, "systemctl restart " + " ".join(restart))

    def control_plane_units(self):
        pki = PKI_DIR
        apiserver = " ".join([
            "/usr/local/bin/kube-apiserver",
            "--etcd-servers=http://127.0.0.1:2379",
            f"--advertise-address={CP_IP}", "--bind-address=0.0.0.0", f"--secure-port={API_PORT}",
            f"--tls-cert-file={pki}/apiserver.crt", f"--tls-private-key-file={pki}/apiserver.key",
            f"--client-ca-file={pki}/ca.crt", f"--token-auth-file={K8S_DIR}/tokens.csv",
            "--anonymous-auth=false", "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction", "--allow-privileged=true",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki}/sa.pub", f"--service-account-signing-key-file={pki}/sa.key",
            f"--kubelet-client-certificate={pki}/apiserver-kubelet-client.crt",
            f"--kubelet-client-key={pki}/apiserver-kubelet-client.key",
            "--kubelet-preferred-address-types=InternalIP", "--profiling=false",
        ])
        cm = " ".join([
            "/usr/local/bin/kube-controller-manager", f"--kubeconfig={K8S_DIR}/controller-manager.conf",
            f"--authentication-kubeconfig={K8S_DIR}/controller-manager.conf",
            f"--authorization-kubeconfig={K8S_DIR}/controller-manager.conf",
            "--bind-address=127.0.0.1", "--leader-elect=false", "--use-service-account-credentials=true",
            f"--service-account-private-key-file={pki}/sa.key", f"--root-ca-file={pki}/ca.crt",
            f"--cluster-signing-cert-file={pki}/ca.crt", f"--cluster-signing-key-file={pki}/ca.key",
            f"--service-cluster-ip-range={SERVICE_CIDR}", "--controllers=*,-nodeipam",
            # evictions of the upgrade tests are the tests' own, not the taint manager's
            "--node-monitor-grace-period=40s",
        ])
        scheduler = " ".join([
            "/usr/local/bin/kube-scheduler", f"--kubeconfig={K8S_DIR}/scheduler.conf",
            f"--authentication-kubeconfig={K8S_DIR}/scheduler.conf",
            f"--authorization-kubeconfig={K8S_DIR}/scheduler.conf",
            "--bind-address=127.0.0.1", "--leader-elect=false",
        ])
        kwok = " ".join([
            "/usr/local/bin/kwok", f"--kubeconfig={K8S_DIR}/kwok.conf",
            "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
            "--cidr=10.244.200.0/22", "--node-ip=10.89.0.200",
            # the heartbeat stage writes a node's status every ten minutes or so and leaves its
            # liveness to a node Lease (as a kubelet does): without one, the node controller takes
            # a busy cluster's synthetic nodes for NotReady and their pods for not Ready
            "--node-lease-duration-seconds=40",
            *[f"--config=/etc/kwok/stages/{n}.yaml" for n in manifests.kwok_stages()],
        ])
        return {
            "etcd": unit("etcd for the gpuops lab cluster", " ".join([
                "/usr/local/bin/etcd", "--name=gpuops-lab", "--data-dir=/var/lib/etcd",
                "--listen-client-urls=http://127.0.0.1:2379", "--advertise-client-urls=http://127.0.0.1:2379",
                "--listen-peer-urls=http://127.0.0.1:2380", "--initial-advertise-peer-urls=http://127.0.0.1:2380",
                "--initial-cluster=gpuops-lab=http://127.0.0.1:2380", "--unsafe-no-fsync=true"])),
            "kube-apiserver": unit("Kubernetes API server (gpuops lab)", apiserver, after="etcd.service"),
            "kube-controller-manager": unit("Kubernetes controller manager (gpuops lab)", cm,
                                            after="kube-apiserver.service"),
            "kube-scheduler": unit("Kubernetes scheduler (gpuops lab)", scheduler, after="kube-apiserver.service"),
            "kwok": unit("kwok: the lab's synthetic nodes", kwok, after="kube-apiserver.service"),
        }

    def write_kubeconfig(self):
        with open(self.pki.path("ca.crt"), "rb") as f:
            ca = f.read()
        text = kubeconfig(f"https://127.0.0.1:{API_PORT}", "gpuops-lab-admin", token=self.token, ca_data=ca)
        tmp = KUBECONFIG + ".tmp"
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
            f.write(text)
        os.replace(tmp, KUBECONFIG)

    def wait_api(self, timeout=180):
        deadline = time.time() + timeout
        last = ""
        while time.time() < deadline:
            res = kubectl("get", "--raw", "/readyz", check=False, timeout=20)
            if res.returncode == 0 and res.stdout.strip() == "ok":
                return
            last = (res.stderr or res.stdout).strip()
            time.sleep(1)
        journal = sh(CP, "journalctl -u kube-apiserver -u etcd --no-pager -n 40", check=False).stdout
        raise LabError(f"the API server did not become ready in {timeout}s: {last}\n{journal}")

    def wait_prometheus(self, timeout=60):
        """Prometheus answers /-/ready on 127.0.0.1:9090 (it refuses a configuration it cannot
        load, and systemd then gives up on it)."""
        deadline = time.time() + timeout
        last = ""
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{PROMETHEUS_PORT}/-/ready", timeout=5) as r:
                    if r.status == 200:
                        return
            except OSError as e:
                last = str(e)
            time.sleep(1)
        journal = sh(CP, "journalctl -u prometheus --no-pager -n 20", check=False).stdout
        raise LabError(f"Prometheus did not become ready in {timeout}s: {last}\n{journal}")

    # ---- nodes -------------------------------------------------------------------------
    def join(self, node):
        ip, subnet = NODES[node]
        sh(node, f"dpkg -s {NODE_PACKAGES} >/dev/null 2>&1 || {{ apt-get update -qq && "
                 f"DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends {NODE_PACKAGES} "
                 ">/dev/null; }", timeout=900)
        changed = set()
        for name in ("kubelet", "kube-proxy"):
            if copy(node, os.path.join(self.bins["kubernetes"], name), f"/usr/local/bin/{name}"):
                changed.add(name)
        p = self.pki
        for dest, src in ((f"{PKI_DIR}/ca.crt", "ca.crt"), (f"{PKI_DIR}/kubelet.crt", f"kubelet-{node}.crt"),
                          (f"{PKI_DIR}/kubelet.key", f"kubelet-{node}.key"),
                          (f"{PKI_DIR}/kube-proxy.crt", "kube-proxy.crt"),
                          (f"{PKI_DIR}/kube-proxy.key", "kube-proxy.key")):
            with open(p.path(src), "rb") as f:
                if put(node, dest, f.read(), 0o600 if dest.endswith(".key") else 0o644):
                    changed.update({"kubelet", "kube-proxy"})
        server = f"https://{CP_IP}:{API_PORT}"
        kubelet_conf = kubeconfig(server, f"system:node:{node}", cert=f"{PKI_DIR}/kubelet.crt",
                                  key=f"{PKI_DIR}/kubelet.key", ca_path=f"{PKI_DIR}/ca.crt")
        if put(node, f"{K8S_DIR}/kubelet.conf", kubelet_conf, 0o600):
            changed.add("kubelet")
        proxy_conf = kubeconfig(server, "system:kube-proxy", cert=f"{PKI_DIR}/kube-proxy.crt",
                                key=f"{PKI_DIR}/kube-proxy.key", ca_path=f"{PKI_DIR}/ca.crt")
        if put(node, f"{K8S_DIR}/kube-proxy.conf", proxy_conf, 0o600):
            changed.add("kube-proxy")
        if put(node, "/var/lib/kubelet/config.yaml", manifests.kubelet_config(PKI_DIR)):
            changed.add("kubelet")
        if put(node, "/var/lib/kube-proxy/config.yaml", manifests.kube_proxy_config(K8S_DIR, CLUSTER_CIDR)):
            changed.add("kube-proxy")
        put(node, "/etc/cni/net.d/10-gpuops-lab.conflist", manifests.cni_config(subnet))
        others = [(oip, osub) for n, (oip, osub) in NODES.items() if n != node]
        routes = "".join(f"ip route replace {osub} via {oip}\n" for oip, osub in others)
        put(node, "/usr/local/sbin/gpuops-lab-routes",
            "#!/bin/sh\n# forwarding for the pods, and the other lab nodes' pod subnets\n"
            "sysctl -qw net.ipv4.ip_forward=1\n" + routes, 0o755)
        put(node, "/etc/systemd/system/gpuops-lab-routes.service",
            "[Unit]\nDescription=gpuops lab: routes to the other nodes' pod subnets\nAfter=network-online.target\n\n"
            "[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/usr/local/sbin/gpuops-lab-routes\n\n"
            "[Install]\nWantedBy=multi-user.target\n")
        # the fake driver's /proc/driver entries (nvidia-caps/mig-minors) in the pods' containers:
        # the kernel's procfs has none without nvidia.ko (see gpuops-fake-procfs in the fake NVML)
        put(node, "/usr/local/sbin/runc", RUNC_WRAPPER, 0o755)
        kubelet = " ".join(["/usr/local/bin/kubelet", "--config=/var/lib/kubelet/config.yaml",
                            f"--kubeconfig={K8S_DIR}/kubelet.conf", f"--node-ip={ip}",
                            "--node-labels=gpuops.lab/node=gpu"])
        if put(node, "/etc/systemd/system/kubelet.service",
               unit("Kubernetes node agent (gpuops lab)", kubelet, after="containerd.service",
                    extra="KillMode=process\n")):
            changed.add("kubelet")
        if put(node, "/etc/systemd/system/kube-proxy.service",
               unit("Kubernetes network proxy (gpuops lab)", "/usr/local/bin/kube-proxy "
                    "--config=/var/lib/kube-proxy/config.yaml", after="kubelet.service")):
            changed.add("kube-proxy")
        self.import_images(node)
        self.containerd_oom_score(node)
        sh(node, "systemctl daemon-reload && systemctl enable -q --now gpuops-lab-routes.service kubelet kube-proxy "
                 "&& systemctl restart gpuops-lab-routes.service")
        restart = [u for u in ("kubelet", "kube-proxy") if u in changed]
        if restart:
            sh(node, "systemctl restart " + " ".join(restart))
        log(f"{node}: joined ({ip}, pods {subnet}{'; restarted ' + ', '.join(restart) if restart else ''})")

    @staticmethod
    def containerd_oom_score(node):
        """The kubelet asks for negative OOM scores (the pause container -998, Guaranteed pods
        -997). Lowering a process's oom_score_adj below its parent's needs CAP_SYS_RESOURCE, which
        the lab's own machine may not grant (a sandbox or a rootless setup; runc then fails every
        pod sandbox with "failed to update /proc/self/oom_score_adj: Permission denied"). Only
        then the node's containerd gets `restrict_oom_score_adj = true` (containerd's option for
        exactly this; kind sets it for rootless nodes) in its existing config.toml, before the
        host stages edit that file, which keeps the key as it keeps every other."""
        if sh(node, "echo -1 > /proc/self/oom_score_adj", check=False).returncode == 0:
            return
        path = "/etc/containerd/config.toml"
        text = sh(node, f"cat {path}").stdout
        if re.search(r"^\s*restrict_oom_score_adj\s*=\s*true", text, re.M):
            return
        table = re.search(r'^[ \t]*\[plugins\."io\.containerd\.grpc\.v1\.cri"\][ \t]*$', text, re.M)
        if table:
            text = text[:table.end()] + "\n    restrict_oom_score_adj = true" + text[table.end():]
        else:
            text += '\n[plugins."io.containerd.grpc.v1.cri"]\n  restrict_oom_score_adj = true\n'
        put(node, path, text)
        if "restrict_oom_score_adj = true" not in sh(node, "containerd config dump").stdout:
            raise LabError(f"{node}: containerd did not take restrict_oom_score_adj from {path}")
        sh(node, "systemctl restart containerd")
        log(f"{node}: no CAP_SYS_RESOURCE here; containerd restricts OOM scores to its own")

    def import_images(self, node):
        """Imports every lab image into NODE's containerd (namespace k8s.io, where the kubelet's
        images live) unless the same image is there already."""
        have = set(sh(node, "ctr -n k8s.io images ls -q 2>/dev/null", check=False).stdout.split())
        for path, tags in self.image_paths.items():
            want = imagelib.archive_image_id(path)
            dest = "/var/cache/gpuops-lab/images/" + os.path.basename(path)
            had = sh(node, f"cat {dest}.id 2>/dev/null", check=False).stdout.strip()
            if had == want and all(t in have for t in tags):
                continue
            copy(node, path, dest, 0o644)
            sh(node, f"ctr -n k8s.io images import {dest} >/dev/null && echo {want} > {dest}.id", timeout=300)

    def wait_nodes_ready(self, nodes, timeout=240):
        deadline = time.time() + timeout
        pending = list(nodes)
        while pending and time.time() < deadline:
            res = kubectl("get", "nodes", "-o", "json", check=False)
            ready = set()
            if res.returncode == 0:
                for item in json.loads(res.stdout)["items"]:
                    conds = {c["type"]: c["status"] for c in item["status"].get("conditions", [])}
                    if conds.get("Ready") == "True":
                        ready.add(item["metadata"]["name"])
            pending = [n for n in nodes if n not in ready]
            if pending:
                time.sleep(2)
        if pending:
            logs = {n: sh(n, "journalctl -u kubelet --no-pager -n 30", check=False).stdout for n in pending}
            raise LabError(f"nodes not Ready after {timeout}s: {', '.join(pending)}\n"
                           + "\n".join(f"--- {n} kubelet:\n{t}" for n, t in logs.items()))

    # ---- synthetic nodes ---------------------------------------------------------------
    def synthetic(self, count, profile):
        docs = manifests.synthetic_nodes(count, profile)
        kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))
        names = [d["metadata"]["name"] for d in docs]
        self.wait_nodes_ready(names, timeout=120)
        return names

    # ---- tear-down and status ----------------------------------------------------------
    def down(self):
        for node in NODES:
            if state(node) == "running":
                sh(node, NODE_CLEANUP, check=False, timeout=300)
                log(f"{node}: left the cluster (kubelet, kube-proxy, pods and their files removed)")
        if exists(CP):
            podman("rm", "-f", "-t", "5", CP)
            podman("volume", "rm", "-f", f"{CP}-var", check=False)
            log(f"{CP}: removed")
        for name in ("pki", "admin.token", "kubeconfig"):
            path = os.path.join(BUILD, name)
            if os.path.isdir(path):
                subprocess.run(["rm", "-rf", path], check=False)
            elif os.path.exists(path):
                os.unlink(path)

    def status(self):
        lines = [f"{'COMPONENT':34} STATE"]
        cp = state(CP) or "absent"
        lines.append(f"{CP:34} {cp}")
        if cp == "running":
            for u in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok",
                      "gpuops-lab-prom-targets", "prometheus"):
                lines.append(f"  {u:32} {sh(CP, f'systemctl is-active {u}', check=False).stdout.strip()}")
        for node in NODES:
            st = state(node) or "absent"
            lines.append(f"{node:34} {st}")
            if st == "running":
                for u in ("containerd", "kubelet", "kube-proxy"):
                    lines.append(f"  {u:32} {sh(node, f'systemctl is-active {u}', check=False).stdout.strip()}")
        if cp == "running" and os.path.exists(KUBECONFIG):
            res = kubectl("get", "nodes", "-o", "wide", check=False)
            lines.append("")
            lines.append((res.stdout or res.stderr).rstrip())
        return "\n".join(lines)


# runc as the node's containerd and NVIDIA's runtime find it on PATH: the real one, with the fake
# driver's OCI hook added to the bundles it creates (gpuops-fake-procfs, in the fake NVML package)
RUNC_WRAPPER = r"""#!/bin/sh
# gpuops lab: runc, with the fake NVIDIA driver's /proc/driver entries in new containers
if [ -x /usr/sbin/gpuops-fake-procfs ]; then
  for a in "$@"; do case "$a" in create|run) exec /usr/sbin/gpuops-fake-procfs runc "$@" ;; esac; done
fi
exec /usr/sbin/runc "$@"
"""

# what `kube down` does in a lab node: stop the agents, remove the pods' containers and files
NODE_CLEANUP = r"""
systemctl disable -q --now kubelet kube-proxy gpuops-lab-routes 2>/dev/null
for t in $(ctr -n k8s.io tasks ls -q 2>/dev/null); do ctr -n k8s.io tasks kill -s SIGKILL "$t" 2>/dev/null; done
sleep 1
for c in $(ctr -n k8s.io containers ls -q 2>/dev/null); do
  ctr -n k8s.io tasks delete -f "$c" >/dev/null 2>&1; ctr -n k8s.io containers delete "$c" >/dev/null 2>&1
done
[ -x /usr/local/bin/kube-proxy ] && /usr/local/bin/kube-proxy --cleanup >/dev/null 2>&1
awk '$2 ~ "^/var/lib/kubelet/" {print $2}' /proc/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null
rm -rf /var/lib/kubelet /var/lib/kube-proxy /etc/kubernetes /etc/cni/net.d/10-gpuops-lab.conflist \
  /var/lib/cni/networks/gpuops-lab /etc/systemd/system/kubelet.service /etc/systemd/system/kube-proxy.service \
  /etc/systemd/system/gpuops-lab-routes.service /usr/local/sbin/gpuops-lab-routes /usr/local/sbin/runc
ip link delete cni0 2>/dev/null
systemctl daemon-reload
true
"""
