"""Request body limit, enforced while the body streams in (not after reading it all).

A declared ``Content-Length`` over the limit is refused before a byte is read; a chunked
body is counted as it arrives and cut off the moment it passes the limit.  Either way
the answer is the usual JSON error (413 ``too_large``).  Starlette's own limiter would
answer in plain text, so this one replaces it.
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.api.errors import error_response


class BodyTooLarge(HTTPException):
    """The request body passed the configured limit."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"request body over the limit of {limit} bytes (SSDPREDICT_MAX_UPLOAD_BYTES)")
        self.details = {"max_bytes": limit}


class BodyLimitMiddleware:
    """Answer 413 for request bodies over ``max_body_size`` bytes."""

    def __init__(self, app: ASGIApp, max_body_size: int) -> None:
        self.app = app
        self.max_body_size = max_body_size

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.max_body_size
        declared = Headers(scope=scope).get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            error = BodyTooLarge(limit)
            response = error_response(413, "too_large", str(error.detail), error.details)
            await response(scope, receive, send)
            return
        received = 0

        async def receive_limited() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    # Raised inside the route's body reading; the HTTPException handler answers.
                    raise BodyTooLarge(limit)
            return message

        await self.app(scope, receive_limited, send)
