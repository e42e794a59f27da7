# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Facts about NVIDIA GPUs as data: the model vocabulary and enums (model.py), the
compatibility tables (compat.py) and the pre-flight checks of a driver plan over them
(preflight.py). Pure: no NVML, no I/O. May import report/findings only."""
