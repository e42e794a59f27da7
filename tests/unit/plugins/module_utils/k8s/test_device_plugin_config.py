# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import copy

import pytest

from ansible_collections.gpuops.nvidia.plugins.module_utils.k8s import device_plugin_config

GPU = device_plugin_config.GPU_RESOURCE


def gpu(index, name="NVIDIA H100 80GB HBM3", mig=None, lost=False):
    entry = {"index": index, "uuid": "GPU-%08d-0000-0000-0000-000000000000" % index, "name": name, "lost": lost,
             "mig": {"capable": True, "current": False, "pending": False, "gpu_instances": [], "devices": []}}
    if mig is not None:
        entry["mig"].update({"current": True, "devices": mig})
    return entry


def mig_devices(gpu_index, profile, count):
    return [{"index": position, "uuid": "MIG-%d-%d" % (gpu_index, position), "profile": profile}
            for position in range(count)]


def lost_gpu(index):
    """A lost GPU as nvml.py reports it."""
    return {"index": index, "lost": True, "name": None, "uuid": None, "pci": {}, "xids": []}


def time_slicing(replicas, name=GPU, **options):
    return {"sharing": {"timeSlicing": dict(options, resources=[{"name": name, "replicas": replicas}])}}


def mps(replicas, **options):
    return {"sharing": {"mps": dict(options, resources=[{"name": GPU, "replicas": replicas}])}}


def one(config, name="c"):
    return {name: config}


# ---- errors(): refusals -------------------------------------------------------------------------

TS = {"resources": [{"name": GPU, "replicas": 4}]}

