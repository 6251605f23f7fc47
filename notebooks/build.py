"""Build the notebooks from their sources: ``python notebooks/build.py [--execute] [--check]``.

Each ``notebooks/src/<name>.py`` is plain Python split into cells by ``# %%`` lines
(``# %% [markdown]`` starts a markdown cell whose lines are ``#`` comments). The cells
get stable ids, so a diff of a notebook's code is a diff of its source.

``--execute`` runs each notebook top to bottom with nbclient on the repository's own
data (the fio-plot results in ``tests/data``, imported into a fresh temporary data
directory) and writes it with its outputs and figures: that is how the notebooks are
committed, so they can be read on GitHub or in any viewer without running anything.
``--check`` only compares each notebook's cells with its source (outputs are ignored).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent
SOURCES = HERE / "src"
NOTEBOOKS = ("sweep_analysis", "model_accuracy")
KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
EXECUTE_ENV = {"SSDPREDICT_NB_TIME_BUDGET_S": "10"}
"""Settings of the committed run: a 10 s tuning budget keeps the nested evaluation to minutes."""
EXECUTE_TIMEOUT_S = 3600


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
    """The notebook's file content, without outputs."""
    return nbformat.writes(build_notebook(name)) + "\n"


def cells_of(nb: nbformat.NotebookNode) -> list[tuple[str, str, str]]:
    """``(type, id, source)`` of every cell: what ``--check`` compares (outputs left out)."""
    return [(c.cell_type, c.get("id", ""), c.source) for c in nb.cells]


def execute(
    name: str, env: dict[str, str] | None = None, *, timeout_s: int = EXECUTE_TIMEOUT_S
) -> nbformat.NotebookNode:
    """The notebook built from its source and run top to bottom in a fresh kernel.

    ``env`` is the kernel's environment (default: this process's, without any
    ``SSDPREDICT_*`` variable, plus :data:`EXECUTE_ENV` and a new temporary data
    directory); ``timeout_s`` bounds each cell.  Local paths in the outputs are replaced
    by placeholders.
    """
    from nbclient import NotebookClient  # only needed to execute

    home = None
    if env is None:
        home = tempfile.mkdtemp(prefix="ssdpredict-nb-build-")
        env = {k: v for k, v in os.environ.items() if not k.startswith("SSDPREDICT_")}
        env.pop("MPLBACKEND", None)  # a non-interactive backend would swallow the figures
        env.update({**EXECUTE_ENV, "SSDPREDICT_HOME": home})
    nb = build_notebook(name)
    client = NotebookClient(nb, timeout=timeout_s, kernel_name=KERNELSPEC["name"],
                            resources={"metadata": {"path": str(HERE)}})
    client.execute(env=env)  # raises CellExecutionError naming the failing cell
    places = {str(HERE.parent): "<repo>", **({home: "<data directory>"} if home else {})}
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if "text" in out:
                for path, placeholder in places.items():
                    out["text"] = out["text"].replace(path, placeholder)
    nb.metadata = {"kernelspec": KERNELSPEC, "language_info": {"name": "python"}}
    nbformat.validate(nb)
    return nb


def main(argv: list[str] | None = None) -> int:
    """Write every notebook (executed with ``--execute``), or with ``--check`` report stale ones."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check the notebooks match their sources")
    parser.add_argument("--execute", action="store_true", help="run each notebook and keep its outputs")
    parser.add_argument("names", nargs="*", help=f"notebooks (default: all of {', '.join(NOTEBOOKS)})")
    args = parser.parse_args(argv)
    unknown = set(args.names) - set(NOTEBOOKS)
    if unknown:
        parser.error(f"unknown notebook(s) {sorted(unknown)}; known: {', '.join(NOTEBOOKS)}")
    stale = []
    for name in args.names or NOTEBOOKS:
        path = HERE / f"{name}.ipynb"
        if args.check:
            committed = nbformat.read(path, as_version=4) if path.exists() else None
            if committed is None or cells_of(committed) != cells_of(build_notebook(name)):
                stale.append(path.name)
        elif args.execute:
            path.write_text(nbformat.writes(execute(name)) + "\n")
            print(f"wrote {path} (executed)")
        else:
            path.write_text(render(name))
            print(f"wrote {path} (no outputs: --execute runs it)")
    if stale:
        print(f"out of date: {', '.join(stale)}; run python notebooks/build.py --execute", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
