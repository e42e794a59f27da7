# HGX B200 8-GPU baseboard: 2 sockets, 2 fifth-generation NVSwitch chips,
# 18 NVLink 5.0 links per GPU. MIG: the 1g and 2g profiles as measured, 3g/4g/7g extrapolated
# (src/mig_tables.c).
description = 8x NVIDIA B200 (Blackwell, HGX), 2 NVSwitches, NVLink x18, driver 580.95.05 / CUDA 13.0

[node]
driver_version = 580.95.05
nvml_version = 13.580.95.05
cuda_driver_version = 13000
gpu_count = 8
uuid_seed = hgx-b200
# 2x Xeon Platinum 8570, 56 cores each, SMT on
numa0_cpus = 0-55,112-167
numa1_cpus = 56-111,168-223
nvswitch_bus_ids = 00000000:05:00.0, 00000000:06:00.0
nvswitch_pci_device_id = 0x2B0010DE
p2p_pcie = ok

[gpu]
name = NVIDIA B200
architecture = blackwell
compute_capability = 10.0
pci_bus_id = 00000000:{i|1B,43,52,61,9D,C3,D1,DF}:00.0
pci_device_id = 0x290110DE
pci_subsystem_id = 0x199B10DE
serial = 16542250{i|02314,02367,02398,02441,02476,02512,02549,02583}
board_part_number = 692-2G525-0220-000
vbios_version = 97.00.83.00.02
memory_total_mib = 183359
memory_reserved_mib = 1013
persistence_mode = enabled
power_usage_mw = {i|141203,139876,143512,140220,138954,142031,141776,139402}
power_limit_mw = 1000000
temperature_gpu = {i|29,31,30,32,30,29,33,31}
clock_graphics = 120
clock_sm = 120
clock_mem = 3996
clock_video = 600
max_clock_graphics = 1965
max_clock_sm = 1965
max_clock_mem = 3996
max_clock_video = 1650
pcie_gen_gpu_max = 5
pcie_width_max = 16
ecc_mode = enabled
nvlink_count = 18
nvlink_remote = switch
numa_node = {i|0,0,0,0,1,1,1,1}
mig_table = b200-180gb
# GPU instance ids: the lowest free one, whatever the placement
mig_gi_ids = sequential
