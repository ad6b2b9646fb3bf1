"""The project's documentation: every relative link resolves, the target reference is current, the docs' Python
examples run as written, and the licence is the MIT licence pyproject.toml names.

The link check reads README.md and docs/*.md the way GitHub renders them: links inside fenced code blocks and code
spans are not links, ``http(s):``/``mailto:`` (any scheme) are not checked, and an anchor must name a heading of the
target file by GitHub's slug rules (or an explicit ``id``/``name``).
"""

from __future__ import annotations

import re
import shutil
import tomllib
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tinyhil.cli.targets import REFERENCE_PATH, github_slug, render_target_reference
from tinyhil.registry import default_registry

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
MARKDOWN = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
STALE = "docs/targets.md is stale: run `tinyhil targets --markdown > docs/targets.md`"

_FENCE = re.compile(r"^\s*(`{3,}|~{3,})(.*)$")
_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)")
# [text](dest "title"): text may hold one level of brackets; dest is <...> or has balanced parentheses
_INLINE_LINK = re.compile(
    r"(?<!\\)!?\[(?P<text>(?:[^\[\]\\]|\\.|\[[^\[\]]*\])*)\]"
    r"\(\s*(?P<dest><[^<>\n]*>|(?:[^\s()\\]|\\.|\((?:[^\s()\\]|\\.)*\))*)"
    r"(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^()]*\)))?\s*\)"
)
_REFERENCE_DEFINITION = re.compile(r"^ {0,3}\[(?P<text>[^\]]+)\]:\s*(?P<dest><[^<>]*>|\S+)")
_HTML_LINK = re.compile(r"<(?:a|img)\b[^>]*?\b(?:href|src)\s*=\s*[\"'](?P<dest>[^\"']*)[\"']", re.IGNORECASE)
_HTML_ANCHOR = re.compile(r"<[a-z][^>]*?\b(?:id|name)\s*=\s*[\"'](?P<anchor>[^\"']+)[\"']", re.IGNORECASE)
_ATX_HEADING = re.compile(r"^ {0,3}#{1,6}(?:[ \t]+(?P<text>.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT_UNDERLINE = re.compile(r"^ {0,3}(?:=+|-+)[ \t]*$")
_NOT_PARAGRAPH = re.compile(r"^\s*(?:$|[|>#]|[-*+][ \t]|\d+[.)][ \t])")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")


@dataclass(frozen=True, slots=True)
class Link:
    """One link of a Markdown file: its line (from 1), its text and its destination as written."""

    line: int
    text: str
    dest: str


def _closes(match: re.Match[str] | None, fence: str) -> bool:
    """Whether a fence-looking line closes ``fence``: the same character, at least as many, nothing after them."""
    return (
        match is not None
        and match.group(1)[0] == fence[0]
        and len(match.group(1)) >= len(fence)
        and not match.group(2).strip()
    )


def prose_lines(text: str) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` of every line outside fenced code blocks, with code spans blanked out."""
    fence: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        match = _FENCE.match(line)
        if fence is not None:
            if _closes(match, fence):
                fence = None
            continue
        if match and not (match.group(1)[0] == "`" and "`" in match.group(2)):
            fence = match.group(1)
            continue
        yield number, _CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line)


def links(text: str) -> list[Link]:
    """Every link destination of a Markdown text: inline links and images, reference definitions, HTML links."""
    found: list[Link] = []
    for number, line in prose_lines(text):
        definition = _REFERENCE_DEFINITION.match(line)
        if definition:
            found.append(Link(number, definition.group("text"), definition.group("dest")))
            continue
        found.extend(Link(number, m.group("text"), m.group("dest")) for m in _INLINE_LINK.finditer(line))
        found.extend(Link(number, "<html>", m.group("dest")) for m in _HTML_LINK.finditer(line))
    return found


def anchors(text: str) -> set[str]:
    """Every anchor a Markdown text defines: its headings' slugs (repeats get -1, -2, ...) and explicit ids."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    previous = ""
    for _number, line in prose_lines(text):
        heading = None
        atx = _ATX_HEADING.match(line)
        if atx:
            heading = atx.group("text") or ""
        elif _SETEXT_UNDERLINE.match(line) and previous and not _NOT_PARAGRAPH.match(previous):
            heading = previous.strip()
        if heading is not None:
            slug = github_slug(heading)
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            found.add(slug if count == 0 else f"{slug}-{count}")
        found.update(m.group("anchor") for m in _HTML_ANCHOR.finditer(line))
        previous = "" if heading is not None else line
    return found


def broken_links(path: Path, root: Path) -> list[str]:
    """One message per relative link of ``path`` that does not resolve inside ``root``: ``file:line: link: why``."""
    text = path.read_text(encoding="utf-8")
    problems = []
    for link in links(text):
        dest = link.dest[1:-1] if link.dest.startswith("<") and link.dest.endswith(">") else link.dest
        if not dest or _SCHEME.match(dest) or dest.startswith("//"):
            continue  # an absolute URL (http, https, mailto, ...): not this test's business
        target_text, _, anchor = dest.partition("#")
        target_text = urllib.parse.unquote(target_text)
        where = f"{path.relative_to(root)}:{link.line}: [{link.text}]({link.dest})"
        if not target_text:
            target = path
        elif target_text.startswith("/"):
            target = root / target_text.lstrip("/")  # GitHub resolves /path from the repository root
        else:
            target = path.parent / target_text
        target = target.resolve()
        if not target.is_relative_to(root):
            problems.append(f"{where}: points outside the repository ({target})")
            continue
        if not target.exists():
            problems.append(f"{where}: no such file {target.relative_to(root)}")
            continue
        if anchor and target.suffix == ".md" and target.is_file():
            anchor = urllib.parse.unquote(anchor)
            if anchor not in anchors(target.read_text(encoding="utf-8")):
                problems.append(f"{where}: {target.relative_to(root)} has no heading with anchor #{anchor}")
    return problems


# --- the project's own documents ---------------------------------------------------------------------------------
@pytest.mark.parametrize("path", MARKDOWN, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(path: Path) -> None:
    problems = broken_links(path, ROOT)
    assert not problems, "broken links:\n" + "\n".join(problems)


def test_the_target_reference_is_current() -> None:
    reference = ROOT / REFERENCE_PATH
    assert reference.is_file(), STALE
    expected = render_target_reference(default_registry())
    assert reference.read_text(encoding="utf-8").rstrip("\n") == expected.rstrip("\n"), STALE


def test_the_docs_index_links_every_page() -> None:
    index = DOCS / "README.md"
    linked = {(DOCS / urllib.parse.unquote(link.dest.partition("#")[0])).resolve() for link in links(index.read_text())}
    missing = [p.name for p in sorted(DOCS.glob("*.md")) if p != index and p.resolve() not in linked]
    assert not missing, f"docs/README.md does not link {missing}: add a line for each page"


def test_the_license_is_the_mit_license_pyproject_names() -> None:
    license_text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert license_text.startswith("MIT License\n")
    assert "Copyright (c) 2026 the tinyhil authors" in license_text
    normalized = " ".join(license_text.split())
    assert "Permission is hereby granted, free of charge, to any person obtaining a copy" in normalized
    assert "The above copyright notice and this permission notice shall be included in all copies" in normalized
    assert 'THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND' in normalized
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"] == "MIT"


def _python_blocks() -> list[tuple[Path, int, str]]:
    blocks = []
    for path in sorted(DOCS.glob("*.md")):
        lines = path.read_text(encoding="utf-8").splitlines()
        start = None
        for number, line in enumerate(lines, start=1):
            if start is None and line.strip() == "```python":
                start = number
            elif start is not None and line.strip() == "```":
                blocks.append((path, start, "\n".join(lines[start : number - 1]) + "\n"))
                start = None
    return blocks


PYTHON_BLOCKS = _python_blocks()


@pytest.mark.parametrize(("path", "line", "code"), PYTHON_BLOCKS, ids=[f"{p.name}:{n}" for p, n, _ in PYTHON_BLOCKS])
def test_python_examples_in_the_docs_run_as_written(
    path: Path, line: int, code: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    if "HostCCompiler" in code and shutil.which("cc") is None:
        pytest.skip("the example compiles with the host C compiler, and there is no cc on PATH (Debian: gcc)")
    monkeypatch.setenv("PARALLEL", "0")  # compile inline: an example needs no worker processes
    monkeypatch.chdir(tmp_path)
    exec(compile(code, f"{path.relative_to(ROOT)}:{line}", "exec"), {"__name__": "__docs_example__"})


# --- the link checker itself -------------------------------------------------------------------------------------
SAMPLE = """\
# Title

Intro with a [good link](other.md), [an anchor](other.md#second-part), [same file](#title),
[external](https://example.com/x.md), [mail](mailto:someone@example.com) and ![an image](pic.png).
A `[code span](missing-in-code.md)` is not a link, nor \\[escaped](missing-escaped.md).

```python
print("[in a fence](missing-in-fence.md)")
```

~~~~
```
[in a tilde fence holding a backtick fence](missing-in-tilde.md)
~~~~

[broken](missing.md) and [bad anchor](other.md#nowhere) and [titled](other.md "a title") and [angle](<other.md>)
[outside](../../outside.md)

[ref]: missing-ref.md

Setext heading
--------------

## Title
"""
OTHER = """\
# Other

## Second part
<a id="explicit"></a>
"""


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    (tmp_path / "repo" / "docs").mkdir(parents=True)
    docs = tmp_path / "repo" / "docs"
    (docs / "other.md").write_text(OTHER)
    (docs / "pic.png").write_bytes(b"")
    (docs / "sample.md").write_text(SAMPLE)
    return docs / "sample.md"


def test_the_link_checker_reports_each_broken_link_with_its_file_and_line(sample: Path) -> None:
    problems = broken_links(sample, sample.parent.parent)
    assert problems == [
        "docs/sample.md:16: [broken](missing.md): no such file docs/missing.md",
        "docs/sample.md:16: [bad anchor](other.md#nowhere): docs/other.md has no heading with anchor #nowhere",
        f"docs/sample.md:17: [outside](../../outside.md): points outside the repository "
        f"({(sample.parent.parent.parent / 'outside.md').resolve()})",
        "docs/sample.md:19: [ref](missing-ref.md): no such file docs/missing-ref.md",
    ]


def test_links_in_code_are_not_links(sample: Path) -> None:
    destinations = {link.dest for link in links(sample.read_text())}
    assert not destinations & {"missing-in-code.md", "missing-in-fence.md", "missing-in-tilde.md"}
    assert "missing-escaped.md" not in destinations
    assert {"other.md#second-part", "pic.png", "<other.md>", "https://example.com/x.md"} <= destinations


def test_anchors_follow_githubs_slugs() -> None:
    assert github_slug("The `MOCKUSB+AMD` target: what it proves") == "the-mockusbamd-target-what-it-proves"
    assert github_slug("[linked](x.md) heading") == "linked-heading"
    assert github_slug("Sizes and directions: the kernel's rules") == "sizes-and-directions-the-kernels-rules"
    assert anchors(SAMPLE) >= {"title", "title-1", "setext-heading"}
    assert anchors(OTHER) == {"other", "second-part", "explicit"}