REFUSALS = [
    # (id, configs, default, cdi, key path the message starts with, a fragment of the message)
    ("unknown-top-key", one({"sharring": {}}), "c", False, "configs.c.sharring", "did you mean 'sharing'"),
    ("misplaced-renameByDefault", {"ts-4": {"sharing": {"timeSlicing": {"resources": [
        {"name": GPU, "replicas": 4, "renameByDefault": True}]}}}}, "ts-4", False,
     "configs.ts-4.sharing.timeSlicing.resources[0].renameByDefault",
     "move it up to configs.ts-4.sharing.timeSlicing.renameByDefault"),
    ("misplaced-renameByDefault-mps", one({"sharing": {"mps": {"resources": [
        {"name": GPU, "replicas": 4, "renameByDefault": True}]}}}), "c", False,
     "configs.c.sharing.mps.resources[0].renameByDefault", "issue #1433"),
    ("misplaced-failRequests", one({"sharing": {"timeSlicing": {"resources": [
        {"name": GPU, "replicas": 4, "failRequestsGreaterThanOne": True}]}}}), "c", False,
     "configs.c.sharing.timeSlicing.resources[0].failRequestsGreaterThanOne",
     "configs.c.sharing.timeSlicing.failRequestsGreaterThanOne"),
    ("misplaced-migStrategy", one({"migStrategy": "mixed"}), "c", False, "configs.c.migStrategy",
     "belongs at configs.c.flags.migStrategy"),
    ("misplaced-replicas", one({"sharing": {"timeSlicing": dict(TS, replicas=4)}}), "c", False,
     "configs.c.sharing.timeSlicing.replicas", "configs.c.sharing.timeSlicing.resources[i].replicas"),
    ("misplaced-renameByDefault-in-sharing", one({"sharing": {"renameByDefault": True, "timeSlicing": TS}}), "c",
     False, "configs.c.sharing.renameByDefault", "configs.c.sharing.timeSlicing.renameByDefault"),
    ("misplaced-deviceListStrategy", one({"flags": {"deviceListStrategy": "envvar"}}), "c", False,
     "configs.c.flags.deviceListStrategy", "configs.c.flags.plugin.deviceListStrategy"),
    ("wrong-case-flag", one({"flags": {"MigStrategy": "none"}}), "c", False, "configs.c.flags.MigStrategy",
     "did you mean 'migStrategy'"),
    ("typo-in-entry", one({"sharing": {"timeSlicing": {"resources": [{"name": GPU, "replica": 4}]}}}), "c", False,
     "configs.c.sharing.timeSlicing.resources[0].replica", "replicas"),
    ("unknown-gfd-key", one({"flags": {"gfd": {"oneShot": True}}}), "c", False, "configs.c.flags.gfd.oneShot",
     "did you mean 'oneshot'"),
    ("unknown-key-no-match", one({"flags": {"plugin": {"zzz": 1}}}), "c", False, "configs.c.flags.plugin.zzz",
     "valid keys here: passDeviceSpecs"),
    ("bool-as-string", one({"flags": {"failOnInitError": "yes"}}), "c", False, "configs.c.flags.failOnInitError",
     "true or false"),
    ("bool-as-int", one({"flags": {"plugin": {"passDeviceSpecs": 1}}}), "c", False,
     "configs.c.flags.plugin.passDeviceSpecs", "true or false"),
    ("string-as-bool", one({"flags": {"mpsRoot": True}}), "c", False, "configs.c.flags.mpsRoot", "a string"),
    ("flags-not-mapping", one({"flags": ["migStrategy"]}), "c", False, "configs.c.flags", "must be a mapping"),
    ("config-not-mapping", one(["sharing"]), "c", False, "configs.c", "must be a mapping"),
    ("timeSlicing-null", one({"sharing": {"timeSlicing": None}}), "c", False, "configs.c.sharing.timeSlicing",
     "must be a mapping"),
    ("replicas-string", one(time_slicing("4")), "c", False, "configs.c.sharing.timeSlicing.resources[0].replicas",
     "must be an integer"),
    ("replicas-bool", one(time_slicing(True)), "c", False, "configs.c.sharing.timeSlicing.resources[0].replicas",
     "must be an integer"),
    ("migStrategy-unknown", one({"flags": {"migStrategy": "both"}}), "c", False, "configs.c.flags.migStrategy",
     "use one of none, single, mixed"),
    ("deviceListStrategy-unknown", one({"flags": {"plugin": {"deviceListStrategy": "env"}}}), "c", False,
     "configs.c.flags.plugin.deviceListStrategy", "use one of envvar, volume-mounts, cdi-annotations, cdi-cri"),
    ("deviceListStrategy-list-item", one({"flags": {"plugin": {"deviceListStrategy": ["envvar", "mounts"]}}}), "c",
     False, "configs.c.flags.plugin.deviceListStrategy[1]", "'mounts' is not a device list strategy"),
    ("deviceListStrategy-empty", one({"flags": {"plugin": {"deviceListStrategy": []}}}), "c", False,
     "configs.c.flags.plugin.deviceListStrategy", "empty list"),
    ("deviceListStrategy-type", one({"flags": {"plugin": {"deviceListStrategy": 1}}}), "c", False,
     "configs.c.flags.plugin.deviceListStrategy", "a string or a list of strings"),
    ("deviceIDStrategy", one({"flags": {"plugin": {"deviceIDStrategy": "serial"}}}), "c", False,
     "configs.c.flags.plugin.deviceIDStrategy", "use one of uuid, index"),
    ("deviceDiscoveryStrategy", one({"flags": {"deviceDiscoveryStrategy": "cuda"}}), "c", False,
     "configs.c.flags.deviceDiscoveryStrategy", "use one of auto, nvml, tegra"),
    ("allocation-policy", one({"flags": {"plugin": {"sharedDevicesAllocationPolicy": "spread"}}}), "c", False,
     "configs.c.flags.plugin.sharedDevicesAllocationPolicy", "distributed, packed"),
    ("sleepInterval", one({"flags": {"gfd": {"sleepInterval": "soon"}}}), "c", False,
     "configs.c.flags.gfd.sleepInterval", "not a Go duration"),
    ("timeSlicing-and-mps", one({"sharing": {"timeSlicing": TS, "mps": TS}}), "c", False, "configs.c.sharing",
     "timeSlicing and mps cannot both be set"),
    ("mps-single", one(dict(mps(4), flags={"migStrategy": "single"})), "c", False, "configs.c.sharing.mps",
     "migStrategy 'single'"),
    ("mps-mixed", one(dict(mps(4), flags={"migStrategy": "mixed"})), "c", False, "configs.c.sharing.mps",
     "set configs.c.flags.migStrategy to none"),
    ("replicas-1", one(time_slicing(1)), "c", False, "configs.c.sharing.timeSlicing.resources[0].replicas",
     "refuses replicas below 2"),
    ("replicas-0", one(time_slicing(0)), "c", False, "configs.c.sharing.timeSlicing.resources[0].replicas",
     "too small"),
    ("mps-replicas-1", one(mps(1)), "c", False, "configs.c.sharing.mps.resources[0].replicas", "below 2"),
    ("mps-replicas-49", one(mps(49)), "c", False, "configs.c.sharing.mps.resources[0].replicas", "at most 48"),
    ("resources-missing", one({"sharing": {"timeSlicing": {"renameByDefault": True}}}), "c", False,
     "configs.c.sharing.timeSlicing", "resources is required"),
    ("resources-empty", one({"sharing": {"timeSlicing": {"resources": []}}}), "c", False,
     "configs.c.sharing.timeSlicing.resources", "no resources specified"),
    ("name-missing", one({"sharing": {"timeSlicing": {"resources": [{"replicas": 4}]}}}), "c", False,
     "configs.c.sharing.timeSlicing.resources[0]", "name is required"),
    ("replicas-missing", one({"sharing": {"timeSlicing": {"resources": [{"name": GPU}]}}}), "c", False,
     "configs.c.sharing.timeSlicing.resources[0]", "replicas is required"),
    ("name-unknown", one(time_slicing(4, name="nvidia.com/gpus")), "c", False,
     "configs.c.sharing.timeSlicing.resources[0].name", "use nvidia.com/gpu or nvidia.com/mig-<profile>"),
    ("name-other-vendor", one(time_slicing(4, name="amd.com/gpu")), "c", False,
     "configs.c.sharing.timeSlicing.resources[0].name", "not a resource the device plugin advertises"),
    ("name-short", one(time_slicing(4, name="gpu")), "c", False, "configs.c.sharing.timeSlicing.resources[0].name",
     "write the full resource name 'nvidia.com/gpu'"),
    ("name-not-string", one(time_slicing(4, name=7)), "c", False, "configs.c.sharing.timeSlicing.resources[0].name",
     "must be a resource name string"),
    ("mig-name-without-mixed", one(time_slicing(4, name="nvidia.com/mig-1g.10gb")), "c", False,
     "configs.c.sharing.timeSlicing.resources[0].name", "only exists with migStrategy mixed"),
    ("mig-name-with-mps", one({"sharing": {"mps": {"resources": [{"name": "nvidia.com/mig-1g.10gb", "replicas": 2}]}}}),
     "c", False, "configs.c.sharing.mps.resources[0].name", "MPS shares only nvidia.com/gpu"),
    ("duplicate-name", one({"sharing": {"timeSlicing": {"resources": [
        {"name": GPU, "replicas": 2}, {"name": GPU, "replicas": 4}]}}}), "c", False,
     "configs.c.sharing.timeSlicing.resources[1].name", "already shared by resources[0]"),
    ("devices-string", one({"sharing": {"timeSlicing": {"resources": [
        {"name": GPU, "replicas": 2, "devices": "some"}]}}}),
     "c", False, "configs.c.sharing.timeSlicing.resources[0].devices", "the only string devices takes is \"all\""),
    ("devices-zero", one({"sharing": {"timeSlicing": {"resources": [{"name": GPU, "replicas": 2, "devices": 0}]}}}),
     "c", False, "configs.c.sharing.timeSlicing.resources[0].devices", "must be > 0"),
    ("devices-bad-list", one({"sharing": {"timeSlicing": {"resources": [
        {"name": GPU, "replicas": 2, "devices": [-1, "GPU-xyz", "first"]}]}}}), "c", False,
     "configs.c.sharing.timeSlicing.resources[0].devices", "are not GPU indexes"),
    ("devices-bool", one({"sharing": {"timeSlicing": {"resources": [{"name": GPU, "replicas": 2, "devices": True}]}}}),
     "c", False, "configs.c.sharing.timeSlicing.resources[0].devices", "not a boolean"),
    ("devices-mapping", one({"sharing": {"timeSlicing": {"resources": [{"name": GPU, "replicas": 2, "devices": {}}]}}}),
     "c", False, "configs.c.sharing.timeSlicing.resources[0].devices", "not a mapping"),
    ("devices-list-ignored", one({"sharing": {"timeSlicing": {"resources": [
        {"name": GPU, "replicas": 2, "devices": [0, "1", "0:1", "GPU-b1028956-cfa2-0990-bf4a-5da9abb51763"]}]}}}), "c",
     False, "configs.c.sharing.timeSlicing.resources[0].devices", "ignores devices"),
    ("devices-count-ignored", one({"sharing": {"timeSlicing": {"resources": [
        {"name": GPU, "replicas": 2, "devices": 2}]}}}),
     "c", False, "configs.c.sharing.timeSlicing.resources[0].devices", "issue #353"),
    ("rename-ignored", one({"sharing": {"timeSlicing": {"resources": [
        {"name": GPU, "rename": "nvidia.com/gpu.shared", "replicas": 2}]}}}), "c", False,
     "configs.c.sharing.timeSlicing.resources[0].rename", "set renameByDefault: true at configs.c.sharing.timeSlicing"),
    ("rename-overridden", one({"sharing": {"timeSlicing": {"renameByDefault": True, "resources": [
        {"name": GPU, "rename": "nvidia.com/gpu-small", "replicas": 2}]}}}), "c", False,
     "configs.c.sharing.timeSlicing.resources[0].rename", "advertised as nvidia.com/gpu.shared regardless"),
    ("rename-type", one({"sharing": {"timeSlicing": {"resources": [{"name": GPU, "rename": 1, "replicas": 2}]}}}), "c",
     False, "configs.c.sharing.timeSlicing.resources[0].rename", "must be a string"),
    ("custom-resources", one({"resources": {"gpus": [{"pattern": "*H100*", "name": "h100"}]}}), "c", False,
     "configs.c.resources.gpus", "ignores custom resource patterns"),
    ("custom-resources-entry", one({"resources": {"mig": [{"name": "x"}]}}), "c", False, "configs.c.resources.mig[0]",
     "pattern is required"),
    ("imex-channels", one({"imex": {"channelIDs": [1]}}), "c", False, "configs.c.imex.channelIDs", "[] or [0]"),
    ("imex-required", one({"imex": {"required": "yes"}}), "c", False, "configs.c.imex.required", "true or false"),
    ("version", one({"version": "v2"}), "c", False, "configs.c.version", "write v1"),
    ("version-type", one({"version": 1}), "c", False, "configs.c.version", "must be a string"),
    ("cdi-cri-without-cdi", one({"flags": {"plugin": {"deviceListStrategy": "cdi-cri"}}}), "c", False,
     "configs.c.flags.plugin.deviceListStrategy", "turn on the NVIDIA Container Toolkit's CDI mode"),
    ("cdi-cri-in-list-without-cdi", one({"flags": {"plugin": {"deviceListStrategy": ["envvar", "cdi-cri"]}}}), "c",
     False, "configs.c.flags.plugin.deviceListStrategy[1]", "cdi-cri needs CDI"),
    ("cdi-annotations-without-cdi", one({"flags": {"plugin": {"deviceListStrategy": "cdi-annotations"}}}), "c",
     False, "configs.c.flags.plugin.deviceListStrategy", "cdi-annotations needs CDI"),
    ("default-unknown", {"a": {}, "b": {}}, "c", False, "default", "'c' is not one of the configs (a, b)"),
    ("default-none", {"a": {}}, None, False, "default", "is not one of the configs"),
    ("name-not-label", {"-ts": {}}, "-ts", False, "configs.-ts", "not a valid Kubernetes label value"),
    ("name-too-long", {"a" * 64: {}}, "a" * 64, False, "configs." + "a" * 64, "at most 63 characters"),
    ("name-not-key", {"ts/4": {}}, "ts/4", False, "configs.ts/4", "not a valid ConfigMap key"),
    ("name-empty", {"": {}}, "", False, "configs.", "must not be empty"),
    ("name-not-string", {4: {}}, 4, False, "configs.4", "must be a string"),
    ("configs-not-mapping", ["a"], "a", False, "configs", "must be a mapping"),
]


