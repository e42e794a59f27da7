"""The counters a DCGM exporter reads besides the basics: energy since the driver was loaded,
PCIe replays, encoder / decoder utilisation."""

import pynvml as P

from fakenvml_util import nvml_raises, profile_path


def test_defaults(h100):
    g = h100.nvmlDeviceGetHandleByIndex(0)
    # one hour at GPU 0's 71342 mW since the driver was loaded
    assert h100.nvmlDeviceGetTotalEnergyConsumption(g) == 71342 * 3600
    assert h100.nvmlDeviceGetPcieReplayCounter(g) == 0
    assert h100.nvmlDeviceGetEncoderUtilization(g) == [0, 1000000]
    assert h100.nvmlDeviceGetDecoderUtilization(g) == [0, 1000000]


def test_values_from_the_profile(nvml, tmp_path):
    prof = tmp_path / "busy.profile"
    prof.write_text(f"include = {profile_path('hgx-h100')}\n\n[gpu.2]\nenergy_consumption_mj = 98765432109\n"
                    "pcie_replay_counter = 17\nutilization_encoder = 35\nutilization_decoder = 61\n")
    n = nvml(prof)
    g = n.nvmlDeviceGetHandleByIndex(2)
    assert n.nvmlDeviceGetTotalEnergyConsumption(g) == 98765432109  # above 32 bits
    assert n.nvmlDeviceGetPcieReplayCounter(g) == 17
    assert n.nvmlDeviceGetEncoderUtilization(g)[0] == 35
    assert n.nvmlDeviceGetDecoderUtilization(g)[0] == 61
    # the other GPUs keep their defaults
    assert n.nvmlDeviceGetPcieReplayCounter(n.nvmlDeviceGetHandleByIndex(1)) == 0


def test_a_bad_value_names_key_and_gpu(nvml, tmp_path):
    prof = tmp_path / "bad.profile"
    prof.write_text(f"include = {profile_path('hgx-h100')}\n\n[gpu.3]\nenergy_consumption_mj = lots\n")
    with nvml_raises(P.NVML_ERROR_UNKNOWN):
        nvml(prof)


def test_codec_utilization_unavailable_in_mig_mode(h100):
    g = h100.nvmlDeviceGetHandleByIndex(0)
    h100.nvmlDeviceSetMigMode(g, P.NVML_DEVICE_MIG_ENABLE)
    for call in (h100.nvmlDeviceGetEncoderUtilization, h100.nvmlDeviceGetDecoderUtilization):
        with nvml_raises(P.NVML_ERROR_NOT_SUPPORTED):
            call(g)
    # energy and replays stay per physical GPU
    assert h100.nvmlDeviceGetTotalEnergyConsumption(g) == 71342 * 3600


def test_bad_arguments(h100):
    for call in (h100.nvmlDeviceGetTotalEnergyConsumption, h100.nvmlDeviceGetPcieReplayCounter):
        with nvml_raises(P.NVML_ERROR_INVALID_ARGUMENT):
            call(None)
