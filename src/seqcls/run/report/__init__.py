"""The evaluation report and the calibration of fit, validate and test.

``evaluation_report`` is the callback: it gathers each evaluated row exactly, fits and applies
the calibration, and writes the report; ``best_validation`` keeps the rows of the validation
that scored the exported weights across a resume; ``failed_run`` measures a run against always
answering the majority class; ``files``, ``pictures`` and ``texts`` make the report's tables,
pictures and decoded texts.
"""
