# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""containerd editor over realistic configurations: everything the user had survives, the
NVIDIA settings are right, a second run changes nothing, absent restores the meaning."""
from __future__ import annotations

import os

import pytest
import tomlkit

from ansible_collections.gpuops.nvidia.plugins.module_utils.runtime import containerd
from ansible_collections.gpuops.nvidia.plugins.module_utils.runtime.common import ConfigError

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
DROP_IN = "/etc/containerd/conf.d/99-nvidia.toml"
RUNTIME = "/usr/bin/nvidia-container-runtime"


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def data(text):
    return tomlkit.parse(text).unwrap() if text else {}


def flatten(tree, prefix=()):
    if isinstance(tree, dict):
        out = {}
        for key, value in tree.items():
            out.update(flatten(value, prefix + (key,)))
        return out or {prefix: {}}
    return {prefix: tree}


def get(tree, path):
    for key in path:
        tree = tree[key]
    return tree


CDI_KEYS = ("enable_cdi", "cdi_spec_dirs")
# The CRI plugin's table per config version, from containerd's documentation
# (docs/man/containerd-config.toml.5.md, docs/cri/config.md), written out here rather than taken
# from the editor under test.
CRI_V1 = ("plugins", "cri")
CRI_V2 = ("plugins", "io.containerd.grpc.v1.cri")
CRI_V3 = ("plugins", "io.containerd.cri.v1.runtime")

CASES = [
    # fixture, containerd version, config version, CRI table, imports merge (containerd >= 2.1)
    ("containerd-1.6-default.toml", "1.6.20", 2, CRI_V2, False),
    ("debian12-packaged.toml", "1.6.20", 2, CRI_V2, False),
    ("kubeadm-v2.toml", "1.7.24", 2, CRI_V2, False),
    ("k3s-v2.toml", "1.7.24", 2, CRI_V2, False),
    ("eks-mirrors-auth-v2.toml", "1.7.24", 2, CRI_V2, False),
    ("existing-nvidia-v2.toml", "1.7.24", 2, CRI_V2, False),
    ("v1-legacy.toml", "1.6.20", 1, CRI_V1, False),
    ("containerd-2.0-v3.toml", "2.0.5", 3, CRI_V3, False),
    ("containerd-2.0-v3.toml", "2.2.0", 3, CRI_V3, True),
    ("containerd-1.7-default.toml", "1.7.24", 2, CRI_V2, False),
    ("containerd-2.1-default.toml", "2.1.9", 3, CRI_V3, True),
    ("rke2-v3.toml", "2.0.5", 3, CRI_V3, False),
    ("rke2-v3.toml", "2.1.4", 3, CRI_V3, True),
]


def run(text, version, **kwargs):
    kwargs.setdefault("enable_cdi", "auto")
    return containerd.configure(text, containerd_version=version, **kwargs)


@pytest.mark.parametrize("name, version, config_version, cri, merges", CASES)
def test_in_place(name, version, config_version, cri, merges):
    original = fixture(name)
    plan = run(original, version, drop_in_path=None, set_as_default=True)
    assert plan["drop_in"] is None and plan["config_version"] == config_version
    before, after = flatten(data(original)), flatten(data(plan["main"]))
    nvidia = get(data(plan["main"]), cri + ("containerd", "runtimes", "nvidia"))
    assert nvidia["options"]["BinaryName"] == RUNTIME
    assert nvidia["runtime_type"] == "io.containerd.runc.v2"
    runc_options = (get(data(original), cri + ("containerd", "runtimes")).get("runc", {}) if
                    data(original).get("plugins") and "runtimes" in str(original) else {}).get("options", {})
    for key, value in runc_options.items():  # runc's options are copied (SystemdCgroup ...)
        assert nvidia["options"].get(key) == value or key == "BinaryName"
    assert get(data(plan["main"]), cri + ("containerd", "default_runtime_name")) == "nvidia"
    for path, value in before.items():  # every original key and value survives
        if path[-1] == "default_runtime_name" or (len(path) > 5 and path[4] == "nvidia"):
            continue
        if plan["cdi"] and path[-1] in CDI_KEYS:  # what CDI needs (1.7's default has enable_cdi = false)
            continue
        assert after.get(path) == value, path
    if plan["cdi"]:
        assert get(data(plan["main"]), cri)["enable_cdi"] is True
    # comments of the user's file survive
    for line in original.splitlines():
        if line.strip().startswith("#"):
            assert line.strip() in plan["main"]
    again = run(plan["main"], version, drop_in_path=None, set_as_default=True)
    assert again["main"] == plan["main"]
    restored = run(plan["main"], version, drop_in_path=None, state="absent")
    if name == "existing-nvidia-v2.toml":  # the user's own nvidia runtime stays
        assert "nvidia" in get(data(restored["main"]), cri + ("containerd", "runtimes"))
    else:
        assert data(restored["main"]) == data(original)


@pytest.mark.parametrize("name, version, config_version, cri, merges", [case for case in CASES if case[2] != 1])
def test_drop_in(name, version, config_version, cri, merges):
    original = fixture(name)
    plan = run(original, version, drop_in_path=DROP_IN)
    main, drop = data(plan["main"]), data(plan["drop_in"])
    assert "/etc/containerd/conf.d/*.toml" in main["imports"]
    assert {k: v for k, v in main.items() if k != "imports"} == {k: v for k, v in data(original).items() if k != "imports"}
    assert main["imports"][:-1] == data(original).get("imports", [])
    assert drop.get("version", 1) == data(original).get("version", 1)
    nvidia = get(drop, cri + ("containerd", "runtimes", "nvidia"))
    assert nvidia["options"]["BinaryName"] == RUNTIME
    original_cri = get(data(original), cri) if "plugins" in data(original) else {}
    if not merges:
        # before 2.1 the drop-in replaces the CRI section: it must carry all of it
        for path, value in flatten(original_cri).items():
            if (len(path) > 2 and path[2] == "nvidia") or (plan["cdi"] and path[-1] in CDI_KEYS):
                continue
            assert flatten(get(drop, cri)).get(path) == value, path
    else:
        assert set(get(drop, cri)) <= {"containerd", "enable_cdi", "cdi_spec_dirs"}
    if plan["cdi"]:
        assert get(drop, cri)["enable_cdi"] is True
    again = run(plan["main"], version, drop_in_path=DROP_IN)
    assert again["main"] == plan["main"] and again["drop_in"] == plan["drop_in"]
    restored = run(plan["main"], version, drop_in_path=DROP_IN, state="absent")
    assert restored["drop_in"] is None
    assert data(restored["main"]) == data(original)
    assert [line for line in restored["main"].splitlines() if line.strip()] == [
        line for line in original.splitlines() if line.strip()]  # only blank lines may move


def test_cdi_keys_on_17_and_refused_on_16():
    plan = containerd.configure(fixture("kubeadm-v2.toml"), containerd_version="1.7.24", enable_cdi="true",
                                drop_in_path=None)
    cri = data(plan["main"])["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["enable_cdi"] is True and cri["cdi_spec_dirs"] == ["/etc/cdi", "/var/run/cdi"]
    with pytest.raises(ConfigError, match=r"^enable_cdi: containerd 1\.6\.20 does not support CDI .* set enable_cdi to "
                                          r"auto \(skip CDI with a warning\) or false$"):
        containerd.configure(fixture("kubeadm-v2.toml"), containerd_version="1.6.20", enable_cdi="true")
    auto = containerd.configure(fixture("kubeadm-v2.toml"), containerd_version="1.6.20", enable_cdi="auto")
    assert auto["cdi"] is False and "CDI was skipped" in auto["warnings"][0]


def test_no_config_file_uses_the_version_containerd_writes():
    assert data(containerd.configure(None, containerd_version="1.7.24")["main"])["version"] == 2
    assert data(containerd.configure("", containerd_version="2.1.4")["main"])["version"] == 3
    assert data(containerd.configure(None, containerd_version="2.3.0")["main"])["version"] == 4
    plan = containerd.configure(None, containerd_version="2.1.4")
    assert set(data(plan["drop_in"])["plugins"]["io.containerd.cri.v1.runtime"]) == {"containerd", "enable_cdi", "cdi_spec_dirs"}
    assert containerd.configure(plan["main"], containerd_version="2.1.4", state="absent")["drop_in"] is None


@pytest.mark.parametrize("text, version, message", [
    (fixture("malformed.toml"), "1.7.24", r"/etc/containerd/config.toml: line \d+, column \d+: .*left unchanged"),
    (fixture("cri-disabled-v2.toml"), "1.7.24", "disables the CRI plugin"),
    (fixture("containerd-2.0-v3.toml"), "1.7.24", "config version 3, which containerd 1.7.24 does not read"),
    ("version = 2", "not-a-version", "^containerd_version: cannot read a containerd version .* set containerd_version"),
    (fixture("v1-legacy.toml"), "1.7.24", "version 1 configuration, whose imports containerd does not merge"),
])
def test_bad_input(text, version, message):
    with pytest.raises(ConfigError, match=message):
        containerd.configure(text, containerd_version=version)


def test_default_runtime_restored_to_what_it_was():
    original = fixture("eks-mirrors-auth-v2.toml")
    plan = containerd.configure(original, containerd_version="1.7.24", drop_in_path=None, set_as_default=True)
    assert 'default_runtime_name = "nvidia" # gpuops.nvidia (was: "runc")' in plan["main"]
    restored = containerd.configure(plan["main"], containerd_version="1.7.24", drop_in_path=None, state="absent")
    assert 'default_runtime_name = "runc"\n' in restored["main"]


@pytest.mark.parametrize("mode", [DROP_IN, None])
def test_runc_written_out_when_the_file_has_no_runtimes(mode):
    """Debian's packaged config.toml has a CRI section without runtimes: the runtimes table we
    add replaces containerd's built-in one, so runc must be there too."""
    plan = containerd.configure(fixture("debian12-packaged.toml"), containerd_version="1.6.20", drop_in_path=mode,
                                enable_cdi="false")
    target = data(plan["drop_in"] if mode else plan["main"])
    runtimes = target["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]
    assert runtimes["runc"] == {"runtime_type": "io.containerd.runc.v2"}
    assert set(runtimes) == {"runc", "nvidia"}


@pytest.mark.parametrize("kwargs, mode, message", [
    # an empty name, runc's own name, names that are no RuntimeClass handler
    ({"runtime_name": ""}, None, r"^runtime_name: '' is not a valid runtime handler name"),
    ({"runtime_name": "runc"}, None, r"^runtime_name: 'runc' is containerd's own runtime"),
    ({"runtime_name": "runc"}, DROP_IN, r"^runtime_name: 'runc' is containerd's own runtime"),
    ({"runtime_name": "nvidia gpu"}, DROP_IN, r"^runtime_name: 'nvidia gpu' is not a valid runtime handler name"),
    ({"runtime_name": 'nv"idia'}, None, r"is not a valid runtime handler name: Kubernetes' RuntimeClass"),
    ({"runtime_name": "NVIDIA"}, None, r"is not a valid runtime handler name"),
    ({"runtime_name": "n" * 64}, None, r"is not a valid runtime handler name"),
    ({"runtime_path": ""}, None, r"^runtime_path: must be the path of the NVIDIA container runtime"),
    ({"state": "latest"}, None, r"^state: must be present or absent"),
])
def test_names_that_would_hijack_or_break_a_runtime_are_refused(kwargs, mode, message):
    with pytest.raises(ConfigError, match=message) as err:
        containerd.configure(fixture("kubeadm-v2.toml"), containerd_version="1.7.24", drop_in_path=mode, **kwargs)
    assert err.value.option == next(iter(kwargs))


def test_another_runtime_of_that_name_is_not_replaced():
    text = ('version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.kata]\n'
            'runtime_type = "io.containerd.kata.v2"\n'
            '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.gvisor]\nruntime_type = "io.containerd.runsc.v1"\n'
            '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.gvisor.options]\nBinaryName = "/usr/bin/runsc"\n')
    for name, binary in (("kata", "runc"), ("gvisor", "/usr/bin/runsc")):
        with pytest.raises(ConfigError, match=r"^runtime_name: the containerd configuration already defines a "
                                              r"runtime '%s' \(%s\) that is not NVIDIA's" % (name, binary)):
            containerd.configure(text, containerd_version="1.7.24", runtime_name=name, drop_in_path=None)
    # NVIDIA's own entry (nvidia-ctk's, or the GPU Operator's toolkit path) is updated, not refused
    existing = fixture("existing-nvidia-v2.toml")
    plan = containerd.configure(existing, containerd_version="1.7.24", drop_in_path=None)
    assert get(data(plan["main"]), CRI_V2 + ("containerd", "runtimes", "nvidia", "options", "BinaryName")) == RUNTIME


@pytest.mark.parametrize("version", ["2.1.4", "2.2.0"])
def test_a_merged_drop_in_still_copies_runcs_options(version):
    """containerd 2.1 merges the drop-in into the main file's CRI section: the NVIDIA runtime in
    the drop-in must carry runc's options itself (rke2's runc has SystemdCgroup = true)."""
    plan = containerd.configure(fixture("rke2-v3.toml"), containerd_version=version, drop_in_path=DROP_IN)
    nvidia = data(plan["drop_in"])["plugins"]["io.containerd.cri.v1.runtime"]["containerd"]["runtimes"]["nvidia"]
    assert nvidia == {"runtime_type": "io.containerd.runc.v2",
                      "options": {"SystemdCgroup": True, "BinaryName": RUNTIME}}
    # containerd's own runc stays where it is: nothing of it is written into the drop-in
    assert set(data(plan["drop_in"])["plugins"]["io.containerd.cri.v1.runtime"]["containerd"]["runtimes"]) == {"nvidia"}


def test_a_runtime_of_another_drop_in_is_not_replaced():
    kata = ('version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.kata]\n'
            'runtime_type = "io.containerd.kata.v2"\n')
    others = containerd.drop_in_runtimes({"/etc/containerd/conf.d/50-kata.toml": kata,
                                          "/etc/containerd/conf.d/broken.toml": "x = ["})
    assert others == {"kata": None}
    with pytest.raises(ConfigError, match=r"^runtime_name: the containerd configuration already defines a runtime 'kata'"):
        containerd.configure(fixture("containerd-2.1-default.toml"), containerd_version="2.1.9", runtime_name="kata",
                             other_runtimes=others)


@pytest.mark.parametrize("imports, redirected", [
    (["/etc/containerd/conf.d/*.toml"], ["/s/conf.d/*.toml"]),
    (["/etc/containerd/conf.d/*"], ["/s/conf.d/*"]),                      # the operator's own pattern
    (["/etc/containerd/conf.d/99-nvidia.toml"], ["/s/conf.d/99-nvidia.toml"]),
    (["/etc/containerd/other/*.toml", "/etc/containerd/conf.d/*"], ["/etc/containerd/other/*.toml", "/s/conf.d/*"]),
])
def test_validation_reads_the_planned_drop_in_through_every_import_that_reaches_it(imports, redirected):
    main = "version = 2\nimports = %s\n" % tomlkit.item(imports).as_string()
    plan = containerd.configure(main, containerd_version="1.7.24", drop_in_path=DROP_IN)
    laid, config = containerd.validation_files(plan, DROP_IN, {}, "/s")
    assert data(laid[config])["imports"] == redirected
    assert "/s/conf.d/99-nvidia.toml" in laid
