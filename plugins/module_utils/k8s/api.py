# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The few Kubernetes API calls the collection's own modules make, with objects as plain dicts shaped
as the API (and kubernetes.core.k8s_info) returns them. The connection options are those of
kubernetes.core and of the gpuops.nvidia.k8s_auth lookup (``kubeconfig``, ``context``, ``host``,
``api_key``, ``validate_certs``, ``ca_cert``); unset ones fall back as kubectl does: ``KUBECONFIG``,
``~/.kube/config``, then the in-cluster service account.

The ``kubernetes`` Python client reads the kubeconfig (its exec plugins, client certificates and
tokens, as kubernetes.core reads them) and makes its urllib3 pool (TLS, proxies, retries); the
requests go over that pool as the API's JSON, without the client's generated API classes and models: building
those costs about a second of CPU in every module run, which a wave of 16 nodes on a small
controller pays 16 times at each step."""

from __future__ import annotations

__metaclass__ = type

import datetime
import json
import os
import time
from urllib.parse import quote, urlencode

try:
    import urllib3
    from kubernetes import client as k8s_client
    from kubernetes import config as k8s_config
    from kubernetes.client import rest as k8s_rest
    from kubernetes.client.rest import ApiException
    from yaml import YAMLError  # the kubernetes client reads kubeconfigs with PyYAML
    HAS_KUBERNETES = True
    KUBERNETES_ERROR = None
except ImportError as exc:  # the module reports it with missing_required_lib
    HAS_KUBERNETES = False
    KUBERNETES_ERROR = exc

    class ApiException(Exception):  # noqa: N818 - the kubernetes client's name
        status = None

    class YAMLError(Exception):
        pass

# The connection options of every module of the collection that calls the API server, merged into
# its argument spec (kube_argument_spec); documented once, in the doc fragment gpuops.nvidia.kube_auth,
# and filled from the gpuops_kube* variables by the gpuops.nvidia.k8s_auth lookup.
KUBE_ARGUMENT_SPEC = dict(
    kubeconfig=dict(type="path"),
    context=dict(type="str"),
    host=dict(type="str"),
    api_key=dict(type="str", no_log=True),
    validate_certs=dict(type="bool", aliases=["verify_ssl"]),
    ca_cert=dict(type="path", aliases=["ssl_ca_cert"]),
)


def kube_argument_spec(**options) -> dict:
    """A module's argument spec: its own options and the connection options."""
    clash = set(options) & set(KUBE_ARGUMENT_SPEC)
    if clash:
        raise ValueError("options %s are connection options already" % ", ".join(sorted(clash)))
    return dict(options, **KUBE_ARGUMENT_SPEC)


REQUEST_TIMEOUT = (10, 60)


class KubeError(Exception):
    """A call the API server refused or could not answer; ``status`` is its HTTP status."""

    def __init__(self, message, status=None, reason=""):
        super().__init__(message)
        self.status = status
        self.reason = reason


def _reason(exc) -> str:
    try:
        return json.loads(exc.body).get("message") or exc.reason
    except (TypeError, ValueError, AttributeError):
        return getattr(exc, "reason", "") or str(exc)


def call(what, method, *args, **kwargs):
    """METHOD(*args, **kwargs) of the kubernetes client; every failure a KubeError naming WHAT."""
    # (connect, read) seconds: a connection an API server failover left half-open fails
    # instead of blocking a wait whose own timeout could then never fire
    kwargs.setdefault("_request_timeout", REQUEST_TIMEOUT)
    try:
        return method(*args, **kwargs)
    except ApiException as exc:
        raise KubeError("%s: %s" % (what, _reason(exc)), status=exc.status, reason=_reason(exc))
    except KubeError:
        raise
    except Exception as exc:  # the client's connection errors (urllib3, ssl) are not ApiExceptions
        raise KubeError("%s: %s" % (what, exc))


