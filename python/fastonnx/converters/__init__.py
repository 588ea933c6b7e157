"""Converters written in Python: the ``GraphContext`` they build with and its registry, the
torch.onnx symbolic dialect, onnxscript converters, autograd symbolics, and the built-in ones
(torchvision's and transformers' library ops), all registered in ``builtin``."""
