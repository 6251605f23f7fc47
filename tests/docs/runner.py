"""The shell examples of README.md and docs/*.md: found, read, checked against the CLI, run.

A fenced block tagged ``sh``, ``bash`` or ``console`` is an example. HTML comments on the
lines just before it steer the runner (see docs/development.md):

- ``<!-- docs-test: skip: REASON -->``: not run (it needs hardware, a network or hours);
- ``<!-- docs-test: needs: TOOL ... -->``: run only where every TOOL is on the PATH;
- ``<!-- docs-test: server -->``: a real ``ssdpredict serve`` is started on a free port
  first (``localhost:8000`` in the block is pointed at it; its token is ``$TOKEN``).

Examples run in order, one file at a time, in a temporary folder holding links to the
repository's top-level entries (so ``tests/data/...`` resolves) with a fresh, empty data
directory (``SSDPREDICT_HOME``).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
DATA_DIR_VARIABLE = "SSDPREDICT_HOME"  # the data directory (service/config.py, `home`)
DOCS_PORT = "8000"  # the port the examples name; a test server gets a free one instead
TOKEN = "docs-test-token"
BLOCK_TIMEOUT_S = 600

FENCE = re.compile(r"^([ \t]*)```(sh|bash|console)[ \t]*\n(.*?)^[ \t]*```[ \t]*$", re.M | re.S)
ANY_FENCE = re.compile(r"^[ \t]*```.*?^[ \t]*```[ \t]*$", re.M | re.S)
DIRECTIVE = re.compile(r"^\s*<!--\s*docs-test:\s*(.*?)\s*-->\s*$")
INLINE_CODE = re.compile(r"(?<!`)`([^`\n]+(?:\n[^`\n]+)?)`(?!`)")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$", re.M)


def doc_files() -> list[Path]:
    """README.md and every docs/*.md, in a stable order."""
    return [README, *sorted((REPO / "docs").glob("*.md"))]


def rel(path: Path) -> str:
    """A path as the repository names it."""
    return str(path.relative_to(REPO))


@dataclass(frozen=True)
class Block:
    """One shell example and what its directives say."""

    path: Path
    line: int
    lang: str
    text: str
    directives: tuple[str, ...]

    @property
    def where(self) -> str:
        return f"{rel(self.path)}:{self.line}"

    @property
    def skip_reason(self) -> str | None:
        """Why this block is not run here, or None."""
        for directive in self.directives:
            if directive.startswith("skip:"):
                return directive.removeprefix("skip:").strip()
            if directive.startswith("needs:"):
                missing = [t for t in directive.removeprefix("needs:").split() if shutil.which(t) is None]
                if missing:
                    return f"needs {', '.join(missing)}, not on the PATH"
        return None

    @property
    def server(self) -> bool:
        return "server" in self.directives

    def commands(self) -> list[str]:
        """The block's commands, continuation lines joined (a console block: its ``$`` lines)."""
        lines = self.text.splitlines()
        if self.lang == "console":
            picked, taking = [], False
            for line in lines:
                if line.startswith("$ "):
                    picked.append(line[2:])
                    taking = line.endswith("\\")
                elif taking:
                    picked.append(line)
                    taking = line.endswith("\\")
            lines = picked
        commands, current = [], ""
        for line in lines:
            if line.endswith("\\"):
                current += line[:-1].strip() + " "
                continue
            current += line.strip()
            if current.strip() and not current.strip().startswith("#"):
                commands.append(current.strip())
            current = ""
        return commands

    def script(self) -> str:
        """What bash runs."""
        return "\n".join(self.commands())


def directive_errors(directives: tuple[str, ...]) -> list[str]:
    """What is wrong with a block's directives (an unknown one would silently change a run)."""
    errors = []
    for directive in directives:
        if directive == "server":
            continue
        if directive.startswith("skip:") and directive.removeprefix("skip:").strip():
            continue
        if directive.startswith("needs:") and directive.removeprefix("needs:").split():
            continue
        errors.append(f"unknown or empty docs-test directive {directive!r}")
    return errors


def blocks(path: Path) -> list[Block]:
    """Every shell example of one Markdown file."""
    text = path.read_text()
    found = []
    for match in FENCE.finditer(text):
        indent, lang, body = match.group(1), match.group(2), match.group(3)
        lines = body.splitlines()
        body = "\n".join(line[len(indent):] if line.startswith(indent) else line for line in lines)
        directives: list[str] = []
        for line in reversed(text[: match.start()].splitlines()):
            if not line.strip():
                continue
            directive = DIRECTIVE.match(line)
            if directive is None:
                break
            directives.insert(0, directive.group(1))
        line_no = text.count("\n", 0, match.start()) + 1
        found.append(Block(path, line_no, lang, body, tuple(directives)))
    return found


def prose(path: Path) -> str:
    """A Markdown file without its fenced blocks."""
    return ANY_FENCE.sub("", path.read_text())


def inline_code(path: Path) -> list[str]:
    """The inline code spans of a file's prose, whitespace normalised."""
    return [" ".join(span.split()) for span in INLINE_CODE.findall(prose(path))]


def links(path: Path) -> list[str]:
    """The link targets of a file's prose."""
    return LINK.findall(prose(path))


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: its text, lower case, punctuation dropped."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).lower().replace("`", "")
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors of a Markdown file's headings (repeats get -1, -2... as on GitHub)."""
    seen: dict[str, int] = {}
    found = set()
    for _, title in HEADING.findall(prose(path)):
        base = slug(title)
        count = seen.get(base, 0)
        found.add(base if count == 0 else f"{base}-{count}")
        seen[base] = count + 1
    return found


def words(command: str) -> list[str]:
    """A command's words, as a POSIX shell splits them (comments dropped)."""
    try:
        return shlex.split(command, comments=True)
    except ValueError:
        return command.split()


# --- the CLI's tree ---------------------------------------------------------------------

@dataclass
class Node:
    """A command or group of the CLI: its options and its subcommands."""

    options: set[str]
    children: dict[str, Node]
    runs_alone: bool  # a group that does something without a subcommand (`devices`)


def cli_tree() -> Node:
    """The typer app's commands, walked from its click command."""
    import typer.main

    from service.cli.main import app

    def walk(command: Any) -> Node:
        options = {"--help"}
        for param in command.params:
            for opt in [*getattr(param, "opts", ()), *getattr(param, "secondary_opts", ())]:
                if opt.startswith("-"):
                    options.add(opt)
        subs = getattr(command, "commands", None) or {}
        return Node(options, {name: walk(sub) for name, sub in subs.items()},
                    bool(getattr(command, "invoke_without_command", False)))

    return walk(typer.main.get_command(app))


def command_paths(node: Node, prefix: tuple[str, ...] = ()) -> Iterator[str]:
    """Every runnable command, as words after ``ssdpredict``."""
    if not node.children or node.runs_alone:
        if prefix:
            yield " ".join(prefix)
    for name, child in node.children.items():
        yield from command_paths(child, (*prefix, name))


def check_invocation(tree: Node, args: list[str]) -> list[str]:
    """What in ``ssdpredict ARGS`` the CLI does not have (unknown commands or options)."""
    node, path = tree, ["ssdpredict"]
    rest = list(args)
    if not rest:
        return []  # the program named alone: it prints its help
    while node.children and rest and not rest[0].startswith("-"):
        name = rest[0]
        if name not in node.children:
            if node.runs_alone:
                break
            return [f"`{' '.join(path)}` has no command {name!r}"]
        node, path = node.children[name], [*path, rest.pop(0)]
    if node.children and not node.runs_alone and not set(rest) & {"--help"}:
        return [f"`{' '.join(path)}` needs a command"]
    errors = []
    for word in rest:
        if word in {"|", "&&", ";", "||", ">", "2>&1"}:
            break
        if re.fullmatch(r"--?[A-Za-z][\w-]*(=.*)?", word):
            option = word.split("=", 1)[0]
            if option not in node.options:
                errors.append(f"`{' '.join(path)}` has no option {option}")
    return errors


def invocations(command: str) -> Iterator[list[str]]:
    """The argument lists of every ``ssdpredict`` call in a shell command."""
    tokens = words(command)
    for i, token in enumerate(tokens):
        if token == "ssdpredict" or token.endswith("bin/ssdpredict"):
            args = []
            for word in tokens[i + 1:]:
                if word in {"|", "&&", ";", "||"} or word.endswith(";"):
                    break
                args.append(word)
            yield args


# --- running ----------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def workspace(tmp: Path) -> tuple[Path, dict[str, str]]:
    """A folder to run examples in and their environment: repository links, empty data dir."""
    work = tmp / "work"
    work.mkdir()
    for entry in REPO.iterdir():
        if entry.name not in {".git", ".venv"} and not entry.name.startswith(".pytest"):
            (work / entry.name).symlink_to(entry)
    curl_home = tmp / "curl"
    curl_home.mkdir()
    (curl_home / ".curlrc").write_text("fail-with-body\n")  # an HTTP error fails the example
    env = {k: v for k, v in os.environ.items() if not k.startswith("SSDPREDICT_")}
    env.update({
        DATA_DIR_VARIABLE: str(tmp / "home"),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        "PYTHONPATH": str(REPO),
        "CURL_HOME": str(curl_home),
        "TOKEN": TOKEN,
    })
    return work, env


@dataclass
class Outcome:
    block: Block
    returncode: int
    output: str


class Server:
    """A real ``ssdpredict serve`` on a free loopback port, for the blocks marked ``server``."""

    def __init__(self, work: Path, env: dict[str, str]) -> None:
        self.port = free_port()
        self.log = (work / f"server-{self.port}.log").open("wb")
        self.proc = subprocess.Popen(
            ["ssdpredict", "serve", "--host", "127.0.0.1", "--port", str(self.port)],
            cwd=work, env={**env, "SSDPREDICT_API_TOKEN": TOKEN}, stdout=self.log, stderr=subprocess.STDOUT,
            start_new_session=True)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ssdpredict serve exited with {self.proc.returncode}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=2):
                    return
            except OSError:
                time.sleep(0.3)
        self.stop()
        raise RuntimeError("ssdpredict serve did not answer /healthz within 90 s")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def run_block(block: Block, work: Path, env: dict[str, str]) -> Outcome:
    """Run one example with bash (errexit, pipefail); a server first when the block asks."""
    script = block.script()
    server = Server(work, env) if block.server else None
    try:
        if server is not None:
            script = re.sub(rf"(localhost|127\.0\.0\.1):{DOCS_PORT}\b", f"127.0.0.1:{server.port}", script)
        proc = subprocess.run(
            ["bash", "-e", "-u", "-o", "pipefail", "-c", script], cwd=work, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=BLOCK_TIMEOUT_S, check=False)
        return Outcome(block, proc.returncode, proc.stdout.decode(errors="replace"))
    finally:
        if server is not None:
            server.stop()