def connect(params: dict):
    """A Connection for the connection options (a dict with the KUBE_ARGUMENT_SPEC keys)."""
    if params.get("host"):
        configuration = k8s_client.Configuration()
        configuration.host = params["host"]
        if params.get("api_key"):
            # (the client's key for it: BearerToken from version 34, authorization before)
            token = "Bearer " + params["api_key"]
            configuration.api_key = {"BearerToken": token, "authorization": token}
    else:
        if params.get("kubeconfig") and not os.path.exists(params["kubeconfig"]):
            # (never another cluster's credentials in place of the one asked for)
            raise KubeError("the kubeconfig %s does not exist: set gpuops_kubeconfig (the module's kubeconfig "
                            "option) to the cluster's kubeconfig" % params["kubeconfig"])
        kubeconfig = params.get("kubeconfig") or os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] \
            or os.path.expanduser("~/.kube/config")
        configuration = k8s_client.Configuration()
        if os.path.exists(kubeconfig):
            try:
                k8s_config.load_kube_config(config_file=kubeconfig, context=params.get("context"),
                                            client_configuration=configuration, persist_config=False)
            except (k8s_config.ConfigException, ValueError, TypeError, KeyError, AttributeError, OSError,
                    YAMLError) as exc:
                # a file that is no kubeconfig (not YAML, a directory, not UTF-8, the wrong shape)
                reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                raise KubeError("cannot use the kubeconfig %s%s: %s; check gpuops_kubeconfig and gpuops_kube_context"
                                % (kubeconfig, " (context %s)" % params["context"] if params.get("context") else "",
                                   reason))
        else:
            try:
                k8s_config.load_incluster_config(client_configuration=configuration)
            except k8s_config.ConfigException as exc:
                raise KubeError("no kubeconfig at %s and not running in a cluster (%s): set gpuops_kubeconfig "
                                "(the module's kubeconfig option) to the cluster's kubeconfig" % (kubeconfig, exc))
    if params.get("validate_certs") is not None:
        configuration.verify_ssl = params["validate_certs"]
    if params.get("ca_cert"):
        configuration.ssl_ca_cert = params["ca_cert"]
    return Connection(configuration)


class Connection:
    """The API server's address, TLS settings and credentials (a kubernetes client Configuration,
    ``configuration``) and a urllib3 pool to it. ``request`` sends one call; every failure is a
    KubeError naming it."""

    def __init__(self, configuration):
        self.configuration = configuration
        self._pool = None

    def api_client(self):
        """The kubernetes client's ApiClient on the same configuration (for its dynamic client)."""
        return k8s_client.ApiClient(self.configuration)

    def _manager(self):
        # the kubernetes client's own urllib3 pool for the configuration: its TLS settings (CA,
        # client certificate, server name), proxies (HTTP and SOCKS, no_proxy), retries and
        # socket options, exactly as the client would connect
        if self._pool is None:
            self._pool = k8s_rest.RESTClientObject(self.configuration).pool_manager
        return self._pool

    def _headers(self, content_type: str | None) -> dict:
        headers = {"Accept": "application/json", "User-Agent": "gpuops.nvidia"}
        if content_type:
            headers["Content-Type"] = content_type
        # the client's own credentials: a token (refreshed by its hook where a kubeconfig's exec
        # plugin or auth provider gave it), as the header it names
        for setting in (self.configuration.auth_settings() or {}).values():
            if setting.get("in") == "header" and setting.get("value"):
                headers[setting["key"]] = setting["value"]
        return headers

    def request(self, what: str, method: str, path: str, query: dict | None = None, body=None,
                content_type: str = "application/json", stream: bool = False, timeout=REQUEST_TIMEOUT):
        """``method`` ``path`` (with ``query``, empty values left out, and ``body`` as JSON): the
        answer's JSON, or (stream) the open urllib3 response."""
        query = {k: v for k, v in (query or {}).items() if v not in (None, "")}
        url = self.configuration.host.rstrip("/") + path + ("?" + urlencode(query) if query else "")
        try:
            response = self._manager().request(
                method, url, body=None if body is None else json.dumps(body),
                headers=self._headers(content_type if body is not None else None),
                timeout=urllib3.Timeout(connect=timeout[0], read=timeout[1]), preload_content=not stream)
        except Exception as exc:  # urllib3's connection, TLS and timeout errors
            raise KubeError("%s: %s" % (what, exc))
        if response.status >= 400:
            data = response.data if not stream else response.read()
            if stream:
                response.release_conn()
            reason = response.reason or ""
            try:
                reason = json.loads(data).get("message") or reason
            except (TypeError, ValueError, AttributeError):
                pass
            raise KubeError("%s: %s" % (what, reason), status=response.status, reason=reason)
        if stream:
            return response
        try:
            return json.loads(response.data) if response.data else {}
        except ValueError as exc:
            raise KubeError("%s: the API server's answer is no JSON (%s)" % (what, exc), status=response.status)


