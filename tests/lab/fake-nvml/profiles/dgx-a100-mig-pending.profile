# MIG mode changes only take effect after a GPU reset or a reboot, as on an A100 in a VM with
# pass-through, where NVML cannot reset the GPU itself: nvmlDeviceSetMigMode returns activation
# status NVML_ERROR_RESET_REQUIRED and GetMigMode shows current != pending until
# `nvidia-smi -r` (fake-nvml-reset --gpu) or a reboot (fake-nvml-reset).
description = dgx-a100 where MIG mode changes stay pending until a GPU reset (activation status RESET_REQUIRED)
include = dgx-a100

[gpu]
mig_mode_change = pending
