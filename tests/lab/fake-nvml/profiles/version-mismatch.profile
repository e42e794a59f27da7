# Driver packages were upgraded but the old kernel module is still loaded:
# nvmlInit -> NVML_ERROR_LIB_RM_VERSION_MISMATCH (18),
# nvidia-smi says "Failed to initialize NVML: Driver/library version mismatch".
description = hgx-h100 hardware, upgraded library vs old loaded module (nvmlInit -> LIB_RM_VERSION_MISMATCH)
include = hgx-h100

[node]
driver_state = version_mismatch
driver_version = 580.95.05
nvml_version = 13.580.95.05
cuda_driver_version = 13000
