"""The docs name only what exists: commands, options, links, anchors and repository files (fast)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.docs import runner
from tests.docs.runner import REPO, README

README_MAX_LINES = 220
DOCS = runner.doc_files()
TREE = runner.cli_tree()
TOP_LEVEL = {p.name for p in REPO.iterdir() if p.name not in {".git", ".venv"}}
REPO_PATH = re.compile(r"\.?[\w-]+(?:/[\w.\-]+)+/?|[\w-]+\.(?:py|md|toml|txt|cfg|ini)")


def _calls(path: Path) -> list[tuple[str, list[str]]]:
    """Every ``ssdpredict`` call a file names: in its examples and its inline code."""
    calls = []
    for block in runner.blocks(path):
        for command in block.commands():
            calls += [(block.where, args) for args in runner.invocations(command)]
    for span in runner.inline_code(path):
        calls += [(f"{runner.rel(path)} `{span}`", args) for args in runner.invocations(span)]
        first, *rest = runner.words(span) or [""]
        if first in TREE.children and any(w.startswith("--") for w in rest):
            calls.append((f"{runner.rel(path)} `{span}`", [first, *rest]))  # `sweep --open-loop`
    return calls


@pytest.mark.parametrize("path", DOCS, ids=runner.rel)
def test_every_command_and_option_named_exists(path: Path) -> None:
    errors = [f"{where}: {error}" for where, args in _calls(path)
              for error in runner.check_invocation(TREE, args)]
    assert not errors, "\n".join(errors)


def _all_options(node: runner.Node) -> set[str]:
    return node.options.union(*(_all_options(child) for child in node.children.values()))


@pytest.mark.parametrize("path", [p for p in DOCS if p.name != "benchmarks.md"], ids=runner.rel)
def test_every_option_named_alone_exists(path: Path) -> None:
    """`--wait` in prose is some command's option (benchmarks.md names the bench scripts' options)."""
    known = _all_options(TREE)
    named = {runner.words(span)[0].split("=")[0] for span in runner.inline_code(path)
             if re.fullmatch(r"--[a-z][\w-]*(=\S*)?", (runner.words(span) or [""])[0])}
    assert not named - known, f"{runner.rel(path)} names options no command has: {sorted(named - known)}"


def test_every_setting_is_documented() -> None:
    from service.config import Settings

    text = (REPO / "docs" / "configuration.md").read_text()
    missing = [f"SSDPREDICT_{name.upper()}" for name in Settings.model_fields
               if f"SSDPREDICT_{name.upper()}" not in text]
    assert not missing, f"docs/configuration.md does not name {missing}"


def test_every_benchmark_section_names_its_command_and_date() -> None:
    text = (REPO / "docs" / "benchmarks.md").read_text()
    sections = re.split(r"^## ", text, flags=re.M)[1:]
    assert len(sections) >= 10
    for section in sections:
        title = section.splitlines()[0]
        assert re.search(r"`bench/\w+\.py[^`]*`|No bench script", section), (
            f"benchmarks.md: {title!r} names no bench command (nor says there is none)")
        assert re.search(r"20\d\d-\d\d-\d\d", section), f"benchmarks.md: {title!r} gives no date"


def test_every_cli_command_is_documented() -> None:
    text = "\n".join(p.read_text() for p in DOCS)
    commands = list(runner.command_paths(TREE))
    assert len(commands) >= 10
    missing = [c for c in commands if not re.search(rf"ssdpredict {re.escape(c)}\b", text)]
    assert not missing, f"commands named nowhere in README.md or docs/: {missing}"


@pytest.mark.parametrize("path", DOCS, ids=runner.rel)
def test_every_relative_link_and_anchor_exists(path: Path) -> None:
    broken = []
    for target in runner.links(path):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):
            continue  # http:, https:, mailto:
        file_part, _, anchor = target.partition("#")
        resolved = (path.parent / file_part).resolve() if file_part else path
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in runner.anchors(resolved):
            broken.append(f"{target}: no heading with anchor #{anchor}")
    assert not broken, f"{runner.rel(path)}: " + "; ".join(broken)


@pytest.mark.parametrize("path", DOCS, ids=runner.rel)
def test_every_repository_path_named_exists(path: Path) -> None:
    words = [w for span in runner.inline_code(path) for w in runner.words(span)]
    words += [w for block in runner.blocks(path) for c in block.commands() for w in runner.words(c)]
    missing = set()
    for word in words:
        word = word.rstrip(".,:;)")
        if not REPO_PATH.fullmatch(word) or word.split("/")[0] not in TOP_LEVEL:
            continue  # not a repository path (a data-directory path, a URL, a device)
        if not (REPO / word).exists():
            missing.add(word)
    assert not missing, f"{runner.rel(path)} names files that do not exist: {sorted(missing)}"


@pytest.mark.parametrize("path", DOCS, ids=runner.rel)
def test_directives_are_known_and_skips_give_a_reason(path: Path) -> None:
    errors = [f"{b.where}: {e}" for b in runner.blocks(path) for e in runner.directive_errors(b.directives)]
    assert not errors, "\n".join(errors)


def test_readme_is_short() -> None:
    lines = len(README.read_text().splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move detail to docs/"


def test_readme_starts_with_the_two_make_commands() -> None:
    first = [line.split("#")[0].strip() for line in runner.blocks(README)[0].commands()]
    assert first == ["make run", "make test"]
    makefile = (REPO / "Makefile").read_text()
    assert re.search(r"^run: bootstrap$", makefile, re.M)
    assert re.search(r"^test: bootstrap$", makefile, re.M)
    assert "make test" in (REPO / ".ci" / "run").read_text()


def test_the_readme_first_steps_are_run_by_the_examples_test() -> None:
    runnable = [b for b in runner.blocks(README)
                if not b.skip_reason and b.commands() != ["make run", "make test"]]
    named = " ".join(" ".join(b.commands()) for b in runnable)
    for step in ("ssdpredict sweep", "ssdpredict train", "ssdpredict predict", "curl", "ssdpredict trace"):
        assert step in named, f"no runnable README example uses {step!r}"


# --- the checker itself can fail ---------------------------------------------------------

@pytest.mark.parametrize(("args", "error"), [
    (["sweep", "--devcie", "d"], "`ssdpredict sweep` has no option --devcie"),
    (["trace", "charcterize", "t.bin"], "`ssdpredict trace` has no command 'charcterize'"),
    (["models", "--device", "d"], "`ssdpredict models` needs a command"),
    (["predict", "--queue-depth=8", "--rank_by", "iops"], "`ssdpredict predict` has no option --rank_by"),
])
def test_the_checker_reports_what_the_cli_lacks(args: list[str], error: str) -> None:
    assert runner.check_invocation(TREE, args) == [error]


def test_the_checker_accepts_real_calls() -> None:
    for args in (["devices"], ["devices", "show", "d", "--json"], ["train", "--activate", "-d", "x"],
                 ["trace", "--help"], ["sweep", "--plan=quick", "--device", "d"]):
        assert runner.check_invocation(TREE, args) == [], args


def test_blocks_directives_and_continuations_are_read(tmp_path: Path) -> None:
    doc = tmp_path / "x.md"
    doc.write_text(
        "text\n\n<!-- docs-test: skip: needs a real NVMe drive -->\n\n```sh\nssdpredict sweep \\\n"
        "    --device d   # comment\n```\n\n<!-- docs-test: server -->\n```console\n$ curl -s x\n"
        "{\"ok\": 1}\n```\n\n- item\n\n  ```bash\n  echo hi\n  ```\n\n```python\nprint()\n```\n")
    found = runner.blocks(doc)
    assert [(b.lang, b.line) for b in found] == [("sh", 5), ("console", 11), ("bash", 18)]
    assert found[0].skip_reason == "needs a real NVMe drive"
    assert found[0].commands() == ["ssdpredict sweep --device d   # comment"]
    assert found[1].server and found[1].commands() == ["curl -s x"]
    assert found[2].commands() == ["echo hi"] and found[2].skip_reason is None
    assert runner.directive_errors(("skip:",)) and runner.directive_errors(("serve",))


def test_anchors_follow_githubs_rule(tmp_path: Path) -> None:
    doc = tmp_path / "x.md"
    doc.write_text("# A `code` title: with, punctuation\n\n## Repeat\n\n## Repeat\n")
    assert runner.anchors(doc) == {"a-code-title-with-punctuation", "repeat", "repeat-1"}
