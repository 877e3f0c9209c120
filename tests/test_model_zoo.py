"""Real models train on every device exactly as on the CPU (issue 15).

Tiny HF transformers and torchvision models (the zoo of torchplug_bench.zoo,
checked by tests/zoo_models.py) are built
on the CPU, copied to the device and checked against the CPU in the same
process: parameter ties after ``.to()``, the eval forward, 3 AdamW training
steps (fp32 losses within 1e-5), greedy ``generate()`` tokens and a
save/load round trip on the device.

To keep the cost to three interpreters, one child process per PrivateUse1 owner
runs every model on its devices and reports JSON (``foo`` with ``hpu`` beside
it, then ``npu`` with ``TORCHPLUG_PRIVATEUSE1=npu``, then ``dsc`` on the
remote driver, whose memory the host cannot address); each test reads its own
(model, device) result. ``hpu`` runs eval, generate and the round trip; its
training is a strict expected failure.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fresh_interpreter import DISCRETE_MODEL_RUN, MODEL_RUNS, ChildReports, model_report
from torchplug_bench.zoo import MODELS, MODELS_BY_NAME

LOSS_TOLERANCE = 1e-5
OUTPUT_TOLERANCE = 1e-5
CHILD_TIMEOUT_SECONDS = 900

HPU_BACKWARD_BLOCKED = (
    "hpu backward is blocked upstream: on PyPI's torch (a CUDA build) the autograd engine "
    "asserts (opt_ready_stream && opt_parent_stream) when HPU is not the accelerator"
)


DEVICES = [device for run in (*MODEL_RUNS, DISCRETE_MODEL_RUN) for device in run.devices]


class ZooResults:
    """Starts each child run on first use and keeps what it reported."""

    def __init__(self, scratch: Path) -> None:
        self.children = ChildReports("zoo_models", scratch, CHILD_TIMEOUT_SECONDS)

    def of(self, model: str, device: str) -> dict[str, Any]:
        result = model_report(self.children, model, device)
        if "error" in result:
            pytest.fail(f"{model} could not be built or run on the CPU: {result['error']}")
        if device not in result:
            pytest.fail(f"the zoo child process did not report {model} on {device}")
        return result[device]


@pytest.fixture(scope="module")
def zoo(tmp_path_factory: pytest.TempPathFactory) -> ZooResults:
    return ZooResults(tmp_path_factory.mktemp("zoo"))


def cases(
    applies: Any = lambda spec: True, hpu_marks: tuple[pytest.MarkDecorator, ...] = ()
) -> list[Any]:
    return [
        pytest.param(
            spec.name,
            device,
            id=f"{spec.name}-{device}",
            marks=hpu_marks if device == "hpu" else (),
        )
        for spec in MODELS
        if applies(spec)
        for device in DEVICES
    ]


def check(zoo: ZooResults, model: str, device: str, name: str) -> dict[str, Any]:
    """The outcome of one check, failing the test with the device's error if it raised."""
    pytest.importorskip(MODELS_BY_NAME[model].library)
    outcome = zoo.of(model, device)[name]
    assert outcome["error"] is None, f"{name} of {model} failed on {device}:\n{outcome['error']}"
    return outcome


def assert_same(outcome: dict[str, Any], device: str, what: str) -> None:
    assert outcome["device"] == outcome["cpu"], (
        f"{what} differ on {device} from the CPU's:\n"
        f"  cpu:    {outcome['cpu']}\n  device: {outcome['device']}"
    )


def assert_close(outcome: dict[str, Any], tolerance: float, what: str) -> None:
    difference = outcome["difference"]
    assert difference <= tolerance, (
        f"{what} differs from the CPU's by {difference:g} (tolerance {tolerance:g}):\n"
        f"  cpu:    {outcome['cpu']}\n  device: {outcome['device']}"
    )


@pytest.mark.parametrize(("model", "device"), cases())
def test_to_device_keeps_tied_parameters(zoo: ZooResults, model: str, device: str) -> None:
    assert_same(check(zoo, model, device, "ties"), device, "parameters shared")


@pytest.mark.parametrize(("model", "device"), cases())
def test_eval_forward_like_cpu(zoo: ZooResults, model: str, device: str) -> None:
    assert_close(check(zoo, model, device, "eval"), OUTPUT_TOLERANCE, "the eval output")


@pytest.mark.parametrize(
    ("model", "device"),
    cases(
        lambda spec: spec.trains,
        hpu_marks=(pytest.mark.xfail(strict=True, reason=HPU_BACKWARD_BLOCKED),),
    ),
)
def test_trains_like_cpu(zoo: ZooResults, model: str, device: str) -> None:
    outcome = check(zoo, model, device, "train")
    # A device with kernels of its own: the first loss (no step taken yet) as
    # close as any device's, the later ones within twice what rounding alone
    # moved the CPU's (zoo_models.py).
    first_difference = abs(outcome["cpu"][0] - outcome["device"][0])
    assert first_difference <= LOSS_TOLERANCE, f"the first loss differs by {first_difference:g}"
    spread = outcome["details"].get("rounding_spread", 0.0)
    assert_close(outcome, max(LOSS_TOLERANCE, 2 * spread), "the training losses")


@pytest.mark.parametrize(("model", "device"), cases(lambda spec: spec.generates))
def test_greedy_generate_like_cpu(zoo: ZooResults, model: str, device: str) -> None:
    assert_same(check(zoo, model, device, "generate"), device, "greedy tokens")


@pytest.mark.parametrize(("model", "device"), cases())
def test_save_and_load_round_trip_on_device(zoo: ZooResults, model: str, device: str) -> None:
    details = check(zoo, model, device, "roundtrip")["details"]
    assert details["devices"] == [f"{device}:0"], f"reloaded onto {details['devices']}"
    assert details["weights"] == 0.0, f"reloaded weights differ by {details['weights']:g}"
    assert details["ties"], "the reloaded model lost or gained tied parameters"
    assert details["outputs"] == 0.0, f"reloaded outputs differ by {details['outputs']:g}"
