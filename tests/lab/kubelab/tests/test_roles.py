# -*- coding: utf-8 -*-
"""The collection's Kubernetes roles on the lab cluster: what `make lab` leaves (every node
validated green), per-node device plugin configurations from inventory variables, the
validation naming the stage that is broken, render mode against the roles' own apply, and
`state: absent` leaving the cluster as it was. Runs ansible-playbook on the lab inventory."""
from __future__ import annotations

import base64
import glob
import json
import os
import re
import subprocess

from conftest import LAB, MAKE_LAB_LOG, OLDEST_CORE, REPO, applied_config, require

INVENTORY = os.path.join(REPO, "inventories", "lab")
PLAYBOOKS = os.path.join(REPO, "playbooks")
REPORT = os.path.join(REPO, ".build", "validate-report.json")
NS = "gpuops-nvidia"
TS4 = {"default": {"flags": {"migStrategy": "none"}},
       "ts-4": {"sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}}}


def playbook(name, *args, check=True, timeout=900, cwd=REPO, env_bin=None, env=None):
    """ansible-playbook on the lab inventory: playbooks/NAME of the checkout, or a playbook by its
    FQCN; with the main environment's ansible-core, or the one in env_bin (its Python environment's
    bin; the main environment's kubectl stays on PATH)."""
    bins = [env_bin] if env_bin else []
    env = dict(env or os.environ, CONTAINERS_CONF=os.path.join(LAB, "containers.conf"),
               PATH=os.pathsep.join(bins + [os.path.join(REPO, ".venv", "bin"), os.environ.get("PATH", "")]),
               ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1", ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"))
    target = name if name.startswith("gpuops.nvidia.") else os.path.join(PLAYBOOKS, name)
    res = subprocess.run([os.path.join(env_bin or os.path.join(REPO, ".venv", "bin"), "ansible-playbook"), "-i",
                          INVENTORY, target, *args], cwd=cwd, env=env, capture_output=True,
                         text=True, timeout=timeout, check=False)
    if check and res.returncode != 0:
        raise AssertionError(f"ansible-playbook {name} {' '.join(args)} failed ({res.returncode}):\n"
                             f"{res.stdout[-8000:]}\n{res.stderr[-3000:]}")
    return res


def extra(**values):
    return ["-e", json.dumps(values)]


def recap(stdout):
    """{host: {ok, changed, unreachable, failed, skipped, rescued, ignored}} of a run's PLAY RECAP."""
    text = stdout[stdout.rindex("PLAY RECAP"):]
    return {m.group(1): {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(2))}
            for m in re.finditer(r"^(\S+)\s+:\s+(.*)$", text, re.M)}


def report():
    with open(REPORT, encoding="utf-8") as f:
        return {n["node"]: n for n in json.load(f)["nodes"]}


def validate(*args, **values):
    res = playbook("validate.yml", *extra(**{"validate_workload_timeout": 60, "validate_prometheus_wait": 40, **values}),
                   *args, check=False)
    return res, report()


def test_make_lab_validates_every_node_green(lab_only, gpu_nodes):
    """`make lab` ran the whole site, validation last: every node passes all six checks."""
    nodes = report()
    assert set(nodes) == set(gpu_nodes)
    for name, node in nodes.items():
        assert node["ok"], node
        checks = ["host", "operands", "labels", "allocatable", "workload", "metrics"]
        assert [c["check"] for c in node["checks"]] == checks
        assert all(c["ok"] and not c.get("skipped") for c in node["checks"]), node
        allocatable = next(c for c in node["checks"] if c["check"] == "allocatable")
        if gpu_nodes[name]["allocation"] == "dra":
            assert f"{gpu_nodes[name]['gpus']} device(s) in the node's ResourceSlices" in allocatable["evidence"][0]
            # the test pod's GPU came from a ResourceClaim by attribute: nvidia-smi there listed one
            # device, which the node's ResourceSlices publish and the claim's selector matches
            workload = next(c for c in node["checks"] if c["check"] == "workload")
            product = gpu_nodes[name]["product"].replace("-", " ") if gpu_nodes[name]["product"] else ""
            # (the last line of the evidence: a rerun on a converged node carries the pass over, saying so first)
            assert re.match(r"GPU 0: .+ \(UUID: GPU-[0-9a-f-]+\); a device the node publishes in its ResourceSlices, as "
                            rf"its ResourceClaim selects \(productName {re.escape(product)}", workload["evidence"][-1]), workload
        else:
            assert f"nvidia.com/gpu={gpu_nodes[name]['gpus']}" in allocatable["evidence"][0]


def _log_tasks(text):
    """[(task name, [result lines])] of a default-callback job log."""
    tasks, current = [], None
    for line in text.splitlines():
        match = re.match(r"^TASK \[(.*)\] \**$", line)
        if match:
            current = (match.group(1), [])
            tasks.append(current)
        elif line.startswith("PLAY "):
            current = None
        elif current is not None and line.strip():
            current[1].append(line)
    return tasks


def _role_task_names(*patterns):
    """'gpuops.nvidia.<role> : <task name>' of the tasks in the role files matching patterns."""
    names = set()
    for pattern in patterns:
        for path in glob.glob(os.path.join(REPO, "roles", pattern)):
            role = os.path.relpath(path, os.path.join(REPO, "roles")).split(os.sep)[0]
            with open(path, encoding="utf-8") as handle:
                names |= {"gpuops.nvidia.%s : %s" % (role, m.strip().strip("'\""))
                          for m in re.findall(r"^\s*- name: (.*)$", handle.read(), re.M)}
    return names


