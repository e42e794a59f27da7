# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Container runtimes: containerd, CRI-O and Docker configuration editors (pure text in, text
out: containerd.py, crio.py, docker.py, common.py), the toolkit's own config (toolkit.py),
which runtime a node uses and its version (detect.py: the one version parser and CDI minimum
table), the runtime's own parser run over planned files (validation.py), CDI specs checked
against the GPUs (cdi.py), and the services behind the modules' argspecs: edit.py
(runtime_config: plan, keep the operator's drop-in, validate, write) and cdi_refresh.py
(cdi_spec: check, regenerate, the refresh units).

May import host/, report/findings, gpu/ and nvml/adapter (cdi_refresh only)."""
