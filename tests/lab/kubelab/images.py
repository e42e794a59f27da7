"""Container images for the lab cluster, built from local files, without a registry or a
container engine: each image is one layer written here as a Docker image archive (the format
of `docker save`), which `ctr -n k8s.io images import` loads into a node's containerd.

The images around NVIDIA's and Kubernetes' components carry the upstream names and tags, so
that manifests written for real clusters deploy them unchanged; what is inside is the real
binary built from its Go module (tests/lab/go-binaries) plus the shared libraries it links,
with the environment and entrypoint of the upstream image (each recipe says where that is
from). The lab's own images are named localhost/gpuops-lab/...
"""

import hashlib
import io
import json
import os
import subprocess
import tarfile

# a fixed timestamp: the same inputs give the same archive (and image ID)
EPOCH = 1700000000
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _parents(path):
    parts = path.strip("/").split("/")[:-1]
    return ["/".join(parts[:i + 1]) for i in range(len(parts))]


def shared_libraries(binary):
    """The files the dynamic loader maps for BINARY (ldd), as absolute host paths; [] for a
    static binary."""
    res = subprocess.run(["ldd", binary], capture_output=True, text=True, check=False)
    if res.returncode != 0 or "not a dynamic executable" in res.stdout + res.stderr:
        return []
    libs = []
    for line in res.stdout.splitlines():
        line = line.strip()
        if "=>" in line:
            target = line.split("=>", 1)[1].split("(")[0].strip()
            if target and target != "not":
                libs.append(target)
            elif "not found" in line:
                raise RuntimeError(f"{binary}: {line}")
        elif line.startswith("/"):
            libs.append(line.split("(")[0].strip())  # the loader itself
    return libs


class Image:
    """One image: files (host path -> image path), symlinks, directories, config."""

    def __init__(self, tags, entrypoint=None, cmd=None, env=None, labels=None, workdir="/", user=None):
        self.tags = list(tags)
        self.user = user
        self.entrypoint = entrypoint
        self.cmd = cmd
        self.env = dict(env or {})
        self.labels = dict(labels or {})
        self.workdir = workdir
        self.files = {}  # image path -> (host path or bytes, mode)
        self.links = {}  # image path -> target
        self.dirs = {"tmp": 0o1777, "etc": 0o755}

    def add(self, host_path, image_path=None, mode=None):
        image_path = (image_path or host_path).lstrip("/")
        real = os.path.realpath(host_path)
        self.files[image_path] = (real, mode if mode is not None else os.stat(real).st_mode & 0o7777)
        return self

    def add_text(self, image_path, text, mode=0o644):
        self.files[image_path.lstrip("/")] = (text.encode(), mode)
        return self

    def link(self, image_path, target):
        self.links[image_path.lstrip("/")] = target
        return self

    def add_binary(self, host_path, image_path):
        """A program and every shared library it links, at the libraries' host paths."""
        self.add(host_path, image_path, 0o755)
        for lib in shared_libraries(host_path):
            self.add(lib, lib)
        return self

    def _layer(self):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
            entries = set(self.dirs)
            for p in list(self.files) + list(self.links):
                entries.update(_parents(p))
            for d in sorted(entries):
                info = tarfile.TarInfo(d)
                info.type, info.mode, info.mtime = tarfile.DIRTYPE, self.dirs.get(d, 0o755), EPOCH
                tar.addfile(info)
            for p in sorted(self.links):
                info = tarfile.TarInfo(p)
                info.type, info.linkname, info.mtime, info.mode = tarfile.SYMTYPE, self.links[p], EPOCH, 0o777
                tar.addfile(info)
            for p in sorted(self.files):
                src, mode = self.files[p]
                data = src if isinstance(src, bytes) else open(src, "rb").read()
                info = tarfile.TarInfo(p)
                info.size, info.mode, info.mtime = len(data), mode, EPOCH
                tar.addfile(info, io.BytesIO(data))
        return buf.getvalue()

    def write(self, path):
        """Writes the image as a Docker image archive at PATH; returns its image ID."""
        layer = self._layer()
        diff_id = "sha256:" + hashlib.sha256(layer).hexdigest()
        config = {
            "architecture": "amd64",
            "os": "linux",
            "created": "2023-11-14T22:13:20Z",
            "config": {
                # PATH first: the default unless the recipe sets its own
                "Env": ["PATH=" + self.env.get("PATH", DEFAULT_PATH)]
                + [f"{k}={v}" for k, v in sorted(self.env.items()) if k != "PATH"],
                "Entrypoint": self.entrypoint,
                "Cmd": self.cmd,
                "WorkingDir": self.workdir,
                **({"User": self.user} if self.user else {}),
                "Labels": self.labels or None,
            },
            "rootfs": {"type": "layers", "diff_ids": [diff_id]},
            "history": [{"created": "2023-11-14T22:13:20Z", "created_by": "gpuops lab (tests/lab/kubelab/images.py)"}],
        }
        config_bytes = json.dumps(config, sort_keys=True).encode()
        image_id = hashlib.sha256(config_bytes).hexdigest()
        manifest = [{"Config": f"{image_id}.json", "RepoTags": self.tags, "Layers": [f"{diff_id[7:]}/layer.tar"]}]
        tmp = path + ".tmp"
        with tarfile.open(tmp, "w") as tar:
            for name, data in ((f"{diff_id[7:]}/layer.tar", layer), (f"{image_id}.json", config_bytes),
                               ("manifest.json", json.dumps(manifest).encode())):
                info = tarfile.TarInfo(name)
                info.size, info.mode, info.mtime = len(data), 0o644, EPOCH
                tar.addfile(info, io.BytesIO(data))
        os.replace(tmp, path)
        return image_id