@pytest.mark.parametrize("configs, default, cdi, path, fragment", [case[1:] for case in REFUSALS],
                         ids=[case[0] for case in REFUSALS])
def test_errors_refuses(configs, default, cdi, path, fragment):
    problems = device_plugin_config.errors(configs, default, cdi=cdi)
    matching = [problem for problem in problems if problem.startswith(path + ": ")]
    assert matching, problems
    assert any(fragment in problem for problem in matching), matching


def test_errors_reports_every_mistake():
    configs = {"ts-4": {"flags": {"migStrategy": "both"}, "sharing": {"timeSlicing": {"resources": [
        {"name": GPU, "replicas": 1, "renameByDefault": True}]}}}, "bad name": None}
    problems = device_plugin_config.errors(configs, "default")
    paths = sorted(problem.split(": ", 1)[0] for problem in problems)
    assert paths == ["configs.bad name", "configs.bad name", "configs.ts-4.flags.migStrategy",
                     "configs.ts-4.sharing.timeSlicing.resources[0].renameByDefault",
                     "configs.ts-4.sharing.timeSlicing.resources[0].replicas", "default"]


def test_label_only_problem_for_a_name_fine_as_configmap_key():
    """'-ts' is a valid ConfigMap key but no label value: only the label check complains."""
    problems = device_plugin_config.errors({"-ts": {}}, "-ts")
    assert len(problems) == 1 and "label value" in problems[0]


