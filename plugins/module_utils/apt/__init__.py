# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""apt and dpkg on a Debian node: parsers of apt's output and the source files (parse.py), the
commands that refresh, simulate, install and read package state (ops.py: the one reader of dpkg's
installed and held packages), and OpenPGP repository keys read without gpg (openpgp.py).

May import host/ (commands, files) and report/findings."""
