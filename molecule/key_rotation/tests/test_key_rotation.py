"""After both repositories were signed with new keys and each stage ran again with its new key."""
import json
import os


def test_a_stale_key_names_the_source_apts_reason_and_the_fix(host):
    stale = json.loads(host.file("/var/tmp/gpuops-stale-key.json").content_string)
    # the refresh failed (the scenario records its result instead of stopping)
    assert stale.get("refreshed") is not True and stale["problems"]
    assert stale["msg"].startswith("apt could not refresh /etc/apt/sources.list.d/gpuops-nvidia-container-toolkit"
                                   ".sources (http://127.0.0.1:8765/toolkit/stable/deb/amd64): its Release file is "
                                   "signed with key ")
    assert "which the source's keyring does not hold" in stale["msg"]
    assert stale["msg"].endswith("set container_toolkit_repo_key (the key's content) or "
                                 "container_toolkit_repo_key_url to the repository's current key")
    assert [p["kind"] for p in stale["problems"]] == ["key"]


def test_the_driver_stage_ran_through_while_the_toolkit_key_was_stale(host):
    driver = json.loads(host.file("/var/tmp/gpuops-driver-after-rotation.json").content_string)
    assert driver["installed_version"] == "580.95.05"


def test_the_new_keys_are_installed(host):
    with open(os.path.join(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"], "rotated-apt-repo", "keys", "good.asc")) as handle:
        new = handle.read()
    with open(os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], ".build", "apt-repo", "keys", "good.asc")) as handle:
        old = handle.read()
    assert new != old
    for name in ("gpuops-nvidia-cuda", "gpuops-nvidia-container-toolkit"):
        assert host.file("/etc/apt/keyrings/%s.asc" % name).content_string.strip() == new.strip(), name
    # both sources verify with their keys now: a full refresh succeeds
    assert host.run("apt-get update -q").rc == 0
    assert "NO_PUBKEY" not in host.run("apt-get update -q").stdout


def test_packages_still_installed_and_held(host):
    held = host.check_output("apt-mark showhold").split()
    for package in ("nvidia-open", "nvidia-container-toolkit"):
        assert host.package(package).is_installed, package
        assert package in held, package
