"""Reads the models the C++ writer test wrote (cpp/tests/writer_test.cpp) with onnx: each X.onnx
must pass onnx's checker and equal X.txt, the same model in ONNX's textual syntax as onnx's
parser reads it. Intermediate values and nodes may be named differently: values are compared
by where they are made, interfaces (graph inputs, outputs, weights, functions) by name.

usage: check_models.py DIR
"""

import pathlib
import sys

import onnx
import onnx.checker
import onnx.numpy_helper
import onnx.parser


def value_type(v: onnx.ValueInfoProto):
    t = v.type.tensor_type
    dims = [d.dim_value or d.dim_param for d in t.shape.dim] if t.HasField("shape") else None
    return t.elem_type, dims


def canonical_graph(graph: onnx.GraphProto, names: dict[str, str], interface: bool):
    """The graph with its values renamed by `names` plus, for values it makes, by position."""
    names = dict(names)
    if interface:  # the main graph: its inputs, outputs and weights keep their names
        for v in [*graph.input, *graph.output, *graph.initializer]:
            names[v.name] = v.name
    else:
        for i, v in enumerate(graph.input):
            names[v.name] = f"in{i}"
    nodes = []
    for k, node in enumerate(graph.node):
        for j, out in enumerate(node.output):
            names.setdefault(out, f"n{k}.{j}")
        nodes.append(canonical_node(node, names))
    return {
        "inputs": [(names[v.name], value_type(v)) for v in graph.input],
        "outputs": [(names[v.name], value_type(v)) for v in graph.output],
        "initializers": {t.name: onnx.numpy_helper.to_array(t).tolist() for t in graph.initializer},
        "nodes": nodes,
    }


def canonical_node(node: onnx.NodeProto, names: dict[str, str]):
    attrs = {}
    for a in node.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            attrs[a.name] = canonical_graph(a.g, names, interface=False)
        else:
            attrs[a.name] = onnx.helper.get_attribute_value(a)
    inputs = [names[i] if i else "" for i in node.input]
    return node.domain, node.op_type, inputs, [names[o] for o in node.output], attrs


def canonical_function(f: onnx.FunctionProto):
    names = {name: f"in{i}" for i, name in enumerate(f.input)}
    nodes = []
    for k, node in enumerate(f.node):
        for j, out in enumerate(node.output):
            names.setdefault(out, f"n{k}.{j}")
        nodes.append(canonical_node(node, names))
    opsets = sorted((o.domain, o.version) for o in f.opset_import)
    return f.domain, f.name, nodes, [names[o] for o in f.output], opsets


def canonical_model(m: onnx.ModelProto):
    return {
        "ir_version": m.ir_version,
        "opsets": sorted((o.domain, o.version) for o in m.opset_import),
        "graph": canonical_graph(m.graph, {}, interface=True),
        "functions": [canonical_function(f) for f in m.functions],
    }


def main() -> int:
    folder = pathlib.Path(sys.argv[1])
    written = sorted(folder.glob("*.onnx"))
    if not written:
        print(f"no models in {folder}")
        return 1
    failed = 0
    for path in written:
        model = onnx.load(str(path))  # with its external data, if any
        onnx.checker.check_model(model, full_check=True)
        expected = onnx.parser.parse_model(path.with_suffix(".txt").read_text())
        if canonical_model(model) != canonical_model(expected):
            failed += 1
            print(f"{path.name}: differs from {path.with_suffix('.txt').name}")
            print("written: ", canonical_model(model))
            print("expected:", canonical_model(expected))
        else:
            print(f"{path.name}: ok")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
