"""The README's layout table and docs/architecture.md §2 match the tree (issue 19): every
top-level folder with Python packages appears in both, and neither names a package that is
gone; every module an import-linter contract declares sans-I/O is named in the architecture
document, which is where a reader learns which modules may do no I/O."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOT_SHIPPED = {"tests", "bench", "deploy", "docs", "proto", "build", "dist"}


def packages_in_tree() -> set[str]:
    return {
        path.parent.name
        for path in ROOT.glob("*/__init__.py")
        if path.parent.name not in NOT_SHIPPED and not path.parent.name.endswith(".egg-info")
    }


def table_packages(text: str) -> set[str]:
    """Names in the first column of markdown tables: | `name/` | ... |"""
    return set(re.findall(r"^\| `([a-z_]+)/` \|", text, flags=re.MULTILINE))


def section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start : end if end >= 0 else len(text)]


def test_readme_layout_table_lists_every_package_and_no_other():
    readme = (ROOT / "README.md").read_text()
    listed = table_packages(section(readme, "## Layout"))
    assert packages_in_tree() <= listed, (
        f"missing from README's Layout: {packages_in_tree() - listed}"
    )
    folders = {p.name for p in ROOT.iterdir() if p.is_dir()}
    assert listed <= folders, f"README's Layout names folders not in the tree: {listed - folders}"


def test_architecture_package_table_lists_every_package_and_no_other():
    doc = (ROOT / "docs" / "architecture.md").read_text()
    listed = table_packages(section(doc, "## 2. Packages"))
    assert listed == packages_in_tree(), (
        f"docs/architecture.md §2 lists {sorted(listed)}, the tree has {sorted(packages_in_tree())}"
    )


def test_every_sans_io_module_is_named_in_the_architecture_document():
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"][
        "contracts"
    ]
    doc = (ROOT / "docs" / "architecture.md").read_text()
    sans_io = [
        module
        for contract in contracts
        if "sans-I/O" in contract["name"]
        for module in contract.get("source_modules", [])
    ]
    assert sans_io, "no contract calls itself sans-I/O"
    unnamed = [m for m in sans_io if f"{m.rsplit('.', 1)[-1]}.py" not in doc]
    assert not unnamed, f"sans-I/O modules docs/architecture.md does not name: {unnamed}"


def test_the_wheel_ships_every_package_of_the_tree():
    """pyproject's [tool.setuptools] packages is a list: a subpackage left out of it is left
    out of the wheel (and the docker image) while every test run from the tree passes."""
    shipped = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    in_tree = {
        ".".join(path.parent.relative_to(ROOT).parts)
        for top in packages_in_tree()
        for path in (ROOT / top).rglob("__init__.py")
        if "__pycache__" not in path.parts
    }
    assert in_tree == shipped, (
        f"not shipped: {sorted(in_tree - shipped)}; shipped but gone: {sorted(shipped - in_tree)}"
    )
