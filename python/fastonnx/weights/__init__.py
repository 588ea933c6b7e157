"""Weights that do not live in the traced module: memory-mapped safetensors checkpoints matched to
a program traced on the meta device."""
