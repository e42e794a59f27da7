"""Host-side checks of tests/lab/apt-repo/build: keys, signatures, indices, packages.

Builds the fake NVIDIA apt repositories once into a temporary directory and checks
the files (no container, no apt run; tests/lab/apt-repo/check-in-container does
that). Needs dpkg-deb (dpkg), apt-ftparchive (apt-utils), gpg/gpgv (gnupg).
"""

import gzip
import hashlib
import os
import re
import subprocess
import time
import tomllib
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
BUILD = HERE / "build"
SERVE = HERE / "serve"

CUDA_VERSIONS = ["570.172.08-1", "580.65.06-1", "580.95.05-1"]
TOOLKIT_VERSIONS = ["1.17.8-1", "1.18.0-1"]
# NVIDIA's programs the toolkit packages carry (built from the toolkit's Go module) -> package
TOOLKIT_PROGRAMS = {
    "nvidia-ctk": "nvidia-container-toolkit-base",
    "nvidia-container-runtime": "nvidia-container-toolkit-base",
    "nvidia-cdi-hook": "nvidia-container-toolkit-base",
    "nvidia-container-runtime-hook": "nvidia-container-toolkit",
}
GO_BINARIES = HERE.parent / "go-binaries"

# the same package names in every CUDA driver release, plus the branch/version named ones
CUDA_COMMON = [
    "cuda-drivers",
    "nvidia-open",
    "nvidia-driver",
    "nvidia-driver-cuda",
    "libcuda1",
    "libnvidia-ml1",
    "nvidia-smi",
    "nvidia-persistenced",
    "nvidia-kernel-open-dkms",
    "nvidia-kernel-dkms",
    "nvidia-kernel-support",
    "firmware-nvidia-gsp",
]
TOOLKIT_NAMES = [
    "nvidia-container-toolkit",
    "nvidia-container-toolkit-base",
    "libnvidia-container-tools",
    "libnvidia-container1",
]


def branch(version):
    return version.split(".")[0]


def upstream(version):
    return version.rsplit("-", 1)[0]


def cuda_names(version):
    b, u = branch(version), upstream(version)
    return CUDA_COMMON + [
        f"cuda-drivers-{b}",
        f"nvidia-fabricmanager-{b}",
        f"libnvidia-nscq-{b}",
        f"nvidia-driver-pinning-{b}",
        f"nvidia-driver-pinning-{u}",
    ]


EXPECTED_CUDA = {(n, v) for v in CUDA_VERSIONS for n in cuda_names(v)}
EXPECTED_TOOLKIT = {(n, v) for v in TOOLKIT_VERSIONS for n in TOOLKIT_NAMES}

REPOS = {  # repository directory -> key that must verify it
    "cuda": "good",
    "cuda-rogue": "rogue",
    "toolkit/stable/deb/amd64": "good",
}


def run(*args, check=False, **kw):
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    return subprocess.run([str(a) for a in args], check=check, **kw)


def parse_stanzas(text):
    """deb822 paragraphs -> list of {field: value} (continuation lines joined with \\n)."""
    out = []
    for para in re.split(r"\n\s*\n", text.strip()):
        fields, key = {}, None
        for line in para.splitlines():
            if line[:1] in (" ", "\t") and key:
                fields[key] += "\n" + line[1:]
            elif ":" in line:
                key, value = line.split(":", 1)
                fields[key] = value.strip()
        if fields:
            out.append(fields)
    return out


def relations(value):
    """'a (= 1), b | c (>= 2)' -> [[('a', '=', '1')], [('b', None, None), ('c', '>=', '2')]]"""
    groups = []
    for group in filter(None, (g.strip() for g in (value or "").split(","))):
        alts = []
        for alt in group.split("|"):
            m = re.fullmatch(
                r"\s*([a-z0-9.+-]+)\s*(?:\(\s*(<<|<=|=|>=|>>)\s*([^)\s]+)\s*\))?\s*",
                alt,
            )
            assert m, f"unparsable relation {alt!r}"
            alts.append(m.groups())
        groups.append(alts)
    return groups


@pytest.fixture(scope="session")
def gnupghome(tmp_path_factory):
    home = tmp_path_factory.mktemp("gnupg")
    home.chmod(0o700)
    return home