def test_the_site_runs_job_log_reads_as_a_per_node_story(lab_only, gpu_nodes):
    """What `make lab`'s site run printed, read as an on-call engineer reads an AWX job log: each
    node's GPU report (verdict, a line per GPU), no step of a path the run does not take, pre-flight
    shown once per node, and a fleet summary at the end."""
    with open(MAKE_LAB_LOG, encoding="utf-8") as handle:
        text = handle.read()
    # the newest ansible-core (the main environment's), facts only under ansible_facts (ansible.cfg):
    # nothing the collection does is deprecated there
    assert "[DEPRECATION WARNING]" not in text, re.findall(r"^\[DEPRECATION WARNING\].*", text, re.M)
    tasks = _log_tasks(text)
    names = [name.split(" : ")[-1] for name, _out in tasks]
    # the report: verdict first, then a header and one line per GPU, within 100 columns
    reports = [out for name, out in tasks if name.endswith("Show the GPU report")]
    assert len(reports) == 1
    body = "\n".join(reports[0])
    for node, facts in gpu_nodes.items():
        assert f"ok: [{node}]" in body
    assert body.count("- 'verdict: healthy'") == 2
    assert len(re.findall(r"^\s+- ok\s+\d\s+(H100 80GB HBM3|L40S)\s+GPU-[0-9a-f]{8} ", body, re.M)) == 12
    # the removal paths and the MIG role (no node asks for a layout) are one skipped step each
    absent = (_role_task_names("*/tasks/absent*.yml") - _role_task_names("*/tasks/[!a]*.yml", "*/tasks/a[!b]*.yml")
              | _role_task_names("mig/tasks/*.yml"))
    shown = {name for name, _out in tasks if name in absent}
    assert not shown, shown
    mig = [out for name, out in tasks if name == "Partition the GPUs of the nodes that ask for a MIG layout"]
    assert mig and all(line.startswith("skipping: ") for out in mig for line in out)  # one per batch
    # pre-flight's plan and findings once per node (its own stage), with severity and fix
    shown = [out for name, out in tasks if name.endswith("Show the pre-flight findings, and stop before any change when they are problems")
             and any(line.startswith("ok: ") for line in out)]
    assert len(shown) == 1 and sum(line.startswith("ok: ") for line in shown[0]) == 2
    assert any("[warning] " in line for line in shown[0]) and any("fix: " in line for line in shown[0])
    # the fleet summary ends the run: a line per node, healthy, with its driver and toolkit
    assert names[-2:] == ["Summarise the run, one line per node", "Hand the summary to AWX workflows (set_stats gpuops_fleet)"]
    summary = "\n".join(tasks[-2][1])
    for node, facts in gpu_nodes.items():
        assert re.search(rf"- '?{node}\s+healthy\s+driver {re.escape(facts['driver'])} \(ready\)\s+toolkit 1\.18\.0 "
                         rf"containerd", summary), summary
    assert re.search(r"2 node\(s\): 2 healthy; \d changed", summary), summary


def test_the_oldest_ansible_core_runs_the_site_playbook_from_its_tarball_and_changes_nothing(
        lab_only, gpu_nodes, tmp_path):
    """The smoke run of the supported range's oldest release (the Makefile's OLDEST_CORE, with its
    `ansible` bundle) on the lab make lab left: the collection built by that release's
    ansible-galaxy and installed from its tarball, with kubernetes.core (its dependency) and
    containers.podman (the lab's connection) from a local collection source, into an empty path;
    nothing else is seen (no bundle, no checkout). The whole site playbook runs, host and
    Kubernetes stages: it fails nowhere and changes nothing on the converged lab (the validation's
    report on the controller is rewritten when it says something new: this run skips the workload,
    its host stages having changed nothing)."""
    env_bin = os.path.join(REPO, ".build", "core-" + OLDEST_CORE, "bin")
    require(os.path.isfile(os.path.join(env_bin, "ansible-playbook")), f"ansible-core {OLDEST_CORE}'s environment",
            "make core-envs")
    source, collections = tmp_path / "source", tmp_path / "collections"
    built = subprocess.run([os.path.join(env_bin, "python"), os.path.join(LAB, "collection_source.py"), env_bin,
                            str(source), "kubernetes.core", "containers.podman"], capture_output=True, text=True,
                           timeout=300, check=False)
    assert built.returncode == 0, built.stdout + built.stderr
    requirements = tmp_path / "requirements.yml"
    requirements.write_text("collections:\n" + "".join(f"  - {{name: {path}, type: file}}\n"
                                                       for path in sorted(glob.glob(str(source / "*.tar.gz")))))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(collections), ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="False")
    subprocess.run([os.path.join(env_bin, "ansible-galaxy"), "collection", "install", "--offline", "-p",
                    str(collections), "-r", str(requirements)], env=env, check=True, capture_output=True, text=True)
    res = playbook("gpuops.nvidia.site", env_bin=env_bin, env=env)
    hosts = recap(res.stdout)
    assert set(gpu_nodes) <= set(hosts), hosts
    assert all(counts["failed"] == 0 and counts["unreachable"] == 0 for counts in hosts.values()), hosts
    changed = re.findall(r"^TASK \[(.*?)\] \**\n(?:(?!TASK \[).*\n)*?changed: \[", res.stdout, re.M)
    assert set(changed) <= {"gpuops.nvidia.validate : Write the JSON report of every node, when it says something new"}, \
        changed
    # (the recap's own count: at most that one write on the controller, nothing on a node)
    assert sum(counts["changed"] for counts in hosts.values()) <= 1, hosts
    assert "[DEPRECATION WARNING]" not in res.stdout + res.stderr
    # the run used that release and the installed copies
    version = subprocess.run([os.path.join(env_bin, "ansible-playbook"), "--version"], env=env, check=True,
                             capture_output=True, text=True).stdout
    assert version.startswith(f"ansible-playbook [core {OLDEST_CORE}]"), version
    assert str(collections) in version


