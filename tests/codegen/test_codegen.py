"""The generator: spec round-trips, each bad-spec error, and the staleness check."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from codegen.api.cpp import cpp_args
from codegen.dest.specs import manual_bodies
from codegen.gen import GENERATED, MAPPINGS, ROOT, compile_all, generate
from codegen.load import NativeFunctions, default_native_functions, load_specs
from codegen.model import HELPERS, Helper, Kind, Rule, SpecError, Type, parse_expr


@pytest.fixture(scope="module")
def nf() -> NativeFunctions:
    return NativeFunctions.load(default_native_functions())


def test_every_spec_round_trips():
    specs = load_specs(MAPPINGS)
    assert len(specs) > 50
    for spec in specs:
        for rule in spec.rules:
            assert Rule.from_yaml(rule.to_yaml()) == rule
            if rule.onnx is not None:
                assert parse_expr(str(rule.onnx)) == rule.onnx


@pytest.mark.parametrize(
    "text",
    [
        "Relu(self)",
        "Add(self, Mul(other, alpha))",
        "Conv(input, weight, bias, strides=stride, pads=twice(padding), group=groups)",
        "Reshape(self, [-1, 2])",
        "TopK(self, k, axis=-1)[1]",
        "(Identity(self), Neg(self))",
        "Clip(self, -1.5, 2)",
        "Cast(self, to=1)",
        "Concat(tensors, axis=dim)",
        "LeakyRelu(self, alpha=0.01)",
        "self",
        'Not(compare("Equal", self, other))',
        "reduce_extremum(\"ReduceMax\", self, axes_of(self, dim), keepdim)",
        "layer_norm_with_stats(input, normalized_shape, weight, bias, eps, None)[0]",
    ],
)
def test_expression_round_trips(text):
    e = parse_expr(text)
    assert str(e) == text
    assert parse_expr(str(e)) == e


def _compile(tmp_path: Path, nf: NativeFunctions, yaml_text: str):
    (tmp_path / "ops.yaml").write_text(textwrap.dedent(yaml_text).lstrip())
    return compile_all(nf, tmp_path)


@pytest.mark.parametrize(
    "yaml_text, expected",
    [
        ("relu: {onx: Relu(self)}\n", [r"ops.yaml:1", "unknown key(s) ['onx']", "accepts ['since', 'when', 'onnx'"]),
        ("relu: {onnx: LeakyRelu(self, alpha=0.1)}\n", ["ops.yaml:1", "must be quoted"]),
        ("add.Tensr: {onnx: 'Add(self, other)'}\n", ["ops.yaml:1", "not in native_functions.yaml", "add.Tensor", "add.Scalar"]),
        ("relu: {onnx: Relux(self)}\n", ["ops.yaml:1", "`Relux` is unknown at opset 13", "not an ONNX operator"]),
        ("gelu: {onnx: Gelu(self)}\n", ["ops.yaml:1", "`Gelu` is unknown at opset 13", "add `since: 20`"]),
        ("relu: {onnx: Relu(input)}\n", ["ops.yaml:1", "`input` is not an argument of the schema", "it has: self"]),
        ("relu: {onnx: 'Relu(self'}\n", ["ops.yaml:1", "does not parse"]),
        ("leaky_relu: {onnx: 'LeakyRelu(self, beta=negative_slope)'}\n", ["ops.yaml:1", "no attribute `beta`", "it has: alpha"]),
        ("relu: {onnx: Relu(self), when: 'self +'}\n", ["ops.yaml:1", "`when:` does not parse"]),
        (
            "softmax.int:\n  - {onnx: 'Cast(self, to=dtype)'}\n",
            ["ops.yaml:2", "optional", "when: dtype is not None"],
        ),
        (
            "mean.dim:\n  - {when: dim is not None, onnx: 'ReduceMean(self, axes=dim)'}\n",
            ["ops.yaml:2", "(opset 18) has no attribute `axes`", "split the rule with `since:`"],
        ),
        ("relu_: {same_as: relu}\n", ["ops.yaml:1", "names an overload that is not mapped"]),
        ("relu: [{manual: true}, {manual: true}]\n", ["ops.yaml:1", "only one rule"]),
        ("relu: {since: 9, onnx: Relu(self)}\n", ["ops.yaml:1", "outside the supported opsets"]),
        ("relu: {when: 'dtype(self) == \"half\"', onnx: self}\n", ["ops.yaml:1", "`'half'` is not a dtype name", "float16"]),
        ("relu: {when: 'dtype(self) < \"bool\"', onnx: self}\n", ["ops.yaml:1", "compared with == or !="]),
        ("leaky_relu: {when: is_floating(negative_slope), onnx: self}\n", ["ops.yaml:1", "is_floating() takes a tensor"]),
        ("eq.Tensor: {onnx: 'compare(\"Equal\", self, 2.5, other)'}\n", ["ops.yaml:1", "`compare` takes 3 positional", "op op"]),
        ("eq.Tensor: {onnx: 'compare(\"Equl\", self, other)'}\n", ["ops.yaml:1", "`Equl` is not an ONNX operator"]),
        ("eq.Tensor: {onnx: 'compare(self, self, other)'}\n", ["ops.yaml:1", "argument `op` of `compare` takes op", "`self` is a Tensor"]),
        ("amax: {onnx: 'any_of(self, keepdim, keepdim)'}\n", ["ops.yaml:1", "argument `axes` of `any_of` takes axes", "`keepdim` is a bool"]),
        ("count_nonzero: {onnx: 'count_nonzero_over(self, axis_of(self, dim))'}\n",
         ["ops.yaml:1", "`dim` is optional", "when: dim is not None"]),
        ("relu: {onnx: 'comparee(self)'}\n", ["ops.yaml:1", "`comparee` is not a tensor helper", "compare"]),
        ("argsort: {onnx: 'top_k(self, dim, descending, None)[2]'}\n", ["ops.yaml:1", "gives 2 tensor(s); index 2 is out of range"]),
        ("sigmoid, tanh: {manual: true}\n", ["ops.yaml:1", "name it: `manual: sigmoid`"]),
        ("relu: {manual: 'not a name'}\n", ["ops.yaml:1", "names a C++ function"]),
        ("relu,, tanh: {onnx: Relu(self)}\n", ["ops.yaml:1", "separated by single commas"]),
        ("index.Tensor: {when: indices is None, manual: true}\n", ["ops.yaml:1", "`indices` is not optional"]),
        ("unsqueeze: {manual: true, complex: pairs}\n", ["ops.yaml:1", "`complex:` is one of ['parts']"]),
        ("t:\n  - {when: rank(self) == 2, onnx: 'Transpose(self)', complex: parts}\n  - {onnx: self}\n",
         ["ops.yaml:1", "every rule of an overload says the same `complex:`"]),
    ],
    ids=[
        "unknown-key",
        "unquoted-commas",
        "unknown-overload",
        "unknown-onnx-op",
        "onnx-op-too-new",
        "unknown-argument",
        "expression-syntax",
        "unknown-attribute",
        "guard-syntax",
        "optional-unguarded",
        "attribute-removed-in-range",
        "same-as-unmapped",
        "two-manual-rules",
        "opset-out-of-range",
        "dtype-name-unknown",
        "dtype-ordered",
        "dtype-predicate-of-scalar",
        "helper-arity",
        "helper-op-unknown",
        "helper-argument-type",
        "helper-axes-from-bool",
        "helper-optional-unguarded",
        "helper-unknown",
        "helper-output-out-of-range",
        "shared-manual-unnamed",
        "manual-body-not-an-identifier",
        "empty-overload-in-key",
        "optional-items-list-is-not-optional",
        "complex-mode-unknown",
        "complex-rules-disagree",
    ],
)
def test_bad_spec_errors(tmp_path, nf, yaml_text, expected):
    with pytest.raises(SpecError) as info:
        _compile(tmp_path, nf, yaml_text)
    message = str(info.value)
    for fragment in expected:
        assert fragment in message, f"{fragment!r} not in {message!r}"


def test_rules_compile_guards_and_since(tmp_path, nf):
    (converter,) = _compile(
        tmp_path,
        nf,
        """
        mean.dim:
          - {since: 18, onnx: 'ReduceMean(self, dim, keepdims=keepdim)'}
          - {when: dim is not None and keepdim, onnx: 'ReduceMean(self, axes=dim, keepdims=1)'}
          - {onnx: 'ReduceMean(self, keepdims=0)'}
        """,
    )
    conditions = [r.condition for r in converter.rules]
    assert conditions[0] == "b.opset() >= 18"
    assert "dim.has_value()" in conditions[1] and "keepdim" in conditions[1]
    assert conditions[2] == ""


def test_complex_parts_reaches_the_registry_row(tmp_path, nf):
    converters = _compile(tmp_path, nf, "unsqueeze: {manual: true, complex: parts}\nrelu: {onnx: Relu(self)}\n")
    # (the in-place twins convert as their functional ops do)
    assert {c.overload: c.complex_parts for c in converters} == {
        "unsqueeze": True, "unsqueeze_": True, "relu": False, "relu_": False
    }


def test_guards_test_dtypes(tmp_path, nf):
    converter, _inplace = _compile(
        tmp_path,
        nf,
        """
        sign:
          - {when: 'dtype(self) == "bool"', onnx: self}
          - {when: not is_floating(self) and rank(self) > 0, onnx: Sign(self)}
          - {onnx: Sign(self)}
        """,
    )
    conditions = [r.condition for r in converter.rules]
    assert conditions[0] == "((b.dtype(self) == ScalarType::Bool))"
    assert conditions[1] == "(!(is_floating(b.dtype(self))) && ((b.rank(self) > int64_t{0})))"


def test_check_reports_stale_files(tmp_path, nf):
    fm = generate(nf, check=True, out_dir=tmp_path)
    assert sorted(p.name for p in fm.stale) == sorted(p.name for p in GENERATED.iterdir())
    assert not list(tmp_path.iterdir()), "--check must not write"


def test_a_header_per_family(tmp_path, nf):
    """Each mapping file has a header and a source of its own; a family's source includes its
    header (and another family's only for a row that calls one of its converters), the registry
    includes every header, so adding an op recompiles that family's files only."""
    specs, out = tmp_path / "mappings", tmp_path / "generated"
    specs.mkdir()
    out.mkdir()
    (specs / "arithmetic.yaml").write_text("mul.Tensor: {onnx: 'Mul(self, other)'}\n")
    (specs / "unary.yaml").write_text("relu: {onnx: Relu(self)}\nmul_.Tensor: {same_as: mul.Tensor}\n")
    (specs / "activation.yaml").write_text("sigmoid, tanh: {manual: pointwise}\n")
    (out / "converters.h").write_text("// the former header of every family\n")
    fm = generate(nf, check=False, mapping_dir=specs, out_dir=out)
    # What no template writes any more: `python -m codegen` removes it, `--check` reports it.
    assert fm.leftovers() == [out / "converters.h"]

    def included(name: str) -> list[str]:
        return re.findall(r'#include "(converters\w*\.h)"', (out / name).read_text())

    assert included("converters_arithmetic.cpp") == ["converters_arithmetic.h"]
    assert included("converters_unary.cpp") == ["converters_unary.h", "converters_arithmetic.h"]
    assert included("converters_activation.cpp") == ["converters_activation.h"]
    assert included("registry.cpp") == ["converters_activation.h", "converters_arithmetic.h", "converters_unary.h"]
    declared = {f: (out / f"converters_{f}.h").read_text() for f in ("unary", "arithmetic", "activation")}
    assert "convert_relu(" in declared["unary"] and "convert_mul_Tensor(" not in declared["unary"]
    assert "convert_mul_Tensor(" in declared["arithmetic"] and "pointwise(" not in declared["arithmetic"]
    assert "Value pointwise(Builder& b, Value self);" in declared["activation"]
    assert "op_rows_activation();" in declared["activation"]
    rows = (out / "converters_unary.cpp").read_text()
    assert '{"mul_.Tensor", &unpack_mul__Tensor' in rows and "convert_mul_Tensor(b, " in rows


def test_mapping_file_names_are_identifiers(tmp_path, nf):
    (tmp_path / "my-ops.yaml").write_text("relu: {onnx: Relu(self)}\n")
    with pytest.raises(SpecError, match="my-ops.yaml:1: .*not `my-ops`"):
        compile_all(nf, tmp_path)


def test_committed_output_is_fresh():
    run = subprocess.run([sys.executable, "-m", "codegen", "--check"], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "up to date" in run.stdout


def test_generated_files_carry_banner():
    for path in GENERATED.iterdir():
        assert path.read_text().startswith("// @generated by python -m codegen"), path


def test_string_defaults_are_cpp_literals(nf):
    (_, approximate) = cpp_args(nf.schema("gelu"))
    assert approximate.default == 'std::string("none")'  # the schema writes 'none'


def test_helper_signatures_round_trip():
    for helper in HELPERS.values():
        assert Helper.parse(str(helper), helper.role) == helper


def test_list_of_optional_tensors_is_a_kind_of_its_own(nf):
    indices = next(a for a in cpp_args(nf.schema("index.Tensor")) if a.schema_name == "indices")
    assert indices.type == Type(Kind.OPTIONAL_TENSOR_LIST)
    assert not indices.optional and indices.kind.is_tensor
    assert indices.unpack("x", '"indices"') == 'unpack_opt_tensor_list(b, x, "indices")'


def test_overloads_share_an_entry(tmp_path, nf):
    converters = _compile(
        tmp_path,
        nf,
        """
        eq.Tensor, eq.Scalar: {onnx: 'compare("Equal", self, other)'}
        sigmoid, tanh: {manual: pointwise}
        """,
    )
    by_name = {c.overload: c for c in converters}
    assert by_name["eq.Tensor"].where == by_name["eq.Scalar"].where
    assert by_name["eq.Tensor"].where.endswith("ops.yaml:1")
    assert [s.call for s in by_name["eq.Scalar"].rules[0].steps] == ['compare(b, "Equal", self, other)']
    # A manual body is called by the registry directly, declared once per C++ signature.
    assert by_name["sigmoid"].callee == by_name["tanh"].callee == "manual::pointwise"
    assert not by_name["sigmoid"].generated
    (body,) = manual_bodies(converters)
    assert body.name == "pointwise" and [s.split("(")[0] for s in body.schemas] == ["sigmoid", "tanh"]


def test_own_ops_are_mapped_by_their_qualified_name(tmp_path, nf):
    (converter,) = _compile(tmp_path, nf, "fastonnx::padded_rnn: {manual: true}\n")
    assert converter.callee == "manual::fastonnx_padded_rnn" and converter.ret == "std::array<Value, 3>"
    assert [a.schema_name for a in converter.params][:3] == ["mode", "input", "lengths"]


@pytest.mark.parametrize(
    "yaml_text, expected",
    [
        ("fastonnx::padded_rn: {manual: true}\n", ["ops.yaml:1", "not in op_schemas.txt", "no overload of that name"]),
        ("mylib::scaled: {manual: true}\n", ["ops.yaml:1", "another library's op", "register_converter"]),
        ("padded_rnn: {manual: true}\n", ["ops.yaml:1", "not in native_functions.yaml"]),
    ],
    ids=["unknown-own-op", "other-namespace", "own-op-unqualified"],
)
def test_own_op_key_errors(tmp_path, nf, yaml_text, expected):
    with pytest.raises(SpecError) as info:
        _compile(tmp_path, nf, yaml_text)
    for fragment in expected:
        assert fragment in str(info.value), str(info.value)


@pytest.mark.parametrize(
    "line, expected",
    [
        ("scaled(Tensor self -> Tensor", "op_schemas.txt:3: `scaled(Tensor self -> Tensor` is not a torch schema"),
        ("scaled(Tensr self) -> Tensor", "op_schemas.txt:3: `scaled(Tensr self) -> Tensor` is not a torch schema"),
        ("scaled.out(Tensor self) -> Tensor", "op_schemas.txt:3: `scaled.out`: an op of op_schemas.txt is named"),
        ("mylib::scaled(Tensor self) -> Tensor", "op_schemas.txt:3: `mylib::scaled`: an op of op_schemas.txt"),
        ("relu(Tensor self) -> Tensor", "op_schemas.txt:3: `relu` is declared twice (first at line 2)"),
    ],
    ids=["syntax", "unknown-type", "overload", "namespace", "twice"],
)
def test_own_schema_errors(tmp_path, line, expected):
    (tmp_path / "op_schemas.txt").write_text(f"# a comment\nrelu(Tensor self) -> Tensor\n{line}\n")
    with pytest.raises(SpecError) as info:
        NativeFunctions.load(default_native_functions(), tmp_path / "op_schemas.txt")
    assert expected in str(info.value), str(info.value)


@pytest.mark.parametrize("flags", [[], ["--check"], ["--coverage"]], ids=["generate", "check", "coverage"])
def test_entry_points_report_file_and_line(tmp_path, flags):
    (tmp_path / "ops.yaml").write_text("relu: {onnx: Relu(self)}\ntanh: {onnx: 'compare(self)'}\n")
    run = subprocess.run([sys.executable, "-m", "codegen", *flags, "--mappings", str(tmp_path)], cwd=ROOT,
                         capture_output=True, text=True)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "Traceback" not in run.stderr
    assert run.stderr.startswith("error: ") and "ops.yaml:2: `tanh`:" in run.stderr, run.stderr
