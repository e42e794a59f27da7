"""A local collection source, as an air-gapped site keeps one: a directory of collection tarballs.

  tests/lab/collection_source.py BIN OUT NAME...

Builds gpuops.nvidia's tarball from this checkout and one tarball for each collection NAME (e.g.
kubernetes.core) from the copy the `ansible` bundle installed in BIN's Python, with BIN's
ansible-galaxy, into OUT. Galaxy is unreachable here and the bundle ships collections installed,
not as tarballs: each is rebuilt from its installed files and the metadata its MANIFEST.json keeps
(the files the bundle dropped are left out of the new FILES.json by the build itself)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def build(galaxy, source, out):
    res = subprocess.run([galaxy, "collection", "build", "--force", "--output-path", out, source],
                         capture_output=True, text=True, check=False)
    if res.returncode != 0:
        sys.exit(f"collection-source: building {source} failed:\n{res.stdout}{res.stderr}")
    return res.stdout.strip().split()[-1]


def installed(python, name):
    namespace, collection = name.split(".")
    code = ("import ansible_collections, os; print(next(p for p in (os.path.join(b, %r, %r) for b in "
            "ansible_collections.__path__) if os.path.isdir(p)))" % (namespace, collection))
    res = subprocess.run([python, "-c", code], capture_output=True, text=True, check=False)
    if res.returncode != 0:
        sys.exit(f"collection-source: {name} is not installed in {python}'s ansible bundle")
    return res.stdout.strip()


def main():
    bindir, out, names = sys.argv[1], sys.argv[2], sys.argv[3:]
    galaxy = os.path.join(bindir, "ansible-galaxy")
    os.makedirs(out, exist_ok=True)
    print(build(galaxy, REPO, out))
    for name in names:
        path = installed(os.path.join(bindir, "python"), name)
        with open(os.path.join(path, "MANIFEST.json"), encoding="utf-8") as handle:
            info = json.load(handle)["collection_info"]
        with tempfile.TemporaryDirectory() as work:
            copy = os.path.join(work, name)
            shutil.copytree(path, copy, ignore=shutil.ignore_patterns("__pycache__", "MANIFEST.json", "FILES.json"))
            with open(os.path.join(copy, "galaxy.yml"), "w", encoding="utf-8") as handle:
                yaml.safe_dump({k: v for k, v in info.items() if v not in (None, "", [], {})}, handle)
            print(build(galaxy, copy, out))


if __name__ == "__main__":
    main()
