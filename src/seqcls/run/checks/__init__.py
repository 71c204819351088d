"""Mistakes a user can fix, each stopped as one line before it costs a run anything.

``command_line`` holds the checks themselves and the parser whose errors are one line;
``flag_values`` and ``linked_options`` mend or refuse flags as they are parsed; ``parsed`` runs
the checks once the command line is parsed, ``buckets`` once the run's folders are known, and
``built`` once the model and the data are built.
"""
