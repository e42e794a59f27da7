# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import os

from ansible_collections.gpuops.nvidia.plugins.module_utils.host import readiness as host


def write(root, rel, content, mode="w"):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, mode) as handle:
        handle.write(content)


DEBIAN12 = ('PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nNAME="Debian GNU/Linux"\nVERSION_ID="12"\n'
            'VERSION_CODENAME=bookworm\nID=debian\n')
ROCKY9 = 'NAME="Rocky Linux"\nVERSION_ID="9.4"\nID="rocky"\nID_LIKE="rhel centos fedora"\nPRETTY_NAME="Rocky Linux 9.4"\n'


def test_parse_os_release():
    assert host.parse_os_release(DEBIAN12) == {"id": "debian", "id_like": [], "version_id": "12",
                                               "codename": "bookworm", "pretty_name": "Debian GNU/Linux 12 (bookworm)"}
    assert host.parse_os_release(ROCKY9)["id_like"] == ["rhel", "centos", "fedora"]


def test_gather_on_a_prepared_tree(tmp_path):
    root = str(tmp_path)
    write(root, "etc/os-release", DEBIAN12)
    write(root, "proc/sys/kernel/osrelease", "6.1.0-28-amd64\n")
    os.makedirs(os.path.join(root, "lib/modules/6.1.0-28-amd64/build"))
    write(root, host.SECURE_BOOT_VAR, b"\x06\x00\x00\x00\x01", mode="wb")
    os.makedirs(os.path.join(root, "sys/module/nouveau"))
    write(root, "etc/modprobe.d/blacklist-nouveau.conf", "# keep nouveau away\nblacklist nouveau\noptions nouveau modeset=0\n")
    write(root, "usr/bin/nvidia-uninstall", "#!/bin/sh\n")
    facts = host.gather(root)
    assert facts["os"]["id"] == "debian" and facts["os"]["version_id"] == "12"
    assert facts["kernel"] == {"release": "6.1.0-28-amd64", "headers": True}
    assert facts["secure_boot"] is True
    assert facts["nouveau"] == {"loaded": True, "blacklisted": True}
    assert facts["runfile_install"] == "/usr/bin/nvidia-uninstall"
    assert facts["free_mib"]["/usr"] > 0


def test_gather_on_a_bare_tree(tmp_path):
    root = str(tmp_path)
    write(root, "proc/sys/kernel/osrelease", "6.1.0-28-amd64\n")
    write(root, host.SECURE_BOOT_VAR, b"\x06\x00\x00\x00\x00", mode="wb")
    facts = host.gather(root)
    assert facts["kernel"]["headers"] is False
    assert facts["secure_boot"] is False
    assert facts["nouveau"] == {"loaded": False, "blacklisted": False}
    assert facts["runfile_install"] is None


def test_no_efi_means_unknown_secure_boot(tmp_path):
    assert host.secure_boot(str(tmp_path)) is None
