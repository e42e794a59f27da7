# The NVML library is installed but no kernel module is loaded
# (e.g. right after installing the driver packages, or DKMS failed):
# nvmlInit -> NVML_ERROR_DRIVER_NOT_LOADED (9), nvidia-smi exits 9.
description = hgx-h100 hardware, library present but kernel module not loaded (nvmlInit -> DRIVER_NOT_LOADED)
include = hgx-h100

[node]
driver_state = not_loaded
