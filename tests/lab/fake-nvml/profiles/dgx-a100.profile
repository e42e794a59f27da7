# DGX A100 (40GB): 2x AMD EPYC 7742 in NPS4 (8 NUMA nodes), GPUs in pairs
# behind PCIe switches, 6 NVSwitches, 12 NVLink 3.0 links per GPU.
description = 8x NVIDIA A100-SXM4-40GB (DGX A100), 6 NVSwitches, NVLink x12, driver 535.261.03 / CUDA 12.2

[node]
driver_version = 535.261.03
nvml_version = 12.535.261.03
cuda_driver_version = 12020
gpu_count = 8
uuid_seed = dgx-a100
numa0_cpus = 0-15,128-143
numa1_cpus = 16-31,144-159
numa2_cpus = 32-47,160-175
numa3_cpus = 48-63,176-191
numa4_cpus = 64-79,192-207
numa5_cpus = 80-95,208-223
numa6_cpus = 96-111,224-239
numa7_cpus = 112-127,240-255
nvswitch_bus_ids = 00000000:C4:00.0, 00000000:C5:00.0, 00000000:C6:00.0, 00000000:C7:00.0, 00000000:C8:00.0, 00000000:C9:00.0
nvswitch_pci_device_id = 0x1AF110DE
p2p_pcie = ok

[gpu]
name = NVIDIA A100-SXM4-40GB
architecture = ampere
compute_capability = 8.0
pci_bus_id = 00000000:{i|07,0F,47,4E,87,90,B7,BD}:00.0
pci_device_id = 0x20B010DE
pci_subsystem_id = 0x134F10DE
serial = 13231200{i|13770,13815,13862,13904,13951,13997,14036,14082}
board_part_number = 692-2G506-0200-003
vbios_version = 92.00.45.00.03
memory_total_mib = 40960
memory_reserved_mib = 424
persistence_mode = enabled
power_usage_mw = {i|55211,57032,54390,56118,53987,55640,57311,54802}
power_limit_mw = 400000
temperature_gpu = {i|29,31,30,32,28,30,33,29}
# nvidia-smi -q "Temperature" of an A100-SXM4-40GB (driver 535): shutdown 92, slowdown 89,
# GPU max operating 85, memory max operating 95 C
temperature_shutdown = 92
temperature_slowdown = 89
temperature_gpu_max = 85
temperature_mem_max = 95
clock_graphics = 210
clock_sm = 210
clock_mem = 1215
clock_video = 585
max_clock_graphics = 1410
max_clock_sm = 1410
max_clock_mem = 1215
max_clock_video = 1290
pcie_gen_gpu_max = 4
pcie_width_max = 16
ecc_mode = enabled
nvlink_count = 12
nvlink_remote = switch
numa_node = {i|3,3,1,1,7,7,5,5}
pcie_switch = {i|0,0,1,1,2,2,3,3}
mig_table = a100-40gb
