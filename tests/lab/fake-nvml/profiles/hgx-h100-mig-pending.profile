# MIG mode changes only take effect after a GPU reset (as in VMs with
# pass-through, or when the driver cannot reset the GPU itself):
# nvmlDeviceSetMigMode returns activation status NVML_ERROR_RESET_REQUIRED and
# GetMigMode shows current != pending until fake-nvml-reset is run.
description = hgx-h100 where MIG mode changes stay pending until a GPU reset (activation status RESET_REQUIRED)
include = hgx-h100

[gpu]
mig_mode_change = pending
