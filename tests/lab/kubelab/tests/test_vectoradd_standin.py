# -*- coding: utf-8 -*-
"""The lab's stand-ins for NVIDIA's CUDA images on their own (no cluster): the vectorAdd sample's
stand-in (tests/lab/go/cuda-vectoradd) fails as the real sample does where the container has no
GPU device node and prints the sample's lines where it has one; the images carry it, and the CUDA
base image's stand-in the toolbox, with the real images' environment and entrypoint, and the lab
builds them again when their inputs change."""
from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import tarfile

import pytest

from conftest import LAB, require
from kubelab import images

SAMPLE_HEAD = "[Vector addition of 50000 elements]\n"
# NVIDIA/cuda-samples Samples/0_Introduction/vectorAdd/vectorAdd.cu: stdout of a passing run
PASSED = (SAMPLE_HEAD
          + "Copy input data from the host memory to the CUDA device\n"
          + "CUDA kernel launch with 196 blocks of 256 threads\n"
          + "Copy output data from the CUDA device to the host memory\n"
          + "Test PASSED\n"
          + "Done\n")
# ... and its stderr where cudaMalloc finds no device (cudaErrorNoDevice)
NO_DEVICE = "Failed to allocate device vector A (error code no CUDA-capable device is detected)!\n"
# the device nodes a driver has besides the GPUs': none of them is a GPU
CONTROL_NODES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")


@pytest.fixture
def as_root():
    require(os.geteuid() == 0, "root", "a private mount namespace and mknod need root: run the tests as root")


def vectoradd_dir():
    res = subprocess.run([os.path.join(LAB, "go-binaries"), "--dir", "cuda-vectoradd"], capture_output=True,
                         text=True, timeout=1800, check=False)
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()


@pytest.fixture(scope="module")
def binary():
    return os.path.join(vectoradd_dir(), "vectorAdd")


def run(binary, dev_dir=None, wrap=()):
    env = {k: v for k, v in os.environ.items() if k != "GPUOPS_LAB_DEVICE_DIR"}
    if dev_dir is not None:
        env["GPUOPS_LAB_DEVICE_DIR"] = str(dev_dir)
    return subprocess.run([*wrap, binary], capture_output=True, text=True, env=env, timeout=60, check=False)


def dev_dir(tmp_path, *gpus):
    """A device directory with the driver's control nodes and the GPU nodes named (regular files,
    as the lab's fake driver writes them where it cannot mknod)."""
    d = tmp_path / "dev"
    (d / "nvidia-caps").mkdir(parents=True)
    for name in CONTROL_NODES + gpus:
        (d / name).touch()
    return d


def test_it_is_a_static_program(binary):
    assert images.shared_libraries(binary) == []


def test_without_a_gpu_device_it_fails_as_the_sample_does(binary, tmp_path):
    res = run(binary, dev_dir(tmp_path))
    assert (res.returncode, res.stdout, res.stderr) == (1, SAMPLE_HEAD, NO_DEVICE)


def test_with_the_gpu_device_the_runtime_injected_it_passes(binary, tmp_path):
    res = run(binary, dev_dir(tmp_path, "nvidia3"))
    assert (res.returncode, res.stdout, res.stderr) == (0, PASSED, "")


def test_a_directory_or_a_dangling_link_is_no_device(binary, tmp_path):
    d = dev_dir(tmp_path)
    (d / "nvidia0").mkdir()
    (d / "nvidia1").symlink_to(tmp_path / "missing")
    res = run(binary, d)
    assert (res.returncode, res.stderr) == (1, NO_DEVICE)


@pytest.mark.usefixtures("as_root")
def test_in_dev_with_character_devices(binary):
    # the default place, /dev, in a private mount namespace: a tmpfs with or without nvidia0 (195, 0)
    def in_dev(*nodes):
        script = "mount -t tmpfs tmpfs /dev && " + "".join(
            f"mknod -m 666 /dev/{n} c 195 {m} && " for n, m in nodes) + 'exec "$0"'
        return run(binary, wrap=("unshare", "--mount", "--propagation", "private", "sh", "-c", script))
    res = in_dev(("nvidiactl", 255))
    assert (res.returncode, res.stdout, res.stderr) == (1, SAMPLE_HEAD, NO_DEVICE)
    res = in_dev(("nvidiactl", 255), ("nvidia0", 0))
    assert (res.returncode, res.stdout, res.stderr) == (0, PASSED, "")


def read_image(path):
    """(config, layer members by name, layer bytes) of a Docker image archive."""
    with tarfile.open(path) as tar:
        manifest = json.load(tar.extractfile("manifest.json"))[0]
        config = json.load(tar.extractfile(manifest["Config"]))
        layer = tar.extractfile(manifest["Layers"][0]).read()
    with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
        members = {m.name: m for m in tar.getmembers()}
    return manifest, config, members, layer


def env_of(config):
    return dict(e.split("=", 1) for e in config["config"]["Env"])


