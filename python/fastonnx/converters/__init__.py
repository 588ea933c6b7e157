"""Converters written in Python: the ``GraphContext`` they build with and its registry, the
torch.onnx symbolic dialect, onnxscript converters, autograd symbolics, and the built-in ones
(torchvision's, transformers' and torch.ao's library ops), registered here, once, by ``builtin``
when any part of the package is first imported."""

from .builtin import register

register()
