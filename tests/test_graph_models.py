"""A transformers model's whole training step captures into a graph on a
torchplug device: transformers sees the capture and skips its host checks."""

from __future__ import annotations

import pytest
import torch

from torchplug_bench import graphs

pytest.importorskip("transformers")

DEVICE = "foo"


def test_transformers_sees_a_capture_on_a_torchplug_device() -> None:
    from transformers.utils import import_utils

    side = torch.foo.Stream()
    graph = torch.foo.Graph()
    assert not import_utils.is_tracing()
    with torch.foo.stream(side):
        graph.capture_begin()
        try:
            assert import_utils.is_tracing()
        finally:
            graph.capture_end()
    assert not import_utils.is_tracing()


def test_a_captured_gpt2_training_step_replays_as_eager_steps() -> None:
    """Bit for bit, dropout included: each step is seeded alike on both sides."""
    eager, eager_model = graphs.training_step(DEVICE, capturable=True)
    captured, captured_model = graphs.training_step(DEVICE, capturable=True)
    side = torch.foo.Stream()
    side.wait_stream(torch.foo.current_stream())
    with torch.foo.stream(side):
        for seed in (100, 101):  # the warm-up steps are the first two training steps
            for step in (eager, captured):
                torch.manual_seed(seed)
                step()
    torch.foo.synchronize()
    graph = torch.foo.Graph()
    with torch.foo.graph(graph):
        static_loss = captured()
    for seed in range(3):
        torch.manual_seed(seed)
        expected = eager()
        torch.manual_seed(seed)
        graph.replay()
        assert torch.equal(static_loss.cpu(), expected.detach().cpu())
    for replayed, stepped in zip(
        captured_model.parameters(), eager_model.parameters(), strict=True
    ):
        assert torch.equal(replayed.detach().cpu(), stepped.detach().cpu())
