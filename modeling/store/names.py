"""The name rule that keeps device and version names safe as path components."""

from __future__ import annotations

import re

from modeling.errors import InvalidInput

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def validate_name(name: str, what: str = "device name") -> str:
    """Return ``name`` if it is safe as a path component, else raise ``InvalidInput``.

    Letters, digits, ``.``, ``_`` and ``-``; 1-128 characters; not starting with a dot,
    so ``..`` and hidden files can never be named.
    """
    if not isinstance(name, str) or not _NAME_RE.match(name) or name in (".", ".."):
        raise InvalidInput(
            f"invalid {what} {name!r}: use 1-128 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return name
