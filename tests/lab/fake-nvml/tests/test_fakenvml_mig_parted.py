"""NVIDIA's own nvidia-mig-parted (built from its Go module, tests/lab/go-binaries mig-parted)
against the fake: the usual layouts apply and assert on the fake exactly as on hardware, a
mode change that needs a GPU reset goes through mig-parted's `nvidia-smi -r`, and a GPU held
by a client stops it. This is the check that the fake's MIG is right; the collection's MIG
module is later compared with mig-parted on the same fake GPUs.

mig-parted reads the kernel's view too (/proc/modules, /sys/bus/pci): the commands run under
`with-gpus --node`, which shows it the profile's GPUs there."""

import os
import subprocess
import sys
import textwrap

import pytest

from fakenvml_util import LAB_DIR, WITH_GPUS

GO_BINARIES = LAB_DIR / "go-binaries"

# per profile: the profile names of the usual layouts
LAYOUTS = {
    "dgx-a100": {"all-1g": {"1g.5gb": 7}, "all-2g": {"2g.10gb": 3}, "all-3g": {"3g.20gb": 2},
                 "all-balanced": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}, "all-7g": {"7g.40gb": 1}},
    "hgx-h100": {"all-1g": {"1g.10gb": 7}, "all-2g": {"2g.20gb": 3}, "all-3g": {"3g.40gb": 2},
                 "all-balanced": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}, "all-4g-3g": {"4g.40gb": 1, "3g.40gb": 1}},
    "hgx-h200": {"all-1g": {"1g.18gb": 7}, "all-1g.35gb": {"1g.35gb": 4},
                 "all-balanced": {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1}},
    "rtx-pro-6000-x4": {"all-1g": {"1g.24gb": 4}, "all-2g": {"2g.48gb": 2},
                        "all-balanced": {"1g.24gb": 2, "2g.48gb": 1}, "all-4g": {"4g.96gb": 1}},
}

READ_LAYOUT = textwrap.dedent("""
    import json, pynvml as n
    n.nvmlInit()
    out = []
    for i in range(n.nvmlDeviceGetCount()):
        h = n.nvmlDeviceGetHandleByIndex(i)
        mode = n.nvmlDeviceGetMigMode(h)
        names = []
        if mode[0] == 1:
            for k in range(n.nvmlDeviceGetMaxMigDeviceCount(h)):
                try:
                    m = n.nvmlDeviceGetMigDeviceHandleByIndex(h, k)
                except n.NVMLError_NotFound:
                    break
                names.append(n.nvmlDeviceGetName(m).split("MIG ")[-1])  # "NVIDIA H100 ... MIG 1g.10gb"
        out.append([mode, sorted(names)])
    print(json.dumps(out))
    """)


@pytest.fixture(scope="module")
def mig_parted():
    res = subprocess.run([str(GO_BINARIES), "--dir", "mig-parted"], capture_output=True, text=True, timeout=900,
                         check=False)
    if res.returncode != 0:
        if os.environ.get("GPUOPS_REQUIRE_ALL"):
            pytest.fail("nvidia-mig-parted could not be built: " + res.stderr[-2000:])
        pytest.skip("nvidia-mig-parted could not be built (no Go toolchain or module proxy)")
    return os.path.join(res.stdout.strip(), "nvidia-mig-parted")


@pytest.fixture
def node(tmp_path):
    if os.geteuid() != 0:
        pytest.fail("with-gpus --node needs root (a private mount namespace); run the lab's tests as root",
                    pytrace=False)

    def run(profile, *cmd, fresh=False, check=True):
        env = {k: v for k, v in os.environ.items() if not k.startswith("GPUOPS_FAKE_NVML")}
        env["TMPDIR"] = str(tmp_path)
        args = [str(WITH_GPUS), "--node"] + (["--fresh"] if fresh else []) + [profile, "--", *cmd]
        res = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120, check=False)
        if check:
            assert res.returncode == 0, f"{' '.join(cmd)} failed ({res.returncode}):\n{res.stdout}\n{res.stderr}"
        return res

    return run


