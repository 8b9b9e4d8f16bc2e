"""The aging error: bad aging parameters or a target that cannot be aged."""

from __future__ import annotations

from fsscope.errors import FsscopeError


class AgingError(FsscopeError):
    """Bad aging parameters or a target that cannot be aged; the message says which."""

