"""``torchplug doctor``: what backends are installed, loaded, and why not."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from importlib import metadata
from typing import Any

from torchplug import cuda_coexistence, settings, torch_builds
from torchplug.activation import records
from torchplug.backend import BackendState
from torchplug.device_kind import privateuse1_owner


@dataclass
class EntryPointReport:
    entry_point: str
    target: str
    distribution: str | None
    version: str | None
    torchplug: bool
    device: str | None = None
    status: str = "unknown"
    reason: str = ""
    load_ms: float | None = None
    device_count: int | None = None
    # The backend's driver: its library, the interface version it speaks, its
    # name and release, capabilities and extensions (None when not opened).
    driver: dict[str, Any] | None = None


@dataclass
class Report:
    torch_version: str
    torchplug_version: str
    settings: dict[str, Any]
    privateuse1_owner: str | None
    current_accelerator: str | None
    # The torch releases the core has a native build for ("2.14", "2.15"),
    # and whether the running torch is one of them.
    core_builds: list[str] = field(default_factory=list)
    core_build_for_running_torch: bool = False
    backends: list[EntryPointReport] = field(default_factory=list)
    cuda: cuda_coexistence.Coexistence | None = None

    def as_dict(self) -> dict[str, Any]:
        # asdict keeps a named tuple a tuple, which JSON would write as a list.
        return {**asdict(self), "cuda": None if self.cuda is None else self.cuda._asdict()}


def collect() -> Report:
    import torch

    import torchplug

    config = settings.current()
    by_distribution = {
        status.backend.distribution: status
        for status in [
            *records.import_failures().values(),
            *records.shadowed(),
            *records.statuses().values(),
        ]
        if status.backend.distribution
    }
    owner = torch._C._get_privateuse1_backend_name()
    accelerator = torch.accelerator.current_accelerator()
    report = Report(
        torch_version=torch.__version__,
        torchplug_version=torchplug.__version__,
        settings=config.as_dict(),
        privateuse1_owner=privateuse1_owner(owner),
        current_accelerator=None if accelerator is None else accelerator.type,
        cuda=cuda_coexistence.assess(privateuse1_owner(owner)),
    )
    report.core_builds = list(torch_builds.installed_builds())
    running = ".".join(torch_builds.running_torch().split(".")[:2])
    report.core_build_for_running_torch = running in report.core_builds
    for ep in sorted(metadata.entry_points(group="torch.backends"), key=lambda e: e.name):
        dist = ep.dist
        dist_name = dist.metadata["Name"] if dist is not None else None
        status = by_distribution.get(dist_name) if dist_name else None
        entry = EntryPointReport(
            entry_point=ep.name,
            target=ep.value,
            distribution=dist_name,
            version=dist.version if dist is not None else None,
            torchplug=status is not None or _requires_torchplug(dist),
        )
        if status is not None:
            entry.device = status.backend.name
            entry.status = status.state.value
            entry.reason = status.reason
            entry.load_ms = round(status.load_ms, 2)
            if status.state is BackendState.ACTIVE:
                entry.device_count = getattr(torch, status.backend.name).device_count()
            entry.driver = _driver(status.backend)
        elif not config.autoload:
            entry.status = "not loaded"
            entry.reason = f"{settings.AUTOLOAD}=0 turns autoloading off"
        elif entry.torchplug:
            entry.status = "not loaded"
            entry.reason = (
                "its entry point ran but never activated a torchplug backend; "
                "point it at torchplug:plugin.<module> to have failures recorded here"
            )
        else:
            entry.status = "loaded"
            entry.reason = "not built on torchplug; torch ran its entry point"
        report.backends.append(entry)
    return report


def _driver(backend: Any) -> dict[str, Any] | None:
    """What the core knows of ``backend``'s driver: its library, and once loaded its
    name, release, interface version, capabilities and extensions (``loaded``
    False when it could not be: the status' reason says why). None when the
    native core itself does not load."""
    try:
        from torchplug import _C
        from torchplug.activation.registration import driver_path

        if backend.name not in _C.opened_drivers():
            return {"library": driver_path(backend), "loaded": False}
        return {**_C.driver_info(backend.name), "loaded": True}
    except Exception:  # the native core itself may not load; the status says why
        return None


def _requires_torchplug(dist: metadata.Distribution | None) -> bool:
    if dist is None:
        return False
    return any(req.split(";")[0].strip().startswith("torchplug") for req in dist.requires or [])


def render(report: Report) -> str:
    rows = [("ENTRY POINT", "DISTRIBUTION", "DEVICE", "STATUS", "LOAD ms", "DEVICES")]
    for b in report.backends:
        rows.append(
            (
                b.entry_point,
                f"{b.distribution or '?'} {b.version or ''}".strip(),
                b.device or "-",
                b.status,
                "-" if b.load_ms is None else f"{b.load_ms:.1f}",
                "-" if b.device_count is None else str(b.device_count),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        f"torch {report.torch_version}, torchplug {report.torchplug_version} "
        f"(native builds for torch {', '.join(report.core_builds) or 'none'}"
        f"{'' if report.core_build_for_running_torch else '; none for the running torch'})",
        f"current accelerator: {report.current_accelerator or 'none'}; "
        f"PrivateUse1 owner: {report.privateuse1_owner or 'unclaimed'}",
        "",
    ]
    lines += [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        for row in rows
    ]
    notes = [f"  {b.entry_point}: {b.reason}" for b in report.backends if b.reason]
    drivers = [_render_driver(b.device, d) for b in report.backends if (d := b.driver) is not None]
    if not report.backends:
        lines.append("(no torch.backends entry points are installed)")
    if drivers:
        lines += ["", "drivers:", *drivers]
    if notes:
        lines += ["", "why:", *notes]
    if report.cuda is not None and report.cuda.message:
        lines += ["", f"cuda: {report.cuda.message}"]
    lines += ["", "settings:"] + [f"  {k}={v}" for k, v in report.settings.items()]
    return "\n".join(lines)


def _render_driver(device: str | None, driver: dict[str, Any]) -> str:
    if not driver.get("loaded"):
        return f"  {device}: {driver['library']} (not loaded)"
    return (
        f"  {device}: {driver['name']} {driver['version']} (interface {driver['interface']}) "
        f"{driver['library']}; capabilities: {', '.join(driver['capabilities']) or 'none'}; "
        f"extensions: {', '.join(driver['extensions']) or 'none'}"
    )


def run(as_json: bool) -> str:
    report = collect()
    return json.dumps(report.as_dict(), indent=2) if as_json else render(report)
