"""The target registry: target strings -> capabilities, an availability probe and a factory.

Targets are declared with the :func:`target` decorator, which turns an opener function into a :class:`TargetDef`
value and registers nothing by itself. The registry collects the ``TargetDef`` objects of every module named in
the ``tinyhil.targets`` entry-point group (tinyhil's own targets, its mocks, and any user package), so the core
never imports a mock and nothing registers at import time. Names are unique: a duplicate raises.
"""

from __future__ import annotations

import dataclasses
import difflib
import fnmatch
import importlib
import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import MISSING, dataclass, field
from enum import Enum
from importlib.metadata import entry_points
from types import ModuleType
from typing import Any, Final, TypeVar

from tinyhil.device import Device
from tinyhil.errors import InvalidArgument, TargetUnavailable, TinyHilError
from tinyhil.target import GRAMMAR, TargetString, parse_target

__all__ = [
    "ENTRY_POINT_GROUP",
    "SELECT_ALL",
    "SELECT_EMULATED",
    "Target",
    "TargetDef",
    "TargetRegistry",
    "check_choice",
    "check_option",
    "default_registry",
    "open_target",
    "split_selectors",
    "target",
]

ENTRY_POINT_GROUP: Final = "tinyhil.targets"
SELECT_ALL: Final = "all"  # every available target
SELECT_EMULATED: Final = "emulated"  # every available target that needs no hardware

Opener = Callable[..., Device]
EnumT = TypeVar("EnumT", bound=Enum)
Probe = Callable[[], str | None]
# Why a resolved (renderer, arch) cannot serve the target here, or None: a compiler missing, or code its device
# cannot run. Asked after the target's own probe.
RendererProbe = Callable[[str | None, str | None], str | None]


def _always_available() -> str | None:
    return None


@dataclass(frozen=True, slots=True)
class TargetDef:
    """A registered target: what it can do, whether it can run here, and how to open it.

    ``renderers`` maps each accepted renderer token to the compiler it selects (tinygrad's ``LLVM`` or ``HIP`` map
    to the compiler tinyhil has for the device); ``default_renderer`` applies when the string names none. ``archs``
    lists accepted archs, the first being the default; empty means the target takes no arch. ``renderer_probe``
    says why a resolved renderer and arch cannot serve the target here (``None``: every one can). ``options_type`` is
    the frozen dataclass of the keyword options :meth:`Target.open` accepts (``None``: none); ``options`` are its
    field names. ``indexed`` says whether the string may carry an interface index (``KFD:1+AMD``), ``max_index``
    bounds it (``None``: no bound).
    """

    name: str
    opener: Opener
    capabilities: frozenset[str]
    probe: Probe = _always_available
    emulated: bool = True
    renderers: tuple[tuple[str, str], ...] = ()
    default_renderer: str | None = None
    archs: tuple[str, ...] = ()
    renderer_probe: RendererProbe | None = None
    summary: str = ""
    options_type: type[Any] | None = None
    indexed: bool = False
    max_index: int | None = None
    spec: TargetString = field(init=False, compare=False)
    options: tuple[str, ...] = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "spec", parse_target(self.name))
        if str(self.spec) != self.name:
            raise InvalidArgument(f"target name={self.name!r}, expected its canonical spelling {str(self.spec)!r}")
        known = dict(self.renderers)
        if self.default_renderer is not None and self.default_renderer not in known.values():
            raise InvalidArgument(
                f"default_renderer={self.default_renderer!r} of {self.name}, expected one of {sorted(known.values())}"
            )
        if self.max_index is not None and not self.indexed:
            raise InvalidArgument(f"max_index={self.max_index!r} of {self.name}, expected indexed=True with it")
        object.__setattr__(self, "options", _option_names(self.name, self.options_type))

    @property
    def renderer_map(self) -> dict[str, str]:
        return dict(self.renderers)


def _option_names(name: str, options_type: type[Any] | None) -> tuple[str, ...]:
    """The field names of a target's options dataclass, sorted; checks it is frozen and every field has a default."""
    if options_type is None:
        return ()
    if not (isinstance(options_type, type) and dataclasses.is_dataclass(options_type)):
        raise InvalidArgument(f"@target({name!r}, options={options_type!r}): expected a frozen dataclass type")
    if not options_type.__dataclass_params__.frozen:  # type: ignore[attr-defined]
        raise InvalidArgument(f"@target({name!r}, options={options_type.__name__}): expected @dataclass(frozen=True)")
    fields = [f for f in dataclasses.fields(options_type) if f.init]
    required = [f.name for f in fields if f.default is MISSING and f.default_factory is MISSING]
    if required:
        raise InvalidArgument(
            f"@target({name!r}, options={options_type.__name__}): fields {required} have no default, expected a "
            "default for every option (open_target(T) with no options must work)"
        )
    return tuple(sorted(f.name for f in fields))


