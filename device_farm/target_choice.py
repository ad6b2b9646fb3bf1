"""Which targets a run is for: those ``--target`` names, else ``$DEV``, else the default (every available emulated
target), and where the choice came from, so a target named explicitly that cannot run here stops the run."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from tinyhil.errors import InvalidArgument, TinyHilError
from tinyhil.fixtures.options import ENV_TARGET, read_targets_from_environment
from tinyhil.registry import SELECT_EMULATED, Target, TargetRegistry

__all__ = ["SOURCE_DEFAULT", "TargetChoice", "TargetsUnavailable", "choose_targets"]

SOURCE_DEFAULT: Final = "default"


class TargetsUnavailable(TinyHilError, LookupError):
    """Targets named explicitly cannot run here (the run exits :data:`EXIT_UNAVAILABLE`)."""


@dataclass(frozen=True, slots=True)
class TargetChoice:
    """The targets a run was asked for, and where the ask came from (``--target``, ``$DEV`` or ``default``)."""

    targets: tuple[Target, ...]
    source: str

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.targets)

    def unavailable(self) -> dict[str, str]:
        """The chosen targets that cannot run on this host, with the reason of each."""
        return {t.name: reason for t in self.targets if (reason := t.unavailable_reason()) is not None}

    def check_here(self, *, allow_unavailable: bool) -> None:
        """Check that every target named explicitly can run on this host (a default choice holds only available
        ones); ``allow_unavailable`` runs them anyway, their tests counted as skipped.

        Raises:
            TargetsUnavailable: one line naming each target, where it was named, and why it cannot run.
        """
        unavailable = self.unavailable()
        if self.source == SOURCE_DEFAULT or allow_unavailable or not unavailable:
            return
        reasons = "; ".join(f"target {name} ({self.source}) cannot run here: {why}" for name, why in unavailable.items()
                            )  # fmt: skip
        raise TargetsUnavailable(f"{reasons}; pass --allow-unavailable to run anyway and count its tests as skipped")


def choose_targets(registry: TargetRegistry, selectors: Sequence[str] | None, *, environment: bool = True,
                   default: Sequence[str] = (SELECT_EMULATED,)) -> TargetChoice:  # fmt: skip
    """The targets ``selectors`` (``--target``) name, else ``$DEV`` (with ``environment``), else ``default``.

    Raises:
        InvalidArgument: a malformed or unknown selector, or selectors that match no available target.
    """
    from_env = read_targets_from_environment() if environment else None
    if selectors:
        chosen, source = tuple(selectors), "--target"
    elif from_env:
        chosen, source = from_env, f"${ENV_TARGET}"
    else:
        chosen, source = tuple(default), SOURCE_DEFAULT
    targets = tuple(registry.select(chosen)) if chosen else ()
    if chosen and not targets:
        raise InvalidArgument(f"no available target matches {list(chosen)}; see `tinyhil targets`")
    return TargetChoice(targets, source)