# ---- errors(): accepted -------------------------------------------------------------------------

FULL_FLAGS = {
    "migStrategy": "none", "failOnInitError": True, "mpsRoot": "/run/nvidia/mps", "nvidiaDriverRoot": "/",
    "nvidiaDevRoot": "/", "gdrcopyEnabled": False, "gdsEnabled": False, "mofedEnabled": False,
    "useNodeFeatureAPI": False, "deviceDiscoveryStrategy": "auto",
    "plugin": {"passDeviceSpecs": False, "deviceListStrategy": "envvar", "deviceIDStrategy": "uuid",
               "cdiAnnotationPrefix": "cdi.k8s.io/", "nvidiaCTKPath": "/usr/bin/nvidia-ctk",
               "containerDriverRoot": "/driver-root", "sharedDevicesAllocationPolicy": "packed"},
    "gfd": {"oneshot": False, "noTimestamp": False, "sleepInterval": "60s", "outputFile": "/etc/kubernetes/node-"
            "feature-discovery/features.d/gfd", "machineTypeFile": "/sys/class/dmi/id/product_name"},
}

ACCEPTED = [
    ("empty", {}, "c", False),
    ("defaults", {"default": None, "plain": {}}, "default", False),
    ("version", one({"version": "v1"}), "c", False),
    ("all-flags", one({"version": "v1", "flags": FULL_FLAGS}), "c", False),
    ("time-slicing", one(time_slicing(4)), "c", False),
    ("time-slicing-renameByDefault", {"ts-4": time_slicing(4, renameByDefault=True)}, "ts-4", False),
    ("time-slicing-rename-to-default-target", one({"sharing": {"timeSlicing": {"renameByDefault": True, "resources": [
        {"name": GPU, "rename": "nvidia.com/gpu.shared", "replicas": 4, "devices": "all"}]}}}), "c", False),
    ("time-slicing-failRequests", one(time_slicing(10, failRequestsGreaterThanOne=True)), "c", False),
    ("mps", one(dict(mps(4), flags={"migStrategy": "none"})), "c", False),
    ("mps-max", one(mps(48, renameByDefault=True, failRequestsGreaterThanOne=False)), "c", False),
    ("mixed-mig", one({"flags": {"migStrategy": "mixed"}, "sharing": {"timeSlicing": {"resources": [
        {"name": GPU, "replicas": 2}, {"name": "nvidia.com/mig-1g.10gb", "replicas": 4},
        {"name": "nvidia.com/mig-1g.10gb.me", "replicas": 2}, {"name": "nvidia.com/mig-3g.40gb", "replicas": 2}]}}}),
     "c", False),
    ("single-mig-time-slicing", one(dict(time_slicing(2), flags={"migStrategy": "single"})), "c", False),
    ("cdi-cri-with-cdi", one({"flags": {"plugin": {"deviceListStrategy": "cdi-cri"}}}), "c", True),
    ("cdi-list-with-cdi", one({"flags": {"plugin": {"deviceListStrategy": ["envvar", "cdi-cri"]}}}), "c", True),
    ("cdi-annotations-with-cdi", one({"flags": {"plugin": {"deviceListStrategy": "cdi-annotations"}}}), "c", True),
    ("imex", one({"imex": {"channelIDs": [0], "required": True}}), "c", False),
    ("imex-empty", one({"imex": {"channelIDs": []}}), "c", False),
    ("empty-custom-resources", one({"resources": {"gpus": [], "mig": []}}), "c", False),
    ("sleep-infinite", one({"flags": {"gfd": {"sleepInterval": "infinite"}}}), "c", False),
    ("sleep-compound", one({"flags": {"gfd": {"sleepInterval": "1m30s"}}}), "c", False),
    ("label-like-names", {"a100-80gb.ts_4": {}, "x": {}}, "x", False),
]


