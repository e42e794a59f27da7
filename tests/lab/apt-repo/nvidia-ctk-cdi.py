# `nvidia-ctk cdi ...` of the gpuops lab placeholder toolkit (tests/lab/apt-repo). Not NVIDIA's
# program: a small stand-in, written for the lab, that produces a CDI spec of the same shape as
# `nvidia-ctk cdi generate` from what NVML reports (the lab's fake libnvidia-ml.so.1 through the
# real pynvml bindings), so roles can generate, check and regenerate specs on simulated nodes.
#
#   nvidia-ctk cdi generate [--output=FILE] [--format=yaml|json] [--device-name-strategy=S ...]
#                           [--vendor=V] [--class=C] [--dev-root=DIR]
#   nvidia-ctk cdi list [--spec-dir=DIR ...]
#
# Like the real command it fails when NVML cannot be initialised (no library, driver not
# loaded) and writes nothing then.
"""Lab stand-in for `nvidia-ctk cdi generate|list`."""

import json
import os
import sys
import tempfile

CONTROL_NODES = ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"]
HOOK = "/usr/bin/nvidia-cdi-hook"


def die(message):
    sys.stderr.write("time=\"-\" level=error msg=\"%s\"\n" % message)
    sys.exit(1)


def options(argv):
    """--key=value / --key value pairs; repeated keys collect into lists."""
    result, rest = {}, list(argv)
    while rest:
        arg = rest.pop(0)
        if not arg.startswith("--"):
            die("unexpected argument %r" % arg)
        key, sep, value = arg[2:].partition("=")
        if not sep:
            if not rest:
                die("flag needs an argument: --%s" % key)
            value = rest.pop(0)
        result.setdefault(key, []).append(value)
    return result


def text(value):
    return value.decode() if isinstance(value, bytes) else value


def read_devices():
    """[(names, device node)] for every GPU and MIG device, per the name strategies."""
    try:
        import pynvml  # pylint: disable=import-outside-toplevel
    except ImportError:
        die("failed to generate CDI spec: failed to initialize NVML: ERROR_LIBRARY_NOT_FOUND")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        die("failed to generate CDI spec: failed to initialize NVML: %s" % exc)
    try:
        driver = text(pynvml.nvmlSystemGetDriverVersion())
        devices = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            node = "/dev/nvidia%d" % pynvml.nvmlDeviceGetMinorNumber(handle)
            devices.append((str(i), text(pynvml.nvmlDeviceGetUUID(handle)), [node]))
            try:
                current, _pending = pynvml.nvmlDeviceGetMigMode(handle)
            except pynvml.NVMLError:
                current = 0
            if current != 1:
                continue
            for j in range(pynvml.nvmlDeviceGetMaxMigDeviceCount(handle)):
                try:
                    mig = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, j)
                except pynvml.NVMLError:
                    continue
                devices.append(("%d:%d" % (i, j), text(pynvml.nvmlDeviceGetUUID(mig)), [node]))
        return driver, devices
    finally:
        pynvml.nvmlShutdown()


def generate(opts):
    strategies = opts.get("device-name-strategy") or ["index", "uuid"]
    unknown = set(strategies) - {"index", "uuid"}
    if unknown:
        die("invalid device name strategy: %s" % ", ".join(sorted(unknown)))
    vendor = (opts.get("vendor") or ["nvidia.com"])[-1]
    klass = (opts.get("class") or ["gpu"])[-1]
    dev_root = (opts.get("dev-root") or ["/"])[-1]
    driver, found = read_devices()
    devices, every_node = [], []
    for index_name, uuid, nodes in found:
        for node in nodes:
            if node not in every_node:
                every_node.append(node)
        for strategy, name in (("index", index_name), ("uuid", uuid)):
            if strategy in strategies:
                devices.append({"name": name, "containerEdits": {"deviceNodes": [{"path": node} for node in nodes]}})
    devices.append({"name": "all", "containerEdits": {"deviceNodes": [{"path": node} for node in every_node]}})
    control = [node for node in CONTROL_NODES if os.path.exists(os.path.join(dev_root, node.lstrip("/")))]
    for node in sorted(set(CONTROL_NODES) - set(control)):
        sys.stderr.write("time=\"-\" level=warning msg=\"Could not locate %s: pattern not found\"\n" % node)
    spec = {
        "cdiVersion": "0.5.0",
        "kind": "%s/%s" % (vendor, klass),
        "devices": devices,
        "containerEdits": {
            "env": ["NVIDIA_VISIBLE_DEVICES=void"],
            "deviceNodes": [{"path": node} for node in control],
            "hooks": [{"hookName": "createContainer", "path": HOOK,
                       "args": ["nvidia-cdi-hook", "create-symlinks", "--link",
                                "libnvidia-ml.so.%s::/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1" % driver]}],
        },
    }
    output = (opts.get("output") or opts.get("output-file") or [""])[-1]
    fmt = (opts.get("format") or [""])[-1] or ("json" if output.endswith(".json") else "yaml")
    try:
        import yaml  # pylint: disable=import-outside-toplevel
    except ImportError:
        yaml = None  # JSON is YAML too
    if fmt == "json" or yaml is None:
        body = json.dumps(spec, indent=2) + "\n"
    else:
        body = "---\n" + yaml.safe_dump(spec, default_flow_style=False, sort_keys=False)
    if not output:
        sys.stdout.write(body)
        return
    directory = os.path.dirname(os.path.abspath(output))
    os.makedirs(directory, exist_ok=True)
    handle, temp = tempfile.mkstemp(dir=directory, prefix=".nvidia-ctk-")
    with os.fdopen(handle, "w") as out:
        out.write(body)
    os.chmod(temp, 0o644)
    os.replace(temp, output)
    sys.stderr.write("time=\"-\" level=info msg=\"Generated CDI spec with version 0.5.0\"\n")


def list_devices(opts):
    try:
        import yaml  # pylint: disable=import-outside-toplevel
    except ImportError:
        yaml = None
    names = []
    for directory in opts.get("spec-dir") or ["/etc/cdi", "/var/run/cdi"]:
        if not os.path.isdir(directory):
            continue
        for entry in sorted(os.listdir(directory)):
            if entry.endswith((".yaml", ".yml", ".json")):
                with open(os.path.join(directory, entry), encoding="utf-8") as handle:
                    data = (yaml.safe_load if yaml else json.load)(handle) or {}
                names += ["%s=%s" % (data.get("kind"), device.get("name")) for device in data.get("devices") or []]
    sys.stderr.write("time=\"-\" level=info msg=\"Found %d CDI devices\"\n" % len(names))
    sys.stdout.write("".join(name + "\n" for name in names))


def main(argv):
    if not argv or argv[0] not in ("generate", "list"):
        die("nvidia-ctk cdi (gpuops lab placeholder): only 'generate' and 'list' are implemented")
    opts = options(argv[1:])
    if argv[0] == "generate":
        generate(opts)
    else:
        list_devices(opts)


if __name__ == "__main__":
    main(sys.argv[1:])
