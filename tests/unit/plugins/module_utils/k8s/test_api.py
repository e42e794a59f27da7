# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How the collection's Kubernetes modules reach the API server: the kubernetes client's own
configuration, built from the modules' connection options (no request is made here)."""
from __future__ import annotations

import http.server
import json
import threading

import pytest
import yaml

from ansible_collections.gpuops.nvidia.plugins.doc_fragments.kube_auth import ModuleDocFragment
from ansible_collections.gpuops.nvidia.plugins.module_utils.k8s import api as kube_api

KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- name: lab
  cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}
- name: prod
  cluster: {server: "https://10.0.0.1:6443", insecure-skip-tls-verify: true}
users:
- name: admin
  user: {token: secret-token}
contexts:
- name: lab
  context: {cluster: lab, user: admin}
- name: prod
  context: {cluster: prod, user: admin}
current-context: lab
"""


@pytest.fixture
def kubeconfig(tmp_path):
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    return str(path)


def test_the_kubeconfigs_current_context(kubeconfig):
    client = kube_api.connect({"kubeconfig": kubeconfig})
    assert client.configuration.host == "https://127.0.0.1:6443"
    assert "Bearer secret-token" in client.configuration.api_key.values()
    # what the client sends
    assert client.configuration.auth_settings()["BearerToken"]["value"] == "Bearer secret-token"


def test_a_named_context(kubeconfig):
    assert kube_api.connect({"kubeconfig": kubeconfig, "context": "prod"}).configuration.host == "https://10.0.0.1:6443"


def test_the_kubeconfig_environment_variable(kubeconfig, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", kubeconfig)
    assert kube_api.connect({}).configuration.host == "https://127.0.0.1:6443"


def test_a_host_and_token_instead_of_a_kubeconfig(tmp_path):
    ca = tmp_path / "ca.crt"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    client = kube_api.connect({"host": "https://api.example:6443", "api_key": "t0k3n", "validate_certs": True,
                               "ca_cert": str(ca)})
    config = client.configuration
    assert config.host == "https://api.example:6443"
    assert config.auth_settings()["BearerToken"] == {"type": "api_key", "in": "header", "key": "authorization",
                                                     "value": "Bearer t0k3n"}
    assert config.verify_ssl is True and config.ssl_ca_cert == str(ca)


def test_a_kubeconfig_given_but_missing_is_refused_not_replaced(tmp_path, monkeypatch):
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")  # (as in a pod: never fall back to it)
    with pytest.raises(kube_api.KubeError, match=r"the kubeconfig .*missing does not exist: set gpuops_kubeconfig"):
        kube_api.connect({"kubeconfig": str(tmp_path / "missing")})


def test_no_kubeconfig_and_no_cluster_says_what_to_set(tmp_path, monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    with pytest.raises(kube_api.KubeError, match="set gpuops_kubeconfig"):
        kube_api.connect({})


@pytest.mark.parametrize("content", [
    "apiVersion: v1\nclusters: [\n",                                 # not YAML
    b"\xff\xfe\x00kube",                                             # not UTF-8
    "- just\n- a list\n",                                            # YAML of the wrong shape
    "apiVersion: v1\nclusters: 7\ncontexts: x\ncurrent-context: 3\n",  # fields of the wrong shape
    "",                                                              # empty
    None,                                                            # a directory
])
def test_a_file_that_is_no_kubeconfig_is_named_not_a_crash(tmp_path, content):
    path = tmp_path / "kubeconfig"
    if content is None:
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    with pytest.raises(kube_api.KubeError, match=r"^cannot use the kubeconfig %s: .+; check gpuops_kubeconfig" % path):
        kube_api.connect({"kubeconfig": str(path)})


def test_an_unknown_context_is_named(kubeconfig):
    with pytest.raises(kube_api.KubeError, match=r"\(context staging\).*gpuops_kube_context"):
        kube_api.connect({"kubeconfig": kubeconfig, "context": "staging"})


# ---- the connection options: one argument spec, documented once (the lookup's test: lookup/) --

def test_the_doc_fragment_documents_the_connection_options_as_they_are():
    documented = yaml.safe_load(ModuleDocFragment.DOCUMENTATION)["options"]
    assert set(documented) == set(kube_api.KUBE_ARGUMENT_SPEC)
    for name, spec in kube_api.KUBE_ARGUMENT_SPEC.items():
        assert documented[name]["type"] == spec["type"], name
        assert documented[name].get("aliases", []) == spec.get("aliases", []), name


@pytest.mark.parametrize("options, names", [
    ({}, ["api_key", "ca_cert", "context", "host", "kubeconfig", "validate_certs"]),
    ({"name": {"type": "str"}}, ["api_key", "ca_cert", "context", "host", "kubeconfig", "name", "validate_certs"]),
])
def test_a_modules_argument_spec_takes_the_connection_options(options, names):
    spec = kube_api.kube_argument_spec(**options)
    assert sorted(spec) == names
    assert spec["api_key"]["no_log"] is True


def test_a_module_option_named_as_a_connection_option_is_refused():
    with pytest.raises(ValueError, match="host"):
        kube_api.kube_argument_spec(host={"type": "str"})


class _Watch:
    """What urllib3 returns for a watch (preload_content=False)."""

    def __init__(self, data):
        self.data, self.closed = data, False

    def read(self, amount):
        return self.data[:amount]

    def close(self):
        self.closed = True

    def release_conn(self):
        pass


class _Connection:
    """A Connection that records each request and answers with ANSWER (an exception is raised)."""

    def __init__(self, answer):
        self.answer, self.calls = answer, []

    def request(self, what, method, path, query=None, body=None, content_type="application/json", stream=False,
                timeout=kube_api.REQUEST_TIMEOUT):
        self.calls.append(dict(what=what, method=method, path=path, query=query, body=body,
                               content_type=content_type, stream=stream, timeout=timeout))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def _kube_with_a_list(answer):
    connection = _Connection(answer)
    kube = kube_api.Kube(connection)
    kube._listed[("pods", "gpu-01", "", "")] = ("4711", "list pods of gpu-01", "/api/v1/pods",
                                                {"fieldSelector": "spec.nodeName=gpu-01"})
    return kube, connection


def test_a_wait_watches_from_the_version_of_its_last_list():
    answer = _Watch(b'{"type":"DELETED"}\n')
    kube, connection = _kube_with_a_list(answer)
    assert kube.wait_change(("pods", "gpu-01", "", ""), 12.5) is True and answer.closed
    call = connection.calls[0]
    assert call["method"] == "GET" and call["path"] == "/api/v1/pods" and call["stream"] is True
    assert call["query"] == {"fieldSelector": "spec.nodeName=gpu-01", "watch": "true", "resourceVersion": "4711",
                             "timeoutSeconds": 12, "allowWatchBookmarks": "false"}
    assert call["what"] == "watch pods of gpu-01" and call["timeout"] == (10, 22)
    # the server ending the watch at its timeout, with no event: nothing changed
    answer.data = b""
    assert kube.wait_change(("pods", "gpu-01", "", ""), 5) is False
    # nothing listed under a key yet: nothing to watch from
    assert kube.wait_change(("nodes", ""), 5) is False and len(connection.calls) == 2


def test_credentials_that_may_not_watch_sleep_the_timeout_instead(monkeypatch):
    slept = []
    monkeypatch.setattr(kube_api.time, "sleep", slept.append)
    kube, _connection = _kube_with_a_list(kube_api.KubeError("watch pods of gpu-01: forbidden", status=403))
    assert kube.wait_change(("pods", "gpu-01", "", ""), 9) is False and slept == [9]


def test_a_watch_the_server_fails_is_a_kube_error_naming_it():
    kube, _connection = _kube_with_a_list(kube_api.KubeError("watch pods of gpu-01: unavailable", status=503))
    with pytest.raises(kube_api.KubeError, match="watch pods of gpu-01") as exc:
        kube.wait_change(("pods", "gpu-01", "", ""), 9)
    assert exc.value.status == 503


def test_a_list_keeps_its_query_and_version_for_the_watch():
    kube, connection = _kube_with_a_list({"metadata": {"resourceVersion": "99"}, "items": [{"metadata": {"name": "p"}}]})
    assert kube.pods("gpu-02", namespace="gpu-operator", label_selector="app=x") == [{"metadata": {"name": "p"}}]
    assert connection.calls[-1]["path"] == "/api/v1/namespaces/gpu-operator/pods"
    assert connection.calls[-1]["query"] == {"fieldSelector": "spec.nodeName=gpu-02", "labelSelector": "app=x"}
    assert kube._listed[("pods", "gpu-02", "gpu-operator", "app=x")][0] == "99"


# ---- the requests as the API server receives them (a real HTTP server on this machine) ----------

class _Handler(http.server.BaseHTTPRequestHandler):
    answers = {}
    seen = []

    def _answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        type(self).seen.append({"method": self.command, "path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()},
                                "body": json.loads(self.rfile.read(length)) if length else None})
        status, body = type(self).answers.get((self.command, self.path.split("?")[0]), (404, {
            "kind": "Status", "message": 'nodes "x" not found', "code": 404}))
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_PATCH = do_POST = do_DELETE = _answer

    def log_message(self, *args):  # (quiet)
        pass


@pytest.fixture
def server(monkeypatch):
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    _Handler.answers, _Handler.seen = {}, []
    httpd = http.server.HTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd, _Handler
    httpd.shutdown()
    httpd.server_close()


def test_requests_carry_the_token_and_the_patch_type_and_errors_carry_the_servers_message(server):
    httpd, handler = server
    handler.answers[("PATCH", "/api/v1/nodes/gpu-01")] = (200, {"metadata": {"name": "gpu-01"}})
    handler.answers[("POST", "/api/v1/namespaces/ml/pods/train-0/eviction")] = (429, {
        "kind": "Status", "message": "Cannot evict pod as it would violate the pod's disruption budget.", "code": 429})
    kube = kube_api.Kube(kube_api.connect({"host": "http://127.0.0.1:%d" % httpd.server_port, "api_key": "t0k3n"}))
    assert kube.patch_node("gpu-01", {"metadata": {"labels": {"a": None}}}) == {"metadata": {"name": "gpu-01"}}
    sent = handler.seen[-1]
    assert sent["headers"]["content-type"] == "application/strategic-merge-patch+json"
    assert sent["headers"]["authorization"] == "Bearer t0k3n"
    assert sent["body"] == {"metadata": {"labels": {"a": None}}}
    with pytest.raises(kube_api.KubeError, match=r"^evict pod ml/train-0: Cannot evict pod as it would violate") as exc:
        kube.evict_pod("ml", "train-0")
    assert exc.value.status == 429
    assert handler.seen[-1]["body"] == {"apiVersion": "policy/v1", "kind": "Eviction",
                                        "metadata": {"name": "train-0", "namespace": "ml"}}
    # a node that is not there is None, not an error
    assert kube.node("x") is None and handler.seen[-1]["path"] == "/api/v1/nodes/x"


def test_the_connection_goes_as_the_kubernetes_client_would_through_its_proxy(monkeypatch):
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    connection = kube_api.connect({"host": "https://10.96.0.1:443"})
    connection.configuration.proxy = "http://proxy.internal:3128"
    pool = connection._manager()
    assert type(pool).__name__ == "ProxyManager" and pool.proxy.host == "proxy.internal"
    # a cluster address the client's no_proxy names (a CIDR) goes direct
    direct = kube_api.connect({"host": "https://10.96.0.1:443"})
    direct.configuration.proxy, direct.configuration.no_proxy = "http://proxy.internal:3128", "10.0.0.0/8"
    assert type(direct._manager()).__name__ == "PoolManager"


def test_an_api_server_that_does_not_answer_is_named(monkeypatch):
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    kube = kube_api.Kube(kube_api.connect({"host": "http://127.0.0.1:9"}))
    with pytest.raises(kube_api.KubeError, match=r"^list nodes: ") as exc:
        kube.nodes()
    assert exc.value.status is None


# ---- over TLS, as a cluster's API server answers: its CA, a client certificate, chunked watches --

def _certificates(tmp_path):
    """A CA, the server's certificate for 127.0.0.1 and a client certificate it signed (PEM files)."""
    import datetime  # pylint: disable=import-outside-toplevel
    import ipaddress  # pylint: disable=import-outside-toplevel

    from cryptography import x509  # pylint: disable=import-outside-toplevel
    from cryptography.hazmat.primitives import hashes, serialization  # pylint: disable=import-outside-toplevel
    from cryptography.hazmat.primitives.asymmetric import ec  # pylint: disable=import-outside-toplevel
    from cryptography.x509.oid import NameOID  # pylint: disable=import-outside-toplevel

    now = datetime.datetime.now(datetime.timezone.utc)

    def issue(name, issuer=None, issuer_key=None, ca=False, san=None):
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer or subject)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(hours=1))
                   .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if san:
            builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
        cert = builder.sign(issuer_key or key, hashes.SHA256())
        return cert, key

    files = {}

    def write(name, cert, key):
        files[name] = (tmp_path / (name + ".crt"), tmp_path / (name + ".key"))
        files[name][0].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        files[name][1].write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                     serialization.NoEncryption()))
    ca, ca_key = issue("gpuops-test-ca", ca=True)
    write("ca", ca, ca_key)
    write("server", *issue("kube-apiserver", ca.subject, ca_key, san=[x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]))
    write("client", *issue("gpuops-operator", ca.subject, ca_key))
    write("other-ca", *issue("another-ca", ca=True))
    return files