def gpgv(gnupghome, keyring, *files):
    env = dict(os.environ, GNUPGHOME=str(gnupghome), LC_ALL="C")
    return run("gpgv", "--keyring", keyring, *files, env=env)


def packages(repo, sub):
    return parse_stanzas((repo / sub / "Packages").read_text())


def index(repo, sub):
    return {(p["Package"], p["Version"]): p for p in packages(repo, sub)}


# ------------------------------------------------------------------ layout and keys


def test_layout(repo):
    for sub in REPOS:
        for name in ("Packages", "Packages.gz", "Release", "Release.gpg", "InRelease"):
            assert (repo / sub / name).is_file(), f"{sub}/{name}"
    for name in (
        "good.gpg",
        "good.asc",
        "good.fpr",
        "rogue.gpg",
        "rogue.asc",
        "rogue.fpr",
    ):
        assert (repo / "keys" / name).is_file(), name
    assert (repo / "toolkit" / "gpgkey").read_text() == (
        repo / "keys" / "good.asc"
    ).read_text()
    good = (repo / "keys" / "good.fpr").read_text().strip()
    pub = repo / "cuda" / f"{good[-8:].lower()}.pub"
    assert pub.read_text() == (repo / "keys" / "good.asc").read_text()
    assert (repo / "keys" / "gnupg").stat().st_mode & 0o077 == 0


def test_keys(repo, gnupghome):
    fprs = {}
    for name in ("good", "rogue"):
        fpr = (repo / "keys" / f"{name}.fpr").read_text().strip()
        assert re.fullmatch(r"[0-9A-F]{40}", fpr)
        env = dict(os.environ, GNUPGHOME=str(gnupghome))
        shown = run(
            "gpg",
            "--batch",
            "--with-colons",
            "--show-keys",
            repo / "keys" / f"{name}.gpg",
            env=env,
        )
        assert shown.returncode == 0, shown.stderr
        assert [
            ln.split(":")[9]
            for ln in shown.stdout.splitlines()
            if ln.startswith("fpr:")
        ][0] == fpr
        # the binary keyring is a plain OpenPGP public key (what apt's signed-by wants), not a keybox
        assert (repo / "keys" / f"{name}.gpg").read_bytes()[:1] in (
            b"\x98",
            b"\x99",
            b"\xc6",
        )
        asc = (repo / "keys" / f"{name}.asc").read_text()
        assert asc.startswith("-----BEGIN PGP PUBLIC KEY BLOCK-----")
        assert "PRIVATE" not in asc
        dearmored = subprocess.run(
            ["gpg", "--batch", "--dearmor"],
            input=asc.encode(),
            capture_output=True,
            env=env,
            check=True,
        ).stdout
        assert dearmored == (repo / "keys" / f"{name}.gpg").read_bytes()
        fprs[name] = fpr
    assert fprs["good"] != fprs["rogue"]


# ------------------------------------------------------------------ signatures


@pytest.mark.parametrize("sub", list(REPOS))
def test_signatures(repo, gnupghome, sub):
    d = repo / sub
    signer = REPOS[sub]
    other = "rogue" if signer == "good" else "good"
    ok = repo / "keys" / f"{signer}.gpg"
    bad = repo / "keys" / f"{other}.gpg"

    res = gpgv(gnupghome, ok, d / "InRelease")
    assert res.returncode == 0, res.stderr
    assert (repo / "keys" / f"{signer}.fpr").read_text().strip()[-16:] in res.stderr
    res = gpgv(gnupghome, ok, d / "Release.gpg", d / "Release")
    assert res.returncode == 0, res.stderr

    res = gpgv(gnupghome, bad, d / "InRelease")
    assert res.returncode != 0
    assert "No public key" in res.stderr or "NO_PUBKEY" in res.stderr
    assert gpgv(gnupghome, bad, d / "Release.gpg", d / "Release").returncode != 0

    # InRelease signs exactly the Release file
    clear = (d / "InRelease").read_text()
    body = clear.split("\n\n", 1)[1].split("\n-----BEGIN PGP SIGNATURE-----", 1)[0]
    assert body + "\n" == (d / "Release").read_text()


def test_rogue_repo_has_the_same_content(repo):
    for name in ("Packages", "Packages.gz", "Release"):
        assert (repo / "cuda" / name).read_bytes() == (
            repo / "cuda-rogue" / name
        ).read_bytes()
    assert sorted(p.name for p in (repo / "cuda").glob("*.deb")) == sorted(
        p.name for p in (repo / "cuda-rogue").glob("*.deb")
    )


