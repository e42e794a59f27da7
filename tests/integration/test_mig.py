# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpuops.nvidia.mig through `ansible` on simulated nodes (the fake NVML): check mode prints the
plan and changes nothing, apply / idempotence / switching / disabling on A100, H100 and H200,
invalid configs named and refused before anything changes, a mode change that waits for a reset,
GPUs held by processes, a fault injected midway and the run after it converging, and the same
layouts as NVIDIA's nvidia-mig-parted with no more NVML mutations."""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from conftest import BIN, _env, go_binaries

MODELS = {  # profile: its usual layouts (profile names as the GPU reports them)
    "dgx-a100": {"all-1g": {"1g.5gb": 7}, "all-3g": {"3g.20gb": 2},
                 "all-balanced": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}, "four-three": {"4g.20gb": 1, "3g.20gb": 1}},
    "hgx-h100": {"all-1g": {"1g.10gb": 7}, "all-3g": {"3g.40gb": 2},
                 "all-balanced": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}, "four-three": {"4g.40gb": 1, "3g.40gb": 1}},
    "hgx-h200": {"all-1g": {"1g.18gb": 7}, "all-3g": {"3g.71gb": 2},
                 "all-balanced": {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1}, "four-three": {"4g.71gb": 1, "3g.71gb": 1}},
}


def config(layouts, extra=None):
    configs = {"all-disabled": [{"devices": "all", "mig-enabled": False}],
               "all-enabled": [{"devices": "all", "mig-enabled": True, "mig-devices": {}}]}
    for name, devices in layouts.items():
        configs[name] = [{"devices": "all", "mig-enabled": True, "mig-devices": devices}]
    configs.update(extra or {})
    return {"version": "v1", "mig-configs": configs}


@pytest.fixture
def mig(lab, tmp_path):
    def run(profile, name, document, check_mode=False, expect_failure=False, env=None, **args):
        path = tmp_path / "mig-config.yaml"
        path.write_text(json.dumps(document))
        params = {"config_file": str(path), "config_name": name, "profile_record": str(tmp_path / "record.json")}
        params.update(args)
        return lab.module(profile, "gpuops.nvidia.mig", json.dumps(params), check_mode=check_mode,
                          expect_failure=expect_failure, env=env)
    return run


def layout(result):
    """{gpu: sorted profile names} from a result's mig_devices"""
    out = {}
    for d in result["mig_devices"]:
        out.setdefault(d["gpu"], []).append(d["profile"])
    return {g: sorted(p) for g, p in out.items()}


def state_bytes(tmp_path, profile):
    path = tmp_path / ("%s.state" % profile)
    return path.read_bytes() if path.exists() else None


def test_check_mode_prints_the_plan_and_changes_nothing(lab, mig, tmp_path):
    doc = config(MODELS["hgx-h100"])
    lab.module("hgx-h100")  # the node as it boots
    before = state_bytes(tmp_path, "hgx-h100")
    proc = lab.run("hgx-h100", [os.path.join(os.path.dirname(os.sys.executable), "ansible"), "localhost", "-m",
                                "gpuops.nvidia.mig", "-a", json.dumps({"config": doc, "config_name": "all-balanced",
                                                                       "profile_record": ""}),
                                "--check", "--diff"], env={"ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.default"})
    assert "+GPU 7: MIG on: 2 x 1g.10gb, 1 x 2g.20gb, 1 x 3g.40gb" in proc.stdout, proc.stdout[-3000:]
    assert state_bytes(tmp_path, "hgx-h100") == before
    result = mig("hgx-h100", "all-balanced", doc, check_mode=True)
    assert result["changed"] is True and result["matches"] is False
    assert [s["action"] for s in result["plan"]["steps"] if s["gpu"] == 0][:1] == ["set_mig_mode"]
    assert state_bytes(tmp_path, "hgx-h100") == before


