"""Secrets from Google Secret Manager, read when the job starts instead of stored in its spec.

A Vertex AI job spec, environment variables included, is readable by anyone who can view the
job. So a token is given by name: ``SEQCLS_SECRET_HF_TOKEN=projects/P/secrets/S/versions/V``
makes seqcls read that secret version and set ``HF_TOKEN`` to it, in this process only,
before any model loads. The job's service account needs ``roles/secretmanager.secretAccessor``
on the secret. A variable that is already set wins, so DDP's worker processes, which inherit
the environment, do not read the secret again.
"""

import base64
import binascii
import logging
import os
import re
from collections.abc import MutableMapping
from typing import Any

from seqcls.errors import ConfigurationError

log = logging.getLogger(__name__)

PREFIX = "SEQCLS_SECRET_"
ENDPOINT = "https://secretmanager.googleapis.com/v1"
_VERSION = re.compile(r"projects/[^/\s]+/secrets/[^/\s]+/versions/[^/\s]+")


def _default_session() -> Any:
    # google-auth and requests come with gcsfs; imported here, since most runs read no secret.
    import google.auth
    from google.auth.transport.requests import AuthorizedSession

    credentials, _ = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
    return AuthorizedSession(credentials)


def read_secret(variable: str, version: str, session: Any, endpoint: str = ENDPOINT) -> str:
    """The text of a secret ``version`` (``projects/P/secrets/S/versions/V``)."""
    try:
        response = session.get(f"{endpoint}/{version}:access", timeout=30)
    except OSError as error:  # requests' connection errors are OSErrors
        raise ConfigurationError(
            f"{variable}={version}: Secret Manager unreachable ({type(error).__name__})"
        ) from None
    if response.status_code != 200:
        try:
            reason = response.json()["error"]["message"]
        except (ValueError, KeyError, TypeError):
            reason = f"HTTP {response.status_code}"
        hint = (
            "grant the job's service account roles/secretmanager.secretAccessor on the secret"
            if response.status_code == 403
            else "check the secret's name and version"
        )
        raise ConfigurationError(f"{variable}={version}: Secret Manager says: {reason}; {hint}")
    try:
        return base64.b64decode(response.json()["payload"]["data"]).decode()
    except (ValueError, KeyError, TypeError, binascii.Error, UnicodeDecodeError):
        raise ConfigurationError(
            f"{variable}={version}: Secret Manager's answer holds no text payload"
        ) from None


def apply_secrets(
    environ: MutableMapping[str, str] | None = None,
    session: Any = None,
    endpoint: str = ENDPOINT,
) -> list[str]:
    """Set each ``NAME`` named by a ``SEQCLS_SECRET_NAME`` variable; the names that were set."""
    env = os.environ if environ is None else environ
    wanted = sorted((key, value) for key, value in env.items() if key.startswith(PREFIX))
    applied = []
    for variable, version in wanted:
        name = variable.removeprefix(PREFIX)
        if not name:
            raise ConfigurationError(f"{variable}: name the variable to set, e.g. {PREFIX}HF_TOKEN")
        if not _VERSION.fullmatch(version):
            raise ConfigurationError(
                f"{variable}={version}: expected projects/PROJECT/secrets/SECRET/versions/VERSION "
                "(VERSION may be latest)"
            )
        if name in env:
            continue
        if session is None:
            try:
                session = _default_session()
            except Exception as error:  # google.auth's DefaultCredentialsError and kin
                raise ConfigurationError(
                    f"{variable}: no Google credentials to read Secret Manager with "
                    f"({type(error).__name__}); on Vertex AI the job's service account has them"
                ) from None
        env[name] = read_secret(variable, version, session, endpoint)
        log.info("%s set from Secret Manager (%s)", name, version)
        applied.append(name)
    return applied
