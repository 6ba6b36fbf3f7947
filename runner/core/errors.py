"""The one base of the errors a person can fix by changing what they gave (a path, a file, an option's value).

The stages raise their own kinds (a library that is not there, a selection that cannot be made, a run folder
that cannot be resumed, ...), each with a message that names the input and says what is wrong with it. They
share this base so that the command line handles them in one place, the same way: the message, one line, and
exit 2, never a traceback.
"""


class UsageError(Exception):
    """Bad input a user can act on: the CLI prints its one line and exits 2."""
