"""Loading: ATen schemas from ``native_functions.yaml``, the schemas of fastonnx's own ops from
``python/fastonnx/op_schemas.txt`` and mapping specs from ``codegen/mappings/*.yaml``, each error
naming ``file:line``.

Schemas are parsed with ``torchgen.model.FunctionSchema`` rather than a parser of our own, and
YAML keys are popped one by one so leftovers are reported with the keys that are accepted (the
pattern of torchgen's ``NativeFunction.from_yaml``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from torchgen.model import FunctionSchema, SchemaKind

from .model import LINE_KEYS, RULE_KEYS, OpSpec, Rule, SpecError, fail

ENTRY_KEYS = RULE_KEYS + ("same_as",)

# The ops fastonnx declares itself. Python declares them from the same file at run time (so it
# ships inside the package); mapping entries key them `fastonnx::<name>`, qualified so that no
# ATen op (unqualified in native_functions.yaml) can take the name, and spelt as torch names the
# op (`torch.ops.fastonnx.padded_rnn.default` is `fastonnx::padded_rnn`).
OWN_NAMESPACE = "fastonnx"
OWN_SCHEMAS = Path(__file__).resolve().parent.parent / "python" / OWN_NAMESPACE / "op_schemas.txt"


def default_native_functions() -> Path:
    import torchgen

    return Path(torchgen.__file__).parent / "packaged" / "ATen" / "native" / "native_functions.yaml"


def _shown(path: Path) -> Path:
    """A path as errors print it: relative to the working directory when it is inside it."""
    return Path(os.path.relpath(path)) if Path(path).resolve().is_relative_to(Path.cwd()) else Path(path)


class LineLoader(yaml.SafeLoader):
    """Records the line of every mapping as ``__line__`` (1-based), as torchgen's loader does."""

    def construct_mapping(self, node, deep=False):
        mapping = super().construct_mapping(node, deep=deep)
        key_lines: dict = {}
        for k, _ in node.value:
            key = self.construct_object(k)
            if key in key_lines:  # YAML would keep the last silently
                raise yaml.constructor.ConstructorError(
                    None, None, f"`{key}` appears twice in one mapping (first at line {key_lines[key]})", k.start_mark
                )
            key_lines[key] = k.start_mark.line + 1
        mapping["__line__"] = node.start_mark.line + 1
        mapping["__key_lines__"] = key_lines
        return mapping


@dataclass
class NativeFunctions:
    """The overloads of ``native_functions.yaml``, keyed ``name.overload`` (``name`` for the
    default overload) as in that file, and fastonnx's own ops, keyed ``fastonnx::name``; ATen's
    schemas are parsed on first use."""

    path: Path
    own_path: Path = OWN_SCHEMAS
    funcs: dict[str, str] = field(default_factory=dict)
    tags: dict[str, frozenset[str]] = field(default_factory=dict)
    _parsed: dict[str, FunctionSchema] = field(default_factory=dict)

    @staticmethod
    def load(path: Path, own_schemas: Path = OWN_SCHEMAS) -> NativeFunctions:
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        with open(path) as f:
            entries = yaml.load(f, Loader=loader)
        nf = NativeFunctions(Path(path), Path(own_schemas))
        for e in entries:
            func = e["func"]
            key = func[: func.index("(")]
            nf.funcs[key] = func
            tags = e.get("tags", ())
            nf.tags[key] = frozenset([tags] if isinstance(tags, str) else tags)
            nf.funcs.update(_functional_variants(e))
        nf._load_own()
        return nf

    def _load_own(self) -> None:
        """``op_schemas.txt``: a schema a line, ``#`` starting a comment line. Each is parsed here,
        so that a line torch would refuse fails codegen with its ``file:line``."""
        shown = _shown(self.own_path)
        lines = self.own_path.read_text(encoding="utf-8").splitlines()
        declared: dict[str, int] = {}
        for number, line in enumerate(lines, 1):
            text = line.strip()
            if not text or text.startswith("#"):
                continue
            where = f"{shown}:{number}"
            try:
                schema = FunctionSchema.parse(text)
            except Exception as e:  # noqa: BLE001 - torchgen's parser fails with assertions and runtime errors alike
                fail(where, f"`{text}` is not a torch schema: {e}")
            name = str(schema.name)
            if not name.isidentifier():
                fail(where, f"`{name}`: an op of {shown.name} is named `name(...)`, without a namespace or overload")
            key = f"{OWN_NAMESPACE}::{name}"
            if key in declared:
                fail(where, f"`{name}` is declared twice (first at line {declared[key]})")
            declared[key] = number
            self.funcs[key] = text
            self._parsed[key] = schema

    def file_of(self, key: str) -> str:
        """The file that declares, or would declare, ``key``."""
        return self.own_path.name if key.startswith(f"{OWN_NAMESPACE}::") else self.path.name

    def schema(self, key: str) -> FunctionSchema:
        if key not in self._parsed:
            self._parsed[key] = FunctionSchema.parse(self.funcs[key])
        return self._parsed[key]

    def overloads_of(self, key: str) -> list[str]:
        base = key.split(".")[0]
        return sorted(k for k in self.funcs if k.split(".")[0] == base)

    def inplace_twins(self) -> list[tuple[str, str]]:
        """(in-place overload, its functional twin): ``relu_`` and ``relu``, ``add_.Tensor`` and
        ``add.Tensor``. Dunder names (``__iand__``) are left out: their twins are spelled apart."""
        out = []
        for key in self.funcs:
            name, _, overload = key.partition(".")
            if name.endswith("_") and not name.startswith("__"):
                functional = name[:-1] + (f".{overload}" if overload else "")
                if functional in self.funcs:
                    out.append((key, functional))
        return sorted(out)

    def core(self) -> list[str]:
        return sorted(k for k, t in self.tags.items() if "core" in t)