def write_config(path, layouts):
    lines = ["version: v1", "mig-configs:", "  all-disabled:", "    - devices: all", "      mig-enabled: false",
             "  all-enabled:", "    - devices: all", "      mig-enabled: true", "      mig-devices: {}"]
    for name, devices in layouts.items():
        lines += [f"  {name}:", "    - devices: all", "      mig-enabled: true", "      mig-devices:"]
        lines += [f'        "{profile}": {count}' for profile, count in devices.items()]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def layout(node, profile):
    import json

    return json.loads(node(profile, sys.executable, "-c", READ_LAYOUT).stdout)


def test_the_node_view_shows_the_profiles_gpus(node):
    res = node("hgx-h100", "sh", "-c", "cat /proc/modules; for d in /sys/bus/pci/devices/*; do "
               "echo ${d##*/} $(cat $d/vendor $d/device $d/class $d/numa_node) $(basename $(readlink -f $d/driver)); "
               "done; command -v nvidia-smi", fresh=True)
    lines = res.stdout.splitlines()
    assert [line.split()[0] for line in lines[:3]] == ["nvidia_uvm", "nvidia_modeset", "nvidia"]
    gpus = [line.split() for line in lines[3:11]]
    assert [g[0] for g in gpus] == ["0000:%s:00.0" % b for b in ("1b", "43", "52", "61", "9d", "c3", "d1", "df")]
    assert all(g[1:4] == ["0x10de", "0x2330", "0x030200"] and g[5] == "nvidia" for g in gpus), gpus
    assert [g[4] for g in gpus] == ["0"] * 4 + ["1"] * 4
    assert lines[11].endswith("/usr/bin/nvidia-smi")
    # without a loaded driver: no module, no driver bound
    res = node("driver-not-loaded", "sh", "-c", "wc -c < /proc/modules; ls /sys/bus/pci/devices | wc -l; "
               "find /sys/bus/pci/devices/ -name driver | wc -l", fresh=True)
    assert res.stdout.split() == ["0", "8", "0"]


@pytest.mark.parametrize("profile", sorted(LAYOUTS))
def test_mig_parted_applies_and_asserts_the_usual_layouts(node, mig_parted, tmp_path, profile):
    config = write_config(tmp_path / "config.yaml", LAYOUTS[profile])
    node(profile, mig_parted, "export", fresh=True)
    gpus = len(layout(node, profile))
    for name, devices in [("all-enabled", {})] + list(LAYOUTS[profile].items()) + [("all-disabled", None)]:
        node(profile, mig_parted, "apply", "-f", config, "-c", name)
        node(profile, mig_parted, "assert", "-f", config, "-c", name)
        want = sorted(p for p, c in (devices or {}).items() for _unused in range(c))
        enabled = [0, 0] if devices is None else [1, 1]
        assert layout(node, profile) == [[enabled, want]] * gpus, name
        # and a layout that is not there does not assert
        other = "all-disabled" if devices is not None else "all-enabled"
        assert node(profile, mig_parted, "assert", "-f", config, "-c", other, check=False).returncode != 0


def test_a_reset_required_mode_change_goes_through_nvidia_smi(node, mig_parted, tmp_path):
    config = write_config(tmp_path / "config.yaml", LAYOUTS["dgx-a100"])
    node("dgx-a100-mig-pending", mig_parted, "apply", "-f", config, "-c", "all-balanced", fresh=True)
    assert layout(node, "dgx-a100-mig-pending") == [[[1, 1], ["1g.5gb", "1g.5gb", "2g.10gb", "3g.20gb"]]] * 8


def test_a_gpu_held_by_a_client_stops_mig_parted(node, mig_parted, tmp_path):
    config = write_config(tmp_path / "config.yaml", LAYOUTS["dgx-a100"])
    res = node("dgx-a100-mig-in-use", mig_parted, "apply", "-f", config, "-c", "all-1g", fresh=True, check=False)
    assert res.returncode != 0 and "In use by another client" in res.stderr, res.stderr[-2000:]
    # the mode change is left pending, as on hardware: a reboot would apply it
    assert layout(node, "dgx-a100-mig-in-use") == [[[0, 1], []]] * 8
