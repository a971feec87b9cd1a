"""The error classes minic reports to a user (see the README's "Errors" section)."""


class MinicError(Exception):
    """Base of every error minic reports to a user."""


class UserError(MinicError):
    """Bad input from the user: a file, a model name, a shape. CLI exit status 1."""


class UnsupportedError(UserError):
    """The input is valid, but a path does not support it (an op, an opset, a dtype)."""
