"""The one exception type for mistakes a user can fix."""


class ConfigurationError(ValueError):
    """Bad input the user can fix: a file, column, flag or value.

    The message is a single line that names the culprit and the fix. The command line
    prints it without a traceback and exits with status 2.
    """
