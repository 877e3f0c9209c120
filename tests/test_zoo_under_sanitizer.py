"""Real models train with the stream sanitizer on, and it reports nothing.

Models from transformers and torchvision (the zoo's tiny configs) run their
training steps on the default stream of foo; every operator of forward,
backward and AdamW is checked against the stream order (backward's
autograd threads included). A report would be a race in torchplug itself.
"""

import pytest
import torch

from torchplug import sanitizer
from torchplug_bench.zoo import MODELS_BY_NAME, available, seed_everything, to_device
from torchplug_testing.fixtures import require_device

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def device() -> str:
    return require_device(
        "foo", "the 'foo' backend did not autoload; run the tests in the uv workspace"
    )


MODELS = ("gpt2", "bert", "llama", "resnet18")


@pytest.mark.parametrize("name", MODELS)
def test_trains_clean_under_the_sanitizer(device: str, name: str) -> None:
    spec = MODELS_BY_NAME[name]
    if not available(spec):
        pytest.skip(f"{spec.library} is not installed")
    seed_everything(0)
    model = spec.build().to(device)
    batch = to_device(spec.batch(), device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    with sanitizer.enabled():
        for _ in range(2):
            optimizer.zero_grad()
            loss = spec.loss(model, batch)
            loss.backward()
            optimizer.step()
        assert torch.isfinite(loss).item()
        # Still watching: a side stream reading new work without a wait is reported.
        scaled = loss * 2
        with torch.foo.stream(torch.foo.Stream()), pytest.raises(sanitizer.StreamRaceError):
            scaled + 1
