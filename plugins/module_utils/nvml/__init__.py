# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVML, the one adapter to NVIDIA's management library (through pynvml, from nvidia-ml-py).

Owns: opening NVML (the one session helper, adapter.session(), which maps NVML's errors to
adapter.NvmlError), plain-data snapshots of GPUs, MIG devices and processes (adapter.py), and the
MIG mutations that go through the same session (mig.py, which calls NVML only through the
adapter). adapter.py is the only importer of pynvml. It may import gpu/ (the vocabulary of the
snapshots); nothing else."""
