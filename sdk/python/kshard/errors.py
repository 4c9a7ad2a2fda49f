"""Errors of the app contract (sdk/README.md): the app's own answers and the sidecar's."""

import json


def error_body(code, message):
    """kshard's JSON error shape: {"error": {"code": ..., "message": ...}}, as bytes."""
    return json.dumps({"error": {"code": code, "message": message}}).encode()


def decode_error(body):
    """(code, message) of kshard's error shape, or None when body is not one."""
    try:
        err = json.loads(body)["error"]
        code = err["code"]
    except (ValueError, TypeError, KeyError):
        return None
    if not isinstance(code, str) or not code:
        return None
    return code, str(err.get("message", ""))


class _Coded:
    """An exception with an HTTP status, a code and a message."""
    prefix = ""

    def __init__(self, status, code, message=""):
        super().__init__(f"{self.prefix}{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message


class Error(_Coded, Exception):
    """An answer of the app with a status and a code: raise it from a handler to answer
    {"error": {"code", "message"}} with that status. Any other exception answers 500 Internal."""


class KshardError(Exception):
    """Base of the client's errors."""


class SidecarError(_Coded, KshardError):
    """An error the sidecar made itself (Kshard-Error), not the app's answer."""
    prefix = "kshard sidecar: "
    #: whether the message may have reached the entity
    delivered = True


class NotDeliveredError(SidecarError):
    """The sidecar says the message surely did not reach the entity: it may be sent again."""
    delivered = False


class BadRequestError(NotDeliveredError):
    """400: a bad type, id, mode or escape. Not delivered."""


class PayloadTooLargeError(NotDeliveredError):
    """413: the body is over the sidecar's --max-body-bytes. Not delivered."""


class NotReadyError(NotDeliveredError):
    """503 NotReady: the sidecar has no ShardMap yet. Not delivered."""


class EntityOverloadedError(NotDeliveredError):
    """503 EntityOverloaded: mailbox or tell backlog full; slow down. Not delivered."""


class SendTimeoutError(NotDeliveredError):
    """504 SendTimeout: no owner took it within sendTimeout. Not delivered; may be sent again."""


class AppUnavailableError(NotDeliveredError):
    """502 AppUnavailable: the owner's app could not be reached. Not delivered."""


class OutcomeUnknownError(SidecarError):
    """The message may or may not have been applied: the sidecar said OutcomeUnknown (502, 504),
    or the exchange with the sidecar broke, or timed out, after the request went out (status
    None). kshard never sends it again; retry only with an Idempotency-Key the app checks."""


class CallTimeoutError(OutcomeUnknownError, TimeoutError):
    """The call's own timeout ran out after the request went out."""


class SidecarUnavailableError(KshardError):
    """The sidecar could not be reached: nothing was sent."""
    delivered = False


SIDECAR_ERRORS = {
    "BadRequest": BadRequestError,
    "InvalidArgument": BadRequestError,
    "PayloadTooLarge": PayloadTooLargeError,
    "NotReady": NotReadyError,
    "EntityOverloaded": EntityOverloadedError,
    "SendTimeout": SendTimeoutError,
    "AppUnavailable": AppUnavailableError,
    "OutcomeUnknown": OutcomeUnknownError,
}


def sidecar_error(status, code, message):
    """The SidecarError subclass of `code` (SidecarError itself for other codes)."""
    return SIDECAR_ERRORS.get(code, SidecarError)(status, code, message)