def _q(name: str) -> str:
    return quote(name, safe="")


class Kube:
    """Nodes, pods and Leases as dicts, over a Connection. Every failure is a KubeError naming the
    call."""

    def __init__(self, connection):
        self.http = connection
        # the last list of each kind of query: what a watch of the same query starts from
        self._listed = {}

    def _get(self, what, path, **query) -> dict:
        return self.http.request(what, "GET", path, query)

    def _list(self, what, key, path, **query) -> list:
        """The items of a list call; the call and the list's resourceVersion are kept under
        ``key`` for wait_change."""
        data = self._get(what, path, **query)
        self._listed[key] = ((data.get("metadata") or {}).get("resourceVersion"), what, path, query)
        return data.get("items") or []

    def wait_change(self, key, timeout: float) -> bool:
        """Waits, instead of polling, until an object of the last list made under ``key``
        (pods(), nodes()) changes: a watch from that list's resourceVersion, so that nothing
        written between the list and the watch is missed. True when something changed (or the
        version expired: list again), False when ``timeout`` seconds passed without a change.
        An API server that allows list but not watch (RBAC) gets the timeout slept instead."""
        if key not in self._listed or timeout <= 0:
            return False
        version, what, path, query = self._listed[key]
        seconds = max(1, int(timeout))
        query = dict(query, watch="true", timeoutSeconds=seconds, allowWatchBookmarks="false",
                     resourceVersion=version or "")
        what = "watch " + what.replace("list ", "", 1)
        try:
            response = self.http.request(what, "GET", path, query, stream=True, timeout=(10, seconds + 10))
        except KubeError as exc:
            if exc.status in (401, 403, 405):
                time.sleep(seconds)
                return False
            raise
        try:
            # the first byte of the first event (an ERROR event, such as 410 Gone, is a change
            # too: the caller lists again); nothing until the server ends the watch at its timeout
            return bool(response.read(1))
        except Exception as exc:  # (urllib3's own connection errors)
            raise KubeError("%s: %s" % (what, exc))
        finally:
            # (closed, not drained: the rest of the watch is not read; the pool opens a new connection)
            response.close()
            response.release_conn()

    def node(self, name: str) -> dict | None:
        try:
            return self._get("read node %s" % name, "/api/v1/nodes/" + _q(name))
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise

    def nodes(self, label_selector: str = "") -> list:
        return self._list("list nodes", ("nodes", label_selector), "/api/v1/nodes", labelSelector=label_selector)

    def patch_node(self, name: str, body: dict) -> dict:
        # a strategic merge patch: null removes a label or annotation
        return self.http.request("patch node %s" % name, "PATCH", "/api/v1/nodes/" + _q(name), body=body,
                                 content_type="application/strategic-merge-patch+json")

    def pods(self, node: str | None, namespace: str = "", label_selector: str = "") -> list:
        """The pods on ``node`` (None: on every node), in ``namespace`` (empty: in every one)."""
        where = "%s%s" % (" of %s" % node if node else "", " in %s" % namespace if namespace else "")
        path = "/api/v1/namespaces/%s/pods" % _q(namespace) if namespace else "/api/v1/pods"
        return self._list("list pods" + where, ("pods", node, namespace, label_selector), path,
                          fieldSelector="spec.nodeName=%s" % node if node else "", labelSelector=label_selector)

    def resource_slices(self, driver: str = "") -> list:
        """The cluster's ResourceSlices (resource.k8s.io/v1) of ``driver`` (empty: every driver);
        none where the API server does not serve resource.k8s.io/v1; None where the credentials
        may not list them."""
        try:
            return self._get("list resourceslices", "/apis/resource.k8s.io/v1/resourceslices",
                             fieldSelector="spec.driver=%s" % driver if driver else "").get("items") or []
        except KubeError as exc:
            if exc.status == 404:
                return []
            if exc.status == 403:
                return None
            raise

    def daemonsets(self, namespace: str) -> list:
        return self._get("list daemonsets in %s" % namespace,
                         "/apis/apps/v1/namespaces/%s/daemonsets" % _q(namespace)).get("items") or []

    def pod(self, namespace: str, name: str) -> dict | None:
        try:
            return self._get("read pod %s/%s" % (namespace, name),
                             "/api/v1/namespaces/%s/pods/%s" % (_q(namespace), _q(name)))
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise

    def delete_pod(self, namespace: str, name: str) -> bool:
        """False when the pod was gone already."""
        try:
            self.http.request("delete pod %s/%s" % (namespace, name), "DELETE",
                              "/api/v1/namespaces/%s/pods/%s" % (_q(namespace), _q(name)))
        except KubeError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def evict_pod(self, namespace: str, name: str) -> bool:
        """Asks the Eviction API to evict the pod; False when it was gone already. A refusal by a
        PodDisruptionBudget is a KubeError with status 429."""
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace}}
        try:
            self.http.request("evict pod %s/%s" % (namespace, name), "POST",
                              "/api/v1/namespaces/%s/pods/%s/eviction" % (_q(namespace), _q(name)), body=body)
        except KubeError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    @staticmethod
    def _leases(namespace: str) -> str:
        return "/apis/coordination.k8s.io/v1/namespaces/%s/leases" % _q(namespace)

    def create_lease(self, namespace: str, name: str, holder: str, seconds: int) -> dict | None:
        """Creates the Lease (coordination.k8s.io/v1) ``name`` held by ``holder``: the Lease, or
        None when one of that name exists already (an API server's create is atomic: a lock)."""
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"holderIdentity": holder, "leaseDurationSeconds": seconds, "acquireTime": now,
                         "renewTime": now}}
        try:
            return self.http.request("create lease %s/%s" % (namespace, name), "POST", self._leases(namespace),
                                     body=body)
        except KubeError as exc:
            if exc.status == 409:
                return None
            raise

    def lease(self, namespace: str, name: str) -> dict | None:
        """The Lease, or None; wait_change(("lease", namespace, name)) then watches it from the
        version read."""
        try:
            held = self._get("read lease %s/%s" % (namespace, name), self._leases(namespace) + "/" + _q(name))
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise
        self._listed[("lease", namespace, name)] = (
            (held.get("metadata") or {}).get("resourceVersion"), "list lease %s/%s" % (namespace, name),
            self._leases(namespace), {"fieldSelector": "metadata.name=" + name})
        return held

    def delete_lease(self, namespace: str, name: str, uid: str) -> bool:
        """Deletes the Lease if it is still the one with ``uid``; False when it is gone or another."""
        try:
            self.http.request("delete lease %s/%s" % (namespace, name), "DELETE",
                              self._leases(namespace) + "/" + _q(name), body={"preconditions": {"uid": uid}})
        except KubeError as exc:
            if exc.status in (404, 409):
                return False
            raise
        return True