def base_files(image):
    """What every lab image has besides its program: root's passwd/group entries."""
    image.add_text("etc/passwd", "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n")
    image.add_text("etc/group", "root:x:0:\nnogroup:x:65534:\n")
    return image


# ---- the lab's images ------------------------------------------------------------------------

HERE = os.path.dirname(os.path.abspath(__file__))
BUSYBOX = "/bin/busybox"
TOOLBOX_APPLETS = ["sh", "ls", "cat", "echo", "sleep", "env", "grep", "head", "tail", "wc", "true", "false",
                   "test", "[", "mkdir", "rm", "cp", "mv", "ln", "ps", "id", "uname", "date", "tr", "cut",
                   "sort", "uniq", "stat", "find", "xargs", "printf", "wget", "nc", "hostname", "timeout"]
# glibc, for the NVIDIA programs the toolkit injects into a container (nvidia-smi is dynamic)
GLIBC = ["/lib64/ld-linux-x86-64.so.2", "/lib/x86_64-linux-gnu/libc.so.6", "/lib/x86_64-linux-gnu/libm.so.6",
         "/lib/x86_64-linux-gnu/libpthread.so.0", "/lib/x86_64-linux-gnu/libdl.so.2",
         "/lib/x86_64-linux-gnu/librt.so.1"]


def toolbox_files(image):
    """busybox with the toolbox's applets in /bin, and glibc for what the NVIDIA runtime injects."""
    image.add(BUSYBOX, "/bin/busybox", 0o755)
    for applet in TOOLBOX_APPLETS:
        image.link(f"/bin/{applet}", "busybox")
    for lib in GLIBC:
        image.add(lib, lib)
    return image


def _require_cuda(cuda, brands, drivers):
    """NVIDIA_REQUIRE_CUDA as NVIDIA's CUDA images write it: the CUDA version, or one of the
    listed driver branches (which the image's cuda-compat package serves) for each brand."""
    return " ".join([f"cuda>={cuda}"] + [f"brand={b},driver>={d},driver<{d + 1}" for d in drivers for b in brands])