def test_per_node_time_slicing_from_inventory_and_wrong_replicas_named(lab_only, gpu_nodes):
    """device_plugin_configs with a time-slicing config, chosen for one node by its
    node_labels_device_plugin_config (host variable): that node advertises GPUs x 4, the other
    stays as it was; validating against an inventory that says 2 replicas names allocatable."""
    kube = lab_only
    node = "gpuops-lab-l40s"
    host_vars = os.path.join(INVENTORY, "host_vars")
    os.makedirs(host_vars, exist_ok=True)
    path = os.path.join(host_vars, f"{node}.yml")
    with open(path, "w", encoding="utf-8") as f:
        f.write("node_labels_device_plugin_config: ts-4\n")
    try:
        playbook("site.yml", "--tags", "labels,operands", *extra(device_plugin_configs=TS4))
        want = str(gpu_nodes[node]["gpus"] * 4)
        kube.wait(lambda: kube.get("node", node)["status"]["allocatable"].get("nvidia.com/gpu") == want,
                  timeout=120, what=f"{node}: allocatable {want}")
        other = "gpuops-lab-h100"
        assert kube.advertised_gpus(other, gpu_nodes[other]["allocation"]) == str(gpu_nodes[other]["gpus"])
        assert "nvidia.com/device-plugin.config" not in kube.get("node", other)["metadata"]["labels"]
        assert kube.get("node", node)["metadata"]["labels"]["nvidia.com/device-plugin.config"] == "ts-4"
        # GFD follows the same label: it reports the replicas
        kube.wait(lambda: kube.get("node", node)["metadata"]["labels"].get("nvidia.com/gpu.replicas") == "4",
                  timeout=120, what=f"{node}: nvidia.com/gpu.replicas=4")

        # (the time-sliced node only: the other's checklist is the wrong-replicas run's below)
        res, nodes = validate("--limit", node, device_plugin_configs=TS4)
        assert res.returncode == 0, res.stdout[-4000:]
        assert nodes[node]["ok"]

        wrong = json.loads(json.dumps(TS4))
        wrong["ts-4"]["sharing"]["timeSlicing"]["resources"][0]["replicas"] = 2
        # allocatable is checked before the workload: no test pod needed to name it (a node that
        # does not converge to what the inventory says is named after validate_converge_timeout)
        res, nodes = validate(device_plugin_configs=wrong, validate_workload=False, validate_converge_timeout=10)
        assert res.returncode != 0
        assert nodes[node]["first_failure"] == "allocatable", nodes[node]
        assert f"advertises {want}, expected {gpu_nodes[node]['gpus'] * 2}" in nodes[node]["summary"]
        assert nodes[other]["ok"]
        assert f"{node} is not GPU-ready: check allocatable" in res.stdout
    finally:
        os.remove(path)
        playbook("site.yml", "--tags", "labels,operands")
    kube.wait(lambda: kube.get("node", node)["status"]["allocatable"].get("nvidia.com/gpu")
              == str(gpu_nodes[node]["gpus"]), timeout=120, what=f"{node}: allocatable back")
    assert "nvidia.com/device-plugin.config" not in kube.get("node", node)["metadata"]["labels"]


# what validation says of a crash-looping container, whichever moment of the loop it reads:
# waiting in back-off (with the end of the log it failed with), just exited, or restarted and not
# ready yet (k8s/objects.py _pod_reason)
CRASH_LOOP = (r"Running; (container nvidia-device-plugin (waiting: CrashLoopBackOff \(.*\), \d+ restarts; "
              r"last exit [1-9]\d*: .*/config/missing\.yaml|exited [1-9]\d* \(Error\)|not ready)"
              r"|Ready: containers with unready status: \[nvidia-device-plugin\])")


def test_a_crash_looping_device_plugin_is_named_and_the_role_repairs_it(lab_only, gpu_nodes):
    kube = lab_only
    kube.run("-n", NS, "set", "env", "daemonset/nvidia-device-plugin", "-c", "nvidia-device-plugin",
             "CONFIG_FILE=/config/missing.yaml")
    try:
        def reached(restarted=False):
            """{node: pod} of the device plugin pods with the broken configuration (RESTARTED: that
            restarted with it at least once)."""
            pods = kube.get("-n", NS, "pods", "-l", "app.kubernetes.io/name=nvidia-device-plugin")["items"]
            return {p["spec"]["nodeName"]: p["metadata"]["name"] for p in pods
                    if any(e.get("value") == "/config/missing.yaml" for c in p["spec"]["containers"]
                           for e in c.get("env", []))
                    and (not restarted or any(s.get("restartCount", 0) >= 1
                                              for s in p["status"].get("containerStatuses", [])))}
        # the rolling update replaces max_unavailable (1) pods at a time: the nodes it reached crash
        # loop; a node it has not reached keeps its working pod (a crashing pod can pass for Ready
        # for a moment, so the update may reach the next node while validation reads them)
        broken = kube.wait(lambda: reached(restarted=True), timeout=120,
                           what="a device plugin pod restarting with CONFIG_FILE=/config/missing.yaml")
        before = reached()
        # (the crash-looping nodes are named by the operands check; what comes after it need not wait to converge)
        res, nodes = validate(validate_workload=False, validate_converge_timeout=10)
        after = reached()
        assert res.returncode != 0
        assert set(nodes) == set(gpu_nodes), nodes
        for name, node in nodes.items():
            if name not in after:
                assert node["ok"], node
            elif name in broken:
                assert node["first_failure"] == "operands", node
                assert re.search(rf"^operands: nvidia-device-plugin: {re.escape(broken[name])}: {CRASH_LOOP}",
                                 node["summary"], re.S), node["summary"]
            elif name in before:
                # reached before validation read it: its new pod, not yet restarted, is named
                assert node["first_failure"] == "operands", node
                assert f"nvidia-device-plugin: {before[name]}: " in node["summary"], node["summary"]
            else:
                # reached while validation ran: either what it read is true
                assert node["ok"] or f"nvidia-device-plugin: {after[name]}: " in node["summary"], node
    finally:
        playbook("site.yml", "--tags", "operands")
    res, nodes = validate(validate_workload=False)
    assert res.returncode == 0 and set(nodes) == set(gpu_nodes), res.stdout[-3000:]
    assert [name for name, node in nodes.items() if not node["ok"]] == [], res.stdout[-3000:]