class _TLSHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # (chunked answers)
    seen = []

    def do_GET(self):  # pylint: disable=invalid-name
        peer = self.connection.getpeercert() or {}
        subject = dict(item[0] for item in peer.get("subject", ()))
        type(self).seen.append({"path": self.path, "client": subject.get("commonName")})
        if "watch=true" not in self.path:
            data = json.dumps({"metadata": {"resourceVersion": "7"}, "items": [{"metadata": {"name": "gpu-01"}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        # a watch: chunked, as the API server streams it - one event for the nodes, none (the
        # server's timeout ends it) for the pods
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if self.path.startswith("/api/v1/nodes"):
            event = json.dumps({"type": "MODIFIED", "object": {"metadata": {"name": "gpu-01"}}}).encode() + b"\n"
            self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
        self.wfile.write(b"0\r\n\r\n")
        self.close_connection = True

    def log_message(self, *args):  # (quiet)
        pass


@pytest.fixture
def tls_server(tmp_path, monkeypatch):
    import ssl  # pylint: disable=import-outside-toplevel
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    files = _certificates(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*files["server"])
    context.load_verify_locations(files["ca"][0])
    context.verify_mode = ssl.CERT_REQUIRED  # (as an API server that takes client certificates)
    _TLSHandler.seen = []
    httpd = http.server.HTTPServer(("127.0.0.1", 0), _TLSHandler)
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd, files
    httpd.shutdown()
    httpd.server_close()


def _tls_kubeconfig(tmp_path, port, files, ca="ca"):
    path = tmp_path / ("kubeconfig-" + ca)
    cluster = {"server": "https://127.0.0.1:%d" % port, "certificate-authority": str(files[ca][0])}
    user = {"client-certificate": str(files["client"][0]), "client-key": str(files["client"][1])}
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": cluster}], "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    return str(path)


def test_tls_with_the_kubeconfigs_ca_and_client_certificate_and_chunked_watches(tls_server, tmp_path):
    httpd, files = tls_server
    kube = kube_api.Kube(kube_api.connect({"kubeconfig": _tls_kubeconfig(tmp_path, httpd.server_port, files)}))
    assert kube.nodes() == [{"metadata": {"name": "gpu-01"}}]
    # the server verified the client certificate the kubeconfig names
    assert _TLSHandler.seen[-1] == {"path": "/api/v1/nodes", "client": "gpuops-operator"}
    # a watch from the list's version: the first event of the chunked stream is the change
    assert kube.wait_change(("nodes", ""), 5) is True
    assert _TLSHandler.seen[-1]["path"].startswith("/api/v1/nodes?") and "resourceVersion=7" in _TLSHandler.seen[-1]["path"]
    # a watch the server ends with no event: no change
    kube.pods("gpu-01")
    assert kube.wait_change(("pods", "gpu-01", "", ""), 5) is False
    # and the connection is usable again after both
    assert kube.nodes() == [{"metadata": {"name": "gpu-01"}}]


def test_a_server_certificate_another_ca_signed_is_refused_naming_the_call(tls_server, tmp_path):
    httpd, files = tls_server
    kube = kube_api.Kube(kube_api.connect({"kubeconfig": _tls_kubeconfig(tmp_path, httpd.server_port, files, "other-ca")}))
    with pytest.raises(kube_api.KubeError, match=r"^list nodes: .*CERTIFICATE_VERIFY_FAILED") as exc:
        kube.nodes()
    assert exc.value.status is None
