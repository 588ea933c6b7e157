"""Export-time and memory benchmarks of fastonnx against torch.export alone, the disk floor and
torch.onnx.export (dynamo, with and without its optimizer, and TorchScript). Run with

    python -m benchmarks [--runs 3] [--models mlp,resnet18,...] [--out benchmarks/RESULTS.md]
"""
