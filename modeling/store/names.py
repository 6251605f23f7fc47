"""The name rule that keeps device and version names safe as path components."""

from __future__ import annotations

import re
from typing import Final

from modeling.errors import InvalidInput

NAME_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9._@:-]{0,127}$"
"""Letters, digits, ``.``, ``_``, ``-``, ``@`` and ``:``; a multi-host sweep names each
host's device ``NAME@HOST`` or ``NAME@HOST:PORT``.  None of these characters is a path
separator or special to a shell glob, and a name never starts with ``.``."""

_NAME_RE = re.compile(NAME_PATTERN)


def validate_name(name: str, what: str = "device name") -> str:
    """Return ``name`` if it is safe as a path component, else raise ``InvalidInput``.

    Letters, digits, ``.``, ``_``, ``-``, ``@`` and ``:``; 1-128 characters; not starting
    with a dot, so ``..`` and hidden files can never be named.
    """
    if not isinstance(name, str) or not _NAME_RE.match(name) or name in (".", ".."):
        raise InvalidInput(
            f"invalid {what} {name!r}: use 1-128 letters, digits, '.', '_', '-', '@' or ':', "
            "starting with a letter or digit"
        )
    return name
