"""A fit stopped before its end: by SIGTERM or Ctrl-C (``signals``), by a loss that is no
longer a number (``non_finite_loss``), or by a validation metric that has stopped improving
(``early_stopping``)."""
