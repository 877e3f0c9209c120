"""Which installed backend gets PrivateUse1, by a documented rule.

Torch accepts one name for the key per process. When the first PrivateUse1
backend activates, every installed one is imported so that each declares
itself, then they are ranked: the one named by ``TORCHPLUG_PRIVATEUSE1``,
then the highest ``priority``, then name order. The first that registers
holds the key; the others are recorded as inactive with the reason and the
setting that would choose them.
"""

from __future__ import annotations

from importlib import metadata

from torchplug import settings
from torchplug.activation import records
from torchplug.activation.entry_points import (
    distribution_name,
    import_plugin,
    privateuse1_candidates,
)
from torchplug.activation.registration import kept_privateuse1_after_failing, register_timed
from torchplug.backend import PRIVATEUSE1_GROUP, BackendState, BackendStatus
from torchplug.device_kind import kind_of, privateuse1_owner


class _Arbitration:
    """State of the one arbitration a process runs."""

    # True while the candidates are being imported: their activations only declare.
    running = False
    # TORCHPLUG_PRIVATEUSE1 named no installed backend and the user was told once.
    warned_unknown_choice = False


def arbitrating() -> bool:
    """Whether an activation now is a candidate declaring itself, not a request to register."""
    return _Arbitration.running


def settle(status: BackendStatus) -> None:
    """Gives PrivateUse1 to the best installed candidate, or records why ``status`` lost."""
    import torch

    holder = records.privateuse1.holder
    if holder is not None:
        _lose(status, holder, "it was activated first")
        return
    claimed = privateuse1_owner(torch._C._get_privateuse1_backend_name())
    if claimed is not None:
        name = status.backend.name
        status.state = BackendState.LOST_PRIVATEUSE1
        status.reason = (
            f"PrivateUse1 is already taken by '{claimed}' (registered before torchplug chose); "
            f"only one PrivateUse1 backend can be active per process. Uninstall or disable "
            f"'{claimed}' to use '{name}'."
        )
        records.report(status)
        return
    config = settings.current()
    ranked = _rank(_candidates(config), config)
    for candidate in ranked:
        register_timed(candidate)
        if candidate.state is BackendState.ACTIVE or candidate.backend.name == config.privateuse1:
            records.privateuse1.holder = candidate
            break
        # Failed before taking the key: the next in rank order may take it.
        if privateuse1_owner(torch._C._get_privateuse1_backend_name()) is not None:
            records.privateuse1.holder = candidate
            break
    holder = records.privateuse1.holder
    for candidate in ranked:
        if candidate.state is BackendState.PENDING and holder is not None:
            _lose(candidate, holder, _why_first(holder, candidate, ranked, config))
    # A candidate that failed here was tried on behalf of another backend's
    # activation, so its own activation never reports it.
    failed = next((c for c in ranked if c.state is BackendState.FAILED), None)
    if failed is not None and config.strict:
        raise records.strict_error(failed)


def _candidates(config: settings.Settings) -> list[BackendStatus]:
    """The PrivateUse1 backends to choose among: with autoload on, every installed
    one (imported here so that each declares itself); with autoload off, those
    imported explicitly."""
    if config.autoload:
        _Arbitration.running = True
        try:
            for entry_point in metadata.entry_points(group=PRIVATEUSE1_GROUP):
                held = records.by_device.get(entry_point.name)
                undeclared = held is None or held.state is BackendState.DISABLED
                if undeclared and not config.disables(
                    entry_point.name, distribution_name(entry_point)
                ):
                    import_plugin(entry_point.value, device=entry_point.name)
        finally:
            _Arbitration.running = False
    return [
        s
        for s in records.by_device.values()
        if s.state is BackendState.PENDING and kind_of(s.backend.dispatch_key).renamed_to_backend
    ]


def _rank(candidates: list[BackendStatus], config: settings.Settings) -> list[BackendStatus]:
    names = {c.backend.name for c in candidates}
    chosen = config.privateuse1
    if chosen is not None and chosen not in names and not _Arbitration.warned_unknown_choice:
        _Arbitration.warned_unknown_choice = True
        records.log.warning(
            "%s=%s names no installed PrivateUse1 backend (installed: %s); "
            "falling back to the default choice.",
            settings.PRIVATEUSE1,
            chosen,
            ", ".join(sorted(names | set(privateuse1_candidates()))) or "none",
        )
    return sorted(
        candidates,
        key=lambda c: (c.backend.name != chosen, -c.backend.priority, c.backend.name),
    )


def _why_first(
    holder: BackendStatus,
    loser: BackendStatus,
    ranked: list[BackendStatus],
    config: settings.Settings,
) -> str:
    winner = holder.backend
    if config.privateuse1 == winner.name:
        return f"{settings.PRIVATEUSE1}={winner.name}"
    if winner.priority != loser.backend.priority:
        return (
            f"its priority {winner.priority} is higher than {loser.backend.priority}, "
            f"the priority of '{loser.backend.name}'"
        )
    failed = [c.backend.name for c in ranked if c.state is BackendState.FAILED and c is not holder]
    order = ", ".join(c.backend.name for c in ranked)
    note = f"; {', '.join(repr(n) for n in failed)} failed to load" if failed else ""
    return f"the first in name order of the installed PrivateUse1 backends ({order}){note}"


def _lose(status: BackendStatus, holder: BackendStatus, why: str) -> None:
    name = status.backend.name
    winner = holder.backend.name
    failed = ""
    remedy = f"{settings.PRIVATEUSE1}={name}"
    if not holder.active:
        cause = records.describe(holder.error) if holder.error is not None else holder.reason
        when = ""
        if kept_privateuse1_after_failing(holder.backend):
            when = " after taking the key (torch cannot give it back within a process)"
            remedy += f" or {settings.DISABLE}={winner}"
        failed = f", which failed{when}: {cause.rstrip('.')}"
    status.state = BackendState.LOST_PRIVATEUSE1
    if settings.current().privateuse1 == winner:
        status.reason = (
            f"PrivateUse1 belongs to '{winner}' ({why}{failed}); "
            f"set {remedy} to use '{name}' instead."
        )
    else:
        status.reason = (
            f"PrivateUse1 belongs to '{winner}' ({why}{failed}); only one PrivateUse1 backend "
            f"can be active per process. Set {remedy} to use '{name}' instead."
        )
    records.report(status)