def test_an_exporter_switched_off_by_an_admin_stays_off_and_is_named(lab_only):
    """An admin's nvidia.com/gpu.deploy.dcgm-exporter=false removes the exporter from that node;
    the label stage keeps it, and validation names the missing exporter (operands, then metrics)."""
    kube = lab_only
    node = "gpuops-lab-h100"
    saved = kube.node_meta(node)
    kube.run("label", "node", node, "nvidia.com/gpu.deploy.dcgm-exporter=false", "--overwrite")
    try:
        res = playbook("site.yml", "--tags", "labels")
        assert "keep nvidia.com/gpu.deploy.dcgm-exporter" in res.stdout
        assert kube.get("node", node)["metadata"]["labels"]["nvidia.com/gpu.deploy.dcgm-exporter"] == "false"
        kube.wait(lambda: not kube.get("-n", NS, "pods", "-l", "app.kubernetes.io/name=dcgm-exporter",
                                       "--field-selector", f"spec.nodeName={node}")["items"],
                  timeout=120, what=f"the exporter gone from {node}")
        res, nodes = validate(validate_workload=False)
        assert res.returncode != 0
        mine = nodes[node]
        assert mine["first_failure"] == "operands"
        assert "dcgm-exporter: no pod on the node" in mine["summary"]
        metrics = next(c for c in mine["checks"] if c["check"] == "metrics")
        assert not metrics["ok"] and "no dcgm-exporter pod" in metrics["evidence"][0]
        assert nodes["gpuops-lab-l40s"]["ok"]
    finally:
        # the node's deploy labels and our annotations as they were: the exporter comes back
        kube.restore_node_meta(node, saved, MANAGED_NODE_KEYS)
    assert {k: v for k, v in kube.node_meta(node)["labels"].items() if k.startswith(MANAGED_NODE_KEYS)} == \
        {k: v for k, v in saved["labels"].items() if k.startswith(MANAGED_NODE_KEYS)}
    kube.wait(lambda: ready_pods(kube, "dcgm-exporter", node), timeout=180, what=f"the exporter back on {node}")


MANAGED_NODE_KEYS = ("nvidia.com/gpu.deploy.", "gpuops.nvidia/")


def ready_pods(kube, operand, node):
    """The operand's pods on NODE that are Running and Ready."""
    pods = kube.get("-n", NS, "pods", "-l", f"app.kubernetes.io/name={operand}",
                    "--field-selector", f"spec.nodeName={node}")["items"]
    return [p["metadata"]["name"] for p in pods if p["status"].get("phase") == "Running" and any(
        c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))]


def test_a_node_without_the_nvidia_runtime_fails_the_workload(lab_only):
    """The toolkit's runtime configuration missing on one node (containerd without its nvidia
    runtime): the operands already running stay up, but a new GPU pod cannot start there; the
    validation names the workload stage with the runtime's own error."""
    kube = lab_only
    node = "gpuops-lab-l40s"
    # the container_toolkit role's drop-in holds containerd's nvidia runtime
    conf = "/etc/containerd/conf.d/99-nvidia.toml"
    script = f"mv {conf} /root/99-nvidia.toml.gpuops-test && systemctl restart containerd"
    res = kube.node_exec(node, script)
    assert res.returncode == 0, res.stderr
    try:
        assert "runtimes.nvidia]" not in kube.node_exec(node, "containerd config dump").stdout
        # (the broken node's test pod never starts: the run waits out the workload timeout, which
        # the H100's pod, finished in seconds, leaves room for)
        res, nodes = validate(validate_workload_timeout=30)
        assert res.returncode != 0
        mine = nodes[node]
        assert mine["first_failure"] == "workload", mine
        # the kubelet's event with containerd's own error for the RuntimeClass's handler
        assert re.search(r'no runtime for \\?"nvidia\\?" is configured', mine["summary"]), mine["summary"]
        assert nodes["gpuops-lab-h100"]["ok"]
    finally:
        kube.node_exec(node, f"mv /root/99-nvidia.toml.gpuops-test {conf} && systemctl restart containerd")
    res, nodes = validate("--limit", node, validate_workload=True)
    assert nodes[node]["ok"], nodes[node]


def test_a_gpu_gone_from_the_pci_bus_fails_the_host_check(lab_only, gpu_nodes):
    """The lab node's PCI view shows its GPUs (the seeds' first checklist step, `lspci | grep -i
    nvidia`, and Node Feature Discovery's PCI label read it); one GPU gone from the bus while NVML
    still lists it fails the go-live host check, naming the GPU."""
    kube = lab_only
    node = "gpuops-lab-l40s"
    lines = kube.node_exec(node, "lspci | grep -i nvidia").stdout.splitlines()
    assert len(lines) == gpu_nodes[node]["gpus"] == 4, lines
    # (Debian 12's pci.ids predates the L40S: lspci names the vendor and prints the device ID)
    assert all("3D controller: NVIDIA Corporation" in line for line in lines), lines
    assert len(kube.node_exec(node, "lspci -n -d 10de:26b9").stdout.splitlines()) == 4
    labels = kube.get("node", node)["metadata"]["labels"]
    assert labels.get("feature.node.kubernetes.io/pci-0302_10de.present") == "true", labels
    gone = "0000:e1:00.0"  # GPU 3 (the profile's pci_bus_id)
    res = kube.node_exec(node, f"mkdir -p /sys/bus/pci/gone && mv /sys/bus/pci/devices/{gone} /sys/bus/pci/gone/")
    assert res.returncode == 0, res.stderr
    try:
        res, nodes = validate("--limit", node, validate_workload=False)
        assert res.returncode != 0
        mine = nodes[node]
        assert mine["first_failure"] == "host", mine
        assert ("3 NVIDIA GPUs on the PCI bus but NVML lists 4 (not on the PCI bus: GPU 3 (0000:e1:00.0))"
                in mine["summary"]), mine["summary"]
    finally:
        kube.node_exec(node, f"mv /sys/bus/pci/gone/{gone} /sys/bus/pci/devices/ && rmdir /sys/bus/pci/gone")
    assert len(kube.node_exec(node, "lspci -d 10de:").stdout.splitlines()) == 4


