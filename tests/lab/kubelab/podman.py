"""Small helpers around the podman CLI for the lab cluster."""

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
LAB = os.path.dirname(HERE)
REPO = os.path.dirname(os.path.dirname(LAB))
os.environ.setdefault("CONTAINERS_CONF", os.path.join(LAB, "containers.conf"))


class LabError(RuntimeError):
    """A step of the lab failed; the message says which and why."""


def log(msg):
    print(f"[kube] {msg}", file=sys.stderr, flush=True)


def run(argv, check=True, input=None, timeout=600):
    res = subprocess.run(argv, capture_output=True, text=True, input=input, timeout=timeout, check=False)
    if check and res.returncode != 0:
        raise LabError(f"{' '.join(argv[:6])}{' ...' if len(argv) > 6 else ''} failed ({res.returncode}): "
                       f"{(res.stderr or res.stdout).strip()[-2000:]}")
    return res


def podman(*args, **kw):
    return run(["podman", *args], **kw)


def exists(name):
    return podman("container", "exists", name, check=False).returncode == 0


def reachable(name, timeout=30):
    """Whether a running container accepts an exec (a stale one, its processes gone, does not)."""
    try:
        return podman("exec", name, "true", check=False, timeout=timeout).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def state(name):
    res = podman("container", "inspect", "--format", "{{.State.Status}}", name, check=False)
    return res.stdout.strip() if res.returncode == 0 else ""


def inspect(name):
    return json.loads(podman("container", "inspect", name).stdout)[0]


def sh(name, script, check=True, input=None, timeout=600):
    """Runs a shell script inside container NAME."""
    return podman("exec", "-i", name, "bash", "-c", script, check=check, input=input, timeout=timeout)


def put(name, dest, data, mode=0o644):
    """Writes DATA (str or bytes) to DEST inside NAME, only when it differs; returns True when
    it changed."""
    if isinstance(data, str):
        data = data.encode()
    import hashlib
    want = hashlib.sha256(data).hexdigest()
    have = sh(name, f"sha256sum {dest} 2>/dev/null | cut -c1-64", check=False).stdout.strip()
    if have == want:
        return False
    res = subprocess.run(["podman", "exec", "-i", name, "bash", "-c",
                          f"mkdir -p \"$(dirname {dest})\" && cat > {dest}.tmp && chmod {mode:o} {dest}.tmp "
                          f"&& mv -f {dest}.tmp {dest}"], input=data, capture_output=True, check=False)
    if res.returncode != 0:
        raise LabError(f"{name}: writing {dest} failed: {res.stderr.decode(errors='replace').strip()}")
    return True


def copy(name, src, dest, mode=0o755):
    """Copies host file SRC to DEST inside NAME unless identical; returns True when copied."""
    import hashlib
    h = hashlib.sha256()
    with open(src, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    have = sh(name, f"sha256sum {dest} 2>/dev/null | cut -c1-64", check=False).stdout.strip()
    if have == h.hexdigest():
        return False
    sh(name, f"mkdir -p \"$(dirname {dest})\"")
    podman("cp", src, f"{name}:{dest}.tmp")
    sh(name, f"chown 0:0 {dest}.tmp && chmod {mode:o} {dest}.tmp && mv -f {dest}.tmp {dest}")
    return True
