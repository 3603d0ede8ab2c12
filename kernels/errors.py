"""The root of the errors a user of the kernels can cause: a shape, a device or a toolchain a kernel cannot use.

Each keeps its own base (RuntimeError, ValueError) as well; the ci fronts print the message as one line.
"""


class KernelError(Exception):
    """A kernel cannot run as asked or here: the message names what it needs."""
