//go:build tools

package tools

import (
	// the toolkit's hook at the version the DRA driver's go.mod requires: the one its image carries
	_ "github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-cdi-hook"
	_ "sigs.k8s.io/dra-driver-nvidia-gpu/cmd/gpu-kubelet-plugin"
)
