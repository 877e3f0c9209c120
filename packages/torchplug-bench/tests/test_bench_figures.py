"""Like with like: both sides of a ratio do the same work, each waited for on its
own device, and a row that could not be measured shows as failed."""

from __future__ import annotations

import pytest
import torch

from torchplug_bench import micro, zoo
from torchplug_bench.figures import (
    FOREACH,
    Candidate,
    Figure,
    Rounds,
    median_rounds,
    step_time_figure,
)
from torchplug_bench.report import Report
from torchplug_bench.targets import TINY_OP, Target, planned_rows


def test_each_round_and_the_warm_up_wait_for_the_candidates_own_device(monkeypatch) -> None:
    events: list[str] = []
    monkeypatch.setattr(
        torch.hpu, "synchronize", lambda device=None: events.append(f"sync {device}")
    )
    monkeypatch.setattr(
        torch.accelerator, "synchronize", lambda *args: events.append("accelerator")
    )
    candidates = {
        "cpu": Candidate("cpu", lambda: events.append("cpu step")),
        "hpu": Candidate("hpu", lambda: events.append("hpu step")),
    }
    median_rounds(candidates, repeat=1, rounds=2)
    assert "accelerator" not in events
    hpu_events = [event for event in events if "hpu" in event]
    # warm-up, then two rounds: each ends with hpu synchronised
    assert hpu_events == ["hpu step", "sync hpu"] * 3


@pytest.mark.parametrize("device", ["cpu", "foo"])
def test_the_mlp_optimizer_takes_the_same_implementation_everywhere(device, monkeypatch) -> None:
    built: list[object] = []

    class RecordingSGD(torch.optim.SGD):
        def __init__(self, params, **options) -> None:
            super().__init__(params, **options)
            built.append(options.get("foreach"))

    monkeypatch.setattr(torch.optim, "SGD", RecordingSGD)
    micro._mlp_step(device)
    assert built == [FOREACH]


def test_a_zoo_model_that_fails_is_a_failed_row(monkeypatch) -> None:
    def broken() -> torch.nn.Module:
        raise RuntimeError("no such kernel")

    failing = zoo.ZooModel("broken", "torchvision", broken, zoo._vision_batch)
    missing = zoo.ZooModel("missing", "no_such_library", broken, zoo._vision_batch)
    monkeypatch.setattr(zoo, "MODELS", (failing, missing))
    figures = zoo.bench_zoo("foo", rounds=1)
    assert [(figure.row.name, figure.error) for figure in figures] == [
        ("broken training step (AdamW)", "RuntimeError: no such kernel"),
        ("missing training step (AdamW)", "needs no_such_library, which is not installed"),
    ]


def test_a_zoo_step_reports_the_host_waits_its_code_asks_for(monkeypatch) -> None:
    class ReadsItsLoss(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(3 * 32 * 32, 10)

        def forward(self, images: torch.Tensor) -> torch.Tensor:
            logits = self.linear(images.flatten(1))
            logits.sum().item()  # one host read per forward
            return logits

    model = zoo.ZooModel("reads", "torchvision", ReadsItsLoss, zoo._vision_batch)
    monkeypatch.setattr(zoo, "MODELS", (model,))
    (figure,) = zoo.bench_zoo("foo", rounds=1)
    assert figure.error is None
    requested, implicit = figure.host_waits
    assert requested == 1
    assert implicit >= 0
    report = Report.from_measurements(
        [figure.row], 1, {"unpinned": {"figures": {figure.row.name: figure.as_json()}}}
    )
    assert f"reads 1/{implicit:g}" in report.as_text()


def test_the_matmul_launch_figure_times_the_return_and_the_result() -> None:
    from torchplug_bench.micro import bench_matmul_launch

    figure = bench_matmul_launch("foo", rounds=3)
    assert figure.error is None
    assert figure.value > 0
    assert figure.baseline_value > 0


def test_every_planned_row_is_reported_even_when_a_measuring_process_died() -> None:
    rows = planned_rows(["tiny", "copy"])
    report = Report.from_measurements(
        rows,
        rounds=1,
        measurements={
            "pinned": {
                "device": "foo",
                "figures": {TINY_OP.name: Figure(TINY_OP, 2.0, 3.2).as_json()},
            },
            "unpinned": {"device": "foo", "error": "the measuring process exited with status -11"},
        },
    )
    tiny, launch, to_device, to_host = rows
    assert [(row, pinning) for row, pinning, _ in report.failed] == [
        (tiny, "unpinned"),
        (launch, "pinned"),
        (launch, "unpinned"),
        (to_device, "pinned"),
        (to_device, "unpinned"),
        (to_host, "pinned"),
        (to_host, "unpinned"),
    ]
    text = report.as_text()
    assert text.count("FAILED") == 7
    assert "1.60x NO" in text
    assert "exited with status -11" in text


@pytest.mark.parametrize(
    ("target", "ratio", "met"),
    [
        (Target("<=", 1.1), 1.1, True),
        (Target("<=", 1.1), 1.2, False),
        (Target(">=", 0.9), 0.89, False),
        (Target(">=", 0.9), 0.95, True),
        (Target(), 5.0, True),
    ],
)
def test_targets(target: Target, ratio: float, met: bool) -> None:
    assert target.met(ratio) is met


def test_a_miss_by_less_than_the_rounding_shows_three_decimals() -> None:
    report = Report.from_measurements(
        [TINY_OP],
        rounds=1,
        measurements={
            "unpinned": {
                "figures": {
                    TINY_OP.name: Figure(
                        TINY_OP, 2.0, 2.0 * (TINY_OP.target.bound + 0.001)
                    ).as_json()
                }
            }
        },
    )
    assert f"{TINY_OP.target.bound + 0.001:.3f}x NO" in report.as_text()


def test_a_ratio_is_the_median_of_the_rounds_ratios() -> None:
    # The machine slowed down for the last two rounds, both sides alike: the
    # paired ratio stays 1.1, the ratio of the medians would not.
    times = Rounds({"cpu": [1.0, 1.0, 1.0, 2.0, 2.0], "foo": [1.1, 1.1, 1.1, 2.2, 2.2]})
    figure = step_time_figure(TINY_OP, times, "foo")
    assert times["cpu"] == 1.0
    assert times["foo"] == pytest.approx(1.1)
    assert figure.ratio == pytest.approx(1.1)
    drifted = Rounds({"cpu": [1.0, 1.0, 2.0, 2.0, 2.0], "foo": [1.1, 1.1, 1.1, 2.2, 2.2]})
    assert drifted["foo"] / drifted["cpu"] == pytest.approx(0.55)
    assert step_time_figure(TINY_OP, drifted, "foo").ratio == pytest.approx(1.1)
    # Read back from a measuring process's JSON, the paired ratio is kept.
    assert Figure(TINY_OP, 1.0, 2.0, paired=1.1).as_json()["ratio"] == pytest.approx(1.1)