CUDA_BASE = os.environ.get("GPUOPS_TEST_CUDA_IMAGE", "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04")


def test_the_seeds_test_pod_sees_one_gpu_on_every_node(kube, namespace, gpu_nodes):
    """The seeds' checklist pod as written - `kubectl run gpu-test --image=nvidia/cuda:12.4.1-base-
    ubuntu22.04 --limits=nvidia.com/gpu=1 -- nvidia-smi`, no RuntimeClass (kubectl 1.37 has no
    --limits: the same pod through --overrides; NVIDIA's registry name of the image) - runs on each
    GPU node and nvidia-smi there lists exactly one GPU, of the node's model: the device plugin's
    GPU reaches a plain pod because container_toolkit_set_as_default (auto) made NVIDIA's runtime
    the default on nodes the device plugin serves; on the DRA node the scheduler makes the request a
    claim (the DeviceClass's extendedResourceName) and its one GPU comes through CDI."""
    for node, facts in gpu_nodes.items():
        name = "gpu-test-" + node.rsplit("-", 1)[-1]
        pod = {"apiVersion": "v1", "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "tolerations": [{"operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": name, "image": CUDA_BASE, "args": ["nvidia-smi", "-L"],
                            "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
        kube.run("-n", namespace, "run", name, "--restart=Never", f"--image={CUDA_BASE}",
                 "--overrides", json.dumps(pod))
    for node, facts in gpu_nodes.items():
        name = "gpu-test-" + node.rsplit("-", 1)[-1]
        done = kube.wait_pod_done(namespace, name)
        assert "runtimeClassName" not in done["spec"]
        logs = kube.run("-n", namespace, "logs", name).stdout
        assert done["status"]["phase"] == "Succeeded", (node, done["status"], logs)
        gpus = re.findall(r"^GPU (\d+): (.+?) \(UUID: (GPU-[^)]+)\)$", logs, re.M)
        assert len(gpus) == 1, (node, logs)
        assert gpus[0][1].replace(" ", "-") == facts["product"] or facts["product"] is None, (node, logs)
        assert facts["uuids"] is None or gpus[0][2] in facts["uuids"], (node, logs)


def test_a_sick_node_is_labelled_and_tainted_until_it_is_healthy_again(lab_only, gpu_nodes):
    """gpu_info's error findings (here: the fake NVML's fault profile on the H100 node: XIDs,
    uncorrectable ECC, a row-remap failure, NVLinks down, a lost GPU; a degraded PCIe link)
    become the health label and the taint; healthy again, both go and other taints stay."""
    kube = lab_only
    node = "gpuops-lab-h100"
    kube.run("taint", "node", node, "example.com/maintenance=soon:PreferNoSchedule")
    swap = ("cp -p /etc/gpuops-fake-nvml/profile /root/profile.gpuops-test && "
            "cp /etc/gpuops-fake-nvml/profiles/hgx-h100-faults.profile /etc/gpuops-fake-nvml/profile")
    assert kube.node_exec(node, swap).returncode == 0
    restored = False
    try:
        res = playbook("site.yml", "--tags", "labels", "--limit", node, *extra(node_labels_refresh_facts=True))
        labels = kube.get("node", node)["metadata"]["labels"]
        health = labels["gpuops.nvidia/gpu.health"]
        # the codes, sorted and .-joined, within a label value's 63 characters: the next one
        # (row_remap_failure) does not fit, so the value says there are more
        assert health == "ecc_uncorrectable.gpu_lost.nvlink_down.pcie_link_degraded.more", health
        taints = kube.get("node", node)["spec"]["taints"]
        ours = [t for t in taints if t["key"] == "gpuops.nvidia/gpu-unhealthy"]
        assert ours and ours[0]["effect"] == "NoSchedule" and ours[0]["value"] == health, taints
        assert "taint gpuops.nvidia/gpu-unhealthy=" in res.stdout
        # the operands tolerate the taint and stay, to keep reporting the sick GPUs
        operands = kube.get("-n", NS, "pods", "--field-selector", f"spec.nodeName={node}")["items"]
        allocator = {"dra": "dra-driver-nvidia-gpu", "device-plugin": "nvidia-device-plugin"}[
            gpu_nodes[node]["allocation"]]
        assert {p["metadata"]["labels"].get("app.kubernetes.io/name") for p in operands} >= {
            allocator, "gpu-feature-discovery", "dcgm-exporter"}

        kube.node_exec(node, "mv /root/profile.gpuops-test /etc/gpuops-fake-nvml/profile")
        restored = True
        playbook("site.yml", "--tags", "labels", "--limit", node, *extra(node_labels_refresh_facts=True))
        after = kube.get("node", node)
        assert after["metadata"]["labels"]["gpuops.nvidia/gpu.health"] == "healthy"
        keys = [t["key"] for t in after["spec"].get("taints", [])]
        assert "gpuops.nvidia/gpu-unhealthy" not in keys and "example.com/maintenance" in keys, keys
    finally:
        if not restored:
            kube.node_exec(node, "mv /root/profile.gpuops-test /etc/gpuops-fake-nvml/profile")
            playbook("site.yml", "--tags", "labels", "--limit", node, *extra(node_labels_refresh_facts=True),
                     check=False)
        kube.run("taint", "node", node, "example.com/maintenance-", check=False)
        # the allocator saw the fault profile's XIDs and lost GPU: a fresh pod offers them all again
        kube.run("-n", NS, "delete", "pod", "-l", "app.kubernetes.io/name in (nvidia-device-plugin,dra-driver-nvidia-gpu)",
                 "--field-selector", f"spec.nodeName={node}", check=False)
        for daemonset in ("nvidia-device-plugin", "dra-driver-nvidia-gpu-kubelet-plugin"):
            kube.run("-n", NS, "rollout", "status", f"daemonset/{daemonset}", "--timeout=180s", timeout=200)
        kube.wait(lambda: kube.advertised_gpus(node, gpu_nodes[node]["allocation"]) == str(gpu_nodes[node]["gpus"]),
                  timeout=120, what=f"{node}: all its GPUs offered again")


def test_a_node_name_or_device_plugin_config_that_does_not_exist_is_named_before_any_patch(lab_only):
    """Both mistakes of one host's inventory in one message, and the node left as it was."""
    kube = lab_only
    node = "gpuops-lab-l40s"
    before = kube.get("node", node)
    res = playbook("site.yml", "--tags", "labels", "--limit", node, check=False,
                   *extra(node_labels_node_name="gpu-node-mistyped", node_labels_device_plugin_config="ts-nine",
                          device_plugin_configs={"default": {"flags": {"migStrategy": "none"}}, **TS4}))
    assert res.returncode != 0
    out = res.stdout
    assert ("node_labels_device_plugin_config is ts-nine, which is not a configuration of device_plugin_configs "
            "(default, ts-4)") in out, out[-3000:]
    assert "The cluster has no node named gpu-node-mistyped (the name of gpuops-lab-l40s)" in out, out[-3000:]
    assert "Patch the node's labels and taints" not in out
    after = kube.get("node", node)
    assert after["metadata"]["labels"] == before["metadata"]["labels"]
    assert after["spec"].get("taints") == before["spec"].get("taints")


def test_check_mode_reports_a_change_and_makes_none(lab_only):
    kube = lab_only
    configs = {"default": {"flags": {"migStrategy": "none"}}, "ts-2": TS4["ts-4"]}
    before = kube.get("-n", NS, "configmap", "nvidia-device-plugin-configs")
    res = playbook("site.yml", "--tags", "operands", "--check", "--diff", "-v", *extra(device_plugin_configs=configs))
    # the device plugin's apply reports the change: its (dry-run) result holds the new config
    changed = ["\n".join(out) for name, out in _log_tasks(res.stdout)
               if name == "gpuops.nvidia.k8s_objects : Apply the objects (server-side apply)"
               and any(line.startswith("changed: [") for line in out)]
    assert [text for text in changed if "nvidia-device-plugin-configs" in text and "ts-2" in text], \
        res.stdout[-6000:]
    assert sum(counts["changed"] for counts in recap(res.stdout).values()) >= 1, recap(res.stdout)
    after = kube.get("-n", NS, "configmap", "nvidia-device-plugin-configs")
    assert after["data"] == before["data"] and "ts-2" not in after["data"]
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


def test_a_rollout_that_cannot_complete_names_the_nodes_and_why(lab_only):
    kube = lab_only
    saved = kube.get("-n", NS, "daemonset", "dcgm-exporter", "--show-managed-fields")
    args = extra(dcgm_exporter_image="nvcr.io/nvidia/k8s/dcgm-exporter:0.0.0-missing", dcgm_exporter_wait_timeout=30)
    res = playbook("site.yml", "--tags", "operands", *args, check=False)
    try:
        assert res.returncode != 0
        out = res.stdout
        assert "DaemonSet/dcgm-exporter in gpuops-nvidia did not become ready within 30s" in out, out[-3000:]
        # a rolling update replaces one node's pod at a time: the one it started cannot pull
        # its image, and the message names that node, the pod and the kubelet's reason
        named = re.findall(r"(gpuops-lab-\w+): pod (dcgm-exporter-\w+) Pending; container exporter waiting: "
                           r"(ErrImagePull|ImagePullBackOff|ErrImageNeverPull)", out)
        assert named, out[-3000:]
    finally:
        # the exporter's DaemonSet as the roles applied it (the run stopped at its rollout)
        kube.reapply(saved)
        kube.run("-n", NS, "rollout", "status", "daemonset/dcgm-exporter", "--timeout=180s", timeout=200)
    assert applied_config(kube.get("-n", NS, "daemonset", "dcgm-exporter", "--show-managed-fields")) == \
        applied_config(saved)


def test_registry_credentials_become_a_pull_secret_and_never_reach_the_log(lab_only):
    kube = lab_only
    password = "s3cr3t-Pa55-for-the-test"
    creds = [{"name": "gpuops-test-registry", "registry": "mirror.example:5000", "username": "robot",
              "password": password}]
    res = playbook("site.yml", "--tags", "cluster", "-v", *extra(cluster_registry_credentials=creds))
    try:
        log = res.stdout + res.stderr
        assert password not in log
        secret = kube.get("-n", NS, "secret", "gpuops-test-registry")
        assert secret["type"] == "kubernetes.io/dockerconfigjson"
        # nor the credentials in the encodings the Secret carries them in
        assert base64.b64encode(f"robot:{password}".encode()).decode() not in log
        assert secret["data"][".dockerconfigjson"] not in log
        config = json.loads(base64.b64decode(secret["data"][".dockerconfigjson"]))
        assert config["auths"]["mirror.example:5000"]["password"] == password
    finally:
        kube.run("-n", NS, "delete", "secret", "gpuops-test-registry", check=False)


def test_a_bearer_token_connection_works_and_the_token_never_reaches_the_log(lab_only, tmp_path):
    """gpuops_kube_host / _api_key / _ca_cert instead of a kubeconfig (how AWX passes a cluster
    credential): a wrong token is refused by the API server, the right one works, and neither
    appears in the output, even at -vvv."""
    kube = lab_only
    sa = "gpuops-token-test"
    config = json.loads(kube.run("config", "view", "--raw", "--minify", "-o", "json").stdout)
    cluster = config["clusters"][0]["cluster"]
    ca = tmp_path / "ca.crt"
    if "certificate-authority-data" in cluster:
        ca.write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
    else:
        ca.write_text(open(cluster["certificate-authority"], encoding="utf-8").read())
    kube.run("-n", "kube-system", "create", "serviceaccount", sa)
    try:
        kube.run("create", "clusterrolebinding", sa, "--clusterrole=cluster-admin", f"--serviceaccount=kube-system:{sa}")
        token = kube.run("-n", "kube-system", "create", "token", sa, "--duration=10m").stdout.strip()
        assert token.count(".") == 2, "kubectl create token did not print a JWT"
        wrong = token[:-8] + ("A" * 8 if not token.endswith("A" * 8) else "B" * 8)

        def run(api_key, name="site.yml", *args):
            res = playbook(name, *(args or ("--tags", "labels,alerts")), "-vvv", "-e", "gpuops_kubeconfig=",
                           *extra(gpuops_kube_host=cluster["server"], gpuops_kube_api_key=api_key,
                                  gpuops_kube_ca_cert=str(ca)), check=False)
            log = res.stdout + res.stderr
            assert api_key not in log, "the bearer token was printed"
            assert token.split(".")[2] not in log and wrong.split(".")[2] not in log
            return res, log

        res, log = run(wrong)
        assert res.returncode != 0 and "Unauthorized" in log, log[-3000:]
        res, log = run(token)
        assert res.returncode == 0, log[-6000:]
        assert "failed=0" in log[log.rindex("PLAY RECAP"):]
        # the remediation's plan reads the node with the same connection (check mode: nothing changes)
        alert = {"node": "gpuops-lab-l40s", "finding": "xid", "action": "gpu-reset", "labels": {"gpu": "0"}}
        res, log = run(token, "remediate.yml", "--check", *extra(gpuops_remediation_alert=alert))
        assert res.returncode == 0, log[-6000:]
        assert "gpuops-lab-l40s: gpu-reset - xid on GPU 0" in log
    finally:
        kube.run("delete", "clusterrolebinding", sa, check=False)
        kube.run("-n", "kube-system", "delete", "serviceaccount", sa, check=False)


def test_a_service_monitor_once_the_prometheus_operator_is_there(lab_only):
    """With the Prometheus Operator's ServiceMonitor type in the cluster (here its CRD only), the
    exporter role adds a ServiceMonitor; without it, it says why there is none."""
    kube = lab_only
    res = playbook("site.yml", "--tags", "operands")
    assert "No ServiceMonitor: the cluster has no Prometheus Operator" in res.stdout
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "servicemonitors.monitoring.coreos.com"},
           "spec": {"group": "monitoring.coreos.com", "scope": "Namespaced",
                    "names": {"kind": "ServiceMonitor", "listKind": "ServiceMonitorList", "plural": "servicemonitors",
                              "singular": "servicemonitor"},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "schema": {"openAPIV3Schema": {"type": "object",
                                                                 "x-kubernetes-preserve-unknown-fields": True}}}]}}
    kube.apply(crd)
    kube.run("wait", "--for=condition=Established", "crd/servicemonitors.monitoring.coreos.com", "--timeout=60s")
    try:
        playbook("site.yml", "--tags", "operands", *extra(dcgm_exporter_service_monitor_labels={"release": "prom"}))
        sm = kube.get("-n", NS, "servicemonitor", "dcgm-exporter")
        assert sm["metadata"]["labels"]["release"] == "prom"
        assert sm["spec"]["endpoints"][0]["port"] == "metrics"
        assert sm["spec"]["selector"]["matchLabels"] == {"app.kubernetes.io/name": "dcgm-exporter"}
    finally:
        kube.run("delete", "crd", "servicemonitors.monitoring.coreos.com", check=False)


