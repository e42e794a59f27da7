"""The repositories built once per test session, for the host-side checks (test_apt_repo.py)
and the one in a lab container (test_toolkit_in_container.py)."""

import shutil
import subprocess
from pathlib import Path

import pytest

BUILD = Path(__file__).resolve().parent / "build"


@pytest.fixture(scope="session")
def repo(tmp_path_factory):
    missing = [c for c in ("dpkg-deb", "apt-ftparchive", "gpg", "gpgv") if not shutil.which(c)]
    if missing:
        pytest.fail(f"missing {', '.join(missing)}: apt-get install -y dpkg apt-utils gnupg gpgv", pytrace=False)
    out = tmp_path_factory.mktemp("apt-repo") / "out"
    res = subprocess.run([str(BUILD), str(out)], capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stderr
    return out
