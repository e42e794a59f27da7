# Four RTX PRO 6000 Blackwell Server Edition cards (PCIe, no NVLink), two per socket. MIG with
# other profile IDs than A100/H100 (1g.24gb is 14, 2g.48gb 5, 4g.96gb 0), the +me, +gfx,
# +me.all and -me variants, 4 compute slices, placements on a grid of 12 (src/mig_tables.c):
# a tool that hard-codes A100 profile IDs or 7 slices fails here.
description = 4x NVIDIA RTX PRO 6000 Blackwell Server Edition (PCIe, MIG 4 slices, other profile IDs), driver 580.95.05 / CUDA 13.0

[node]
driver_version = 580.95.05
nvml_version = 13.580.95.05
cuda_driver_version = 13000
gpu_count = 4
uuid_seed = rtx-pro-6000-x4
numa0_cpus = 0-47,96-143
numa1_cpus = 48-95,144-191
p2p_pcie = ok

[gpu]
name = NVIDIA RTX PRO 6000 Blackwell Server Edition
architecture = blackwell
compute_capability = 12.0
pci_bus_id = 00000000:{i|17,3D,99,BD}:00.0
pci_device_id = 0x2BB510DE
pci_subsystem_id = 0x204E10DE
serial = 17825250{i|10211,10254,10288,10317}
board_part_number = 900-2G153-0000-000
vbios_version = 98.02.52.00.02
memory_total_mib = 97887
memory_reserved_mib = 549
persistence_mode = enabled
power_usage_mw = {i|46112,45870,47021,45533}
power_limit_mw = 600000
temperature_gpu = {i|31,33,30,32}
clock_graphics = 180
clock_sm = 180
clock_mem = 405
clock_video = 645
max_clock_graphics = 2430
max_clock_sm = 2430
max_clock_mem = 14001
max_clock_video = 2025
pcie_gen_gpu_max = 5
pcie_width_max = 16
ecc_mode = enabled
remapped_rows = supported
nvlink_count = 0
numa_node = {i|0,0,1,1}
pcie_switch = {i|0,0,1,1}
mig_table = rtx-pro-6000
mig_mode = disabled