@pytest.mark.parametrize("configs, default, cdi", [case[1:] for case in ACCEPTED], ids=[case[0] for case in ACCEPTED])
def test_errors_accepts(configs, default, cdi):
    assert device_plugin_config.errors(configs, default, cdi=cdi) == []


def test_errors_leaves_configs_alone():
    configs = {"ts": time_slicing(4, renameByDefault=True)}
    before = copy.deepcopy(configs)
    device_plugin_config.errors(configs, "ts")
    assert configs == before


# ---- render() -----------------------------------------------------------------------------------

RENDERS = [
    ("none", None, False, {"version": "v1"}),
    ("empty", {}, False, {"version": "v1"}),
    ("version-kept-first", {"sharing": {"timeSlicing": TS}, "version": "v1"}, False,
     {"version": "v1", "sharing": {"timeSlicing": TS}}),
    ("no-cdi-no-strategy", {"flags": {"migStrategy": "mixed"}}, False,
     {"version": "v1", "flags": {"migStrategy": "mixed"}}),
    ("cdi-sets-strategy", {"flags": {"migStrategy": "mixed"}}, True,
     {"version": "v1", "flags": {"migStrategy": "mixed", "plugin": {"deviceListStrategy": "cdi-cri"}}}),
    ("cdi-on-empty", None, True, {"version": "v1", "flags": {"plugin": {"deviceListStrategy": "cdi-cri"}}}),
    ("cdi-null-flags", {"flags": None}, True,
     {"version": "v1", "flags": {"plugin": {"deviceListStrategy": "cdi-cri"}}}),
    ("cdi-keeps-strategy", {"flags": {"plugin": {"deviceListStrategy": "envvar"}}}, True,
     {"version": "v1", "flags": {"plugin": {"deviceListStrategy": "envvar"}}}),
    ("cdi-keeps-list", {"flags": {"plugin": {"deviceListStrategy": ["envvar", "cdi-cri"]}}}, True,
     {"version": "v1", "flags": {"plugin": {"deviceListStrategy": ["envvar", "cdi-cri"]}}}),
]


