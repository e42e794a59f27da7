# A GPU client the node cannot stop holds the A100s: nvmlDeviceSetMigMode records the pending
# mode but returns activation status NVML_ERROR_IN_USE, and a GPU reset fails IN_USE; a reboot
# (fake-nvml-reset) applies the pending mode (clients start after the driver).
description = dgx-a100 whose GPUs are held by a client: MIG mode changes report IN_USE and stay pending until a reboot
include = dgx-a100

[gpu]
mig_mode_change = in_use
