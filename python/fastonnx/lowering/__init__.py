"""Lowering: an FX program prepared (decomposed where an op has no converter, checked for
unsupported ops) and handed to the native core node by node."""
