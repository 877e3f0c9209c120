"""A transformers model's whole training step captures into a graph on a
torchplug device: transformers sees the capture and skips its host checks."""

from __future__ import annotations

import copy

import pytest
import torch

from torchplug_bench import graphs, zoo

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


def test_graphed_torchvision_blocks_train_as_eager_ones() -> None:
    """make_graphed_callables on modules nobody here wrote: mobilenet_v3_small's
    feature blocks (convolutions, batch norm updating its running statistics,
    hardswish, squeeze-excitation) replay as their eager steps, bit for bit."""
    pytest.importorskip("torchvision")
    spec = zoo.MODELS_BY_NAME["mobilenet_v3_small"]
    zoo.seed_everything(zoo.DATA_SEED)
    batch = zoo.to_device(spec.batch(), DEVICE)
    zoo.seed_everything(zoo.MODEL_SEED)
    base = spec.build()
    eager, graphed = (copy.deepcopy(base).to(DEVICE).train() for _ in range(2))
    stem, blocks = graphed.features[0], graphed.features[1]
    images = batch["images"]
    with torch.no_grad():
        hidden = stem(images).requires_grad_()
    graphed.features[0], graphed.features[1] = torch.foo.make_graphed_callables(
        (stem, blocks), ((images,), (hidden,))
    )
    # Computing `hidden` and the three warm-ups ran the blocks in training
    # mode, moving their running statistics: the eager model takes the same steps.
    eager_stem, eager_blocks = eager.features[0], eager.features[1]
    with torch.no_grad():
        eager_hidden = eager_stem(images)
        for _ in range(3):
            eager_stem(images)
        for _ in range(3):
            eager_blocks(eager_hidden)
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.05) for m in (eager, graphed)]
    for step in range(3):
        losses = []
        for model, optimizer in zip((eager, graphed), optimizers, strict=True):
            torch.manual_seed(step)  # the classifier's dropout
            optimizer.zero_grad(set_to_none=True)
            loss = spec.loss(model, batch)
            loss.backward()
            optimizer.step()
            losses.append(loss.detach().cpu())
        assert torch.equal(*losses)
    for eager_tensor, graphed_tensor in zip(
        eager.state_dict().values(), graphed.state_dict().values(), strict=True
    ):
        assert torch.equal(eager_tensor.cpu(), graphed_tensor.cpu())
    # The steps replayed: two forward graphs, two backward graphs.
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as trace:
        spec.loss(graphed, batch).backward()
    replays = [event.name for event in trace.events() if event.name.endswith("Graph.replay")]
    assert len(replays) == 4, replays
