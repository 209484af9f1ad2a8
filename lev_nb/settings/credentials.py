"""Which environment variables a script may read: the credential-name rule (spec/rhai.md §3.3).

A name shaped like a secret (it contains TOKEN, SECRET, KEY, AUTH..., is one of a few well-known
connection-string names, or starts with a cloud or runtime prefix) is refused unless the user lists
it, exactly and in any case, under ``[security] allow_env_vars``. Script tools and provider scripts
both read variables through this rule.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["env_var_allowed", "looks_like_credential"]

_CREDENTIAL_WORDS = (
    "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL", "APIKEY", "API_KEY",
    "ACCESS_KEY", "PRIVATE_KEY", "KEY", "_PAT", "SESSION", "COOKIE", "AUTH", "BEARER", "SIGNATURE",
    "SIGNING", "DSN", "NETRC", "KUBECONFIG",
)
_CREDENTIAL_NAMES = frozenset(
    {"DATABASE_URL", "DATABASE_DSN", "REDIS_URL", "MONGO_URL", "MONGODB_URI", "AMQP_URL", "SSH_AUTH_SOCK"}
)
_CREDENTIAL_PREFIXES = ("LEVIATH_", "AWS_", "AZURE_", "GOOGLE_", "GCP_", "LEV_")


def looks_like_credential(name: str) -> bool:
    """Whether an environment variable name is shaped like a secret."""
    upper = name.upper()
    return (
        upper in _CREDENTIAL_NAMES
        or upper.startswith(_CREDENTIAL_PREFIXES)
        or any(word in upper for word in _CREDENTIAL_WORDS)
    )


def env_var_allowed(name: str, allowed: Iterable[str] = ()) -> bool:
    """Whether a script may read ``name``: not credential-shaped, or listed in ``allowed``
    (``[security] allow_env_vars``: exact names, compared without case, no wildcards)."""
    if not looks_like_credential(name):
        return True
    return name.upper() in {entry.upper() for entry in allowed}