def _render(tmp_path):
    out = tmp_path / "render"
    playbook("site.yml", "--tags", "cluster,operands", "-e", f"gpuops_render_dir={out}")
    return out


def test_kubectl_apply_of_the_rendered_objects_changes_nothing(lab_only, tmp_path):
    """Render mode and the roles' apply agree: a server-side diff of the rendered files (same
    field manager) against what the roles applied finds no difference."""
    kube = lab_only
    out = _render(tmp_path)
    files = sorted(os.listdir(out))
    assert any(f.startswith("40-daemonset-") for f in files), files
    res = kube.run("diff", "--server-side", "--field-manager=gpuops-nvidia", "--force-conflicts", "-f", str(out),
                   check=False)
    assert res.returncode == 0, f"rendered objects differ from the applied ones:\n{res.stdout[-4000:]}{res.stderr}"


def _snapshot(kube):
    """What the roles can touch: our objects (by label) in every namespace and cluster-wide, and
    the nodes' labels, annotations and taints."""
    kinds = ("namespaces,runtimeclasses,priorityclasses,clusterroles,clusterrolebindings,customresourcedefinitions,"
             "deviceclasses,validatingadmissionpolicies,validatingadmissionpolicybindings")
    cluster = kube.get(kinds, "-l", "app.kubernetes.io/managed-by=gpuops.nvidia")["items"]
    ns_objects = []
    if kube.run("get", "namespace", NS, check=False).returncode == 0:
        ns_objects = kube.get("-n", NS, "all,configmaps,secrets,serviceaccounts,roles,rolebindings")["items"]
    nodes = {}
    for node in kube.get("nodes")["items"]:
        meta = node["metadata"]
        nodes[meta["name"]] = {
            "labels": {k: v for k, v in meta.get("labels", {}).items() if k != "nvidia.com/gfd.timestamp"},
            "annotations": {k: v for k, v in meta.get("annotations", {}).items()
                            if not k.startswith("node.alpha.kubernetes.io/")},
            "taints": node["spec"].get("taints", [])}
    return {"cluster": sorted((o["kind"], o["metadata"]["name"]) for o in cluster),
            "namespaced": sorted((o["kind"], o["metadata"]["name"]) for o in ns_objects
                                 if o["kind"] not in ("Event",) and o["metadata"]["name"] != "kube-root-ca.crt"
                                 and not (o["kind"] == "ServiceAccount" and o["metadata"]["name"] == "default")),
            "nodes": nodes}