@pytest.mark.parametrize("config, cdi, expected", [case[1:] for case in RENDERS], ids=[case[0] for case in RENDERS])
def test_render(config, cdi, expected):
    rendered = device_plugin_config.render(config, cdi=cdi)
    assert rendered == expected
    assert list(rendered)[0] == "version"


def test_render_is_a_deep_copy():
    config = {"flags": {"plugin": {"passDeviceSpecs": True}}, "sharing": {"timeSlicing": copy.deepcopy(TS)}}
    before = copy.deepcopy(config)
    rendered = device_plugin_config.render(config, cdi=True)
    rendered["sharing"]["timeSlicing"]["resources"][0]["replicas"] = 99
    assert config == before
    assert rendered["flags"]["plugin"] == {"passDeviceSpecs": True, "deviceListStrategy": "cdi-cri"}


# ---- expected_resources() -----------------------------------------------------------------------

H100S = [gpu(index) for index in range(8)]
FOUR = H100S[:4]
MIXED_NODE = [gpu(0, mig=mig_devices(0, "1g.10gb", 7))] + [gpu(index) for index in (1, 2, 3)]
SINGLE_NODE = [gpu(index, mig=mig_devices(index, "1g.10gb", 7)) for index in range(2)]

# nvml.py's shape: MIG devices carry no profile; their GPU instance (and compute instance) does
NVML_MIG_GPU = {"index": 0, "uuid": "GPU-a", "lost": False, "mig": {
    "capable": True, "current": True,
    "gpu_instances": [
        {"id": 1, "profile_id": 9, "profile": "3g.40gb", "compute_instances": [{"id": 0, "profile": "3g.40gb"}]},
        {"id": 7, "profile_id": 19, "profile": "1g.10gb+me", "compute_instances": [{"id": 0, "profile": "1g.10gb"}]},
        {"id": 9, "profile_id": 19, "profile": "1g.10gb", "compute_instances": [{"id": 0, "profile": "1g.10gb"}]},
    ],
    "devices": [
        {"index": 0, "uuid": "MIG-a0", "gpu_instance_id": 1, "compute_instance_id": 0, "name": "x"},
        {"index": 1, "uuid": "MIG-a1", "gpu_instance_id": 7, "compute_instance_id": 0, "name": "x"},
        {"index": 2, "uuid": "MIG-a2", "gpu_instance_id": 9, "compute_instance_id": 0, "name": "x"},
        # no instance data: the profile comes from the NVML name
        {"index": 3, "uuid": "MIG-a3", "name": "NVIDIA H100 80GB HBM3 MIG 2g.20gb"},
    ]}}