def check_option(name: str, value: Any, kinds: type[Any] | tuple[type[Any], ...], expected: str) -> None:
    """The one value check of target options dataclasses: ``value`` is ``None`` or an instance of ``kinds``.

    Raises:
        InvalidArgument: naming the option, the bad value and ``expected``.
    """
    if value is not None and not isinstance(value, kinds):
        raise InvalidArgument(f"option {name}={value!r}, expected {expected}")


def check_choice(name: str, value: Any, choices: type[EnumT]) -> EnumT:
    """An enum option given as its member or its value (``"timed"``), as the member.

    Raises:
        InvalidArgument: naming the option, the bad value and the valid values.
    """
    try:
        return choices(value)
    except (ValueError, TypeError):
        valid = ", ".join(repr(member.value) for member in choices)
        raise InvalidArgument(f"option {name}={value!r}, expected one of {valid}") from None


def target(
    name: str,
    *,
    capabilities: Iterable[str] | None = None,
    probe: Probe = _always_available,
    emulated: bool = True,
    renderers: Mapping[str, str] | None = None,
    default_renderer: str | None = None,
    archs: Sequence[str] = (),
    renderer_probe: RendererProbe | None = None,
    summary: str = "",
    options: type[Any] | None = None,
    indexed: bool = False,
    max_index: int | None = None,
) -> Callable[[Opener], TargetDef]:
    """Declare a target: decorate its opener ``fn(target: Target, options: MyOptions) -> Device``.

    ``options`` is a frozen dataclass whose fields (each with a default) are the options :meth:`Target.open`
    accepts; the registry checks the names (suggesting the closest for a typo), builds the dataclass (its
    ``__post_init__`` checks the values) and passes it to the opener. A target without options omits it and its
    opener takes only the target. ``indexed=True`` lets the string carry an interface index (``KFD:1+AMD``). The
    decorated name becomes a :class:`TargetDef`; list its module in the ``tinyhil.targets`` entry-point group (or
    call :meth:`TargetRegistry.add`) to register it.
    """
    if callable(name):
        raise InvalidArgument("@target needs its name: write @target('MYIFACE+DEV', capabilities=[...])")
    if capabilities is None:
        raise InvalidArgument(f"@target({name!r}) needs capabilities=[...] (an empty list if it has none yet)")

    def wrap(opener: Opener) -> TargetDef:
        _check_opener(name, opener, options)
        return TargetDef(
            name=name,
            opener=opener,
            capabilities=frozenset(capabilities),
            probe=probe,
            emulated=emulated,
            renderers=tuple(sorted((renderers or {}).items())),
            default_renderer=default_renderer,
            archs=tuple(archs),
            renderer_probe=renderer_probe,
            summary=summary or (opener.__doc__ or "").strip().split("\n")[0],
            options_type=options,
            indexed=indexed,
            max_index=max_index,
        )

    return wrap


def _check_opener(name: str, opener: Opener, options: type[Any] | None) -> None:
    """An opener takes the resolved Target, then the options object when the target declares options."""
    parameters = list(inspect.signature(opener).parameters.values())
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional + [p for p in parameters if p.kind is p.KEYWORD_ONLY] if p.default is p.empty]
    wanted = 1 if options is None else 2
    if len(required) > wanted or len(positional) < wanted:
        shape = "fn(target)" if options is None else f"fn(target, options: {options.__name__})"
        raise InvalidArgument(f"@target({name!r}): the opener takes ({', '.join(p.name for p in parameters)}), "
                              f"expected {shape}; declare options with @target(..., options=MyOptions)")  # fmt: skip


