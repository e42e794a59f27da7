"""Prometheus's DCGM exporter targets, for the lab's Prometheus (runs in the control-plane
container as gpuops-lab-prom-targets.service).

Debian builds its prometheus package without Kubernetes service discovery (kubernetes_sd_configs
is rejected: "field kubernetes_sd_configs not found"), so this does the part of it the lab needs:
every 5 s it lists the EndpointSlices of the DCGM exporter Services through the API (the client
certificate of the Prometheus user) and writes them as a file_sd target file, which Prometheus
re-reads when it changes. The Services are recognised by the labels NVIDIA's Helm chart
(app.kubernetes.io/name=dcgm-exporter) and the GPU Operator (app=nvidia-dcgm-exporter) give them
(an EndpointSlice carries its Service's labels), their port by its name (metrics, gpu-metrics).
"""
import json
import os
import ssl
import sys
import time
import urllib.parse
import urllib.request

API, OUT = sys.argv[1], sys.argv[2]
PKI = "/etc/kubernetes/pki"
SELECTORS = ("app.kubernetes.io/name=dcgm-exporter", "app=nvidia-dcgm-exporter")
PORTS = ("metrics", "gpu-metrics")


def targets(ctx):
    groups = []
    for sel in SELECTORS:
        url = f"{API}/apis/discovery.k8s.io/v1/endpointslices?" + urllib.parse.urlencode({"labelSelector": sel})
        with urllib.request.urlopen(url, context=ctx, timeout=10) as r:
            slices = json.load(r)["items"]
        for s in slices:
            port = next((p["port"] for p in s.get("ports") or [] if p.get("name") in PORTS), None)
            if port is None:
                continue
            for ep in s.get("endpoints") or []:
                if not (ep.get("conditions") or {}).get("ready", True):
                    continue
                ref = ep.get("targetRef") or {}
                for addr in ep.get("addresses", []):
                    # no namespace / pod target labels: the exporter's series carry the pod and
                    # namespace of the workload holding a GPU, which those would rename
                    groups.append({"targets": [f"{addr}:{port}"],
                                   "labels": {"service": s["metadata"]["labels"].get("kubernetes.io/service-name", ""),
                                              "exporter_pod": ref.get("name", ""),
                                              "kubernetes_node": ep.get("nodeName", "")}})
    return sorted(groups, key=lambda g: g["targets"])


def main():
    ctx = ssl.create_default_context(cafile=f"{PKI}/ca.crt")
    ctx.load_cert_chain(f"{PKI}/prometheus.crt", f"{PKI}/prometheus.key")
    last = None
    while True:
        try:
            body = json.dumps(targets(ctx), indent=1)
            if body != last:
                with open(OUT + ".tmp", "w") as f:
                    f.write(body)
                os.replace(OUT + ".tmp", OUT)
                last = body
        except (OSError, ValueError, KeyError) as e:
            print(f"listing the DCGM exporter endpoints: {e}", file=sys.stderr, flush=True)
        time.sleep(5)


if __name__ == "__main__":
    main()