@pytest.mark.parametrize("sub", list(REPOS))
def test_release_file(repo, sub):
    d = repo / sub
    (rel,) = parse_stanzas((d / "Release").read_text())
    assert rel["Origin"] == "NVIDIA"
    assert rel["Label"] == (
        "NVIDIA Container Toolkit" if sub.startswith("toolkit") else "NVIDIA CUDA"
    )
    assert rel["Architectures"] == "amd64"
    assert rel["Date"] == "Wed, 01 Jan 2025 00:00:00 UTC"
    assert "Valid-Until" not in rel  # a fixed Date must not expire
    assert "Suite" not in rel and "Components" not in rel  # flat repository
    listed = {}
    for line in rel["SHA256"].strip().splitlines():
        digest, size, name = line.split()
        listed[name] = (digest, int(size))
    assert set(listed) == {"Packages", "Packages.gz"}
    for name, (digest, size) in listed.items():
        data = (d / name).read_bytes()
        assert (hashlib.sha256(data).hexdigest(), len(data)) == (digest, size)
    assert (
        gzip.decompress((d / "Packages.gz").read_bytes())
        == (d / "Packages").read_bytes()
    )


# ------------------------------------------------------------------ indices


def test_cuda_packages_index(repo):
    idx = index(repo, "cuda")
    assert set(idx) == EXPECTED_CUDA
    assert len(EXPECTED_CUDA) == 51
    assert {v for (n, v) in idx if n == "cuda-drivers-580"} == {
        "580.65.06-1",
        "580.95.05-1",
    }
    assert {v for (n, v) in idx if n == "cuda-drivers-570"} == {"570.172.08-1"}


def test_toolkit_packages_index(repo):
    assert set(index(repo, "toolkit/stable/deb/amd64")) == EXPECTED_TOOLKIT


def test_cuda_release_is_self_consistent(repo):
    """Every exact relation points at the same release, and it exists in the repository."""
    idx = index(repo, "cuda")
    names = {n for n, _v in idx}
    for (name, version), p in idx.items():
        for field in ("Depends", "Recommends"):
            for group in relations(p.get(field)):
                for dep, op, ver in group:
                    assert dep in names, f"{name} {version} {field} unknown {dep}"
                    assert (
                        op == "="
                    ), f"{name} {version}: {field} {dep} is not an exact pin"
                    assert ver == version, f"{name} {version}: {field} {dep} (= {ver})"
                    assert (dep, ver) in idx


def closure(idx, name, version):
    """Packages apt installs for name=version, taking the first alternative of each group."""
    seen, todo = set(), [(name, version)]
    while todo:
        item = todo.pop()
        if item in seen:
            continue
        seen.add(item)
        for group in relations(idx[item].get("Depends")):
            dep, op, ver = group[0]
            assert op == "="
            todo.append((dep, ver))
    return seen


@pytest.mark.parametrize("version", CUDA_VERSIONS)
def test_cuda_drivers_pulls_one_release(repo, version):
    idx = index(repo, "cuda")
    got = closure(idx, f"cuda-drivers-{branch(version)}", version)
    assert {v for _n, v in got} == {version}
    assert {n for n, _v in got} == {
        f"cuda-drivers-{branch(version)}", "cuda-drivers", "nvidia-driver", "nvidia-driver-cuda",
        "libcuda1", "libnvidia-ml1", "nvidia-smi", "nvidia-persistenced",
        "nvidia-kernel-open-dkms", "nvidia-kernel-support", "firmware-nvidia-gsp",
    }  # fmt: skip
    assert closure(idx, "nvidia-open", version) >= {
        ("nvidia-kernel-open-dkms", version)
    }