@pytest.mark.parametrize("profile", sorted(MODELS))
def test_apply_idempotence_switching_and_disabling(mig, tmp_path, profile):
    layouts = MODELS[profile]
    doc = config(layouts)
    first = mig(profile, "all-balanced", doc)
    assert first["changed"] is True and first["converged"] is True, first.get("msg")
    assert layout(first) == {g: sorted(p for p, c in layouts["all-balanced"].items() for _unused in range(c))
                             for g in range(8)}
    assert len({d["uuid"] for d in first["mig_devices"]}) == 32
    # every placement the module created is where the plan said, read back from NVML
    planned = {(s["gpu"], tuple(s["placement"])) for s in first["done"] if s["action"] == "create_gpu_instance"}
    assert planned == {(d["gpu"], tuple(d["placement"])) for d in first["mig_devices"]}
    second = mig(profile, "all-balanced", doc)
    assert second["changed"] is False and second["matches"] is True and second["done"] == []
    # now that the profiles are known, check mode checks the whole layout (no unvalidated GPUs)
    ahead = mig(profile, "four-three", doc, check_mode=True)
    assert [p["validated"] for p in ahead["plan"]["gpus"]] == [True] * 8, ahead["plan"]["gpus"]
    # switching keeps the instances that still belong: the 1g instances of the balanced layout
    kept_before = {(d["gpu"], d["gpu_instance"]) for d in first["mig_devices"] if d["profile"].startswith("1g.")}
    switched = mig(profile, "all-1g", doc)
    assert switched["converged"] is True
    assert kept_before <= {(d["gpu"], d["gpu_instance"]) for d in switched["mig_devices"]}
    destroyed = [s for s in switched["done"] if s["action"] == "destroy_gpu_instance"]
    assert {s["profile"] for s in destroyed} == {p for p in layouts["all-balanced"] if not p.startswith("1g.")}
    assert mig(profile, "four-three", doc)["converged"] is True
    off = mig(profile, "all-disabled", doc)
    assert off["converged"] is True and off["mig_devices"] == []
    assert mig(profile, "all-disabled", doc)["changed"] is False


