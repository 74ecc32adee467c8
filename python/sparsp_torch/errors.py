"""Errors of the bridge. ``InputError`` is bad input (the CLI prints one line, exit 2);
``NoDeviceError`` means no GPU was found where one is needed (exit 1, as ``sparsp calibrate``)."""


class InputError(ValueError):
    """Bad input: the message names the file and the place."""


class NoDeviceError(RuntimeError):
    """A GPU is needed and none is visible."""
