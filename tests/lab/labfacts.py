# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Facts of the lab's simulated nodes that tests write down once, read off the profiles by hand
(tests/lab/fake-nvml/profiles), and the MIG partitioning an operator's tool would do."""
from __future__ import annotations

# hgx-h100: the GPUs' UUIDs by NVML index (= PCI bus order)
H100_UUIDS = [
    "GPU-3d3d1d99-c20b-0e4f-c33f-d51ece91c8e7",
    "GPU-57689648-34d5-b049-3b3e-7143bb11a2bb",
    "GPU-645b7fab-2112-fb15-19ef-fb6667d97a43",
    "GPU-5cea62b1-072e-1a6f-2b6d-a5960066b6a7",
    "GPU-0ec55287-2f59-3fc8-0b41-f16cf0fad72e",
    "GPU-5b664595-2565-157e-c347-d4a5b72f7928",
    "GPU-f5cab8aa-0b89-bec9-7037-71686233532a",
    "GPU-37faa470-9f9c-ac34-617f-e8111a793417",
]
# l40s-x4: the GPUs' UUIDs by NVML index
L40S_UUIDS = [
    "GPU-4c003944-1ef8-297d-5436-13937f9089d3",
    "GPU-40df8bc3-12a1-1350-e2b1-0bf6459937b1",
    "GPU-d36cd80c-1e7b-3203-ef40-e676d3ef5921",
    "GPU-872f6a32-b4e1-fe25-149d-ef9002ab74a0",
]
# hgx-h100 GPU 0 split into two 3g.40gb instances (MIG_SCRIPT): their MIG devices' UUIDs
H100_MIG_UUIDS = ["MIG-140a9795-df98-63f0-de2c-d8ee6bb13536", "MIG-bb8db6d1-fcdd-1106-c45d-6cbf0f36f963"]


def mig_script(gpu: int, profile: str, count: int) -> str:
    """Python that partitions one GPU through pynvml in its own process, as an operator's tool
    would: MIG on, then `count` GPU instances of profile ('1_SLICE', '3_SLICE' ...), each with a
    compute instance of the same size."""
    return "\n".join([
        "import pynvml",
        "pynvml.nvmlInit()",
        "handle = pynvml.nvmlDeviceGetHandleByIndex(%d)" % gpu,
        "pynvml.nvmlDeviceSetMigMode(handle, pynvml.NVML_DEVICE_MIG_ENABLE)",
        "info = pynvml.nvmlDeviceGetGpuInstanceProfileInfo(handle, pynvml.NVML_GPU_INSTANCE_PROFILE_%s)" % profile,
        "for _ in range(%d):" % count,
        "    gi = pynvml.nvmlDeviceCreateGpuInstance(handle, info.id)",
        "    ci = pynvml.nvmlGpuInstanceGetComputeInstanceProfileInfo(",
        "        gi, pynvml.NVML_COMPUTE_INSTANCE_PROFILE_%s, pynvml.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)" % profile,
        "    pynvml.nvmlGpuInstanceCreateComputeInstance(gi, ci.id)",
        "pynvml.nvmlShutdown()",
    ]) + "\n"


# GPU 0 of a node as two 3g instances
MIG_SCRIPT = mig_script(0, "3_SLICE", 2)
