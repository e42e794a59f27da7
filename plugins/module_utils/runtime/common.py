# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What every container runtime editor shares: the one error type, the checks of the NVIDIA
runtime's name, and secret masking."""

from __future__ import annotations

import copy
import os
import re

__metaclass__ = type

MASK = "********"
# Words in the names of keys whose values are credentials in containerd, CRI-O and Docker
# configurations (password, auth, identitytoken, containerd's registry `headers` with
# `Authorization` or `X-Auth-Token` ...).
_SECRET_WORDS = r"password|passwd|secret|token|auth"
SECRET_KEY_RE = re.compile(r"(%s)" % _SECRET_WORDS, re.I)
# The userinfo of a URL: scheme://USER[:PASSWORD]@host (proxies, registry mirrors, endpoints).
_URL_USERINFO_RE = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^\s/@\"'<>\\]+)@")
# A Kubernetes RuntimeClass handler is a DNS label (RFC 1123): the NVIDIA runtime's name must be one.
RUNTIME_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
# Binaries of NVIDIA's container runtime (nvidia-container-runtime, .cdi, .legacy).
NVIDIA_RUNTIME_BINARY_RE = re.compile(r"^nvidia-container-runtime(\.[a-z]+)?$")


class ConfigError(Exception):
    """Input that cannot be used: a configuration that cannot be edited (the message names the
    file, where, and why) or module options the editors refuse (``option`` names the option).
    Every editor raises only this; the module turns it into a failure naming the fix."""

    def __init__(self, message: str, option: str | None = None):
        super().__init__(message)
        self.option = option


def option_error(option: str, problem: str, fix: str) -> ConfigError:
    """A refused option value: 'OPTION: PROBLEM; FIX'."""
    return ConfigError("%s: %s; %s" % (option, problem, fix), option=option)


def is_nvidia_binary(path) -> bool:
    return isinstance(path, str) and bool(NVIDIA_RUNTIME_BINARY_RE.match(os.path.basename(path)))


def check_runtime_name(name, runtime: str, reserved=(), existing: dict | None = None, runtime_path: str = "") -> None:
    """Refuse a name that is no valid RuntimeClass handler, a runtime's own built-in name
    (`reserved`: runc, crun), or the name of another runtime the configuration already defines
    (`existing`: name -> that runtime's binary or None), which the NVIDIA runtime would replace.
    An entry that already runs NVIDIA's runtime (a re-run, or nvidia-ctk's own) may be updated."""
    if not isinstance(name, str) or not RUNTIME_NAME_RE.match(name):
        raise option_error(
            "runtime_name", "%r is not a valid runtime handler name: Kubernetes' RuntimeClass handler must be a "
            "DNS label (lowercase letters, digits and '-', at most 63 characters, starting and ending with a letter "
            "or digit)" % (name,), "use a name such as nvidia (the default)")
    if name in reserved:
        raise option_error(
            "runtime_name", "%r is %s's own runtime; using it would make every container that asks for %s run "
            "the NVIDIA runtime instead" % (name, runtime, name),
            "use another name such as nvidia (the default)")
    if existing and name in existing:
        binary = existing[name]
        if not (is_nvidia_binary(binary) or (binary and binary == runtime_path)):
            raise option_error(
                "runtime_name", "the %s configuration already defines a runtime %r (%s) that is not NVIDIA's; "
                "it would be replaced" % (runtime, name, binary or "runc"),
                "use another name%s, or remove that runtime first" % ("" if name == "nvidia" else " such as nvidia"))


def check_options(runtime: str, runtime_name, runtime_path, state: str = "present", reserved=()) -> None:
    """The options every editor takes: state, the runtime's name (see check_runtime_name) and,
    to add it, the NVIDIA runtime's path."""
    if state not in ("present", "absent"):
        raise option_error("state", "must be present or absent, not %r" % (state,), "set state to present or absent")
    check_runtime_name(runtime_name, runtime, reserved=reserved)
    if state == "present" and (not isinstance(runtime_path, str) or not runtime_path.strip()):
        raise option_error("runtime_path", "must be the path of the NVIDIA container runtime, not %r" % (runtime_path,),
                           "set runtime_path (default /usr/bin/nvidia-container-runtime)")


def _mask_userinfo(match) -> str:
    userinfo = match.group("userinfo")
    user = userinfo.split(":", 1)[0] + ":" if ":" in userinfo else ""
    return "%s%s%s@" % (match.group("scheme"), user, MASK)


def mask_string(value: str) -> str:
    """A string with the password (or token) in every URL's userinfo masked."""
    return _URL_USERINFO_RE.sub(_mask_userinfo, value)


def mask_secrets(data):
    """A deep copy of parsed configuration data with credential values (under secret-looking
    keys, and the userinfo of every URL) replaced by MASK."""
    if isinstance(data, dict):
        masked = {}
        for key, value in data.items():
            if SECRET_KEY_RE.search(str(key)) and isinstance(value, str) and value:
                masked[key] = MASK
            elif SECRET_KEY_RE.search(str(key)) and isinstance(value, list):
                masked[key] = [MASK if isinstance(item, str) and item else mask_secrets(item) for item in value]
            else:
                masked[key] = mask_secrets(value)
        return masked
    if isinstance(data, list):
        return [mask_secrets(item) for item in data]
    if isinstance(data, str):
        return mask_string(data)
    return copy.deepcopy(data)


# "...", '...', """...""" and '''...''' (TOML's multi-line strings)
_QUOTED = r'"""(?:.|\n)*?"""|' + r"'''(?:.|\n)*?'''" + r'|"(?:[^"\\\n]|\\.)*"' + r"|'[^'\n]*'"
# KEY = "value", KEY: "value", KEY = ["a", "b"] (over several lines too), for every key whose name
# holds a secret word (X-Auth-Token, registry_password ...)
_TEXT_SECRET_RE = re.compile(
    r'''(?P<key>["']?[\w.-]*(?:%s)[\w.-]*["']?\s*[=:]\s*)(?P<value>%s|\[[^\]]*\])''' % (_SECRET_WORDS, _QUOTED),
    re.I)
_STRING_RE = re.compile(_QUOTED)


def _mask_value(match) -> str:
    value = match.group("value")

    def one(string):
        text = string.group(0)
        quote = text[:3] if text[:3] in ('"""', "'''") else text[0]
        return text if len(text) == 2 * len(quote) else "%s%s%s" % (quote, MASK, quote)
    return match.group("key") + _STRING_RE.sub(one, value)


def mask_text(text: str | None) -> str | None:
    """Configuration text (TOML or JSON), or any message, with credentials masked: values of
    secret-looking keys (strings and arrays of strings) and the userinfo of every URL."""
    if text is None:
        return None
    return mask_string(_TEXT_SECRET_RE.sub(_mask_value, text))
