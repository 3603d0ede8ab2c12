"""The root of the errors a user of the kernels causes; each class keeps its RuntimeError or ValueError base too."""


class KernelError(Exception):
    """A shape, a device or a toolchain a kernel cannot use: the message names what it needs."""
