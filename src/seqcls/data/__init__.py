"""Labelled text to token batches: the first half of a training row's way to the loss.

A row flows downhill through these modules:

``sources`` (which file or hub split) -> ``tables`` (read it) -> ``labels`` (the label space,
decided once from the training data; each row's target) -> ``encoding`` (tokenize) with
``token_cache`` -> ``selection`` (held-out and subsampled rows) -> ``loaders`` with
``length_grouping`` and ``sub_batches`` (padded batches) -> the model.
``classification`` is the LightningDataModule's typed options; ``rows`` and ``batches``
compose the modules above, on the shared ``base``; ``glue`` holds the GLUE submission names
and ``metric_names`` which metrics score each problem type.
"""
