"""Build the notebooks from their percent-format sources: ``python notebooks/build.py [--check]``.

Each ``notebooks/src/<name>.py`` is plain Python split into cells by ``# %%`` lines
(``# %% [markdown]`` starts a markdown cell whose lines are ``#`` comments). The
notebooks are written without outputs and with stable cell ids, so building twice gives
byte-identical files and a diff of a notebook is a diff of its source.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent
SOURCES = HERE / "src"
NOTEBOOKS = ("sweep_analysis", "model_accuracy")
KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}


def split_cells(text: str) -> list[tuple[str, str]]:
    """``(kind, source)`` cells of a percent-format file; text before the first marker is dropped."""
    cells: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("# %%"):
            cells.append(("markdown" if "[markdown]" in line else "code", []))
        elif cells:
            cells[-1][1].append(line)
    out = []
    for kind, lines in cells:
        if kind == "markdown":
            lines = [line[2:] if line.startswith("# ") else line.lstrip("#") for line in lines]
        source = "\n".join(lines).strip("\n")
        if source:
            out.append((kind, source))
    return out


def build_notebook(name: str) -> nbformat.NotebookNode:
    """The notebook built from ``src/<name>.py``."""
    cells = []
    for i, (kind, source) in enumerate(split_cells((SOURCES / f"{name}.py").read_text())):
        make = new_markdown_cell if kind == "markdown" else new_code_cell
        # fixed ids: nbformat's default random ids would change the file on every build
        cells.append(make(source, id=f"{name[:20]}-{i:02d}"))
    nb = new_notebook(cells=cells)
    nb.metadata = {"kernelspec": KERNELSPEC, "language_info": {"name": "python"}}
    nbformat.validate(nb)
    return nb


def render(name: str) -> str:
    """The notebook's file content."""
    return nbformat.writes(build_notebook(name)) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write every notebook, or with ``--check`` report (exit 1) those that are out of date."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check the notebooks are up to date")
    args = parser.parse_args(argv)
    stale = []
    for name in NOTEBOOKS:
        path = HERE / f"{name}.ipynb"
        content = render(name)
        if args.check:
            if not path.exists() or path.read_text() != content:
                stale.append(path.name)
        else:
            path.write_text(content)
            print(f"wrote {path}")
    if stale:
        print(f"out of date: {', '.join(stale)}; run python notebooks/build.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
