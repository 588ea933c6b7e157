"""Reductions."""

from row import from_opinfo

ROWS = (
    from_opinfo("mean", "mean", "mean.dim"),
    from_opinfo("sum", "sum", "sum.dim_IntList"),
)
