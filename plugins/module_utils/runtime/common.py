# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What every container runtime editor shares: the error type and secret masking."""

from __future__ import annotations

import copy
import re

__metaclass__ = type

MASK = "********"
# Keys whose values are credentials in containerd, CRI-O and Docker configurations.
SECRET_KEY_RE = re.compile(r"^(password|auth|identitytoken|identity_token|registrytoken|token|secret)$", re.I)


class ConfigError(Exception):
    """A configuration that cannot be edited: the message names the file, where, and why."""


def mask_secrets(data):
    """A deep copy of parsed configuration data with credential values replaced by MASK."""
    if isinstance(data, dict):
        return {key: (MASK if SECRET_KEY_RE.match(str(key)) and isinstance(value, (str, bytes)) and value
                      else mask_secrets(value)) for key, value in data.items()}
    if isinstance(data, list):
        return [mask_secrets(item) for item in data]
    return copy.deepcopy(data)


_TEXT_SECRET_RE = re.compile(
    r'''(?P<key>["']?(?:password|auth|identitytoken|identity_token|registrytoken|token|secret)["']?\s*[=:]\s*)'''
    r'''(?P<quote>["'])(?P<value>.*?)(?P=quote)''', re.I)


def mask_text(text: str | None) -> str | None:
    """Configuration text (TOML or JSON) with credential values replaced by MASK, for diffs."""
    if text is None:
        return None
    return _TEXT_SECRET_RE.sub(lambda m: "%s%s%s%s" % (m.group("key"), m.group("quote"), MASK, m.group("quote")), text)
