"""The error classes minic reports to a user (see the README's "Errors" section)."""


class MinicError(Exception):
    """Base of every error minic reports to a user."""


class UserError(MinicError):
    """Bad input from the user: a file, a model name, a shape. CLI exit status 1."""


class UnsupportedError(UserError):
    """The input is valid, but a path does not support it (an op, an opset, a dtype)."""


class MissingBridgeError(UserError, ImportError):
    """A bridge's production stack (TVM, IREE, OpenVINO, ...) is not installed; the
    message names the pip extra that installs it (``pip install 'minic[tvm]'``)."""


class DataError(UserError):
    """The input *data* is outside what an op is defined for: a gather index out of
    range, an integer division by zero.  The interpreter raises it from the op's
    reference; compiled code tests the data, reports it in its status word, and the
    runtime raises it after the call, naming the node."""
