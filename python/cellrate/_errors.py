"""Bad arguments raised from Python as the compiled core raises them:
`InvalidArgument` (a ValueError) or `InvalidArgumentType` (a TypeError), both
CellrateError, whose `param` names the parameter at fault."""

from __future__ import annotations

from cellrate import _cellrate


def invalid(param: str, message: str) -> _cellrate.InvalidArgument:
    """A bad value of `param` (`message` starts with the parameter's name)."""
    error = _cellrate.InvalidArgument(message)
    error.param = param
    return error


def invalid_type(param: str, message: str) -> _cellrate.InvalidArgumentType:
    """A value of `param` of the wrong type."""
    error = _cellrate.InvalidArgumentType(message)
    error.param = param
    return error
