"""Normalization and dropout's modes."""

import torch
from row import SampleRule, aten, from_opinfo, hand_written, tensor
from torch.testing._internal.opinfo.core import SampleInput

# torch computes float16 norms in float32 and rounds the output once; the batch-statistics
# composite and onnxruntime's float16 InstanceNormalization round each step to float16, and its
# float16 LayerNormalization rounds the mean, which moves outputs of magnitude up to ~8 by an ulp
# or two (0.004 there).
FLOAT16_NORM_TOLERANCE = {torch.float16: (1e-3, 5e-3)}


def _native_dropout(dtype):
    # (p, train): train=False and p=0 are deterministic; training with p > 0 is random.
    for shape, p, train in [((3, 4), 0.5, False), ((2, 3, 4), 0.0, True), ((5,), 0.3, None), ((3, 4), 0.5, True)]:
        yield SampleInput(tensor(shape, dtype), args=(p, train))


def _random_dropout(sample: SampleInput) -> bool:
    p, train = sample.args
    return p > 0 and train is not False


ROWS = (
    from_opinfo("nn.functional.layer_norm", "layer_norm"),
    from_opinfo("native_layer_norm", "native_layer_norm", tolerance=FLOAT16_NORM_TOLERANCE),
    from_opinfo("nn.functional.group_norm", "group_norm"),
    from_opinfo("native_group_norm", "native_group_norm"),
    from_opinfo("nn.functional.instance_norm", "instance_norm", tolerance=FLOAT16_NORM_TOLERANCE),
    from_opinfo(
        "_native_batch_norm_legit",
        "_native_batch_norm_legit",
        "_native_batch_norm_legit.no_stats",
        tolerance=FLOAT16_NORM_TOLERANCE,
    ),
    from_opinfo("nn.functional.rms_norm", "rms_norm"),
    hand_written(
        "native_dropout",
        fn=lambda x, *args: aten.native_dropout(x, *args),
        samples=_native_dropout,
        sample_filter=SampleRule(
            "training-mode dropout with p > 0 is random (ONNX Dropout, training_mode)", _random_dropout
        ),
    ),
)
