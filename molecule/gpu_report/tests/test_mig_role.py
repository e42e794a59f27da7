"""The node after the mig role (all-balanced on 8 simulated H100s): the layout NVML reports, the
GPU client running again, the config and the boot unit; a reboot of the simulated node (Hopper:
MIG mode and instances gone) and the boot unit putting the layout back."""
import json

LAYOUT = (
    "python3 -c 'import json, pynvml as n; n.nvmlInit(); out = []\n"
    "for i in range(n.nvmlDeviceGetCount()):\n"
    "    h = n.nvmlDeviceGetHandleByIndex(i); names = []\n"
    "    if n.nvmlDeviceGetMigMode(h)[0]:\n"
    "        for k in range(n.nvmlDeviceGetMaxMigDeviceCount(h)):\n"
    "            try: names.append(n.nvmlDeviceGetName(n.nvmlDeviceGetMigDeviceHandleByIndex(h, k)).split(\"MIG \")[-1])\n"
    "            except n.NVMLError_NotFound: break\n"
    "    out.append(sorted(names))\n"
    "print(json.dumps(out))'"
)
BALANCED = ["1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"]


def layout(host):
    return json.loads(host.check_output(LAYOUT))


def test_the_gpus_have_the_balanced_layout(host):
    assert layout(host) == [BALANCED] * 8


def test_the_gpu_client_runs_again_and_holds_the_gpus(host):
    assert host.service("nvidia-persistenced.service").is_running
    # it holds them: a GPU reset is refused
    out = host.run("nvidia-smi -r -i 0")
    assert out.rc != 0 and "In use by another client" in out.stdout


def test_config_file_and_boot_unit(host):
    config = host.file("/etc/gpuops-nvidia/mig-config.yaml")
    assert config.is_file and "all-balanced:" in config.content_string and "1g.10gb: 2" in config.content_string
    unit = host.service("gpuops-mig.service")
    assert unit.is_enabled
    before = host.check_output("systemctl show -p Before --value gpuops-mig.service").split()
    for later in ("nvidia-persistenced.service", "containerd.service", "kubelet.service", "crio.service"):
        assert later in before, before
    assert host.file("/usr/local/lib/gpuops-nvidia/mig/mig_plan.py").is_file


def test_after_a_reboot_the_boot_unit_puts_the_layout_back(host):
    host.check_output("systemctl stop nvidia-persistenced.service")
    host.check_output("fake-nvml-reset")  # the simulated node reboots: Hopper forgets MIG
    assert layout(host) == [[]] * 8
    mode = host.check_output("python3 -c 'import pynvml as n; n.nvmlInit(); "
                             "print(n.nvmlDeviceGetMigMode(n.nvmlDeviceGetHandleByIndex(0)))'")
    assert mode == "[0, 0]"
    host.check_output("systemctl restart gpuops-mig.service")  # what boot runs, before the clients
    host.check_output("systemctl start nvidia-persistenced.service")
    assert layout(host) == [BALANCED] * 8
    # the applier exits 0 only when the GPUs have the layout
    assert host.check_output("systemctl show -p Result --value gpuops-mig.service") == "success"
    assert host.check_output("systemctl show -p ExecMainStatus --value gpuops-mig.service") == "0"
