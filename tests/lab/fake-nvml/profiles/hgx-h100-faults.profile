# hgx-h100 with one fault per GPU (GPUs 0 and 6 stay healthy):
#   1: XID 79 + 48, volatile and aggregate uncorrectable (DBE) ECC errors
#   2: XID 94, row-remapping failure with a remap pending
#   3: PCIe link degraded to Gen3 x8 (max Gen5 x16)
#   4: clocks held down: HW slowdown + SW thermal slowdown + SW power cap
#   5: NVLinks 0, 7 and 12 down
#   7: fallen off the bus (every query returns NVML_ERROR_GPU_IS_LOST)
description = hgx-h100 with faults: XIDs 79/48 + DBE ECC (gpu1), XID 94 + remap failure (gpu2), PCIe x8 Gen3 (gpu3), throttling (gpu4), NVLinks down (gpu5), GPU lost (gpu7)
include = hgx-h100

[gpu.1]
xid_events = 79, 48
ecc_volatile_corrected = 14
ecc_volatile_uncorrected = 2
ecc_aggregate_corrected = 211
ecc_aggregate_uncorrected = 3

[gpu.2]
xid_events = 94
ecc_volatile_uncorrected = 1
ecc_aggregate_uncorrected = 1
remapped_rows_correctable = 5
remapped_rows_uncorrectable = 9
remapped_rows_pending = yes
remapped_rows_failure = yes

[gpu.3]
pcie_gen_current = 3
pcie_width_current = 8

[gpu.4]
clocks_event_reasons = hw_slowdown, sw_thermal_slowdown, sw_power_cap
temperature_gpu = 88
power_usage_mw = 699120
utilization_gpu = 100
utilization_memory = 71
clock_graphics = 1095
clock_sm = 1095

[gpu.5]
nvlink_down = 0, 7, 12

[gpu.7]
lost = true
