"""Integrations of fastonnx with other tools, each an optional import: fastonnx itself needs none
of them (``fastonnx.integrations.transformers`` needs transformers)."""
