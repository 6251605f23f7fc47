"""The README documents every CLI command, and its first two commands are the Makefile's."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import typer.main

from service.cli.main import app
from tests.conftest import REPO

README = (REPO / "README.md").read_text()


def _commands(command: Any, prefix: tuple[str, ...] = ()) -> Iterator[str]:
    subcommands = getattr(command, "commands", None)
    if subcommands:
        for name, sub in subcommands.items():
            yield from _commands(sub, (*prefix, name))
    else:
        yield " ".join(prefix)


def test_every_cli_command_is_in_the_readme() -> None:
    commands = list(_commands(typer.main.get_command(app)))
    assert len(commands) >= 10
    missing = [c for c in commands if f"ssdpredict {c}" not in README]
    assert not missing, f"commands missing from README.md: {missing}"


def test_readme_starts_with_the_two_make_commands() -> None:
    blocks = re.findall(r"```sh\n(.*?)```", README, re.S)
    first = [line.split("#")[0].strip() for line in blocks[0].splitlines()]
    assert first == ["make run", "make test"]
    makefile = (REPO / "Makefile").read_text()
    assert re.search(r"^run: bootstrap$", makefile, re.M)
    assert re.search(r"^test: bootstrap$", makefile, re.M)
    assert "make test" in (REPO / ".ci" / "run").read_text()
