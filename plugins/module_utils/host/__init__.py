# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node itself, read and written under a root directory tests point elsewhere: the one safe
file writer (files.py), the one way to run a command (commands.py), the kernel's view of the
driver (kernel.py), NVIDIA devices on the PCI bus (pci.py), readiness for a driver (readiness.py)
and installed versus loaded driver (driver_state.py).

May import gpu/, report/findings and runtime/common (secret masking); nothing above it."""