def test_the_vectoradd_image(tmp_path):
    path = str(tmp_path / "vectoradd.tar")
    images.cuda_vectoradd_image({"cuda-vectoradd": vectoradd_dir()}).write(path)
    manifest, config, members, layer = read_image(path)
    assert manifest["RepoTags"] == ["nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0-ubuntu22.04"]
    # NVIDIA/k8s-samples deployments/container/Dockerfile.ubuntu: the sample behind /cuda-samples/sample
    assert config["config"]["Entrypoint"] == ["/cuda-samples/sample"]
    assert config["config"]["Cmd"] is None
    link = members["cuda-samples/sample"]
    assert link.issym() and link.linkname == "/cuda-samples/vectorAdd"
    assert members["cuda-samples/vectorAdd"].mode == 0o755
    assert "stand-in" in config["config"]["Labels"]["org.gpuops.lab"]
    env = env_of(config)
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all" and env["NVIDIA_DRIVER_CAPABILITIES"] == "compute,utility"
    assert env["CUDA_VERSION"] == "12.5.0" and env["NVIDIA_REQUIRE_CUDA"].startswith("cuda>=12.5 brand=")
    assert env["PATH"].startswith("/usr/local/nvidia/bin:/usr/local/cuda/bin:")
    assert [e.split("=")[0] for e in config["config"]["Env"]].count("PATH") == 1
    # a shell and glibc, as the toolbox has, for what the NVIDIA runtime injects
    assert members["bin/sh"].linkname == "busybox" and "lib/x86_64-linux-gnu/libc.so.6" in members
    # the program in the image is the one that behaves as the sample
    with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
        (tmp_path / "vectorAdd").write_bytes(tar.extractfile("cuda-samples/vectorAdd").read())
    (tmp_path / "vectorAdd").chmod(0o755)
    res = run(str(tmp_path / "vectorAdd"), dev_dir(tmp_path, "nvidia0"))
    assert (res.returncode, res.stdout) == (0, PASSED)


def test_the_cuda_base_image(tmp_path):
    path = str(tmp_path / "cuda-base.tar")
    images.cuda_base_image().write(path)
    manifest, config, members, _layer = read_image(path)
    assert manifest["RepoTags"] == ["nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04"]
    assert config["config"]["Entrypoint"] is None and config["config"]["Cmd"] == ["sh"]
    assert "stand-in" in config["config"]["Labels"]["org.gpuops.lab"]
    env = env_of(config)
    # gitlab.com/nvidia/container-images/cuda dist/12.4.1/ubuntu2204/base/Dockerfile
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all" and env["NVIDIA_DRIVER_CAPABILITIES"] == "compute,utility"
    assert env["CUDA_VERSION"] == "12.4.1" and env["NV_CUDA_CUDART_VERSION"] == "12.4.127-1"
    require = env["NVIDIA_REQUIRE_CUDA"].split()
    assert require[0] == "cuda>=12.4" and len(require) == 31
    assert "brand=tesla,driver>=535,driver<536" in require
    # the toolbox's contents: the nvidia-smi the runtime injects needs glibc; pods run busybox's sh
    assert all(members[f"bin/{a}"].linkname == "busybox" for a in images.TOOLBOX_APPLETS)
    assert all(lib.lstrip("/") in members for lib in images.GLIBC)


def test_the_lab_builds_both_and_rebuilds_on_a_new_binary(tmp_path, monkeypatch):
    # the other images' inputs are placeholders here: only the two CUDA images are looked at
    bins = {}
    for name, files in (("device-plugin", ("nvidia-device-plugin", "gpu-feature-discovery", "config-manager")),
                        ("nfd", ("nfd-master", "nfd-worker", "nfd-gc")), ("dcgm-exporter", ("dcgm-exporter",)),
                        ("dra-driver", ("gpu-kubelet-plugin", "nvidia-cdi-hook"))):
        bins[name] = tmp_path / "bins" / name
        bins[name].mkdir(parents=True)
        for f in files:
            (bins[name] / f).write_text("placeholder\n")
    bins["cuda-vectoradd"] = tmp_path / "bins" / "cuda-vectoradd"
    bins["cuda-vectoradd"].mkdir()
    binary = bins["cuda-vectoradd"] / "vectorAdd"
    shutil.copy2(os.path.join(vectoradd_dir(), "vectorAdd"), binary)
    nfd_conf = tmp_path / "nfd" / "deployment/components/worker-config/nfd-worker.conf.example"
    nfd_conf.parent.mkdir(parents=True)
    nfd_conf.write_text("core: {}\n")
    monkeypatch.setattr(images, "nfd_module_dir", lambda: str(tmp_path / "nfd"))
    dra = tmp_path / "dra"
    for f in ("hack/kubelet-plugin-prestart.sh", "LICENSE", "templates/mps-control-daemon.tmpl.yaml"):
        (dra / f).parent.mkdir(parents=True, exist_ok=True)
        (dra / f).write_text("placeholder\n")
    monkeypatch.setattr(images, "module_dir", lambda module: str(dra))
    (tmp_path / "pause").write_text("placeholder\n")
    monkeypatch.setattr(images, "_pause_binary", lambda out_dir: str(tmp_path / "pause"))
    out = tmp_path / "images"
    bins = {k: str(v) for k, v in bins.items()}

    built = images.build_lab_images(str(out), bins)
    base, sample = str(out / "cuda-base.tar"), str(out / "cuda-sample-vectoradd.tar")
    assert built[base] == ["nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04"]
    assert built[sample] == ["nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0-ubuntu22.04"]
    first = {p: (os.stat(p).st_mtime_ns, images.archive_image_id(p)) for p in (base, sample)}

    # the same inputs: nothing written again
    images.build_lab_images(str(out), bins)
    assert {p: (os.stat(p).st_mtime_ns, images.archive_image_id(p)) for p in (base, sample)} == first

    # a rebuilt program (go-binaries renames a new build into place): its image only
    with open(binary, "ab") as f:
        f.write(b"\0")
    images.build_lab_images(str(out), bins)
    assert os.stat(base).st_mtime_ns == first[base][0]
    assert images.archive_image_id(sample) != first[sample][1]