ABSENT = extra(cluster_state="absent", node_labels_state="absent", device_plugin_state="absent",
               dra_driver_state="absent", gpu_feature_discovery_state="absent", dcgm_exporter_state="absent")


def _absent():
    # one run: the cluster stage deletes the namespace (and the operands in it) first, then the
    # labels and the operands' cluster-wide objects go
    playbook("site.yml", "--tags", "cluster,labels,operands", *ABSENT)


# what the roles and their operands write on a node: GFD's and the roles' labels, NFD's labels and
# annotations, the roles' annotations and taints
OURS = ("nvidia.com/", "gpuops.nvidia/", "feature.node.kubernetes.io/", "nfd.node.kubernetes.io/")


def _without_ours(node):
    return {"labels": {k: v for k, v in node["labels"].items() if not k.startswith(OURS)},
            "annotations": {k: v for k, v in node["annotations"].items() if not k.startswith(OURS)},
            "taints": [t for t in node["taints"] if not t["key"].startswith(OURS)]}


def _pods_by_owner(snapshot):
    """The snapshot with each pod named by its owner (the name without the pod's random suffix)."""
    return dict(snapshot, namespaced=sorted((kind, name.rsplit("-", 1)[0] if kind == "Pod" else name)
                                            for kind, name in snapshot["namespaced"]))