def cuda_base_env(version, cudart, require):
    """The environment of nvidia/cuda:VERSION-base-ubuntu22.04 (amd64), from its Dockerfile in
    gitlab.com/nvidia/container-images/cuda, dist/VERSION/ubuntu2204/base/Dockerfile: the
    NVIDIA_* variables the NVIDIA runtime reads (NVIDIA_VISIBLE_DEVICES, NVIDIA_DRIVER_CAPABILITIES;
    NVIDIA_REQUIRE_CUDA, which the toolkit checks only in its legacy hook and CSV mode, not for CDI)
    and the rest as the image sets them."""
    major_minor = ".".join(version.split(".")[:2])
    return {
        "NVARCH": "x86_64",
        "NVIDIA_REQUIRE_CUDA": require,
        "NV_CUDA_CUDART_VERSION": cudart,
        "NV_CUDA_COMPAT_PACKAGE": "cuda-compat-" + major_minor.replace(".", "-"),
        "CUDA_VERSION": version,
        "PATH": "/usr/local/nvidia/bin:/usr/local/cuda/bin:" + DEFAULT_PATH,
        "LD_LIBRARY_PATH": "/usr/local/nvidia/lib:/usr/local/nvidia/lib64",
        "NVIDIA_VISIBLE_DEVICES": "all",
        "NVIDIA_DRIVER_CAPABILITIES": "compute,utility",
    }


# the driver branches and brands each CUDA release's images list (dist/12.4.1 and dist/12.5.0)
CUDA_12_4_1_ENV = cuda_base_env("12.4.1", "12.4.127-1", _require_cuda(
    "12.4", ["tesla", "unknown", "nvidia", "nvidiartx", "geforce", "geforcertx", "quadro", "quadrortx", "titan",
             "titanrtx"], [470, 525, 535]))
CUDA_12_5_0_ENV = cuda_base_env("12.5.0", "12.5.39-1", _require_cuda(
    "12.5", ["unknown", "grid", "tesla", "nvidia", "quadro", "quadrortx", "nvidiartx", "vapps", "vpc", "vcs", "vws",
             "cloudgaming"], [470, 535, 550]))


def _pause_binary(out_dir):
    src = os.path.join(HERE, "pause.c")
    out = os.path.join(out_dir, "pause")
    if not os.path.exists(out) or os.path.getmtime(out) < os.path.getmtime(src):
        subprocess.run(["gcc", "-static", "-Os", "-Wall", "-Wextra", "-Werror", "-o", out + ".tmp", src], check=True)
        os.replace(out + ".tmp", out)
    return out


def nfd_module_dir():
    return module_dir("sigs.k8s.io/node-feature-discovery@v0.19.0")


def cuda_base_image():
    """The lab's stand-in for NVIDIA's CUDA base image (Ubuntu 22.04 and the CUDA runtime package):
    the toolbox's contents with the real image's environment, so that the NVIDIA runtime treats it
    as it treats the real one; a pod names its command (nvidia-smi, which the runtime injects)."""
    return toolbox_files(base_files(Image(
        ["nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04"], cmd=["sh"], env=CUDA_12_4_1_ENV,
        labels={"org.gpuops.lab": "the gpuops lab's stand-in for NVIDIA's CUDA base image: busybox and glibc, "
                                  "no Ubuntu, no CUDA runtime"})))


def cuda_vectoradd_image(bins):
    """The lab's stand-in for NVIDIA's CUDA sample vectorAdd (tests/lab/go/cuda-vectoradd: no CUDA
    here; it needs the GPU device node the runtime injects and adds the vectors on the CPU).
    NVIDIA/k8s-samples, deployments/container/Dockerfile.ubuntu (commit 6a58730, the ubuntu22.04
    images): FROM nvidia/cuda:12.5.0-base-ubuntu22.04, the sample in /cuda-samples/vectorAdd,
    /cuda-samples/sample linked to it, ENTRYPOINT ["/cuda-samples/sample"]."""
    image = toolbox_files(base_files(Image(
        ["nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0-ubuntu22.04"], entrypoint=["/cuda-samples/sample"],
        env=CUDA_12_5_0_ENV,
        labels={"org.gpuops.lab": "the gpuops lab's stand-in for NVIDIA's CUDA sample vectorAdd, not NVIDIA's "
                                  "program: no CUDA (tests/lab/go/cuda-vectoradd)"})))
    image.add_binary(os.path.join(bins["cuda-vectoradd"], "vectorAdd"), "/cuda-samples/vectorAdd")
    image.link("/cuda-samples/sample", "/cuda-samples/vectorAdd")
    return image


