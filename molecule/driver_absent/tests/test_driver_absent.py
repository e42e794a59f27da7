"""After driver_state=absent: exactly what the role's installation added is gone - the package
set is the one from before the role, but for what another role still needs - and the rest is
untouched."""
import json


def installed(host):
    listing = host.check_output("dpkg-query -W -f='${db:Status-Abbrev} ${Package}\\n'")
    return {line.split()[1] for line in listing.splitlines() if line[:2] in ("ii", "hi")}


def test_the_package_set_is_the_one_from_before_but_what_gpu_report_needs(host):
    before = set(host.file("/var/tmp/packages-before-driver.txt").content_string.split())
    now = installed(host)
    # gpu_report needs python3-pynvml (added by the driver role's installation), and
    # python3-pynvml needs an NVML library: libnvidia-ml1 of the driver packages.
    assert now - before == {"python3-pynvml", "libnvidia-ml1"}
    assert before - now == set()


def test_no_hold_is_left(host):
    assert "nvidia" not in host.check_output("apt-mark showhold")


def test_records(host):
    assert not host.file("/var/lib/gpuops/packages/driver.json").exists
    report = json.loads(host.file("/var/lib/gpuops/packages/gpu_report.json").content_string)
    # what stayed for gpu_report is gpu_report's now: its own removal takes it back
    assert report["requires"] == ["python3-pynvml"] and report["added"] == ["libnvidia-ml1", "python3-pynvml"]


def test_role_files_removed(host):
    for path in ("/etc/apt/preferences.d/gpuops-nvidia-driver.pref",
                 "/etc/apt/sources.list.d/gpuops-nvidia-cuda.sources",
                 "/etc/apt/keyrings/gpuops-nvidia-cuda.asc",
                 "/etc/modprobe.d/blacklist-nouveau-gpuops.conf",
                 "/etc/modprobe.d/nvidia-gpuops.conf",
                 "/var/lib/gpuops/driver-state.json"):
        assert not host.file(path).exists, path


def test_other_files_kept(host):
    own = host.file("/etc/modprobe.d/operator-own.conf")
    assert own.exists and own.content_string == "options snd_hda_intel power_save=0\n"
