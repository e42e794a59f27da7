"""A Debian 12 node after the driver role from the signed NVIDIA-style repository, pinned to
580.65.06 while the repository's newest is 580.95.05."""
import json

PINNED = "580.65.06-1"
SET = ("nvidia-open", "cuda-drivers", "nvidia-driver", "nvidia-driver-cuda", "nvidia-kernel-open-dkms",
       "libnvidia-ml1", "libcuda1", "nvidia-smi", "nvidia-persistenced", "nvidia-kernel-support",
       "firmware-nvidia-gsp")


def test_whole_set_at_the_pinned_version(host):
    for name in SET:
        package = host.package(name)
        assert package.is_installed, name
        assert package.version == PINNED, (name, package.version)
    assert not host.package("nvidia-kernel-dkms").is_installed  # open modules were chosen


def test_pin_makes_the_older_release_the_candidate(host):
    pref = host.file("/etc/apt/preferences.d/gpuops-nvidia-driver.pref")
    assert "Pin: version 580.65.06-*" in pref.content_string
    policy = host.check_output("apt-cache policy cuda-drivers")
    assert "Candidate: %s" % PINNED in policy
    assert "580.95.05-1" in policy  # the newer release is there, and not chosen


def test_held(host):
    held = set(host.check_output("apt-mark showhold").split())
    assert {"nvidia-open", "nvidia-persistenced"} <= held
    upgrade = host.run("apt-get -s -o Dir::Etc::preferencesparts=/nonexistent upgrade")
    assert "Inst nvidia-open" not in upgrade.stdout and "Inst cuda-drivers" not in upgrade.stdout


def test_repository_trusted_only_with_its_key(host):
    sources = host.file("/etc/apt/sources.list.d/gpuops-nvidia-cuda.sources").content_string
    assert "URIs: http://127.0.0.1:8765/cuda/" in sources
    assert "Signed-By: /etc/apt/keyrings/gpuops-nvidia-cuda.asc" in sources
    assert host.file("/etc/apt/keyrings/gpuops-nvidia-cuda.asc").content_string.startswith(
        "-----BEGIN PGP PUBLIC KEY BLOCK-----")


def test_repository_signed_with_another_key_is_refused(host):
    rogue = "/etc/apt/sources.list.d/zz-rogue-test.sources"
    host.run("printf '%%s\\n' 'Types: deb' 'URIs: http://127.0.0.1:8765/cuda-rogue/' 'Suites: /' "
             "'Signed-By: /etc/apt/keyrings/gpuops-nvidia-cuda.asc' > %s" % rogue)
    try:
        result = host.run("apt-get update")
        assert result.rc != 0
        assert "NO_PUBKEY" in result.stdout + result.stderr
        assert "is not signed" in result.stdout + result.stderr
    finally:
        host.run("rm -f %s" % rogue)


def test_persistenced_enabled(host):
    assert host.service("nvidia-persistenced").is_enabled


def test_role_reported_the_state(host):
    record = json.loads(host.file("/var/lib/gpuops/driver-state.json").content_string)
    assert record["installed_version"] == "580.65.06"
    assert record["installed_from"] == "nvidia-driver"
    assert record["state"] == "installed_not_loaded"
