"""``tinyhil targets``: every registered target, whether it can run here (or why not), and its capabilities; and
the target and capability reference (``docs/targets.md``), generated from the target registry.

``tinyhil targets --json`` prints the same rows for machines; ``tinyhil targets --markdown`` prints
:func:`render_target_reference` of the default registry, and ``tests/test_docs.py`` checks that ``docs/targets.md``
equals it. The text is deterministic: it says what each target *is* (name, summary, emulated or real hardware,
renderers, archs, index, options, capabilities), never whether it can run on the machine that generated it, which varies
by host (``tinyhil targets`` says that).
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Iterable
from typing import Any, Final, Protocol

from tinyhil.capabilities import CAPABILITIES, known_capabilities
from tinyhil.cli.usage import EXIT_OK, EXIT_USAGE, add_subcommand
from tinyhil.registry import TargetRegistry
from tinyhil.target import GRAMMAR

__all__ = ["REFERENCE_PATH", "add_targets_command", "github_slug", "render_target_reference", "target_rows"]

REFERENCE_PATH: Final = "docs/targets.md"  # where the rendered reference lives, relative to the repository root
UNDESCRIBED: Final = "(not in tinyhil's capability table: declared by a target of another package)"
_SLUG_DROP: Final = re.compile(r"[^\w\- ]")
_LINK_OR_IMAGE: Final = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_TAG: Final = re.compile(r"<[^>]+>")


class _TargetString(Protocol):
    @property
    def renderer(self) -> str | None: ...
    @property
    def arch(self) -> str | None: ...


class _Definition(Protocol):
    """What the reference reads of a registered target (a :class:`~tinyhil.registry.TargetDef`)."""

    @property
    def name(self) -> str: ...
    @property
    def summary(self) -> str: ...
    @property
    def emulated(self) -> bool: ...
    @property
    def capabilities(self) -> frozenset[str]: ...
    @property
    def renderers(self) -> tuple[tuple[str, str], ...]: ...
    @property
    def default_renderer(self) -> str | None: ...
    @property
    def archs(self) -> tuple[str, ...]: ...
    @property
    def spec(self) -> _TargetString: ...


class _Registry(Protocol):
    def definitions(self) -> Iterable[_Definition]: ...


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading's text (before ``-1``, ``-2`` on repeats): links and images as their
    text, tags and backquotes dropped, lower case, punctuation dropped, spaces to hyphens."""
    text = _LINK_OR_IMAGE.sub(r"\1", heading)
    text = _TAG.sub("", text).replace("`", "")
    return _SLUG_DROP.sub("", text.strip().lower()).replace(" ", "-")


