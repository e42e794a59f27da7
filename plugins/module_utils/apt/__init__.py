# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""apt and dpkg on a Debian node: parsers of apt's output and the source files (parse.py), apt's
commands - refresh, simulate, install, remove, depends (ops.py), dpkg's package state: the one
reader of installed and held packages and the one writer of holds (packages.py), the services
behind the modules - a role's install transaction (install.py), a removal and a role's whole
removal from its record (remove.py), a repository with its key, source and pin (sources.py) -
and OpenPGP repository keys read without gpg (openpgp.py).

May import host/ (commands, files, records) and report/findings. host/driver_state reads dpkg's
database through packages.py, which imports only ops.py and host/commands."""
