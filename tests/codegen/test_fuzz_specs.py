"""Fuzzing the spec loader: random, structured and mutated YAML never fails with anything but a
SpecError (with file:line), and what loads either compiles or fails with one."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from codegen.dest.specs import compile_spec
from codegen.gen import MAPPINGS
from codegen.load import NativeFunctions, default_native_functions, load_spec_file
from codegen.model import SpecError
from fuzz import fuzz_settings

NF = NativeFunctions.load(default_native_functions())
REAL_FILES = sorted(MAPPINGS.glob("*.yaml"))

# Overloads whose schemas have tensors, scalars, int lists, optionals and several returns, and
# keys that are not overloads at all.
OVERLOADS = ["relu", "add.Tensor", "conv2d", "sum.dim_IntList", "max_pool2d", "topk", "cat", "where.self",
             "clamp", "relu_", "mean.dim", "native_layer_norm", "split.Tensor", "not_an_op", "add", ""]
NAMES = ["self", "other", "alpha", "input", "weight", "bias", "dim", "keepdim", "dtype", "tensors", "stride",
         "padding", "k", "min", "max", "x"]
ONNX_OPS = ["Relu", "Add", "Mul", "Conv", "Reshape", "TopK", "Concat", "Cast", "ReduceSum", "Clip", "Where",
            "Identity", "Split", "NotAnOp", "relu", "twice", "conv_pads", "rank", "len"]
TOKENS = [":", "-", " ", "  ", "\n", "{", "}", "[", "]", ",", "'", '"', "#", "&a ", "*a", "!!str ", "!!python/object ",
          "? ", "|", ">", "\t", "\x00", "\ufeff", "é", "Relu(", ")", "=", "since: ", "when: ", "onnx: ", "manual: true",
          "promote: ", "same_as: ", "__line__: ", "1e309", "-0", "null", "~", "yes", "0x1F"]


def _expr_text() -> st.SearchStrategy[str]:
    leaf = st.sampled_from(NAMES) | st.integers(-3, 70).map(str) | st.floats(allow_nan=True).map(repr) | st.sampled_from(
        ["[-1]", "[]", "[1, 'a']", "'str'", "None", "True", "[[1]]", "*self", "self.x", "1 + 2", "lambda: 0"]
    )

    def call(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        args = st.lists(children, max_size=3)
        kwargs = st.lists(st.tuples(st.sampled_from(["axis", "to", "keepdims", "pads", "alpha", "bad"]), children), max_size=2)
        made = st.builds(lambda f, a, k: f"{f}({', '.join(a + [f'{n}={v}' for n, v in k])})", st.sampled_from(ONNX_OPS), args, kwargs)
        return made | made.map(lambda c: f"{c}[1]") | st.lists(children, max_size=3).map(lambda xs: f"({', '.join(xs)})")

    return st.recursive(leaf, call, max_leaves=8)


def _guard_text() -> st.SearchStrategy[str]:
    operand = st.sampled_from(NAMES) | st.integers(-2, 5).map(str) | st.sampled_from(["None", "'x'", "rank(self)", "len(dim)", "[1, 2]"])
    compare = st.builds(lambda a, op, b: f"{a} {op} {b}", operand, st.sampled_from(["==", "!=", "<", ">=", "is", "is not", "in"]), operand)
    return st.recursive(compare | operand, lambda c: st.builds(lambda a, op, b: f"{a} {op} {b}", c, st.sampled_from(["and", "or"]), c)
                        | c.map(lambda x: f"not {x}"), max_leaves=4)


_ANY = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=8) | st.lists(st.integers(), max_size=2)
_RULE = st.fixed_dictionaries(
    {},
    optional={
        "since": st.integers(0, 30) | _ANY,
        "when": _guard_text() | _ANY,
        "onnx": _expr_text() | _ANY,
        "manual": st.booleans() | _ANY,
        "promote": st.lists(st.sampled_from(NAMES), max_size=3) | _ANY,
        "same_as": st.sampled_from(OVERLOADS) | _ANY,
        "bogus": _ANY,
    },
)
_BODY = _RULE | st.lists(_RULE, max_size=3) | _ANY
STRUCTURED = st.dictionaries(st.sampled_from(OVERLOADS) | st.text(max_size=10) | st.integers(), _BODY, max_size=4) | _ANY


@st.composite
def mutated_real_text(draw) -> str:
    """A window of a real mapping file with a few edits at random places."""
    lines = draw(st.sampled_from(REAL_FILES)).read_text().splitlines(keepends=True)
    start = draw(st.integers(0, max(0, len(lines) - 1)))
    text = "".join(lines[start : start + draw(st.integers(1, 12))])
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(text)))
        end = min(len(text), at + draw(st.integers(0, 6)))
        text = text[:at] + draw(st.sampled_from(TOKENS) | st.text(max_size=3) | st.just("")) + text[end:]
    return text


def load_and_compile(path: Path, data: bytes) -> None:
    """The loader's whole path: file -> specs -> compiled converters (or a SpecError)."""
    path.write_bytes(data)
    try:
        converters: dict = {}
        for spec in load_spec_file(path):
            converters[spec.overload] = compile_spec(spec, NF, converters)
    except SpecError as e:
        assert str(path) in str(e), f"the error does not say which file: {e}"


FUZZ = fuzz_settings(150)


@pytest.fixture(scope="module")
def spec_path(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz") / "ops.yaml"


@FUZZ
@given(doc=STRUCTURED)
def test_structured_yaml(spec_path, doc):
    load_and_compile(spec_path, yaml.safe_dump(doc, allow_unicode=True).encode())


@FUZZ
@given(text=mutated_real_text())
def test_mutated_real_specs(spec_path, text):
    load_and_compile(spec_path, text.encode("utf-8", "surrogatepass"))


@FUZZ
@given(data=st.binary(max_size=120) | st.lists(st.sampled_from(TOKENS), max_size=20).map(lambda t: "".join(t).encode("utf-8", "surrogatepass")))
def test_random_bytes(spec_path, data):
    load_and_compile(spec_path, data)


@pytest.mark.parametrize(
    "text, fragment",
    [
        (b"relu: {onnx: Relu(self)}\n\xff\xfe", "not UTF-8"),
        (b"relu: {promote: 5, onnx: Relu(self)}", "`promote:` is a list of argument names"),
        (b"relu: {onnx: \"Relu(self)\\0\"}", "expression does not parse"),
        (b"relu: {when: \"x\\0\", onnx: Relu(self)}", "`when:` does not parse"),
        (b"relu: {m, true}", "unknown key\\(s\\) \\['True', 'm'\\]"),
        (b"relu: {onnx: Relu(self)}\nrelu: {manual: true}", "`relu` appears twice"),
    ],
)
def test_fuzz_findings(spec_path, text, fragment):
    """Inputs the fuzzer found that once escaped as other exceptions."""
    spec_path.write_bytes(text)
    with pytest.raises(SpecError, match=fragment):
        for spec in load_spec_file(spec_path):
            compile_spec(spec, NF, {})