class _Anchors:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, ``-1``, ``-2`` on repeats."""

    def __init__(self) -> None:
        self._seen: dict[str, int] = {}

    def take(self, heading: str) -> str:
        base = github_slug(heading)
        count = self._seen.get(base, 0)
        self._seen[base] = count + 1
        return base if count == 0 else f"{base}-{count}"


def _text(text: str) -> str:
    """Plain text as Markdown: one line, ``<``/``>`` as entities (GitHub drops unknown tags such as ``<n>``), ``*``
    escaped (no accidental emphasis)."""
    return " ".join(text.split()).replace("<", "&lt;").replace(">", "&gt;").replace("*", "\\*")


def _cell(text: str) -> str:
    """Plain text safe inside a Markdown table cell: :func:`_text` with pipes escaped."""
    return _text(text).replace("|", "\\|")


def _code(names: Iterable[str]) -> str:
    return ", ".join(f"`{name}`" for name in names)


def _renderer_line(definition: _Definition) -> str:
    if definition.spec.renderer is not None:
        return f"`{definition.spec.renderer}`, fixed by the target name"
    if not definition.renderers:
        return "none (the target string takes no renderer)"
    compiler2tokens: dict[str, list[str]] = {}
    for token, compiler in definition.renderers:
        compiler2tokens.setdefault(compiler, []).append(token)
    parts = []
    for compiler in sorted(compiler2tokens):
        default = " (the default)" if compiler == definition.default_renderer else ""
        tokens = sorted(compiler2tokens[compiler])
        verb = "selects" if len(tokens) == 1 else "select"
        parts.append(f"{_code(tokens)} {verb} the `{compiler}` compiler{default}")
    return "; ".join(parts)


def _arch_line(definition: _Definition) -> str:
    if definition.spec.arch is not None:
        return f"`{definition.spec.arch}`, fixed by the target name"
    if not definition.archs:
        return "none (the target string takes no arch)"
    default, *others = definition.archs
    return ", ".join([f"`{default}` (the default)", *(f"`{arch}`" for arch in others)])


def _options_line(definition: _Definition) -> str:
    # ``options`` (the keyword options Target.open accepts) is read with getattr: a definition from an older
    # registry, or a user's own definition object, may not carry it.
    options = tuple(getattr(definition, "options", ()))
    if not options:
        return "none"
    return _code(sorted(options))


def _index_line(definition: _Definition) -> str | None:
    if not getattr(definition, "indexed", False):
        return None
    spec = definition.spec
    form = f"`{getattr(spec, 'iface', None)}:<n>+{getattr(spec, 'device', None)}` picks device n"
    max_index = getattr(definition, "max_index", None)
    return form if max_index is None else f"{form}, n from 0 to {max_index}"


def render_target_reference(registry: _Registry) -> str:
    """The Markdown of ``docs/targets.md`` for ``registry`` (every registered target, every known capability).

    The text ends with one newline; write it as it is (``sys.stdout.write``), so the file equals the rendering.
    """
    definitions = sorted(registry.definitions(), key=lambda d: d.name)
    capabilities = sorted(known_capabilities(registry))
    anchors = _Anchors()
    title = "Targets and capabilities"
    anchors.take(title)
    targets_heading, capabilities_heading = "Targets", "Capabilities"
    targets_anchor = anchors.take(targets_heading)
    name2anchor = {d.name: anchors.take(d.name) for d in definitions}
    capabilities_anchor = anchors.take(capabilities_heading)

    def link(name: str) -> str:
        return f"[`{name}`](#{name2anchor[name]})"

    lines = [
        f"# {title}",
        "",
        "> Generated by `tinyhil targets --markdown` from the target registry and checked by `tests/test_docs.py`:",
        "> do not edit it by hand. Capability descriptions live in `tinyhil/capabilities.py`.",
        "",
        "Every target this installation registers and every capability they declare. A target string picks a target:",
        f"`{GRAMMAR}`, given as `--hil-target T` to pytest, as `DEV=T` in the environment, or to",
        "`tinyhil.open_target(T)`. Whether a target can run depends on the machine (a board attached, `/dev/kfd`,",
        "qemu-user), so this page does not say: run `tinyhil targets` to see what is available here, and the precise",
        "reason for the rest.",
        "",
        f"- [{targets_heading}](#{targets_anchor})",
        f"- [{capabilities_heading}](#{capabilities_anchor})",
        "",
        f"## {targets_heading}",
        "",
        "Each target below lists the renderers and archs its string accepts, the index it takes (a target that drives",
        "one of several devices), the options `tinyhil.open_target(T, option=value)` accepts (any other option is an",
        "error naming these), and its capabilities.",
        "",
        "| target | hardware | summary |",
        "|---|---|---|",
    ]
    for definition in definitions:
        kind = "emulated" if definition.emulated else "real hardware"
        lines.append(f"| {link(definition.name)} | {kind} | {_cell(definition.summary)} |")
    for definition in definitions:
        kind = (
            "emulated: needs no hardware" if definition.emulated else "real hardware: needs the device on this machine"
        )
        lines += [
            "",
            f"### {definition.name}",
            "",
            _text(definition.summary) or "(no summary)",
            "",
            f"- **Hardware**: {kind}",
            f"- **Renderers**: {_renderer_line(definition)}",
            f"- **Archs**: {_arch_line(definition)}",
        ]
        index = _index_line(definition)
        if index is not None:
            lines.append(f"- **Index**: {index}")
        lines += [
            f"- **Options**: {_options_line(definition)}",
            f"- **Capabilities**: {_code(sorted(definition.capabilities)) or 'none'}",
        ]
    lines += [
        "",
        f"## {capabilities_heading}",
        "",
        "A test asks for capabilities with `@pytest.mark.hil(requires=[...])` and is skipped, with the missing",
        "capability named, on a target that lacks one; a device raises `NotImplementedError` naming the capability",
        "for an operation it does not have.",
        "",
        "| capability | what a target with it can do | targets |",
        "|---|---|---|",
    ]
    for capability in capabilities:
        description = CAPABILITIES.get(capability, UNDESCRIBED)
        having = [d.name for d in definitions if capability in d.capabilities]
        targets = ", ".join(link(name) for name in having) or "none registered"
        lines.append(f"| `{capability}` | {_cell(description)} | {targets} |")
    return "\n".join(lines) + "\n"


def target_rows(registry: TargetRegistry) -> list[dict[str, Any]]:
    """One row per registered target: its name, whether it can run here (and why not), and what it declares."""
    rows: list[dict[str, Any]] = []
    for definition in registry.definitions():
        reason = registry.resolve(definition.name).unavailable_reason()
        rows.append({"target": definition.name, "available": reason is None, "reason": reason,
                     "emulated": definition.emulated, "capabilities": sorted(definition.capabilities),
                     "renderers": sorted(definition.renderer_map), "archs": list(definition.archs),
                     "summary": definition.summary})  # fmt: skip
    return rows


def _targets(args: argparse.Namespace, registry: TargetRegistry) -> int:
    if args.markdown:
        print(render_target_reference(registry), end="")
        return 0
    rows = target_rows(registry)
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    width = max(len(row["target"]) for row in rows)
    for row in rows:
        state = "available" if row["available"] else "unavailable"
        detail = ", ".join(row["capabilities"]) if row["available"] else row["reason"]
        print(f"{row['target']:<{width}}  {state:<11}  {detail}")
    return 0


def add_targets_command(commands: Any) -> None:
    """Add ``targets`` to the ``tinyhil`` parser's subcommands."""
    listing = add_subcommand(
        commands,
        "targets",
        "list registered targets, their availability and capabilities",
        EXIT_OK,
        EXIT_USAGE,
        details="List every registered target: available here or why not, and its capabilities "
        f"(--markdown: the reference in {REFERENCE_PATH}).",
    )
    formats = listing.add_mutually_exclusive_group()
    formats.add_argument("--json", action="store_true", help="print JSON for machines")
    formats.add_argument(
        "--markdown", action="store_true", help=f"print the target and capability reference ({REFERENCE_PATH})"
    )
    listing.set_defaults(handler=_targets)
