"""An index of the product code for tests/test_config_readers.py: which attributes are read
and which string constants are read (not written) anywhere, so a config key that is
accepted can be checked for a reader.

A string counts as read where code looks it up: an argument of a call
(`props.get("node.id")`, `_int(props, "node.id")`), a subscript (`props["listeners"]`) or a
comparison (`key == "compression.type"`, `"broker.rack" in props`). A dict key, a set or
tuple member or an assignment is a declaration, not a read; so are the acceptance tables
themselves (the dicts that list what a node, topic or broker accepts), which are skipped.
"""

from __future__ import annotations

import ast
import pathlib
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

ROOT = pathlib.Path(__file__).resolve().parent.parent
PRODUCT = (
    "storage",
    "raft",
    "metadata",
    "coordinator",
    "broker",
    "server",
    "strom",
    "pyspark_strom",
    "strom_api",
    "strom_tools",
)

# (module, name) of the module-level tables that say which keys are accepted.
ACCEPTANCE_TABLES = {
    ("server/server_config.py", name)
    for name in ("_NODE_KEYS", "_REPLICA_KEYS", "_LOWEST", "_CONTROLLER_KEYS", "_RAFT_KEYS")
} | {
    ("server/server_config.py", "_GROUP_KEYS"),
    ("metadata/config_control.py", "STATIC_BROKER_CONFIGS"),
    ("metadata/config_control.py", "DYNAMIC_BROKER_CONFIGS"),
    ("metadata/config_control.py", "_TOPIC_TO_BROKER"),
    ("metadata/config_control.py", "_NO_BROKER_DEFAULT"),
    ("metadata/topic_configs.py", "REPLICATION_CONFIGS"),
    ("storage/config.py", "_SPECS"),
    ("raft/config.py", "_NAMES"),
    ("server/unapplied_configs.py", "NOT_APPLIED"),
    ("server/listener_security.py", "SSL_KEYS"),
}


@dataclass
class CodeIndex:
    attribute_reads: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    string_reads: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    # Every string constant, read or not (argparse actions are looked up by name from
    # tuples such as ACTIONS).
    strings: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))

    def add(self, module: str, source: str) -> None:
        tree = ast.parse(source)
        skipped: set[int] = set()
        for node in tree.body:
            target = None
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
            elif isinstance(node, ast.AnnAssign):
                target = node.target
            if isinstance(target, ast.Name) and (module, target.id) in ACCEPTANCE_TABLES:
                skipped |= {id(n) for n in ast.walk(node)}
        # Module constants (LEADER_REPLICAS = "leader.replication.throttled.replicas")
        # count as read where their name is.
        constants = {
            node.targets[0].id: node.value.value
            for node in tree.body
            if isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        }
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                self.attribute_reads[node.attr].add(module)
            for text in _strings_read(node, constants):
                self.string_reads[text].add(module)
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                self.strings[node.value].add(module)

    def reads_attribute(self, name: str, outside: Iterable[str] = ()) -> set[str]:
        return self.attribute_reads.get(name, set()) - set(outside)

    def reads_string(self, text: str, outside: Iterable[str] = ()) -> set[str]:
        return self.string_reads.get(text, set()) - set(outside)


def _constant_strings(
    nodes: Iterable[ast.expr], constants: Mapping[str, str] | None = None
) -> list[str]:
    out = []
    for n in nodes:
        if isinstance(n, ast.Constant) and isinstance(n.value, str):
            out.append(n.value)
        elif constants and isinstance(n, ast.Name) and n.id in constants:
            out.append(constants[n.id])
    return out


def _strings_read(node: ast.AST, constants: Mapping[str, str] | None = None) -> list[str]:
    if isinstance(node, ast.Call):
        return _constant_strings(node.args, constants)
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
        return _constant_strings([node.slice], constants)
    if isinstance(node, ast.Compare):
        return _constant_strings([node.left, *node.comparators], constants)
    return []


def product_index() -> CodeIndex:
    index = CodeIndex()
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            index.add(str(path.relative_to(ROOT)), path.read_text(encoding="utf-8"))
    return index


@dataclass(frozen=True)
class Option:
    module: str
    flags: tuple[str, ...]
    dest: str


def cli_options(package: str = "strom_tools") -> list[Option]:
    """Every argparse option the `strom` command defines, with the attribute it lands in
    (skipping --help and --version, which argparse acts on itself)."""
    options = []
    for path in sorted((ROOT / package).glob("*.py")):
        module = str(path.relative_to(ROOT))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument"
            ):
                continue
            keywords = {k.arg: k.value for k in node.keywords}
            action = keywords.get("action")
            if isinstance(action, ast.Constant) and action.value in ("help", "version"):
                continue
            flags = tuple(_constant_strings(node.args))
            dest_node = keywords.get("dest")
            if isinstance(dest_node, ast.Constant):
                dest = str(dest_node.value)
            else:
                longs = [f for f in flags if f.startswith("--")]
                dest = (longs or list(flags))[0].lstrip("-").replace("-", "_")
            options.append(Option(module, flags, dest))
    return options


def init_parameters_unread(source: str, class_name: str, index: CodeIndex) -> list[str]:
    """The keyword parameters of `class_name.__init__` that go nowhere that is read: used
    only in `if` tests (checked, then dropped), or stored in an attribute or passed as a
    keyword argument whose name nothing reads."""
    tree = ast.parse(source)
    cls = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == class_name)
    init = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    parents = {id(c): p for p in ast.walk(init) for c in ast.iter_child_nodes(p)}
    unread = []
    for param in [a.arg for a in init.args.args[1:] + init.args.kwonlyargs]:
        uses = [
            n
            for n in ast.walk(init)
            if isinstance(n, ast.Name) and n.id == param and isinstance(n.ctx, ast.Load)
        ]
        if not any(_use_is_read(use, parents, index) for use in uses):
            unread.append(param)
    return unread


def _use_is_read(use: ast.AST, parents: dict[int, ast.AST], index: CodeIndex) -> bool:
    node = use
    while id(node) in parents:
        parent = parents[id(node)]
        if isinstance(parent, (ast.If, ast.While)) and node is parent.test:
            return False  # a check, not a use
        if isinstance(parent, ast.keyword):
            return parent.arg is None or bool(index.reads_attribute(parent.arg))
        if isinstance(parent, ast.Call) and node in parent.args:
            return True
        if isinstance(parent, (ast.Assign, ast.AnnAssign)):
            target = parent.targets[0] if isinstance(parent, ast.Assign) else parent.target
            if isinstance(target, ast.Attribute):
                return bool(index.reads_attribute(target.attr))
            return True  # a local: followed by eye, not here
        node = parent
    return True
