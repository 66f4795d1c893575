"""S3 credentials from botocore's chain, the one the AWS CLI and boto3 use, for obstore's S3Store
(whose own chain reads only AWS_* variables, a web identity and container or instance roles).

The chain, first found wins: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (AWS_SESSION_TOKEN); the
profile AWS_PROFILE names (else `default`) in AWS_SHARED_CREDENTIALS_FILE (~/.aws/credentials) and
AWS_CONFIG_FILE (~/.aws/config): its keys, an assumed role, SSO (after `aws sso login`), a
credential_process; a web identity (AWS_WEB_IDENTITY_TOKEN_FILE, AWS_ROLE_ARN); a container role;
the instance role. The profile's `region` is used when AWS_REGION is not set.

obstore caches what the provider hands out and asks again 5 minutes before its `expires_at`: once
for static keys (no expiry), every 5 minutes for credentials that expire (`TTL`, 10 minutes, as
their expiry), never per request. botocore hands those out with at least 10 minutes left (it
refreshes them 15 minutes before they expire, and must 10 minutes before), so what obstore uses
still has 5 minutes left when obstore asks again.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import botocore.credentials
import botocore.exceptions
import botocore.session

if TYPE_CHECKING:
    from obstore.store import S3Credential

__all__ = ["TTL", "AwsCredentials", "AwsCredentialsError"]

TTL = timedelta(minutes=10)
"""The expiry given to obstore for credentials that expire: it asks again after 5 minutes (5 before
the expiry), while botocore's have at least 10 left. Under 5 minutes, obstore would ask every 0.1 s."""
_PROFILE_METHODS = frozenset(
    {"shared-credentials-file", "config-file", "assume-role", "sso", "custom-process", "login"}
)
"""botocore's names for credentials that come from a profile."""


class AwsCredentialsError(ValueError):
    """botocore could not get credentials (a missing profile, an expired SSO login, a failing
    credential_process); the message names the profile and what botocore said."""


@dataclass
class AwsCredentials:
    """obstore's `credential_provider` for S3Store over botocore `credentials`; `source` says where
    they came from (a profile and its file, the environment, a role), for error messages."""

    credentials: Any
    source: str
    region: str | None = None
    """The profile's region (or AWS_DEFAULT_REGION) when AWS_REGION is not set."""

    @classmethod
    def from_chain(cls) -> AwsCredentials | None:
        """The chain's credentials, fetched once now (so a bad profile fails at start), None when
        it finds none; AwsCredentialsError when a source it found fails."""
        session = botocore.session.Session()
        profile = session.get_config_variable("profile")
        try:
            credentials = session.get_credentials()
            if credentials is None:
                return None
            credentials.get_frozen_credentials()
        except botocore.exceptions.BotoCoreError as exc:
            raise AwsCredentialsError(f"AWS profile {profile or 'default'!r}: {str(exc).strip()}") from None
        region = None if os.environ.get("AWS_REGION") else session.get_config_variable("region")
        return cls(credentials, _source(session, credentials.method, profile), region)

    def __call__(self) -> S3Credential:
        frozen = self.credentials.get_frozen_credentials()  # refreshed by botocore when near expiry
        expires = isinstance(self.credentials, botocore.credentials.RefreshableCredentials)
        return {
            "access_key_id": frozen.access_key,
            "secret_access_key": frozen.secret_key,
            "token": frozen.token,
            "expires_at": datetime.now(UTC) + TTL if expires else None,
        }

    def __repr__(self) -> str:
        return f"AwsCredentials({self.source})"


def _source(session: Any, method: str, profile: str | None) -> str:
    if method == "env":
        return "the credentials in AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY"
    if method not in _PROFILE_METHODS:
        return f"the {method} credentials"
    file = session.get_config_variable("credentials_file" if method == "shared-credentials-file" else "config_file")
    return f"the credentials of AWS profile {profile or 'default'!r} ({method}, {file})"
