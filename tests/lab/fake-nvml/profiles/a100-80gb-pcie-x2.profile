# Two A100 80GB PCIe cards joined by three NVLink bridges (12 links, GPU to GPU).
description = 2x NVIDIA A100 80GB PCIe, NVLink bridge pair (12 links, no NVSwitch), driver 550.163.01 / CUDA 12.4

[node]
driver_version = 550.163.01
nvml_version = 12.550.163.01
cuda_driver_version = 12040
gpu_count = 2
uuid_seed = a100-80gb-pcie-x2
# 2x Xeon Gold 6338, 32 cores each, SMT on
numa0_cpus = 0-31,64-95
numa1_cpus = 32-63,96-127
p2p_pcie = ok

[gpu]
name = NVIDIA A100 80GB PCIe
architecture = ampere
compute_capability = 8.0
pci_bus_id = 00000000:{i|17,65}:00.0
pci_device_id = 0x20B510DE
pci_subsystem_id = 0x153310DE
serial = 13222210{i|25531,25588}
board_part_number = 900-21001-0020-100
vbios_version = 92.00.90.00.04
memory_total_mib = 81920
memory_reserved_mib = 567
persistence_mode = enabled
power_usage_mw = {i|43216,44871}
power_limit_mw = 300000
temperature_gpu = {i|34,36}
clock_graphics = 210
clock_sm = 210
clock_mem = 1512
clock_video = 795
max_clock_graphics = 1410
max_clock_sm = 1410
max_clock_mem = 1512
max_clock_video = 1290
pcie_gen_gpu_max = 4
pcie_width_max = 16
ecc_mode = enabled
nvlink_count = 12
nvlink_remote = gpu
nvlink_peer = {i|1,0}
numa_node = 0
mig_table = a100-80gb
