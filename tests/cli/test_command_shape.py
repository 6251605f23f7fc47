"""The CLI's shape: thin commands, every option declared once, and rooms that say what they hold.

Walks the real Typer app (every command, every group's commands and callbacks), so a
command added anywhere is held to the same rules.
"""

from __future__ import annotations

import ast
import inspect
import typing
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import pytest
import typer
from typer.models import OptionInfo

from service.cli.main import app

CLI = Path(__file__).resolve().parents[2] / "service" / "cli"
MAX_COMMAND_LINES = 60


def _commands(group: typer.Typer, prefix: str = "") -> Iterator[tuple[str, Callable[..., Any]]]:
    """(command path, callback) of every command and group callback under ``group``."""
    if group.registered_callback is not None and group.registered_callback.callback is not None:
        yield prefix or "(root)", group.registered_callback.callback
    for command in group.registered_commands:
        assert command.callback is not None
        name = command.name or command.callback.__name__.replace("_", "-")
        yield f"{prefix} {name}".strip(), command.callback
    for sub in group.registered_groups:
        assert sub.typer_instance is not None
        yield from _commands(sub.typer_instance, f"{prefix} {sub.name}".strip())


COMMANDS = dict(_commands(app))


def _options(callback: Callable[..., Any]) -> Iterator[tuple[str, OptionInfo]]:
    """(long option name, its declaration) of each option a command takes."""
    hints = typing.get_type_hints(inspect.unwrap(callback), include_extras=True)
    for param, hint in hints.items():
        if typing.get_origin(hint) is not Annotated:
            continue
        for info in hint.__metadata__:
            if not isinstance(info, OptionInfo):
                continue
            # in Annotated, typer reads Option's first positional (its `default`) as a name too
            given = ([info.default] if isinstance(info.default, str) else []) + list(info.param_decls)
            decls = [d for decl in given for d in decl.split("/") if d.startswith("--")]
            for name in decls or ["--" + param.replace("_", "-")]:
                yield name, info


def _declarations(commands: dict[str, Callable[..., Any]]) -> dict[str, set[int]]:
    found: dict[str, set[int]] = defaultdict(set)
    for callback in commands.values():
        for name, info in _options(callback):
            found[name].add(id(info))
    return found


def test_the_walk_sees_every_command_and_its_options() -> None:
    # guards the walk itself: an empty walk would pass every rule below
    assert {"sweep", "train", "evaluate", "predict", "trace replay", "models show", "catalog rebuild",
            "devices"} <= set(COMMANDS)
    options = dict(_options(COMMANDS["sweep"]))
    assert {"--target", "--destroy-data", "--runtime", "--precondition-passes", "--json"} <= set(options)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_no_command_function_is_over_60_lines(command: str) -> None:
    lines, _ = inspect.getsourcelines(inspect.unwrap(COMMANDS[command]))
    assert len(lines) <= MAX_COMMAND_LINES, f"`{command}` is {len(lines)} lines"


def test_every_option_name_has_one_declaration() -> None:
    many = {name: len(ids) for name, ids in _declarations(COMMANDS).items() if len(ids) > 1}
    assert not many, f"options declared more than once (put one alias in service/cli/options.py): {many}"


def test_the_declaration_check_catches_a_second_declaration() -> None:
    def one(target: Annotated[str, typer.Option("--target")] = "") -> None: ...

    def two(target: Annotated[str, typer.Option("--target")] = "") -> None: ...

    assert len(_declarations({"one": one, "two": two})["--target"]) == 2


def _option_names_in_source() -> dict[str, list[str]]:
    """Each ``"--name"`` written in a ``typer.Option(...)`` call under service/cli, and where."""
    where: dict[str, list[str]] = defaultdict(list)
    for path in sorted(CLI.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            option_call = isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "Option"
            if option_call:
                for arg in node.args:
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                        for name in arg.value.split("/"):
                            if name.startswith("--"):
                                where[name].append(f"{path.relative_to(CLI)}:{node.lineno}")
    return where


def test_every_option_name_is_written_once_in_the_source() -> None:
    where = _option_names_in_source()
    assert {"--target", "--destroy-data", "--folds", "--time-budget", "--device"} <= set(where)
    assert not {name: lines for name, lines in where.items() if len(lines) > 1}


def test_rooms_hold_the_commands_and_stay_small() -> None:
    rooms = {p.name for p in CLI.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert {"measure", "learn", "ask", "data", "trace"} <= rooms
    for folder in [CLI, *(CLI / room for room in rooms)]:
        modules = [p for p in folder.glob("*.py")]
        assert len(modules) <= 12, f"{folder} holds {len(modules)} modules"
    # a command module at the top level is one of these; new ones go in a room
    top = {p.stem for p in CLI.glob("*.py")}
    assert top <= {"__init__", "main", "common", "options", "progress", "serve", "quickstart"}, top
