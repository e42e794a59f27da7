# HGX H100 8-GPU baseboard (DGX H100 class host): 2 sockets, 4 third-generation
# NVSwitches, every GPU with 18 NVLink 4.0 links to the switches.
description = 8x NVIDIA H100 80GB HBM3 (HGX/SXM5), 4 NVSwitches, NVLink x18, driver 570.172.08 / CUDA 12.8

[node]
driver_state = loaded
driver_version = 570.172.08
nvml_version = 12.570.172.08
cuda_driver_version = 12080
gpu_count = 8
uuid_seed = hgx-h100
# 2x Xeon Platinum 8480C, 56 cores each, SMT on
numa0_cpus = 0-55,112-167
numa1_cpus = 56-111,168-223
nvswitch_bus_ids = 00000000:05:00.0, 00000000:06:00.0, 00000000:07:00.0, 00000000:08:00.0
nvswitch_pci_device_id = 0x22A310DE
p2p_pcie = ok

[gpu]
name = NVIDIA H100 80GB HBM3
architecture = hopper
compute_capability = 9.0
pci_bus_id = 00000000:{i|1B,43,52,61,9D,C3,D1,DF}:00.0
pci_device_id = 0x233010DE
pci_subsystem_id = 0x16C110DE
serial = 16522230{i|08145,08213,08290,08317,08402,08455,08519,08586}
board_part_number = 692-2G520-0200-000
vbios_version = 96.00.99.00.01
memory_total_mib = 81559
memory_reserved_mib = 555
memory_used_mib = 0
persistence_mode = enabled
power_usage_mw = {i|71342,72018,69877,73410,70655,71984,72730,70112}
power_limit_mw = 700000
power_management_limit_mw = 700000
temperature_gpu = {i|31,33,30,34,32,31,35,30}
# nvidia-smi -q "Temperature" of the HGX H100/H800 SXM5 board (driver 525): shutdown 92,
# slowdown 89, GPU max operating 87, memory max operating 95 C (drivers >= 550 print these as
# T.Limit offsets; NVML still answers the thresholds)
temperature_shutdown = 92
temperature_slowdown = 89
temperature_gpu_max = 87
temperature_mem_max = 95
clock_graphics = 345
clock_sm = 345
clock_mem = 2619
clock_video = 765
max_clock_graphics = 1980
max_clock_sm = 1980
max_clock_mem = 2619
max_clock_video = 1545
clocks_event_reasons = gpu_idle
pcie_gen_gpu_max = 5
pcie_gen_max = 5
pcie_gen_current = 5
pcie_width_max = 16
pcie_width_current = 16
utilization_gpu = 0
utilization_memory = 0
ecc_mode = enabled
remapped_rows = supported
nvlink_count = 18
nvlink_remote = switch
numa_node = {i|0,0,0,0,1,1,1,1}
supported_events = single_bit_ecc, double_bit_ecc, pstate, xid, clock
mig_table = h100-80gb
mig_mode = disabled
# Hopper: a MIG mode change applies at once and is gone after a GPU reset or reboot
mig_mode_change = auto