def test_cuda_relations(repo):
    idx = index(repo, "cuda")
    for v in CUDA_VERSIONS:
        b, u = branch(v), upstream(v)
        assert relations(idx[(f"cuda-drivers-{b}", v)]["Depends"]) == [
            [("cuda-drivers", "=", v)]
        ]
        assert relations(idx[("nvidia-driver", v)]["Depends"])[1] == [
            ("nvidia-kernel-open-dkms", "=", v),
            ("nvidia-kernel-dkms", "=", v),
        ]
        fm = idx[(f"nvidia-fabricmanager-{b}", v)]
        assert relations(fm["Depends"]) == [[("nvidia-kernel-support", "=", v)]]
        assert fm["Conflicts"] == "nvidia-fabricmanager-any"
        assert fm["Provides"] == f"nvidia-fabricmanager-any (= {u})"
        assert idx[("nvidia-kernel-open-dkms", v)]["Conflicts"] == "nvidia-kernel-dkms"
        assert idx[("nvidia-kernel-dkms", v)]["Conflicts"] == "nvidia-kernel-open-dkms"
        for kmod in ("nvidia-kernel-open-dkms", "nvidia-kernel-dkms"):
            assert f"nvidia-kernel-{u}" in idx[(kmod, v)]["Provides"]
        assert idx[("libnvidia-ml1", v)]["Provides"] == f"libnvidia-ml.so.1 (= {u})"
        for pin in (f"nvidia-driver-pinning-{b}", f"nvidia-driver-pinning-{u}"):
            assert idx[(pin, v)]["Architecture"] == "all"
            assert idx[(pin, v)]["Conflicts"] == "nvidia-driver-pinning"


def test_toolkit_relations(repo):
    idx = index(repo, "toolkit/stable/deb/amd64")
    for v in TOOLKIT_VERSIONS:
        assert relations(idx[("nvidia-container-toolkit", v)]["Depends"]) == [
            [("nvidia-container-toolkit-base", "=", v)],
            [("libnvidia-container-tools", ">=", v)],
            [("libnvidia-container-tools", "<<", "2.0.0")],
            [("libseccomp2", None, None)],
        ]
        assert relations(idx[("libnvidia-container-tools", v)]["Depends"]) == [
            [("libnvidia-container1", ">=", v)],
            [("libnvidia-container1", "<<", "2.0.0")],
        ]
        assert (
            idx[("nvidia-container-toolkit-base", v)]["Breaks"]
            == "nvidia-container-toolkit (<= 1.10.0-1)"
        )


# ------------------------------------------------------------------ the .deb files


def deb_files(repo):
    for sub in ("cuda", "toolkit/stable/deb/amd64"):
        for p in packages(repo, sub):
            yield sub, p


ALLOWED = [
    r"usr/share/doc/(?P<pkg>[^/]+)/README\.gpuops-fake",
    r"usr/lib/gpuops-fake-(cuda|toolkit)-repo/(?P<pkg>[^/]+)\.txt",
    r"etc/apt/preferences\.d/nvidia-driver-pinning-[0-9.]+\.pref",
    r"usr/bin/(nvidia-ctk|nvidia-cdi-hook|nvidia-container-runtime|nvidia-container-runtime-hook|nvidia-container-cli)",
    # placeholder service units, so roles can enable the services NVIDIA's packages ship
    r"usr/lib/systemd/system/(nvidia-persistenced|nvidia-fabricmanager)\.service",
    # the toolkit's CDI refresh units and their settings (1.18), where NVIDIA's package puts them
    r"etc/systemd/system/nvidia-cdi-refresh\.(service|path)",
    r"etc/nvidia-container-toolkit/nvidia-cdi-refresh\.env",
]


