# HGX H200 8-GPU baseboard: 2 sockets, 4 NVSwitches, 18 NVLinks per GPU.
description = 8x NVIDIA H200 141GB HBM3e (HGX/SXM), 4 NVSwitches, NVLink x18, driver 575.57.08 / CUDA 12.9

[node]
driver_version = 575.57.08
nvml_version = 12.575.57.08
cuda_driver_version = 12090
gpu_count = 8
uuid_seed = hgx-h200
# 2x Xeon Platinum 8468, 48 cores each, SMT on
numa0_cpus = 0-47,96-143
numa1_cpus = 48-95,144-191
nvswitch_bus_ids = 00000000:05:00.0, 00000000:06:00.0, 00000000:07:00.0, 00000000:08:00.0
nvswitch_pci_device_id = 0x22A310DE
p2p_pcie = ok

[gpu]
name = NVIDIA H200
architecture = hopper
compute_capability = 9.0
pci_bus_id = 00000000:{i|18,2A,3A,5D,9A,AB,BA,DB}:00.0
pci_device_id = 0x233510DE
pci_subsystem_id = 0x18BE10DE
serial = 16532240{i|11307,11342,11390,11428,11465,11501,11577,11619}
board_part_number = 692-2G520-0280-000
vbios_version = 96.00.AF.00.01
memory_total_mib = 143771
memory_reserved_mib = 603
persistence_mode = enabled
power_usage_mw = {i|76120,77405,75318,78012,76644,75903,77210,76031}
power_limit_mw = 700000
temperature_gpu = {i|30,32,31,33,29,31,34,30}
clock_graphics = 345
clock_sm = 345
clock_mem = 3201
clock_video = 765
max_clock_graphics = 1980
max_clock_sm = 1980
max_clock_mem = 3201
max_clock_video = 1545
pcie_gen_gpu_max = 5
pcie_width_max = 16
ecc_mode = enabled
nvlink_count = 18
nvlink_remote = switch
numa_node = {i|0,0,0,0,1,1,1,1}
mig_table = h200-141gb
# GPU instance ids as some driver releases hand them out: not derived from the placement
mig_gi_ids = shuffled
