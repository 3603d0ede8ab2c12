"""The root of the errors a user of the measuring layer can cause: a busy GPU, no monitor, a wrong result, ...

Each keeps its own base (RuntimeError, ValueError) as well; the ci fronts print the message as one line.
"""


class MeasurementError(Exception):
    """The measurement cannot be made, or its result is not valid: the message says why."""