def test_deb_control_and_contents(repo):
    owner = {}  # file path -> package name: no two packages may ship the same file
    for sub, p in deb_files(repo):
        deb = repo / sub / p["Filename"]
        name, version, arch = p["Package"], p["Version"], p["Architecture"]
        assert deb.name == f"{name}_{version}_{arch}.deb"
        assert hashlib.sha256(deb.read_bytes()).hexdigest() == p["SHA256"]
        assert int(p["Size"]) == deb.stat().st_size

        ctrl = parse_stanzas(run("dpkg-deb", "-f", deb, check=True).stdout)[0]
        assert (ctrl["Package"], ctrl["Version"], ctrl["Architecture"]) == (
            name,
            version,
            arch,
        )
        assert ctrl["Maintainer"] == "gpuops.nvidia lab <lab@localhost>"
        assert "placeholder" in ctrl["Description"]
        for field in (
            "Depends",
            "Recommends",
            "Provides",
            "Conflicts",
            "Breaks",
            "Replaces",
        ):
            assert ctrl.get(field) == p.get(field), (name, version, field)

        listing = run("dpkg-deb", "-c", deb, check=True).stdout.splitlines()
        files = []
        for line in listing:
            perms, owner_group, *_rest, path = line.split(None, 5)
            assert owner_group == "root/root"
            assert perms[0] in "-d", f"{deb.name}: {line}"
            if perms[0] == "-":
                files.append((perms, path.removeprefix("./")))
        assert files, deb.name
        for perms, path in files:
            m = next(
                (re.fullmatch(rx, path) for rx in ALLOWED if re.fullmatch(rx, path)),
                None,
            )
            assert m, f"{deb.name} ships unexpected {path}"
            if "pkg" in m.groupdict():
                assert m["pkg"] == name, f"{deb.name}: {path}"
            assert not re.search(r"\.(so(\.\d+)*|ko)$", path)
            assert perms == (
                "-rwxr-xr-x" if path.startswith("usr/bin/") else "-rw-r--r--"
            ), path
            # Branch-suffixed packages that conflict with each other (nvidia-fabricmanager-570
            # and -580) may ship the same file, as NVIDIA's do; no other two packages may.
            first = owner.setdefault(path, name)
            assert first == name or re.sub(r"-\d{3}$", "", first) == re.sub(r"-\d{3}$", "", name), (
                f"{path} in {first} and {name}")
        assert (
            f"usr/lib/gpuops-fake-{'cuda' if sub == 'cuda' else 'toolkit'}-repo/{name}.txt"
            in {f for _perms, f in files}
        )


def extract(repo, tmp_path, sub, name, version, arch="amd64"):
    dest = tmp_path / f"{name}_{version}"
    run("dpkg-deb", "-x", repo / sub / f"{name}_{version}_{arch}.deb", dest, check=True)
    return dest


@pytest.fixture(scope="session")
def toolkit_binaries():
    """upstream version -> directory of the binaries the build packaged (go-binaries' cache)."""
    sets = [f"toolkit-{upstream(v)}" for v in TOOLKIT_VERSIONS]
    res = run(GO_BINARIES, "--dir", *sets)
    assert res.returncode == 0, res.stderr
    return dict(zip((upstream(v) for v in TOOLKIT_VERSIONS), map(Path, res.stdout.split())))


def go_main_module(path):
    """(module, version) a Go binary was built from, from its embedded build information
    (what `go version -m` prints as the `mod` line)."""
    m = re.search(rb"\nmod\t([^\t\n]+)\t(v[^\t\n]+)\t", path.read_bytes())
    return m and (m[1].decode(), m[2].decode())


@pytest.mark.parametrize("version", TOOLKIT_VERSIONS)
def test_toolkit_ships_nvidias_programs(repo, tmp_path, toolkit_binaries, version):
    sub, u = "toolkit/stable/deb/amd64", upstream(version)
    for program, package in TOOLKIT_PROGRAMS.items():
        root = extract(repo, tmp_path, sub, package, version)
        binary = root / "usr/bin" / program
        assert binary.read_bytes() == (toolkit_binaries[u] / program).read_bytes(), program
        assert go_main_module(binary) == ("github.com/NVIDIA/nvidia-container-toolkit", f"v{u}"), program
    base = extract(repo, tmp_path, sub, "nvidia-container-toolkit-base", version)
    res = run(base / "usr/bin/nvidia-ctk", "--version")
    # `go install` sets no version string (NVIDIA's release build sets it with -ldflags)
    assert res.returncode == 0 and res.stdout.startswith("NVIDIA Container Toolkit CLI version ")

    tools = extract(repo, tmp_path, sub, "libnvidia-container-tools", version)
    res = run("sh", tools / "usr/bin/nvidia-container-cli", "--version")
    assert res.stdout.splitlines()[:2] == [f"cli-version: {u}", f"lib-version: {u}"]
    res = run("sh", tools / "usr/bin/nvidia-container-cli", "info")
    assert res.returncode == 1 and "driver not loaded" in res.stderr


def control_member(repo, name, version, member):
    deb = repo / "toolkit/stable/deb/amd64" / f"{name}_{version}_amd64.deb"
    res = run("dpkg-deb", "-I", deb, member)
    return res.stdout if res.returncode == 0 else None