PARTIAL_CI_GPU = {"index": 0, "lost": False, "mig": {"current": True, "gpu_instances": [
    {"id": 2, "profile": "2g.20gb", "compute_instances": [{"id": 0, "profile": "1c.2g.20gb"}]}],
    "devices": [{"index": 0, "uuid": "MIG-p0", "gpu_instance_id": 2, "compute_instance_id": 0}]}}

RESOURCES = [
    ("8-h100-no-sharing", {}, H100S, {GPU: 8}),
    ("8-h100-none-config", None, H100S, {GPU: 8}),
    ("4-gpus-time-slicing-4", time_slicing(4), FOUR, {GPU: 16}),
    ("4-gpus-renameByDefault", time_slicing(4, renameByDefault=True), FOUR, {"nvidia.com/gpu.shared": 16}),
    ("4-gpus-mps-renameByDefault", mps(4, renameByDefault=True), FOUR, {"nvidia.com/gpu.shared": 16}),
    ("mps-wins-over-time-slicing", {"sharing": {"mps": {"resources": [{"name": GPU, "replicas": 3}]},
                                                "timeSlicing": TS}}, FOUR, {GPU: 12}),
    ("mixed-mig", {"flags": {"migStrategy": "mixed"}}, MIXED_NODE, {GPU: 3, "nvidia.com/mig-1g.10gb": 7}),
    ("mixed-mig-time-sliced", {"flags": {"migStrategy": "mixed"}, "sharing": {"timeSlicing": {"resources": [
        {"name": "nvidia.com/mig-1g.10gb", "replicas": 2}]}}}, MIXED_NODE, {GPU: 3, "nvidia.com/mig-1g.10gb": 14}),
    ("mixed-mig-renameByDefault", {"flags": {"migStrategy": "mixed"}, "sharing": {"timeSlicing": {
        "renameByDefault": True, "resources": [{"name": GPU, "replicas": 2}]}}}, MIXED_NODE,
     {"nvidia.com/gpu.shared": 6, "nvidia.com/mig-1g.10gb": 7}),
    ("mixed-mig-gpu-without-devices", {"flags": {"migStrategy": "mixed"}}, [gpu(0, mig=[]), gpu(1)], {GPU: 1}),
    ("none-counts-mig-gpus-whole", {}, MIXED_NODE, {GPU: 4}),
    ("single-mig", {"flags": {"migStrategy": "single"}}, SINGLE_NODE, {GPU: 14}),
    ("single-mig-time-sliced", dict(time_slicing(3), flags={"migStrategy": "single"}), SINGLE_NODE, {GPU: 42}),
    ("single-without-mig", {"flags": {"migStrategy": "single"}}, FOUR, {GPU: 4}),
    ("lost-gpu-not-counted", {}, FOUR[:3] + [lost_gpu(3)], {GPU: 3}),
    ("lost-gpu-not-shared", time_slicing(4), FOUR[:3] + [lost_gpu(3)], {GPU: 12}),
    ("lost-gpu-ignored-by-single", {"flags": {"migStrategy": "single"}}, SINGLE_NODE + [lost_gpu(2)], {GPU: 14}),
    ("unopened-gpu-not-counted", {}, FOUR[:3] + [{"index": 3, "lost": False, "error": "Unknown Error"}], {GPU: 3}),
    ("rename-ignored", {"sharing": {"timeSlicing": {"resources": [
        {"name": GPU, "rename": "nvidia.com/gpu.shared", "replicas": 2}]}}}, FOUR, {GPU: 8}),
    ("devices-ignored", {"sharing": {"timeSlicing": {"resources": [
        {"name": GPU, "replicas": 2, "devices": [0]}]}}}, FOUR, {GPU: 8}),
    ("short-name-gets-prefix", time_slicing(2, name="gpu"), FOUR, {GPU: 8}),
    ("duplicate-entries-larger-wins", {"sharing": {"timeSlicing": {"resources": [
        {"name": GPU, "replicas": 2}, {"name": GPU, "replicas": 5}]}}}, FOUR, {GPU: 20}),
    ("mig-sharing-without-mixed-skipped", time_slicing(4, name="nvidia.com/mig-1g.10gb"), FOUR, {GPU: 4}),
    ("no-gpus", time_slicing(4), [], {}),
    ("profiles-from-nvml-data", {"flags": {"migStrategy": "mixed"}}, [NVML_MIG_GPU, gpu(1)],
     {GPU: 1, "nvidia.com/mig-3g.40gb": 1, "nvidia.com/mig-1g.10gb.me": 1, "nvidia.com/mig-1g.10gb": 1,
      "nvidia.com/mig-2g.20gb": 1}),
]