def _functional_variants(entry: dict) -> dict[str, str]:
    """The functional variants torchgen generates for a mutating op and names in its ``autogen:``
    (``embedding_renorm`` for ``embedding_renorm_``), which functionalized graphs call: their
    schema is the op's signature, with the arguments it mutates returned after its results."""
    names = [n.strip() for n in str(entry.get("autogen", "")).split(",")]
    functional = [n for n in names if n and not n.partition(".")[2].endswith("out")]
    if not functional:
        return {}
    schema = FunctionSchema.parse(entry["func"])
    if schema.kind() not in (SchemaKind.inplace, SchemaKind.mutable):
        return {}
    signature = str(schema.signature())
    arguments = signature[signature.index("(") :]
    return {name: name + arguments for name in functional}


def load_spec_file(path: Path) -> list[OpSpec]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise SpecError(f"{path}: the file is not UTF-8 ({e.reason} at byte {e.start})") from None
    try:
        doc = yaml.load(text, Loader=LineLoader)
    except yaml.YAMLError as e:
        raise SpecError(f"{path}: YAML does not parse: {e}") from None
    if doc is None:
        return []
    if not isinstance(doc, dict):
        fail(f"{path}:1", "a mapping file is a YAML mapping of ATen overloads to rules")
    specs = []
    doc.pop("__line__", None)
    key_lines = doc.pop("__key_lines__", {})
    for key, body in doc.items():
        line = key_lines.get(key, 1)
        where = f"{path}:{line}"
        overloads = [o.strip() for o in str(key).split(",")]
        if not all(overloads):
            fail(where, f"`{key}`: overloads that share an entry are separated by single commas")
        if isinstance(body, dict) and "same_as" in body:
            extra = sorted(str(k) for k in body if k != "same_as" and k not in LINE_KEYS)
            if extra:
                fail(where, f"`same_as:` stands alone; remove {extra}")
            specs += [OpSpec(o, same_as=str(body["same_as"]), file=str(path), line=line) for o in overloads]
            continue
        items = body if isinstance(body, list) else [body]
        if not items or not all(isinstance(i, dict) for i in items):
            fail(
                where,
                f"`{key}` must map to a rule ({{onnx: ...}} or {{manual: true}}), "
                f"a list of rules, or {{same_as: other}}; accepted keys: {list(ENTRY_KEYS)}",
            )
        rules = tuple(Rule.from_yaml(i, f"{path}:{i.get('__line__', line)}") for i in items)
        if len(overloads) > 1 and any(r.manual and r.body is None for r in rules):
            fail(where, f"overloads sharing a manual body name it: `manual: {overloads[0].split('.')[0]}`")
        specs += [OpSpec(o, rules=rules, file=str(path), line=line) for o in overloads]
    return specs


def load_specs(mapping_dir: Path) -> list[OpSpec]:
    specs: list[OpSpec] = []
    seen: dict[str, OpSpec] = {}
    for path in sorted(Path(mapping_dir).glob("*.yaml")):
        if not path.stem.isidentifier():
            # The family's name is part of its generated file names and C++ function names.
            fail(f"{_shown(path)}:1", f"a mapping file's name is an identifier (letters, digits, _), not `{path.stem}`")
        for spec in load_spec_file(_shown(path)):
            if spec.overload in seen:
                raise SpecError(f"{spec.where}: `{spec.overload}` is already mapped at {seen[spec.overload].where}")
            seen[spec.overload] = spec
            specs.append(spec)
    return specs
