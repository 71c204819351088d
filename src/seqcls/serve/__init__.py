"""Serving an exported model: ONNX export, and the HTTP server Vertex AI's endpoints call.

``model_files`` reads what a model folder says (labels, problem type, calibration, how texts
are read), ``onnx_export`` writes the ONNX model beside it, ``backends`` score token batches
with PyTorch or ONNX Runtime, ``predictions`` turns texts into answers, ``requests`` checks a
request body, ``batching`` gathers concurrent requests into one forward pass, ``server`` is
the FastAPI app, and ``command`` parses ``seqcls export`` and ``seqcls serve``.
"""