def test_state_absent_leaves_the_cluster_as_it_was(lab_only):
    """Removed, no object of the roles is left, and of the nodes' labels, annotations and taints
    exactly those the roles and their operands wrote are gone, every other one as it was; applied
    again, the cluster and its nodes are exactly as they were converged."""
    kube = lab_only
    converged = _snapshot(kube)
    for name, node in converged["nodes"].items():
        assert [k for k in node["labels"] if k.startswith("nvidia.com/")], (name, node)
        assert [k for k in node["labels"] if k.startswith("feature.node.kubernetes.io/")], (name, node)
    assert converged["cluster"] and converged["namespaced"]
    try:
        _absent()
        removed = _snapshot(kube)
        assert removed["cluster"] == [] and removed["namespaced"] == [], removed
        assert removed["nodes"] == {name: _without_ours(node) for name, node in converged["nodes"].items()}
    finally:
        playbook("site.yml", "--tags", "cluster,labels,operands")
    # GFD's and NFD's labels come from the operands once they run: wait for them, not the run
    kube.wait(lambda: _snapshot(kube)["nodes"] == converged["nodes"], timeout=120,
              what="the nodes' labels, annotations and taints as they were converged")
    assert _pods_by_owner(_snapshot(kube)) == _pods_by_owner(converged)


def test_only_a_drifted_node_goes_through_the_driver_stage_for_real(lab_only):
    """The driver stage plans every node at once in check mode and runs for real only where the
    plan found work: a node whose nouveau blacklist went missing gets it back (and its initramfs
    rebuilt), the converged node is planned and left alone, changing nothing."""
    kube = lab_only
    node, other = "gpuops-lab-l40s", "gpuops-lab-h100"
    conf = "/etc/modprobe.d/blacklist-nouveau-gpuops.conf"
    assert kube.node_exec(node, f"rm {conf}").returncode == 0
    res = playbook("site.yml", "--tags", "driver")
    assert "blacklist nouveau" in kube.node_exec(node, f"cat {conf}").stdout
    assert recap(res.stdout)[other]["changed"] == 0
    tasks = _log_tasks(res.stdout)
    real = [line for name, out in tasks if name == "Install, hold and verify the driver where the plan found something to change"
            for line in out]
    assert f"skipping: [{other}]" in real and not any(node in line and "skipping" in line for line in real), real
    # the initramfs: the plan's handler changes nothing, the real run's rebuilds it
    start = res.stdout.index("PLAY [Stage 2 - plan the NVIDIA driver")
    split = res.stdout.index("PLAY [Stage 2 - NVIDIA driver on the nodes the plan found work on")
    handler = r"RUNNING HANDLER \[gpuops\.nvidia\.driver : Rebuild the initramfs\] \**\n(\S+): \[%s\]" % node
    assert [m.group(1) for m in re.finditer(handler, res.stdout[start:split])] == ["skipping"]
    assert [m.group(1) for m in re.finditer(handler, res.stdout[split:])] == ["changed"]


def test_a_passed_workload_is_carried_over_only_when_the_host_stages_changed_nothing(lab_only):
    """validate.yml alone runs the test pod; with the host stages' change lists empty (as a
    converged site run has them) the pass is carried over, saying so; with a change, it runs."""
    res, nodes = validate()
    ran = {name: next(c for c in node["checks"] if c["check"] == "workload") for name, node in nodes.items()}
    assert all(c["ok"] and not c.get("reused") and "Test PASSED" in c["evidence"][0] for c in ran.values()), ran
    unchanged = {"driver_changes": [], "container_toolkit_changes": []}
    res, nodes = validate(**unchanged)
    for name, node in nodes.items():
        check = next(c for c in node["checks"] if c["check"] == "workload")
        assert check["ok"] and check["reused"], check
        assert check["evidence"][0].startswith(f"not run again: it passed on this node with driver {node['driver']}")
        assert check["evidence"][1:] == ran[name]["evidence"]
    assert "Start the test pod" not in res.stdout
    res, nodes = validate(**{**unchanged, "container_toolkit_changes": ["containerd configured and restarted"]})
    assert not any(next(c for c in n["checks"] if c["check"] == "workload").get("reused") for n in nodes.values())
