"""The gpuops lab's Kubernetes cluster (see tests/lab/kube)."""
