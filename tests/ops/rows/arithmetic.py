"""Binary arithmetic, with tensors, Python numbers and in place."""

import torch
from row import aten, binary, from_opinfo, hand_written, with_scalar

ROWS = (
    from_opinfo("add", "add.Tensor"),
    from_opinfo("sub", "sub.Tensor"),
    from_opinfo("mul", "mul.Tensor"),
    from_opinfo("div", "div.Tensor", variant="no_rounding_mode"),
    hand_written("add.Scalar", fn=lambda x, o, **kw: aten.add.Scalar(x, o, **kw), samples=lambda d: with_scalar(d, (2, -0.5))),
    hand_written("sub.Scalar", fn=lambda x, o, **kw: aten.sub.Scalar(x, o, **kw), samples=lambda d: with_scalar(d, (2, -0.5))),
    hand_written("mul.Scalar", fn=lambda x, o: aten.mul.Scalar(x, o), samples=with_scalar),
    hand_written("div.Scalar", fn=lambda x, o: aten.div.Scalar(x, o), samples=with_scalar),
    # `x + 2.5` in a model records add.Tensor with a Python number as `other`.
    hand_written("add.Tensor", id="add.python_scalar", fn=lambda x, o, **kw: torch.add(x, o, **kw), samples=lambda d: with_scalar(d, (2,))),
    hand_written("sub.Tensor", id="sub.python_scalar", fn=lambda x, o, **kw: torch.sub(x, o, **kw), samples=lambda d: with_scalar(d, (2,))),
    hand_written("mul.Tensor", id="mul.python_scalar", fn=lambda x, o: x * o, samples=with_scalar),
    hand_written("div.Tensor", id="div.python_scalar", fn=lambda x, o: x / o, samples=with_scalar),
    hand_written("add_.Tensor", fn=lambda x, o, **kw: x.clone().add_(o, **kw), samples=lambda d: binary(d, (2, -0.5))),
    hand_written("add_.Scalar", fn=lambda x, o, **kw: aten.add_.Scalar(x.clone(), o, **kw), samples=lambda d: with_scalar(d, (2,))),
    hand_written("sub_.Tensor", fn=lambda x, o, **kw: x.clone().sub_(o, **kw), samples=lambda d: binary(d, (2,))),
    hand_written("mul_.Tensor", fn=lambda x, o: x.clone().mul_(o), samples=binary),
    hand_written("div_.Tensor", fn=lambda x, o: x.clone().div_(o), samples=binary),
)
