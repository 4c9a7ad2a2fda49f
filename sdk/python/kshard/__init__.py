"""kshard's app contract for Python (sdk/README.md): EntityServer for the sidecar's callbacks,
Client for its app API. Standard library only."""

from .client import Client, Response, path_escape
from .errors import (AppUnavailableError, BadRequestError, CallTimeoutError, EntityOverloadedError,
                     NotDeliveredError,
                     Error, KshardError, NotReadyError, OutcomeUnknownError, PayloadTooLargeError,
                     SendTimeoutError, SidecarError, SidecarUnavailableError, decode_error,
                     error_body)
from http.server import ThreadingHTTPServer

from .server import (DEFAULT_MAX_BODY_BYTES, SINGLETON_TYPE, EntityServer, Message, Reply,
                     Start, Stop, error_reply, json_reply, make_request_handler,
                     serve_in_thread)
from .topics import PodFailure, Publication, PublishResult

__all__ = [
    "AppUnavailableError", "BadRequestError", "CallTimeoutError", "Client",
    "DEFAULT_MAX_BODY_BYTES", "EntityOverloadedError", "EntityServer", "Error", "KshardError",
    "Message", "NotDeliveredError", "NotReadyError", "OutcomeUnknownError", "PayloadTooLargeError", "PodFailure",
    "Publication", "PublishResult", "Reply",
    "Response", "SINGLETON_TYPE", "SendTimeoutError", "Start", "ThreadingHTTPServer", "SidecarError", "SidecarUnavailableError", "Stop",
    "decode_error", "error_body", "error_reply", "json_reply", "make_request_handler",
    "path_escape", "serve_in_thread",
]
