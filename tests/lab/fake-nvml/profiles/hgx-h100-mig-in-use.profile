# A GPU client (persistenced, DCGM, fabric manager user, ...) holds the GPUs:
# nvmlDeviceSetMigMode records the pending mode but returns activation status
# NVML_ERROR_IN_USE; a reset (fake-nvml-reset) applies it.
description = hgx-h100 whose GPUs are held by clients: MIG mode changes report IN_USE and stay pending
include = hgx-h100

[gpu]
mig_mode_change = in_use
