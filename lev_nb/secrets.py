"""Credentials in the environment: the ONE rule for which variable names look like secrets, the
environment a child process gets (the shell tool, command seeds, a script's ``shell()``: as
``[security] shell_env`` says, by default every credential-shaped variable left out, and under every
mode lev_nb's own provider keys and every variable the configuration names as holding a key), and
the redaction of a secret's value from any text lev_nb stores or shows (docs/security.md#secrets; issue 12 item 8).

The script ``env_var`` host function refuses exactly the names :func:`looks_like_credential`
accepts, and :func:`child_environment` drops exactly those, so what a script cannot read is what a
command it runs cannot see. This module imports nothing of lev_nb (a bottom layer).
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# A name containing one of these words is a credential (ANTHROPIC_API_KEY, GITHUB_TOKEN, DB_PASS,
# MYSQL_PWD, SLACK_WEBHOOK_URL, SENTRY_DSN, ...).
_CREDENTIAL_WORDS = (
    "TOKEN", "SECRET", "PASS", "PWD", "CREDENTIAL", "APIKEY", "API_KEY", "ACCESS_KEY",
    "PRIVATE", "KEY", "_PAT", "SESSION", "COOKIE", "AUTH", "BEARER", "SIGNATURE", "SIGNING",
    "DSN", "NETRC", "KUBECONFIG", "WEBHOOK", "CONNECTION_STRING", "CONN_STR",
)
_CREDENTIAL_NAMES = frozenset(
    {"DATABASE_URL", "DATABASE_DSN", "REDIS_URL", "MONGO_URL", "MONGODB_URI", "AMQP_URL", "SSH_AUTH_SOCK"}
)
_CREDENTIAL_PREFIXES = ("LEVIATH_", "AWS_", "AZURE_", "GOOGLE_", "GCP_", "LEV_")
# Ordinary variables a shell sets that contain one of the words above.
_NOT_CREDENTIALS = frozenset({"PWD", "OLDPWD"})

# Names whose value is itself the secret (not a path or a socket to one, like KUBECONFIG, NETRC or
# SSH_AUTH_SOCK, nor a setting under a prefix, like LEV_HOME or AWS_REGION): these values are redacted.
_SECRET_VALUE_WORDS = (
    "TOKEN", "SECRET", "PASS", "PWD", "CREDENTIAL", "APIKEY", "API_KEY", "ACCESS_KEY", "PRIVATE_KEY",
    "_KEY", "BEARER", "WEBHOOK", "DSN", "CONNECTION_STRING", "CONN_STR", "_PAT", "COOKIE", "SIGNATURE",
)
_SECRET_VALUE_NAMES = _CREDENTIAL_NAMES - {"SSH_AUTH_SOCK"}

# A value shorter than this is not redacted: "1" or "yes" would turn every text into noise.
MIN_SECRET_LENGTH = 8
REDACTED = "[redacted]"


# Variables the configuration names as holding a credential (``[model_providers.<name>]
# api_key_env``), in upper case: secrets whatever their name. Only ever grows in a process: a name
# once configured as a key stays hidden even after the configuration changes.
_declared: frozenset[str] = frozenset()
_declared_lock = threading.Lock()


def declare_credentials(names: Iterable[str]) -> None:
    """Treat each variable in ``names`` as a credential whatever its name: kept from every child
    process, refused to scripts unless allowed, its value redacted (a key in ``CLAUDE``)."""
    global _declared
    wanted = {name.strip().upper() for name in names if name and name.strip()}
    if wanted <= _declared:
        return
    with _declared_lock:
        _declared = _declared | wanted


def declared_credentials() -> frozenset[str]:
    """The variable names declared by :func:`declare_credentials` (upper case)."""
    return _declared


def looks_like_credential(name: str) -> bool:
    """Whether an environment variable holds a credential: it is shaped like one, or the
    configuration names it as a key variable."""
    return name.upper() in _declared or _shaped_like_credential(name)


@functools.lru_cache(maxsize=4096)  # a pure function of the name; every run start asks for each variable
def _shaped_like_credential(name: str) -> bool:
    upper = name.upper()
    if upper in _NOT_CREDENTIALS:
        return False
    return (
        upper in _CREDENTIAL_NAMES
        or upper.startswith(_CREDENTIAL_PREFIXES)
        or any(word in upper for word in _CREDENTIAL_WORDS)
    )


# ``[security] shell_env`` (upstream configuration.md "What a shell command inherits").
SHELL_ENV_MODES = ("filtered", "strict", "custom", "inherit")
# Withheld under "strict" on top of "filtered" (which lets SSH_AUTH_SOCK through, for git push).
_STRICT_EXTRA = frozenset({"SSH_AUTH_SOCK", "AWS_PROFILE", "AWS_REGION", "KUBECONFIG", "NETRC"})
# A command needs these to find its toolchain: they pass under every mode.
_TOOLCHAIN = frozenset({"PATH", "HOME", "CARGO_HOME", "JAVA_HOME", "VIRTUAL_ENV", "NVM_DIR", "GOPATH",
                        "DOCKER_HOST", "TERM"})
# The credentials lev_nb itself holds: withheld under every mode, "inherit" included (a variable
# the configuration declares as a key joins them); only an exact allow_env_vars entry hands one over.
_OWN_CREDENTIALS = frozenset({"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENROUTER_API_KEY", "GOOGLE_API_KEY",
                              "LEVIATH_API_TOKEN"})


@dataclass(frozen=True)
class ShellEnv:
    """Which variables a command lev_nb runs for an agent inherits: ``mode`` (one of
    :data:`SHELL_ENV_MODES`), ``withhold`` (the names "custom" withholds) and ``allow`` (``[security]
    allow_env_vars``: names handed over under every mode)."""

    mode: str = "filtered"
    withhold: tuple[str, ...] = ()
    allow: tuple[str, ...] = ()

    def passes(self, name: str) -> bool:
        """Whether variable ``name`` reaches the command."""
        upper = name.upper()
        if upper in {entry.upper() for entry in self.allow}:
            return True
        if upper in _OWN_CREDENTIALS or upper in _declared:
            return False
        if upper in _TOOLCHAIN:
            return True
        if self.mode == "inherit":
            return True
        if self.mode == "custom":
            return upper not in {entry.upper() for entry in self.withhold}
        if self.mode == "strict" and upper in _STRICT_EXTRA:
            return False
        return upper == "SSH_AUTH_SOCK" or not looks_like_credential(name)


def child_environment(environ: Mapping[str, str] | None = None, policy: ShellEnv | None = None) -> dict[str, str]:
    """The environment for a command lev_nb runs for an agent (the shell tool, a script's
    ``shell()``, a command seed): ``environ`` (default: this process's) as ``policy`` (default:
    ``shell_env = "filtered"``) lets it through. Whatever the mode, lev_nb's own provider keys stay
    out unless ``allow_env_vars`` names one."""
    source = os.environ if environ is None else environ
    rule = policy or ShellEnv()
    return {name: value for name, value in source.items() if rule.passes(name)}


def holds_secret_value(name: str) -> bool:
    """Whether the value of variable ``name`` is itself a secret (an API key, a password, a URL
    with credentials), so that text echoing it must be redacted. A declared key variable always is."""
    return name.upper() in _declared or _shaped_like_secret_value(name)


@functools.lru_cache(maxsize=4096)
def _shaped_like_secret_value(name: str) -> bool:
    upper = name.upper()
    if not _shaped_like_credential(name):
        return False
    return upper in _SECRET_VALUE_NAMES or any(word in upper for word in _SECRET_VALUE_WORDS)


def environ_stamp() -> tuple[Any, ...]:
    """A fingerprint of this process's environment, equal for as long as nothing in it changes:
    its entries as os.environ keeps them (bytes), so checking it decodes nothing."""
    data = getattr(os.environ, "_data", None)
    return tuple(data.items()) if isinstance(data, dict) else tuple(os.environ.items())


# (environment fingerprint, declared names, the answer) of the last configured_secrets() call:
# every run asks when it starts, and decoding and testing every variable each time added up.
_secrets_seen: tuple[tuple[Any, ...], frozenset[str], tuple[str, ...]] | None = None


def configured_secrets(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The secret values of ``environ`` (default: this process's environment) long enough to
    redact, longest first (so a secret containing another is replaced whole)."""
    global _secrets_seen
    if environ is None:
        stamp, declared, seen = environ_stamp(), _declared, _secrets_seen
        if seen is not None and seen[1] is declared and seen[0] == stamp:
            return seen[2]
        found = _secret_values(os.environ)
        _secrets_seen = (stamp, declared, found)
        return found
    return _secret_values(environ)


def _secret_values(source: Mapping[str, str]) -> tuple[str, ...]:
    values = {
        value for name, value in source.items()
        if holds_secret_value(name) and len(value) >= MIN_SECRET_LENGTH
    }
    return tuple(sorted(values, key=len, reverse=True))


def redact(text: str, secrets: Iterable[str] | None = None) -> str:
    """``text`` with every occurrence of a secret (default: :func:`configured_secrets`) replaced by
    ``[redacted]``."""
    for secret in configured_secrets() if secrets is None else secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def env_var_allowed(name: str, allowed: Iterable[str] = ()) -> bool:
    """Whether a script may read ``name``: not credential-shaped, or listed in ``allowed``
    (``[security] allow_env_vars``: exact names, compared without case, no wildcards)."""
    if not looks_like_credential(name):
        return True
    return name.upper() in {entry.upper() for entry in allowed}
