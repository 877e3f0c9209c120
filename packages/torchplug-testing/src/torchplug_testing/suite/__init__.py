"""The conformance suite, one module per feature group (collected only with ``--device``)."""
