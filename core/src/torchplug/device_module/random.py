"""Random number generation: the per-device default generators the core
keeps (``torch.cuda.random``)."""

from __future__ import annotations

from typing import Any

import torch

from torchplug.device_module._device import BoundDevice

# Seeds are 64-bit: larger and negative ones wrap, as torch.cuda.manual_seed's.
_SEED_MASK = 0xFFFF_FFFF_FFFF_FFFF


def functions(bound: BoundDevice) -> dict[str, Any]:
    """The random-number part of ``torch.<name>``, by attribute name."""
    key = bound.key

    def manual_seed(seed: int) -> None:
        bound.native().manual_seed(key, bound.current_device(), int(seed) & _SEED_MASK)

    def manual_seed_all(seed: int) -> None:
        for index in range(bound.device_count()):
            bound.native().manual_seed(key, index, int(seed) & _SEED_MASK)

    def seed() -> None:
        bound.native().seed(key, bound.current_device())

    def seed_all() -> None:
        first = bound.native().seed(key, 0)
        for index in range(1, bound.device_count()):
            bound.native().manual_seed(key, index, first)

    def initial_seed() -> int:
        return bound.native().initial_seed(key, bound.current_device())

    def get_rng_state(device: Any = None) -> torch.Tensor:
        state = bound.native().get_rng_state(key, bound.index(device))
        return torch.frombuffer(bytearray(state), dtype=torch.uint8)

    def set_rng_state(new_state: torch.Tensor, device: Any = None) -> None:
        data = new_state.detach().cpu().contiguous().to(torch.uint8).numpy().tobytes()
        bound.native().set_rng_state(key, bound.index(device), data)

    def get_rng_state_all() -> list[torch.Tensor]:
        return [get_rng_state(index) for index in range(bound.device_count())]

    def set_rng_state_all(new_states: list[torch.Tensor]) -> None:
        for index, state in enumerate(new_states):
            set_rng_state(state, index)

    # Called by torch around RNG-sensitive code on HPU; device RNG lives on
    # the host here, so there is no context to switch.
    def set_rng_ctx(philox: str) -> None:
        del philox

    def unset_rng_ctx(philox: str) -> None:
        del philox

    return {
        "manual_seed": manual_seed,
        "manual_seed_all": manual_seed_all,
        "seed": seed,
        "seed_all": seed_all,
        "initial_seed": initial_seed,
        "get_rng_state": get_rng_state,
        "set_rng_state": set_rng_state,
        "get_rng_state_all": get_rng_state_all,
        "set_rng_state_all": set_rng_state_all,
        "set_rng_ctx": set_rng_ctx,
        "unset_rng_ctx": unset_rng_ctx,
    }