@pytest.mark.parametrize("version", TOOLKIT_VERSIONS)
def test_toolkit_configuration_comes_from_the_postinst(repo, tmp_path, version):
    """Like NVIDIA's packages, none ships config.toml: the base package's postinst has the real
    nvidia-ctk write it (its defaults, merged into what is there)."""
    base = extract(repo, tmp_path, "toolkit/stable/deb/amd64", "nvidia-container-toolkit-base", version)
    assert not (base / "etc/nvidia-container-runtime").exists()
    postinst = control_member(repo, "nvidia-container-toolkit-base", version, "postinst")
    assert ("/usr/bin/nvidia-ctk --quiet config --config-file=/etc/nvidia-container-runtime/config.toml "
            "--in-place") in postinst
    assert run("sh", "-n", "-c", postinst).returncode == 0
    config = tmp_path / "etc/nvidia-container-runtime/config.toml"
    config.parent.mkdir(parents=True)
    res = run(base / "usr/bin/nvidia-ctk", "--quiet", "config", f"--config-file={config}", "--in-place")
    assert res.returncode == 0, res.stderr
    conf = tomllib.loads(config.read_text())
    assert conf["nvidia-container-runtime"]["mode"] == "auto"
    assert conf["nvidia-container-runtime"]["modes"]["cdi"]["spec-dirs"] == ["/etc/cdi", "/var/run/cdi"]
    assert conf["nvidia-container-runtime"]["modes"]["cdi"]["default-kind"] == "nvidia.com/gpu"
    assert conf["nvidia-container-cli"]["ldconfig"] == "@/sbin/ldconfig"
    # the low-level runtimes nvidia-container-runtime looks for differ between the releases
    assert conf["nvidia-container-runtime"]["runtimes"] == (
        ["docker-runc", "runc", "crun"] if version.startswith("1.17.") else ["runc", "crun"])

    toolkit_postinst = control_member(repo, "nvidia-container-toolkit", version, "postinst")
    assert "ln -s /usr/bin/nvidia-container-runtime-hook /usr/bin/nvidia-container-toolkit" in toolkit_postinst
    assert "rm /usr/bin/nvidia-container-toolkit" in control_member(repo, "nvidia-container-toolkit", version,
                                                                    "postrm")


def unit(text):
    """systemd unit text -> {(section, key): [values]} (comments dropped)."""
    out, section = {}, None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            section = line.strip("[]")
        else:
            key, value = line.split("=", 1)
            out.setdefault((section, key), []).append(value)
    return out


@pytest.mark.parametrize("version", TOOLKIT_VERSIONS)
def test_cdi_refresh_units(repo, tmp_path, version):
    """1.18's refresh units have the settings of NVIDIA's 1.18.0 packaging, in /etc/systemd/system
    (conffiles, as debhelper makes every file under /etc), and its postinst enables and runs them;
    1.17 has none."""
    base = extract(repo, tmp_path, "toolkit/stable/deb/amd64", "nvidia-container-toolkit-base", version)
    conffiles = control_member(repo, "nvidia-container-toolkit-base", version, "conffiles")
    postinst = control_member(repo, "nvidia-container-toolkit-base", version, "postinst")
    if version.startswith("1.17."):
        assert not (base / "etc").exists() and conffiles is None
        assert "nvidia-cdi-refresh" not in postinst
        return
    assert sorted(conffiles.split()) == ["/etc/nvidia-container-toolkit/nvidia-cdi-refresh.env",
                                         "/etc/systemd/system/nvidia-cdi-refresh.path",
                                         "/etc/systemd/system/nvidia-cdi-refresh.service"]
    service = unit((base / "etc/systemd/system/nvidia-cdi-refresh.service").read_text())
    assert service == {
        ("Unit", "Description"): ["Refresh NVIDIA CDI specification file"],
        ("Unit", "ConditionPathExists"): ["|/usr/bin/nvidia-smi", "|/usr/sbin/nvidia-smi", "/usr/bin/nvidia-ctk"],
        ("Service", "Type"): ["oneshot"],
        ("Service", "Environment"): ["NVIDIA_CTK_CDI_OUTPUT_FILE_PATH=/var/run/cdi/nvidia.yaml"],
        ("Service", "EnvironmentFile"): ["-/etc/nvidia-container-toolkit/nvidia-cdi-refresh.env"],
        ("Service", "ExecCondition"): ["/usr/bin/grep -qE '/nvidia.ko' /lib/modules/%v/modules.dep"],
        ("Service", "ExecStart"): ["/usr/bin/nvidia-ctk cdi generate"],
        ("Service", "CapabilityBoundingSet"): ["CAP_SYS_MODULE CAP_SYS_ADMIN CAP_MKNOD"],
        ("Install", "WantedBy"): ["multi-user.target"],
    }
    path = unit((base / "etc/systemd/system/nvidia-cdi-refresh.path").read_text())
    assert path == {
        ("Unit", "Description"): ["Trigger CDI refresh on NVIDIA driver or toolkit install / upgrade events"],
        ("Path", "PathChanged"): ["/lib/modules/%v/modules.dep", "/lib/modules/%v/modules.dep.bin",
                                  "/usr/bin/nvidia-ctk"],
        ("Install", "WantedBy"): ["multi-user.target"],
    }
    env = (base / "etc/nvidia-container-toolkit/nvidia-cdi-refresh.env").read_text()
    assert all(line.startswith("#") for line in env.splitlines())  # settings are opt-in
    for command in ("systemctl enable --now nvidia-cdi-refresh.path", "systemctl enable --now nvidia-cdi-refresh.service",
                    "systemctl start nvidia-cdi-refresh.service"):
        assert command in postinst


