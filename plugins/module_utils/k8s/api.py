# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The few Kubernetes API calls the collection's own modules make, over the ``kubernetes`` Python
client, with objects as plain dicts shaped as the API (and kubernetes.core.k8s_info) returns them.
The connection options are those of kubernetes.core and of the gpuops.nvidia.k8s_auth lookup
(``kubeconfig``, ``context``, ``host``, ``api_key``, ``validate_certs``, ``ca_cert``); unset ones
fall back as kubectl does: ``KUBECONFIG``, ``~/.kube/config``, then the in-cluster service account."""

from __future__ import annotations

__metaclass__ = type

import datetime
import json
import os
import time

try:
    from kubernetes import client as k8s_client
    from kubernetes import config as k8s_config
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
    """An ApiClient for the connection options (a dict with the KUBE_ARGUMENT_SPEC keys)."""
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
    return k8s_client.ApiClient(configuration)


class Kube:
    """Nodes and pods as dicts. Every failure is a KubeError naming the call."""

    def __init__(self, api_client):
        self.core = k8s_client.CoreV1Api(api_client)
        self.apps = k8s_client.AppsV1Api(api_client)
        self.coordination = k8s_client.CoordinationV1Api(api_client)
        # the last list of each kind of query: what a watch of the same query starts from
        self._listed = {}

    def _list(self, what, key, method, *args, **kwargs) -> list:
        """The items of a list call; the call and the list's resourceVersion are kept under
        ``key`` for wait_change."""
        data = self._json(what, method, *args, **kwargs)
        self._listed[key] = ((data.get("metadata") or {}).get("resourceVersion"), what, method, args, kwargs)
        return data["items"]

    def wait_change(self, key, timeout: float) -> bool:
        """Waits, instead of polling, until an object of the last list made under ``key``
        (pods(), nodes()) changes: a watch from that list's resourceVersion, so that nothing
        written between the list and the watch is missed. True when something changed (or the
        version expired: list again), False when ``timeout`` seconds passed without a change.
        An API server that allows list but not watch (RBAC) gets the timeout slept instead."""
        if key not in self._listed or timeout <= 0:
            return False
        version, what, method, args, kwargs = self._listed[key]
        seconds = max(1, int(timeout))
        params = dict(kwargs, watch=True, timeout_seconds=seconds, allow_watch_bookmarks=False,
                      _preload_content=False, _request_timeout=(10, seconds + 10))
        if version:
            params["resource_version"] = version
        try:
            response = self._call("watch " + what.replace("list ", "", 1), method, *args, **params)
        except KubeError as exc:
            if exc.status in (401, 403, 405):
                time.sleep(seconds)
                return False
            raise
        try:
            # the first byte of the first event (an ERROR event, such as 410 Gone, is a change
            # too: the caller lists again); nothing until the server ends the watch at its timeout
            return bool(response.read(1))
        except Exception as exc:  # (the client's connection errors are urllib3's own)
            raise KubeError("watch %s: %s" % (what.replace("list ", "", 1), exc))
        finally:
            response.close()

    def _call(self, what, method, *args, **kwargs):
        return call(what, method, *args, **kwargs)

    def _json(self, what, method, *args, **kwargs):
        response = self._call(what, method, *args, _preload_content=False, **kwargs)
        return json.loads(response.data)

    def node(self, name: str) -> dict | None:
        try:
            return self._json("read node %s" % name, self.core.read_node, name)
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise

    def nodes(self, label_selector: str = "") -> list:
        return self._list("list nodes", ("nodes", label_selector), self.core.list_node, label_selector=label_selector)

    def patch_node(self, name: str, body: dict) -> dict:
        # a dict body goes as a strategic merge patch: null removes a label or annotation
        return self._json("patch node %s" % name, self.core.patch_node, name, body)

    def pods(self, node: str | None, namespace: str = "", label_selector: str = "") -> list:
        """The pods on ``node`` (None: on every node), in ``namespace`` (empty: in every one)."""
        field = "spec.nodeName=%s" % node if node else ""
        where = "%s%s" % (" of %s" % node if node else "", " in %s" % namespace if namespace else "")
        key = ("pods", node, namespace, label_selector)
        if namespace:
            return self._list("list pods" + where, key, self.core.list_namespaced_pod, namespace,
                              field_selector=field, label_selector=label_selector)
        return self._list("list pods" + where, key, self.core.list_pod_for_all_namespaces,
                          field_selector=field, label_selector=label_selector)

    def resource_slices(self, driver: str = "") -> list:
        """The cluster's ResourceSlices (resource.k8s.io/v1) of ``driver`` (empty: every driver);
        none where the API server does not serve resource.k8s.io/v1; None where the credentials
        may not list them."""
        selector = "spec.driver=%s" % driver if driver else ""
        try:
            return self._json("list resourceslices", k8s_client.CustomObjectsApi(self.core.api_client).list_cluster_custom_object,
                              "resource.k8s.io", "v1", "resourceslices", field_selector=selector)["items"]
        except KubeError as exc:
            if exc.status == 404:
                return []
            if exc.status == 403:
                return None
            raise

    def daemonsets(self, namespace: str) -> list:
        return self._json("list daemonsets in %s" % namespace, self.apps.list_namespaced_daemon_set,
                          namespace)["items"]

    def pod(self, namespace: str, name: str) -> dict | None:
        try:
            return self._json("read pod %s/%s" % (namespace, name), self.core.read_namespaced_pod, name, namespace)
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise

    def delete_pod(self, namespace: str, name: str) -> bool:
        """False when the pod was gone already."""
        try:
            self._call("delete pod %s/%s" % (namespace, name), self.core.delete_namespaced_pod, name, namespace)
        except KubeError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def evict_pod(self, namespace: str, name: str) -> bool:
        """Asks the Eviction API to evict the pod; False when it was gone already. A refusal by a
        PodDisruptionBudget is a KubeError with status 429."""
        body = k8s_client.V1Eviction(metadata=k8s_client.V1ObjectMeta(name=name, namespace=namespace))
        try:
            self._call("evict pod %s/%s" % (namespace, name), self.core.create_namespaced_pod_eviction,
                       name, namespace, body)
        except KubeError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def create_lease(self, namespace: str, name: str, holder: str, seconds: int) -> dict | None:
        """Creates the Lease (coordination.k8s.io/v1) ``name`` held by ``holder``: the Lease, or
        None when one of that name exists already (an API server's create is atomic: a lock)."""
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"holderIdentity": holder, "leaseDurationSeconds": seconds, "acquireTime": now,
                         "renewTime": now}}
        try:
            return self._json("create lease %s/%s" % (namespace, name), self.coordination.create_namespaced_lease,
                              namespace, body)
        except KubeError as exc:
            if exc.status == 409:
                return None
            raise

    def lease(self, namespace: str, name: str) -> dict | None:
        """The Lease, or None; wait_change(("lease", namespace, name)) then watches it from the
        version read."""
        try:
            held = self._json("read lease %s/%s" % (namespace, name), self.coordination.read_namespaced_lease,
                              name, namespace)
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise
        self._listed[("lease", namespace, name)] = (
            (held.get("metadata") or {}).get("resourceVersion"), "list lease %s/%s" % (namespace, name),
            self.coordination.list_namespaced_lease, (namespace,), {"field_selector": "metadata.name=" + name})
        return held

    def delete_lease(self, namespace: str, name: str, uid: str) -> bool:
        """Deletes the Lease if it is still the one with ``uid``; False when it is gone or another."""
        try:
            self._call("delete lease %s/%s" % (namespace, name), self.coordination.delete_namespaced_lease,
                       name, namespace, body={"preconditions": {"uid": uid}})
        except KubeError as exc:
            if exc.status in (404, 409):
                return False
            raise
        return True