DRA_DRIVER_MODULE = "sigs.k8s.io/dra-driver-nvidia-gpu@v0.4.1"
# what the DRA driver's scripts (the chart's container commands, kubelet-plugin-prestart.sh) run
# besides bash; the upstream image has them from distroless/cc:debug's busybox
DRA_APPLETS = ["basename", "sed", "mount", "dirname", "readlink"]


def module_dir(module):
    res = subprocess.run(["go", "mod", "download", "-json", module], capture_output=True, text=True, check=True)
    return json.loads(res.stdout)["Dir"]


def dra_driver_image(bins):
    """NVIDIA's DRA driver for GPUs (sigs.k8s.io/dra-driver-nvidia-gpu v0.4.1,
    deployments/container/Dockerfile): its three ENV lines, the labels, the kubelet plugin in
    /usr/bin with the toolkit's nvidia-cdi-hook (of the toolkit version its go.mod requires, as
    the Dockerfile copies it from that toolkit image), bash (the chart's containers run
    `bash -c`), hack/kubelet-plugin-prestart.sh (the chart's init container) and /templates
    from the module; busybox where the upstream image has distroless/cc:debug's. Only the GPU
    kubelet plugin: the ComputeDomain programs and the webhook are not built (not deployed)."""
    image = toolbox_files(base_files(Image(
        ["registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v0.4.1"], user="root:root",
        env={"NVIDIA_DISABLE_REQUIRE": "true", "NVIDIA_VISIBLE_DEVICES": "all",
             "NVIDIA_DRIVER_CAPABILITIES": "utility"},
        labels={"name": "DRA Driver for NVIDIA GPUs", "vendor": "NVIDIA", "version": "v0.4.1",
                "org.gpuops.lab": "built by the gpuops lab from the module's sources (the GPU kubelet plugin only)"})))
    for applet in DRA_APPLETS:
        image.link(f"/bin/{applet}", "busybox")
    image.add_binary("/bin/bash", "/bin/bash")
    for b in ("gpu-kubelet-plugin", "nvidia-cdi-hook"):
        image.add_binary(os.path.join(bins["dra-driver"], b), f"/usr/bin/{b}")
    src = module_dir(DRA_DRIVER_MODULE)
    image.add(os.path.join(src, "hack", "kubelet-plugin-prestart.sh"), "/usr/bin/kubelet-plugin-prestart.sh", 0o755)
    image.add(os.path.join(src, "LICENSE"), "/LICENSE", 0o644)
    for name in sorted(os.listdir(os.path.join(src, "templates"))):
        image.add(os.path.join(src, "templates", name), f"/templates/{name}", 0o644)
    return image