def test_pinning_preferences(repo, tmp_path):
    for v in CUDA_VERSIONS:
        b, u = branch(v), upstream(v)
        for pkg, pattern in (
            (f"nvidia-driver-pinning-{b}", f"{b}.*"),
            (f"nvidia-driver-pinning-{u}", f"{u}-*"),
        ):
            root = extract(repo, tmp_path, "cuda", pkg, v, arch="all")
            (pref,) = (root / "etc/apt/preferences.d").iterdir()
            stanza = parse_stanzas(pref.read_text())[-1]
            assert stanza["Pin"] == f"version {pattern}"
            assert stanza["Pin-Priority"] == "1000"
            assert "cuda-drivers-*" in stanza["Package"].split()


# ------------------------------------------------------------------ rebuilds


def tree_digest(root):
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root)
        if rel.parts[0] in ("keys", ".lock") or p.is_dir():
            continue
        h.update(str(rel).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def test_rebuild_is_quick_and_reproducible(repo):
    before = tree_digest(repo)
    t0 = time.monotonic()
    res = run(BUILD, repo)
    assert res.returncode == 0, res.stderr
    assert "up to date" in res.stderr
    assert time.monotonic() - t0 < 2
    res = run(BUILD, "--force", "--quiet", repo)
    assert res.returncode == 0, res.stderr
    assert (
        tree_digest(repo) == before
    )  # same keys -> byte-identical packages, indices, signatures


def test_build_usage_errors(tmp_path):
    assert run(BUILD).returncode == 2
    assert run(BUILD, "--bogus", tmp_path).returncode != 0


def test_serve_help():
    res = run(SERVE, "--help")
    assert res.returncode == 0
    assert "127.0.0.1" in res.stdout


def free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_roundtrip(repo, tmp_path):
    import urllib.request

    env = dict(os.environ, GPUOPS_APTREPO_RUNDIR=str(tmp_path / "run"))
    port = free_port()
    res = run(SERVE, repo, port, env=env)
    try:
        assert res.returncode == 0, res.stdout + res.stderr
        pid = int((tmp_path / "run" / f"serve-{port}.pid").read_text())
        again = run(SERVE, repo, port, env=env)
        assert again.returncode == 0 and "already serving" in again.stdout
        assert int((tmp_path / "run" / f"serve-{port}.pid").read_text()) == pid
        url = f"http://127.0.0.1:{port}/cuda/InRelease"
        with urllib.request.urlopen(url, timeout=5) as r:
            assert r.read() == (repo / "cuda" / "InRelease").read_bytes()
        status = run(SERVE, "--status", port, env=env)
        assert status.returncode == 0 and f"pid {pid}" in status.stdout
    finally:
        stop = run(SERVE, "--stop", port, env=env)
    assert stop.returncode == 0 and "stopped" in stop.stdout
    assert not (tmp_path / "run" / f"serve-{port}.pid").exists()
    assert run(SERVE, "--status", port, env=env).returncode == 1
    assert (
        not Path(f"/proc/{pid}").exists()
        or Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] == "Z"
    )
