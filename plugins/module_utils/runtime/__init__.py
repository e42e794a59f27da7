# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Container runtimes: containerd, CRI-O and Docker configuration editors (pure text in, text
out: containerd.py, crio.py, docker.py, common.py), the toolkit's own config (toolkit.py),
which runtime a node uses (detect.py), the runtime's own parser run over planned files
(validation.py) and CDI specs checked against the GPUs (cdi.py).

May import host/, report/findings and gpu/."""