@dataclass(frozen=True, slots=True)
class Target:
    """A target string resolved against the registry: the definition plus the renderer and arch it selects."""

    spec: TargetString
    definition: TargetDef
    renderer: str | None
    arch: str | None

    @property
    def name(self) -> str:
        return str(self.spec)

    @property
    def capabilities(self) -> frozenset[str]:
        return self.definition.capabilities

    @property
    def emulated(self) -> bool:
        return self.definition.emulated

    def unavailable_reason(self) -> str | None:
        """``None`` when this target can be opened here, else the precise reason it cannot."""
        definition = self.definition
        try:
            reason = definition.probe()
            if reason is None and definition.renderer_probe is not None:
                reason = definition.renderer_probe(self.renderer, self.arch)
            return reason
        except Exception as exc:  # a probe must never take the harness down; its failure is the reason
            return f"availability probe failed: {type(exc).__name__}: {exc}"

    def check_options(self, options: Mapping[str, Any]) -> None:
        """Check option names against the ones the target accepts (the one place every target's options are checked).

        Raises:
            InvalidArgument: an unknown option; the message suggests the closest valid one and lists them all.
        """
        accepted = self.definition.options
        unknown = sorted(set(options) - set(accepted))
        if not unknown:
            return
        hints = []
        for option in unknown:
            close = difflib.get_close_matches(option, accepted, n=1)
            hints.append(f"{option!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        valid = ", ".join(accepted) if accepted else "none"
        raise InvalidArgument(f"unknown option{'s' * (len(unknown) > 1)} {', '.join(hints)} for {self.name}; "
                              f"valid options: {valid}")  # fmt: skip

    def build_options(self, options: Mapping[str, Any]) -> Any:
        """The target's options object from keyword options: names checked, then values (the dataclass's own checks).

        Returns ``None`` for a target that declares no options.

        Raises:
            InvalidArgument: an unknown option (see :meth:`check_options`) or a bad value (the dataclass names it).
        """
        self.check_options(options)
        options_type = self.definition.options_type
        return None if options_type is None else options_type(**options)

    def open(self, **options: Any) -> Device:
        """Open the target; never falls back to another one.

        Raises:
            InvalidArgument: an option the target does not accept, or a bad option value.
            TargetUnavailable: the probe says the target cannot run here (the reason is attached).
        """
        built = self.build_options(options)
        reason = self.unavailable_reason()
        if reason is not None:
            raise TargetUnavailable(self.name, reason)
        if built is None:
            return self.definition.opener(self)
        return self.definition.opener(self, built)


class TargetRegistry:
    """Every target this installation knows, loaded lazily from the ``tinyhil.targets`` entry points."""

    def __init__(self, *, load_entry_points: bool = True) -> None:
        self._name2def: dict[str, TargetDef] = {}
        self._pending_entry_points = load_entry_points

    def add(self, definition: TargetDef) -> TargetDef:
        """Register ``definition``.

        Raises:
            InvalidArgument: a target of that name is already registered.
        """
        if not isinstance(definition, TargetDef):
            raise InvalidArgument(f"definition={definition!r}, expected a TargetDef (decorate the opener with @target)")
        existing = self._name2def.get(definition.name)
        if existing is not None:
            raise InvalidArgument(
                f"target {definition.name} is registered twice: by {existing.opener.__module__} and by "
                f"{definition.opener.__module__}"
            )
        self._name2def[definition.name] = definition
        return definition

    def add_module(self, module: ModuleType) -> list[TargetDef]:
        """Register every :class:`TargetDef` defined at the top level of ``module``."""
        found = [value for value in vars(module).values() if isinstance(value, TargetDef)]
        for definition in sorted(found, key=lambda d: d.name):
            self.add(definition)
        return found

    def _load(self) -> None:
        if not self._pending_entry_points:
            return
        self._pending_entry_points = False
        for point in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda p: p.name):
            try:
                module = importlib.import_module(point.value)
            except Exception as exc:
                raise TinyHilError(
                    f"entry point {point.name} = {point.value!r} in group {ENTRY_POINT_GROUP} failed to import: {exc}"
                ) from exc
            self.add_module(module)

    def definitions(self) -> list[TargetDef]:
        """All registered definitions, sorted by name."""
        self._load()
        return sorted(self._name2def.values(), key=lambda d: d.name)

    def resolve(self, text: str | TargetString) -> Target:
        """Resolve a target string to a registered target.

        Raises:
            InvalidArgument (``ValueError``): not a str or TargetString, malformed string, unknown target, renderer
                or arch, or an interface index the target does not take.
        """
        spec = text if isinstance(text, TargetString) else parse_target(text)
        self._load()
        candidates = [d for d in self._name2def.values() if d.spec.base == spec.base]
        if not candidates:
            known = ", ".join(d.name for d in self.definitions())
            raise InvalidArgument(f"unknown target {str(spec)!r}; known targets: {known}; grammar: {GRAMMAR}")
        if spec.index is not None:
            _check_index(spec, candidates[0])
        # A definition that fixes renderer (and arch) in its name wins when the string matches them.
        for definition in candidates:
            fixed = definition.spec
            if fixed.renderer is None or spec.renderer != fixed.renderer or spec.arch not in (None, fixed.arch):
                continue
            resolved = TargetString(spec.device, spec.iface, spec.index, fixed.renderer, fixed.arch)
            return Target(resolved, definition, fixed.renderer, fixed.arch)
        generic = [d for d in candidates if d.spec.renderer is None]
        if not generic:
            names = ", ".join(sorted(d.name for d in candidates))
            raise InvalidArgument(f"target {str(spec)!r} matches none of the registered {spec.base} targets: {names}")
        return self._resolve_generic(spec, generic[0], candidates)

    def _resolve_generic(self, spec: TargetString, definition: TargetDef, candidates: list[TargetDef]) -> Target:
        renderer: str | None = definition.default_renderer
        if spec.renderer is not None:
            mapping = definition.renderer_map
            if spec.renderer not in mapping:
                tokens = ", ".join(sorted({*mapping, *(c.spec.renderer for c in candidates if c.spec.renderer)}))
                raise InvalidArgument(
                    f"target {str(spec)!r}: unknown renderer {spec.renderer!r} for {spec.base}; "
                    f"known renderers: {tokens}"
                )
            renderer = mapping[spec.renderer]
        arch = definition.archs[0] if definition.archs else None
        if spec.arch is not None:
            if spec.arch not in definition.archs:
                known = ", ".join(definition.archs) or "none"
                raise InvalidArgument(
                    f"target {str(spec)!r}: unknown arch {spec.arch!r} for {spec.base}; known archs: {known}"
                )
            arch = spec.arch
        return Target(spec, definition, renderer, arch)

    def select(self, selectors: Sequence[str]) -> list[Target]:
        """Expand selectors (target strings, ``all``, ``emulated``, glob patterns) into targets, in order, once each.

        ``all`` is every available target, ``emulated`` every available target that needs no hardware; a glob
        (``MOCK*``) matches registered names. An explicitly named target is kept even when unavailable, so the
        caller can report why.

        Raises:
            InvalidArgument: ``selectors`` is not a list of strings (see :func:`split_selectors`), a pattern matches
                no target, or a target string is malformed or unknown (see :meth:`resolve`).
        """
        out: dict[str, Target] = {}
        for selector in split_selectors(selectors):
            for resolved in self._expand(selector):
                out.setdefault(resolved.name, resolved)
        return list(out.values())

    def _expand(self, selector: str) -> list[Target]:
        lowered = selector.lower()
        if lowered in (SELECT_ALL, SELECT_EMULATED):
            picked = [self.resolve(d.name) for d in self.definitions() if d.emulated or lowered == SELECT_ALL]
            return [t for t in picked if t.unavailable_reason() is None]
        if any(ch in selector for ch in "*?["):
            matched = [self.resolve(d.name) for d in self.definitions() if fnmatch.fnmatchcase(d.name, selector)]
            if not matched:
                raise InvalidArgument(f"target pattern {selector!r} matches no registered target")
            return matched
        return [self.resolve(selector)]


