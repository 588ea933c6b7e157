"""Matrix products."""

from row import from_opinfo

ROWS = (
    from_opinfo("nn.functional.linear", "linear"),
    from_opinfo("addmm", "addmm"),
    from_opinfo("mm", "mm"),
    from_opinfo("bmm", "bmm"),
    from_opinfo("matmul", "matmul"),
)
