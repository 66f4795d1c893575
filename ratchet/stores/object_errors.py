"""What an obstore error says (ratchet/stores/object_artifacts.py reads them): obstore raises one
exception class per kind, and the answer is in the message, as "<what> - Server returned non-2xx
status code: 404 Not Found: <body>\n\nDebug source: ...". Here: the HTTP status, the service's
error code, the request that failed, why there was no answer, and one line for a person."""

from __future__ import annotations

import re


class ObjectStoreError(Exception):
    """A request to the object store failed for a reason other than a missing or corrupt blob
    (network, 5xx, permissions). The message names the URL of the blob and what was answered;
    `status` is the HTTP status of the answer, None without one."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


CREDENTIAL_CODES = frozenset(
    {
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "InvalidToken",
        "ExpiredToken",
        "AuthenticationFailed",
        "InvalidAuthenticationInfo",
        "AuthenticationRequired",
        "401",
    }
)
MISSING_BUCKET_CODES = frozenset({"NoSuchBucket", "ContainerNotFound"})

_STATUS = re.compile(r"status code: (\d{3})")
_CODE = re.compile(r"<Code>\s*([^<\s]+)\s*</Code>")
_REQUEST = re.compile(r"Error performing ([A-Z]+) (\S+)")
_QUERY = re.compile(r"(https?://[^\s?]*)\?\S*")
_OS_REASON = re.compile(r'message: "([^"]+)"')


def _message(exc: Exception) -> str:
    """The message without its debug dump, URLs without their query (an Azure SAS token)."""
    return _QUERY.sub(r"\1", str(exc).split("\n\nDebug source:")[0]).strip()


def summary(exc: Exception) -> str:
    return _message(exc).splitlines()[0] if str(exc) else type(exc).__name__


def http_status(exc: Exception) -> int | None:
    found = _STATUS.search(str(exc))
    return int(found[1]) if found else None


def error_code(exc: Exception) -> str:
    """The service's error code (S3's, Azure's and GCS's XML `<Code>`), else the HTTP status as text."""
    found = _CODE.search(_message(exc))
    return found[1] if found else str(http_status(exc) or "")


def failed_request(exc: Exception) -> str:
    """`METHOD URL` of the request that failed, as obstore reports it."""
    found = _REQUEST.findall(summary(exc))  # the last one: a token request's own request comes after it
    return " ".join(found[-1]) if found else "?"


def no_answer_reason(exc: Exception) -> str:
    """Why there was no answer: the operating system's words when obstore reports them."""
    text = str(exc)
    retried = re.search(r"after (\d+) retries", text)
    reason = _OS_REASON.findall(text)[-1:] or [summary(exc).rpartition(" - ")[2] or type(exc).__name__]
    return reason[0] + (f", after {retried[1]} retries" if retried else "")


def describe(exc: Exception, permissions: str) -> str:
    """An error as `Code (HTTP status), METHOD URL` or `no answer (why), METHOD URL`, with what to
    do about the usual ones."""
    status, code = http_status(exc), error_code(exc)
    if "redirect" in str(exc) or code in ("PermanentRedirect", "AuthorizationHeaderMalformed"):
        return f"{summary(exc)}; is the bucket in another region? Set AWS_REGION to its region"
    if status is None and _REQUEST.search(str(exc)):
        return f"no answer ({no_answer_reason(exc)}), {failed_request(exc)}"
    if status is None:
        return summary(exc)
    detail = f"{code} (HTTP {status}), {failed_request(exc)}"
    if status == 403:
        detail += f"; the credentials need {permissions}"
    return detail
