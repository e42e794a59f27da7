# A single Tesla T4 in a small (cloud-style) VM. Turing: no MIG, no NVLink,
# no row remapping (it retires pages instead).
description = 1x Tesla T4 (Turing, PCIe Gen3 x16, no MIG, no NVLink), driver 535.247.01 / CUDA 12.2

[node]
driver_version = 535.247.01
nvml_version = 12.535.247.01
cuda_driver_version = 12020
gpu_count = 1
uuid_seed = t4-x1
numa0_cpus = 0-15

[gpu]
name = Tesla T4
architecture = turing
compute_capability = 7.5
pci_bus_id = 00000000:00:04.0
pci_device_id = 0x1EB810DE
pci_subsystem_id = 0x12A210DE
serial = 1321020012345
board_part_number = 900-2G183-0000-001
vbios_version = 90.04.96.00.02
memory_total_mib = 15360
memory_reserved_mib = 257
persistence_mode = disabled
power_usage_mw = 9683
power_limit_mw = 70000
temperature_gpu = 37
# nvidia-smi -q "Temperature" of a Tesla T4 (driver 515): shutdown 96, slowdown 93, GPU max
# operating 85 C; no memory sensor (N/A)
temperature_shutdown = 96
temperature_slowdown = 93
temperature_gpu_max = 85
clock_graphics = 300
clock_sm = 300
clock_mem = 405
clock_video = 540
max_clock_graphics = 1590
max_clock_sm = 1590
max_clock_mem = 5001
max_clock_video = 1470
clocks_event_reasons = gpu_idle
pcie_gen_gpu_max = 3
pcie_width_max = 16
ecc_mode = enabled
remapped_rows = unsupported
nvlink_count = 0
numa_node = 0
mig_table = none
