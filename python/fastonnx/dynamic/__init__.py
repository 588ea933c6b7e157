"""Dynamic dimensions: the request users write (``dynamic_shapes``, ``dynamic_axes``) and axes traced
at size 0 or 1."""