def test_invalid_configs_name_the_gpu_and_entry_and_change_nothing(lab, mig, tmp_path):
    lab.module("hgx-h100")
    doc = config(MODELS["hgx-h100"], extra={
        "two-4g": [{"devices": [0], "mig-enabled": True, "mig-devices": {"4g.40gb": 2}}],
        "unknown": [{"devices": [1, 2], "mig-enabled": True, "mig-devices": {"1g.5gb": 1}}],
        "no-gpu-9": [{"devices": [9], "mig-enabled": False}]})
    first = mig("hgx-h100", "all-3g", doc)  # the profiles are known from here on
    before = state_bytes(tmp_path, "hgx-h100")
    cases = {
        "two-4g": "mig-configs.two-4g[0]: GPU 0 (NVIDIA H100 80GB HBM3): at most 1 x 4g.40gb fit on this GPU, not 2",
        "unknown": "mig-configs.unknown[0]: GPU 1 (NVIDIA H100 80GB HBM3): GPU 1 has no MIG profile 1g.5gb",
        "no-gpu-9": "mig-configs.no-gpu-9[0]: the node has no GPU 9 (it has 0, 1, 2, 3, 4, 5, 6, 7)",
        "missing": "no MIG config named 'missing'",
    }
    for name, message in cases.items():
        result = mig("hgx-h100", name, doc, expect_failure=True)
        assert result["failed"] and message in result["msg"], result["msg"]
        assert result.get("changed") is False
        assert state_bytes(tmp_path, "hgx-h100") == before, name
    broken = {"version": "v1",
              "mig-configs": {"x": [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": "two"}}]}}
    result = mig("hgx-h100", "x", broken, expect_failure=True)
    assert "mig-configs.x[0]: the count of 3g.40gb must be a whole number >= 0" in result["msg"]
    assert state_bytes(tmp_path, "hgx-h100") == before
    assert first["converged"] is True


def test_a_layout_unknown_before_the_mode_change_is_checked_after_it_and_undone(mig, tmp_path):
    """No record and MIG off everywhere: the profiles are read once MIG is on; a layout that does
    not fit then fails and MIG goes back off."""
    doc = config({}, extra={"two-4g": [{"devices": "all", "mig-enabled": True, "mig-devices": {"4g.40gb": 2}}]})
    result = mig("hgx-h100", "two-4g", doc, expect_failure=True, profile_record="")
    assert "at most 1 x 4g.40gb fit on this GPU, not 2" in result["msg"]
    assert "MIG mode was turned back off on GPU(s) 0, 1, 2, 3, 4, 5, 6, 7" in result["msg"]
    check = mig("hgx-h100", "all-disabled", doc, profile_record="")
    assert check["changed"] is False  # everything was left as it was


def test_a_mode_change_that_needs_a_reset(lab, mig, tmp_path):
    doc = config(MODELS["dgx-a100"])
    result = mig("dgx-a100-mig-pending", "all-3g", doc)
    assert result["converged"] is False and result["changed"] is True
    assert [(r["gpu"], r["activation"]) for r in result["reset_required"]] == [(i, "RESET_REQUIRED") for i in range(8)]
    # the mode change waits; the instances are not created on a GPU whose MIG is not on yet
    assert {s["action"] for s in result["not_done"]} == {"set_mig_mode", "create_gpu_instance", "create_compute_instance"}
    # allowed, the module resets the idle GPUs (nvidia-smi -r) and goes on
    smi = {"PATH": str(tmp_path / "dgx-a100-mig-pending.driver-root" / "usr" / "bin") + os.pathsep + os.environ["PATH"]}
    done = mig("dgx-a100-mig-pending", "all-3g", doc, allow_gpu_reset=True, env=smi)
    assert done["converged"] is True and done["reset_required"] == []
    assert sum(1 for s in done["done"] if s["action"] == "reset_gpu" and s["ok"]) == 8
    assert layout(done) == {g: ["3g.20gb", "3g.20gb"] for g in range(8)}


def test_a_gpu_in_use_is_reported_with_its_processes(lab, mig, tmp_path):
    busy = os.path.join(os.path.dirname(__file__), "..", "lab", "fake-nvml", "fake-nvml-busy")
    lab.run("dgx-a100", [busy, "--gpu", "1", "--pid", "4242", "--name", "train.py", "--used-mib", "2048"])
    doc = config(MODELS["dgx-a100"])
    smi = {"PATH": str(tmp_path / "dgx-a100.driver-root" / "usr" / "bin") + os.pathsep + os.environ["PATH"]}
    result = mig("dgx-a100", "all-balanced", doc, allow_gpu_reset=True, env=smi)
    assert [(r["gpu"], r["activation"]) for r in result["reset_required"]] == [(1, "IN_USE")]
    assert result["reset_required"][0]["processes"] == [
        {"pid": 4242, "name": "train.py", "kind": "compute", "gpu_instance": None, "compute_instance": None}]
    assert not [s for s in result["done"] if s["action"] == "reset_gpu"]  # never a GPU in use
    assert sorted(layout(result)) == [0, 2, 3, 4, 5, 6, 7]
    lab.run("dgx-a100", [busy, "--clear"])
    assert mig("dgx-a100", "all-balanced", doc, allow_gpu_reset=True, env=smi)["converged"] is True


def test_a_hopper_gpu_a_client_holds_refuses_the_mode_change_once_and_waits(lab, mig, tmp_path):
    """Hopper applies a mode change at once, or refuses it while the GPU is held (IN_USE, the mode
    unchanged): that GPU is reported as waiting, asked once only, the others are done; with its
    profiles unknown before the change (no record) the module goes through its early mode change."""
    busy = os.path.join(os.path.dirname(__file__), "..", "lab", "fake-nvml", "fake-nvml-busy")
    lab.run("hgx-h100", [busy, "--gpu", "0", "--pid", "4343", "--kind", "client"])
    doc = config(MODELS["hgx-h100"])
    result = mig("hgx-h100", "all-1g", doc, profile_record="")
    assert [(r["gpu"], r["activation"]) for r in result["reset_required"]] == [(0, "IN_USE")]
    modes = [(s["gpu"], s["activation"]) for s in result["done"] if s["action"] == "set_mig_mode"]
    assert modes == [(0, "IN_USE")] + [(g, "SUCCESS") for g in range(1, 8)]
    assert sorted(layout(result)) == list(range(1, 8)) and result["converged"] is False
    lab.run("hgx-h100", [busy, "--clear"])
    again = mig("hgx-h100", "all-1g", doc, profile_record="")
    assert again["converged"] is True and len(layout(again)[0]) == 7


def test_a_fault_midway_is_reported_and_the_next_run_converges(mig, tmp_path):
    doc = config(MODELS["hgx-h100"])
    assert mig("hgx-h100", "all-3g", doc)["converged"] is True
    fault = {"GPUOPS_FAKE_NVML_FAULTS": "nvmlDeviceCreateGpuInstanceWithPlacement:5=INSUFFICIENT_RESOURCES"}
    result = mig("hgx-h100", "all-balanced", doc, expect_failure=True, env=fault)
    assert "create gpu instance on GPU" in result["msg"] and "INSUFFICIENT_RESOURCES" in result["msg"]
    assert result["changed"] is True and result["done"] and result["not_done"]
    done_creates = [s for s in result["done"] if s["action"] == "create_gpu_instance"]
    assert len(done_creates) == 4
    assert result["not_done"][0]["action"] == "create_gpu_instance"
    again = mig("hgx-h100", "all-balanced", doc)
    assert again["converged"] is True
    # the rerun does only what was left: nothing that the first run created is made again
    assert len([s for s in again["done"] if s["action"] == "create_gpu_instance"]) == 8 * 3 - 4


def _mutations(log):
    return [line.split()[0] for line in log.read_text().splitlines() if "injected" not in line] if log.exists() else []


@pytest.mark.parametrize("profile", ["dgx-a100", "hgx-h100"])
def test_same_layouts_as_mig_parted_and_no_more_mutations(lab, mig, tmp_path, profile):
    if os.geteuid() != 0:
        pytest.fail("with-gpus --node (for nvidia-mig-parted) needs root", pytrace=False)
    parted = os.path.join(go_binaries("mig-parted"), "nvidia-mig-parted")
    doc = config(MODELS[profile])
    cfg = tmp_path / "parted.yaml"
    cfg.write_text(json.dumps(doc))
    sequence = ["all-balanced", "all-1g", "four-three", "all-balanced", "all-disabled"]
    ours_log, theirs_log = tmp_path / "ours.log", tmp_path / "theirs.log"
    theirs_state = tmp_path / "parted.state"
    for name in sequence:
        before_ours, before_theirs = len(_mutations(ours_log)), len(_mutations(theirs_log))
        ours = mig(profile, name, doc, env={"GPUOPS_FAKE_NVML_CALL_LOG": str(ours_log)})
        proc = lab.run(profile, [parted, "apply", "-f", str(cfg), "-c", name], node=True,
                       env={"GPUOPS_FAKE_NVML_STATE": str(theirs_state), "GPUOPS_FAKE_NVML_CALL_LOG": str(theirs_log)})
        assert proc.returncode == 0
        read = lab.module(profile, env={"GPUOPS_FAKE_NVML_STATE": str(theirs_state)})
        theirs = {g["index"]: sorted(gi["profile"] for gi in g["mig"].get("gpu_instances", []))
                  for g in read["gpus"] if g["mig"].get("current")}
        assert layout(ours) == theirs, name
        n_ours = len(_mutations(ours_log)) - before_ours
        n_theirs = len(_mutations(theirs_log)) - before_theirs
        assert n_ours <= n_theirs, "%s: %d NVML mutations, mig-parted %d" % (name, n_ours, n_theirs)


def test_a_profile_record_release_0_1_0_wrote_is_carried_over_and_used(lab, mig, tmp_path):
    """Release 0.1.0 kept the MIG profile record at /var/lib/gpuops-nvidia/mig-profiles.json: the
    next run finds it there, moves it to /var/lib/gpuops/mig-profiles.json and checks a layout for
    GPUs whose MIG is off with it (without a record such GPUs are not validated)."""
    doc = config(MODELS["hgx-h100"])
    seed = tmp_path / "seed.json"  # a node of the same model that reported its profiles
    mig("hgx-h100", "all-balanced", doc, profile_record=str(seed),
        env={"GPUOPS_FAKE_NVML_STATE": str(tmp_path / "seed.state")})
    record = json.loads(seed.read_text())
    assert list(record) == ["0x233010DE"]
    root = tmp_path / "root"
    old = root / "var/lib/gpuops-nvidia/mig-profiles.json"
    old.parent.mkdir(parents=True)
    old.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")  # as 0.1.0 wrote it
    new = root / "var/lib/gpuops/mig-profiles.json"
    unrecorded = mig("hgx-h100", "all-balanced", doc, check_mode=True, profile_record="", host_root=str(root))
    assert not any(p["validated"] for p in unrecorded["plan"]["gpus"])
    defaults = {"profile_record": "/var/lib/gpuops/mig-profiles.json", "host_root": str(root)}
    # check mode reads it where it is and moves nothing
    checked = mig("hgx-h100", "all-balanced", doc, check_mode=True, **defaults)
    assert all(p["validated"] for p in checked["plan"]["gpus"])
    assert old.exists() and not new.exists()
    # a run moves it to the one records root
    off = mig("hgx-h100", "all-disabled", doc, **defaults)
    assert off["changed"] is False
    assert not old.exists() and json.loads(new.read_text()) == record
    again = mig("hgx-h100", "all-balanced", doc, check_mode=True, **defaults)
    assert all(p["validated"] for p in again["plan"]["gpus"]) and again["matches"] is False


def test_the_boot_time_applier_runs_from_the_files_the_role_copies(lab, tmp_path):
    """gpuops-mig-apply as the mig role installs it (roles/mig/tasks/boot.yml's copy list, flat,
    beside the applier), run without Ansible: every import resolves among the copies."""
    import yaml  # pylint: disable=import-outside-toplevel
    repo = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    with open(os.path.join(repo, "roles/mig/tasks/boot.yml"), encoding="utf-8") as handle:
        tasks = yaml.safe_load(handle)
    copies = next(t["loop"] for t in tasks if t["name"] == "Install the collection's MIG code")
    lib = tmp_path / "lib"
    (lib / "mig").mkdir(parents=True)
    for item in copies:
        with open(os.path.join(repo, "plugins/module_utils", item["src"]), encoding="utf-8") as src:
            (lib / "mig" / item["dest"]).write_text(src.read())
    with open(os.path.join(repo, "roles/mig/files/gpuops-mig-apply"), encoding="utf-8") as src:
        (lib / "gpuops-mig-apply").write_text(src.read())
    cfg = tmp_path / "mig-config.yaml"
    cfg.write_text(json.dumps(config(MODELS["hgx-h100"])))
    applier = [os.sys.executable, str(lib / "gpuops-mig-apply"), str(cfg), "all-3g"]
    proc = lab.run("hgx-h100", applier, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert result["converged"] is True and layout(result) == {g: ["3g.40gb", "3g.40gb"] for g in range(8)}
    again = lab.run("hgx-h100", applier)
    assert json.loads(again.stdout)["changed"] is False


def test_a_profile_name_the_gpu_does_not_have_is_refused_before_mig_mode_is_touched(mig, tmp_path):
    """No record and MIG off: a name an H100 does not have (an A100-40GB's 1g.5gb) was found only
    after MIG mode went on, and then it went off again - on every GPU, at every retry. The fake
    NVML's call log (what the library was asked, not what the module says) shows no mutation."""
    doc = config({}, extra={"typo": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 7}}]})
    log = tmp_path / "calls.log"
    for _attempt in range(2):
        result = mig("hgx-h100", "typo", doc, expect_failure=True, profile_record="",
                     env={"GPUOPS_FAKE_NVML_CALL_LOG": str(log)})
        assert "has no MIG profile 1g.5gb (its profiles: 1g.10gb, 1g.10gb+me" in result["msg"], result["msg"]
        assert "MIG mode was not touched" in result["msg"] and result["changed"] is False
    assert _mutations(log) == []


@pytest.mark.parametrize("variables, ok", [
    ({}, True),
    ({"mig_config_file": "/etc/x.yaml\nExecStartPre=/bin/sh -c id"}, False),
    ({"mig_config_name": "all-1g\n"}, False),
    ({"mig_lib_dir": "/opt/gpu lib"}, False),
])
def test_what_goes_on_the_boot_units_command_line_is_one_token(tmp_path, variables, ok):
    """The role's check refuses a config file, config name or library directory that would add a
    line (a directive of its own) or a word to the boot unit's ExecStart, before anything else."""
    play = tmp_path / "play.yml"
    play.write_text("- hosts: localhost\n  gather_facts: false\n  tasks:\n    - ansible.builtin.include_role:\n"
                    "        name: gpuops.nvidia.mig\n        tasks_from: preflight\n")
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", "localhost,", "-c", "local", str(play),
                           "-e", json.dumps(variables)], env=_env(ANSIBLE_STDOUT_CALLBACK="default"),
                          capture_output=True, text=True, timeout=300, check=False)
    assert (proc.returncode == 0) == ok, proc.stdout[-2000:]
    assert ok or "goes on the boot unit's command line" in proc.stdout
