"""Secrets kept out of ``config.yaml`` and the logged hyperparameters.

A run directory is shared and copied around, and TensorBoard shows every hyperparameter.
A value is replaced by ``REDACTED`` when its key names a secret (``token``, ``password``,
``api_key``...) or when the value itself looks like a credential: a Hugging Face, GitHub,
Google or AWS key, an OAuth access token, a private key, or the password in a URL. Pass
secrets through the environment (``HF_TOKEN``, Google's default credentials) instead: they
never reach the config.
"""

import re
from collections.abc import Mapping
from typing import Any

from jsonargparse import Namespace

REDACTED = "REDACTED"
_SECRET_KEY = re.compile(
    r"(^|[._-])(token|secret|password|passwd|api[_-]?key|access[_-]?key|private[_-]?key|"
    r"credentials?)($|[._-])",
    re.IGNORECASE,
)
_SECRET_VALUE = re.compile(
    r"hf_[A-Za-z0-9]{30,}"  # Hugging Face
    r"|gh[pousr]_[A-Za-z0-9]{30,}"  # GitHub
    r"|AIza[0-9A-Za-z_-]{35}"  # Google API key
    r"|ya29\.[0-9A-Za-z_.-]+"  # Google OAuth access token
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"  # AWS access key id
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----"
)
_URL_PASSWORD = re.compile(r"(://[^/:@\s]+:)[^/@\s]+@")


def redact(key: str, value: Any) -> Any:
    """``value`` with any secret in it replaced; mappings and lists are walked."""
    if isinstance(value, Mapping):
        return {k: redact(f"{key}.{k}", v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(redact(key, v) for v in value)
    if value is None or isinstance(value, bool | int | float):
        return value
    if _SECRET_KEY.search(key.rsplit(".", 1)[-1]):
        return REDACTED
    if isinstance(value, str):
        if _SECRET_VALUE.search(value):
            return REDACTED
        return _URL_PASSWORD.sub(rf"\g<1>{REDACTED}@", value)
    return value


def redact_config(config: Namespace) -> Namespace:
    """A copy of ``config`` with every secret in it replaced (see the module docstring)."""
    clean = config.clone()
    for key, value in config.items():
        cleaned = redact(key, value)
        if cleaned != value:
            clean[key] = cleaned
    return clean
