"""The fastonnx converter generator: ``python -m codegen``."""
