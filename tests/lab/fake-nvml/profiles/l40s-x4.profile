# Four L40S PCIe cards, two per socket behind PCIe switches. No NVLink, no MIG.
description = 4x NVIDIA L40S (Ada, PCIe Gen4, no NVLink, no MIG), driver 580.95.05 / CUDA 13.0

[node]
driver_version = 580.95.05
nvml_version = 13.580.95.05
cuda_driver_version = 13000
gpu_count = 4
uuid_seed = l40s-x4
# 2x AMD EPYC 9354, 32 cores each, SMT on
numa0_cpus = 0-31,64-95
numa1_cpus = 32-63,96-127
p2p_pcie = ok

[gpu]
name = NVIDIA L40S
architecture = ada
compute_capability = 8.9
pci_bus_id = 00000000:{i|4A,61,CA,E1}:00.0
pci_device_id = 0x26B910DE
pci_subsystem_id = 0x185110DE
serial = 13245230{i|04417,04452,04498,04531}
board_part_number = 900-2G133-0080-000
vbios_version = 95.02.66.00.02
memory_total_mib = 46068
memory_reserved_mib = 511
persistence_mode = enabled
power_usage_mw = {i|33418,34102,32876,35020}
power_limit_mw = 350000
temperature_gpu = {i|27,29,28,30}
clock_graphics = 210
clock_sm = 210
clock_mem = 405
clock_video = 765
max_clock_graphics = 2520
max_clock_sm = 2520
max_clock_mem = 9001
max_clock_video = 1965
pcie_gen_gpu_max = 4
pcie_width_max = 16
ecc_mode = enabled
remapped_rows = unsupported
nvlink_count = 0
numa_node = {i|0,0,1,1}
pcie_switch = {i|0,0,1,1}
mig_table = none