@pytest.mark.parametrize("config, gpus, expected", [case[1:] for case in RESOURCES],
                         ids=[case[0] for case in RESOURCES])
def test_expected_resources(config, gpus, expected):
    assert device_plugin_config.expected_resources(config, gpus) == expected


DOES_NOT_START = [
    ("single-mixed-modes", {"flags": {"migStrategy": "single"}}, MIXED_NODE, "MIG mode on all GPUs or on none"),
    ("single-two-profiles", {"flags": {"migStrategy": "single"}},
     [gpu(0, mig=mig_devices(0, "1g.10gb", 7)), gpu(1, mig=mig_devices(1, "3g.40gb", 2))], "one MIG profile"),
    ("single-mig-gpu-without-devices", {"flags": {"migStrategy": "single"}}, [gpu(0, mig=[])], "no MIG devices"),
    ("mps-mixed", dict(mps(2), flags={"migStrategy": "mixed"}), FOUR, "not supported with MPS"),
    ("unknown-strategy", {"flags": {"migStrategy": "both"}}, FOUR, "unknown MIG strategy"),
    ("mixed-partial-compute-instance", {"flags": {"migStrategy": "mixed"}}, [PARTIAL_CI_GPU], "1c.2g.20gb"),
    ("mixed-unknown-profile", {"flags": {"migStrategy": "mixed"}},
     [gpu(0, mig=[{"index": 0, "uuid": "MIG-u"}])], "cannot tell the MIG profile"),
]


@pytest.mark.parametrize("config, gpus, fragment", [case[1:] for case in DOES_NOT_START],
                         ids=[case[0] for case in DOES_NOT_START])
def test_expected_resources_where_the_plugin_does_not_start(config, gpus, fragment):
    with pytest.raises(ValueError, match=fragment.replace(".", r"\.")):
        device_plugin_config.expected_resources(config, gpus)


@pytest.mark.parametrize("profile, resource", [
    ("1g.10gb", "nvidia.com/mig-1g.10gb"),
    ("1g.10gb+me", "nvidia.com/mig-1g.10gb.me"),
    ("7g.80gb", "nvidia.com/mig-7g.80gb"),
])
def test_mig_resource(profile, resource):
    assert device_plugin_config.mig_resource(profile) == resource
    assert device_plugin_config.errors(one({"flags": {"migStrategy": "mixed"}, "sharing": {"timeSlicing": {
        "resources": [{"name": resource, "replicas": 2}]}}}), "c") == []


# ---- node_config_name() -------------------------------------------------------------------------

CONFIGS = {"default": {}, "ts-4": time_slicing(4)}

NODE_CONFIGS = [
    ("label-names-config", "ts-4", CONFIGS, "default", "ts-4"),
    ("label-unset", None, CONFIGS, "default", "default"),
    ("label-empty", "", CONFIGS, "ts-4", "ts-4"),
    ("label-unknown", "ts-8", CONFIGS, "default", None),
    ("default-missing", None, CONFIGS, "plain", None),
    ("no-default-named-fallback", None, CONFIGS, "", "default"),
    ("no-default-single-fallback", None, {"ts-4": {}}, None, "ts-4"),
    ("no-default-no-fallback", None, {"a": {}, "b": {}}, "", None),
    ("no-configs", None, {}, "default", None),
    ("no-configs-label", "ts-4", None, "default", None),
]


@pytest.mark.parametrize("label, configs, default, expected", [case[1:] for case in NODE_CONFIGS],
                         ids=[case[0] for case in NODE_CONFIGS])
def test_node_config_name(label, configs, default, expected):
    assert device_plugin_config.node_config_name(label, configs, default) == expected


def test_default_config_name():
    assert device_plugin_config.DEFAULT_CONFIG_NAME == "default"
