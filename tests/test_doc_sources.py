"""The project carries its own documentation: no tracked file points outside it, and every citation lands.

The code cites ``docs/<page>.md`` for the facts it relies on (``docs/asm2464.md "XDATA map"``). This checks that no
tracked file names a ``shared/`` path or cites a ``spec/<name>.md`` document (neither ships with the project), that
every page a Python file cites exists, and that a section a citation names in quotes is a heading of that page.
"""

from __future__ import annotations

import ast
import io
import re
import shutil
import subprocess
import tokenize
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
THIS = Path(__file__).resolve()

# built from pieces so that this file does not match itself
_SHARED = re.compile(r"(?<![\w.-])" + "shared" + r"/")
_SPEC_DOC = re.compile(r"(?<![\w/])" + "spec" + r"/[a-z0-9_-]+\.md\b")
# docs/page.md, then optionally a comma and a quoted section: "Name" or 'Name'
_DOC_CITATION = re.compile(
    r"docs/(?P<page>[a-z0-9_-]+)\.md(?:``)?(?:(?:,\s*|\s+)(?:\"(?P<dq>[^\"\n]+)\"|'(?P<sq>[^'\n]+)'))?"
)
_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(?P<text>.*?)(?:[ \t]+#+)?[ \t]*$")


@cache
def _tracked_files() -> tuple[Path, ...]:
    """Every file git tracks in the checkout (plus untracked, not ignored ones), as absolute paths."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the tracked files are unknown")
    listing = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return tuple(ROOT / name for name in listing.split("\0") if name and (ROOT / name).is_file())


def _text(path: Path) -> str | None:
    """The file's text, or None for a binary file."""
    data = path.read_bytes()
    if b"\0" in data:
        return None
    return data.decode("utf-8", errors="replace")


@cache
def _headings(page: str) -> frozenset[str]:
    """The heading texts of docs/<page>.md, outside fenced code blocks."""
    headings: set[str] = set()
    fenced = False
    for line in (DOCS / f"{page}.md").read_text().splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        if not fenced and (match := _HEADING.match(line)):
            headings.add(match.group("text").strip())
    return frozenset(headings)


def _is_heading(page: str, section: str) -> bool:
    """Whether ``section`` names a heading of the page: the whole heading, or the part before its parenthesis."""
    return any(heading == section or heading.startswith(f"{section} (") for heading in _headings(page))


def test_no_tracked_file_points_outside_the_project() -> None:
    offenders = []
    for path in _tracked_files():
        if path == THIS or (text := _text(path)) is None:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if _SHARED.search(line) or _SPEC_DOC.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:100]}")
    assert not offenders, "cite docs/, not shared/ or spec/*.md (the project's users have neither):\n" + "\n".join(
        offenders
    )


def _prose(source: str) -> list[tuple[int, str]]:
    """(first line, text) of every comment and docstring of a Python source: where the code cites its docs."""
    pieces = [
        (token.start[0], token.string)
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                pieces.append((first.lineno, first.value.value))
    return pieces


def _citations() -> list[tuple[str, str, str | None]]:
    """(where, page, quoted section or None) for every docs/<page>.md citation in a tracked .py file's prose."""
    found = []
    for path in _tracked_files():
        if path.suffix != ".py" or path == THIS or (text := _text(path)) is None:
            continue
        for first_line, piece in _prose(text):
            for offset, line in enumerate(piece.splitlines()):
                for match in _DOC_CITATION.finditer(line):
                    section = match.group("dq") or match.group("sq")
                    found.append((f"{path.relative_to(ROOT)}:{first_line + offset}", match.group("page"), section))
    return found


def test_every_cited_page_and_section_exists() -> None:
    citations = _citations()
    assert citations, "no docs/ citation found: the pattern no longer matches the code's citations"
    missing_pages = sorted(
        {f"{where}: docs/{page}.md" for where, page, _ in citations if not (DOCS / f"{page}.md").is_file()}
    )
    assert not missing_pages, "cited pages that do not exist:\n" + "\n".join(missing_pages)
    missing_sections = [
        f'{where}: docs/{page}.md "{section}"'
        for where, page, section in citations
        if section is not None and not _is_heading(page, section)
    ]
    assert not missing_sections, "cited sections that are not headings of their page:\n" + "\n".join(missing_sections)


def test_the_citation_pattern_reads_a_section() -> None:
    match = _DOC_CITATION.search('(docs/asm2464.md "XDATA map")')
    assert match is not None and (match.group("page"), match.group("dq")) == ("asm2464", "XDATA map")
    match = _DOC_CITATION.search("docs/copyin.md, 'Three revisions'")
    assert match is not None and match.group("sq") == "Three revisions"


def test_the_docs_index_has_one_row_per_page() -> None:
    index = (DOCS / "README.md").read_text()
    rows = re.findall(r"^\| \[(?P<name>[a-z0-9_-]+\.md)\]\((?P=name)\) \|", index, re.MULTILINE)
    pages = sorted(path.name for path in DOCS.glob("*.md") if path.name != "README.md")
    assert sorted(rows) == pages, f"docs/README.md rows {sorted(rows)}, pages {pages}: one row per page"


def test_python_prose_names_only_the_projects_own_documents() -> None:
    outside = []
    for path in _tracked_files():
        if path.suffix != ".py" or path == THIS or (text := _text(path)) is None:
            continue
        for first_line, piece in _prose(text):
            for match in re.finditer(r"(?<![\w/.-])([\w./-]*[\w-]\.md)\b", piece):
                name = match.group(1)
                if name != "README.md" and not (name.startswith("docs/") and (ROOT / name).is_file()):
                    outside.append(f"{path.relative_to(ROOT)}:{first_line}: {name}")
    assert not outside, "a comment or docstring names a document the project does not carry:\n" + "\n".join(outside)
