# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

__metaclass__ = type


class ModuleDocFragment:
    """Module attributes shared by the collection's modules."""

    DOCUMENTATION = r"""
options: {}
"""

    # Modules that only read the host.
    READ_ONLY = r"""
options: {}
attributes:
  check_mode:
    support: full
    description: The module only reads; check mode returns the same data.
  diff_mode:
    support: none
    description: Nothing is changed, so there is no diff.
  idempotent:
    support: full
    description: Every run reports C(changed=false).
"""
