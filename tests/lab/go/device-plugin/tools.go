//go:build tools

package tools

import (
	_ "github.com/NVIDIA/k8s-device-plugin/cmd/config-manager"
	_ "github.com/NVIDIA/k8s-device-plugin/cmd/gpu-feature-discovery"
	_ "github.com/NVIDIA/k8s-device-plugin/cmd/nvidia-device-plugin"
)