def lab_images(out_dir, bins):
    """name -> Image. BINS: the directories of tests/lab/go-binaries' sets."""
    pause = base_files(Image(
        # the sandbox images containerd 1.6 (Debian 12), 1.7 (Debian 13) and 2.x use by default
        ["registry.k8s.io/pause:3.6", "registry.k8s.io/pause:3.8", "registry.k8s.io/pause:3.10"],
        entrypoint=["/pause"]))
    pause.add(_pause_binary(out_dir), "/pause", 0o755)

    # NVIDIA/k8s-device-plugin v0.19.3, deployments/container/Dockerfile: the three ENV lines,
    # the binaries in /usr/bin, ENTRYPOINT ["nvidia-device-plugin"]; GFD is the same image
    dp = base_files(Image(
        ["nvcr.io/nvidia/k8s-device-plugin:v0.19.3"], entrypoint=["nvidia-device-plugin"],
        env={"NVIDIA_DISABLE_REQUIRE": "true", "NVIDIA_VISIBLE_DEVICES": "all",
             "NVIDIA_DRIVER_CAPABILITIES": "compute,utility"},
        labels={"name": "NVIDIA Device Plugin", "vendor": "NVIDIA", "version": "v0.19.3",
                "org.gpuops.lab": "built by the gpuops lab from the module's sources"}))
    for b in ("nvidia-device-plugin", "gpu-feature-discovery", "config-manager"):
        dp.add_binary(os.path.join(bins["device-plugin"], b), f"/usr/bin/{b}")

    # kubernetes-sigs/node-feature-discovery v0.19.0, Dockerfile: the binaries in /usr/bin, the
    # example worker configuration, GRPC_GO_LOG_SEVERITY_LEVEL, USER 65534:65534 (its deployment
    # says runAsNonRoot); built with hostpath prefix /host-
    nfd = base_files(Image(
        ["registry.k8s.io/nfd/node-feature-discovery:v0.19.0",
         "registry.k8s.io/nfd/node-feature-discovery:v0.19.0-minimal"],
        env={"GRPC_GO_LOG_SEVERITY_LEVEL": "INFO"}, user="65534:65534",
        labels={"org.gpuops.lab": "built by the gpuops lab from the module's sources"}))
    for b in ("nfd-master", "nfd-worker", "nfd-gc"):
        nfd.add_binary(os.path.join(bins["nfd"], b), f"/usr/bin/{b}")
    nfd.add(os.path.join(nfd_module_dir(), "deployment/components/worker-config/nfd-worker.conf.example"),
            "/etc/kubernetes/node-feature-discovery/nfd-worker.conf", 0o644)

    # The lab's stand-in for NVIDIA's DCGM exporter (tests/lab/go/dcgm-exporter; DCGM is not
    # obtainable) under the image names the GPU Operator v26.7.0 and v25.10.1 deploy, with the
    # default counters at the path of the real image
    dcgm = base_files(Image(
        ["nvcr.io/nvidia/k8s/dcgm-exporter:4.6.0-4.8.3-distroless",
         "nvcr.io/nvidia/k8s/dcgm-exporter:4.4.2-4.7.0-distroless"],
        entrypoint=["/usr/bin/dcgm-exporter"],
        env={"NVIDIA_VISIBLE_DEVICES": "all", "NVIDIA_DISABLE_REQUIRE": "true",
             "NVIDIA_DRIVER_CAPABILITIES": "compute,utility,compat32"},
        labels={"org.gpuops.lab": "the gpuops lab's stand-in for the DCGM exporter, not NVIDIA's program"}))
    dcgm.add_binary(os.path.join(bins["dcgm-exporter"], "dcgm-exporter"), "/usr/bin/dcgm-exporter")
    dcgm.add(os.path.join(HERE, "dcgm-default-counters.csv"), "/etc/dcgm-exporter/default-counters.csv", 0o644)

    # the lab's test pods: busybox, and glibc for what the NVIDIA runtime injects
    toolbox = toolbox_files(base_files(Image(["localhost/gpuops-lab/toolbox:1"], cmd=["sh"])))

    return {"pause": pause, "k8s-device-plugin": dp, "node-feature-discovery": nfd, "dcgm-exporter": dcgm,
            "dra-driver": dra_driver_image(bins), "toolbox": toolbox, "cuda-base": cuda_base_image(), "cuda-sample-vectoradd": cuda_vectoradd_image(bins)}


def _recipe_stamp(image):
    h = hashlib.sha256()
    h.update(json.dumps([image.tags, image.entrypoint, image.cmd, image.env, image.labels, image.workdir, image.user,
                         sorted(image.links.items()), sorted(image.dirs.items())]).encode())
    for p in sorted(image.files):
        src, mode = image.files[p]
        h.update(p.encode() + b"\0" + str(mode).encode())
        if isinstance(src, bytes):
            h.update(src)
        else:
            st = os.stat(src)
            h.update(f"{src}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()


def build_lab_images(out_dir, bins):
    """Writes every lab image's archive into OUT_DIR (again only when its inputs changed);
    returns {archive path: tags}."""
    os.makedirs(out_dir, exist_ok=True)
    out = {}
    for name, image in lab_images(out_dir, bins).items():
        path = os.path.join(out_dir, name + ".tar")
        stamp = _recipe_stamp(image)
        stamp_path = path + ".stamp"
        if not (os.path.exists(path) and os.path.exists(stamp_path) and open(stamp_path).read() == stamp):
            image.write(path)
            with open(stamp_path, "w") as f:
                f.write(stamp)
        out[path] = image.tags
    return out


def archive_image_id(path):
    """The image ID (config digest) of a Docker image archive."""
    with tarfile.open(path) as tar:
        manifest = json.load(tar.extractfile("manifest.json"))
    return manifest[0]["Config"].split(".")[0]
