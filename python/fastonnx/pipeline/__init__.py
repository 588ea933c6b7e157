"""``fastonnx.export`` as its stages: options checked, a front end traces, the lowering converts,
the writer writes; the result, its report and its verification."""
