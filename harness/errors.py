"""The root of the errors a user of the measuring layer causes; each class keeps its RuntimeError or ValueError."""


class MeasurementError(Exception):
    """A busy GPU, no monitor, a wrong result, unreadable compiler output: the message says which and why."""