def split_selectors(values: Iterable[str]) -> tuple[str, ...]:
    """Split comma-separated selectors (``--hil-target A,B``, ``DEV=A,B``) into a flat tuple, stripped.

    Raises:
        InvalidArgument: ``values`` is a single string or not iterable (pass ``["A,B"]``), an entry is not a
            string, or an entry is empty (``A,,B``, a trailing comma, an empty string).
    """
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        kind = "one string" if isinstance(values, str) else f"{type(values).__name__} object"
        raise InvalidArgument(
            f"selectors={kind}, expected a list of target selectors such as ['MOCKUSB+AMD', 'all'] "
            "(wrap a single selector in a list)"
        )
    out: list[str] = []
    for value in values:
        if not isinstance(value, str):
            raise InvalidArgument(
                f"target selector {type(value).__name__} object, expected a string such as 'MOCKUSB+AMD' or 'all'"
            )
        parts = [part.strip() for part in value.split(",")]
        if not all(parts):
            raise InvalidArgument(
                f"target list {value!r} has an empty entry (position {parts.index('') + 1}); expected comma-separated "
                "target strings such as MOCKUSB+AMD,NULL"
            )
        out.extend(parts)
    return tuple(out)


def _check_index(spec: TargetString, definition: TargetDef) -> None:
    on = spec.iface or spec.device
    what = "interface index" if spec.iface else "index"
    given = f"{on}:{spec.index}"
    if not definition.indexed:
        raise InvalidArgument(
            f"target {str(spec)!r}: {spec.base} takes no {what} ({given}), expected {spec.base} without ':{spec.index}'"
        )
    if definition.max_index is not None and spec.index is not None and spec.index > definition.max_index:
        raise InvalidArgument(
            f"target {str(spec)!r}: {what} {spec.index}, expected 0..{definition.max_index} for {spec.base}"
        )


_default: TargetRegistry | None = None


def default_registry() -> TargetRegistry:
    """The process-wide registry, created (and its entry points loaded) on first use."""
    global _default
    if _default is None:
        _default = TargetRegistry()
    return _default


def open_target(text: str, **options: Any) -> Device:
    """Open the target named by ``text`` (e.g. ``"NULL"``, ``"MOCKUSB+AMD"``) and return the device.

    Use it as a context manager: ``with tinyhil.open_target("NULL") as dev: ...``.

    Raises:
        InvalidArgument: malformed or unknown target string.
        TargetUnavailable: the target cannot run here (the reason is attached); there is no fallback.
    """
    return default_registry().resolve(text).open(**options)
