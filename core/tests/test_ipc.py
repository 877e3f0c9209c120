"""Device tensors cross process boundaries as CUDA tensors do: shared, not copied."""

from __future__ import annotations

import multiprocessing.synchronize
import os
import subprocess
import sys

import pytest
import torch
import torch.multiprocessing as mp

from device_matrix import active_devices

DEVICES = active_devices()
TIMEOUT = 120  # spawned children import torch; generous on a loaded 2-core machine


def produce(device: str, queue: mp.Queue, written: multiprocessing.synchronize.Event) -> None:
    shared = torch.arange(6.0, device=f"{device}:1").view(2, 3)[:, 1:]
    queue.put(shared)
    written.wait(TIMEOUT)
    queue.put(shared.sum().item())  # the parent's write, seen through the same pages


@pytest.mark.parametrize("device", DEVICES)
def test_queue_delivers_a_device_tensor_that_shares_memory(device: str) -> None:
    context = mp.get_context("spawn")
    queue, written = context.Queue(), context.Event()
    child = context.Process(target=produce, args=(device, queue, written))
    child.start()
    try:
        received = queue.get(timeout=TIMEOUT)
        assert received.device == torch.device(device, 1)
        assert received.stride() == (3, 1)
        torch.testing.assert_close(received.cpu(), torch.tensor([[1.0, 2.0], [4.0, 5.0]]))
        received.fill_(1.0)
        written.set()
        assert queue.get(timeout=TIMEOUT) == 4.0
    finally:
        child.join(TIMEOUT)
        if child.is_alive():
            child.kill()
    assert child.exitcode == 0


def square_on(device: str, value: float) -> torch.Tensor:
    return torch.full((3,), value, device=device) ** 2


def test_pool_returns_device_tensors() -> None:
    with mp.get_context("spawn").Pool(2) as pool:
        results = pool.starmap(square_on, [(DEVICES[0], 2.0), (DEVICES[0], 3.0)], chunksize=1)
    assert [r.device.type for r in results] == [DEVICES[0]] * 2
    assert [r.cpu().tolist() for r in results] == [[4.0] * 3, [9.0] * 3]


class DeviceDataset(torch.utils.data.Dataset):
    def __init__(self, device: str) -> None:
        self.device = device

    def __len__(self) -> int:
        return 4

    def __getitem__(self, index: int) -> torch.Tensor:
        return torch.full((2,), float(index), device=self.device)


def test_dataloader_workers_return_device_tensors() -> None:
    loader = torch.utils.data.DataLoader(
        DeviceDataset(DEVICES[0]), batch_size=2, num_workers=2, multiprocessing_context="spawn"
    )
    batches = [batch.cpu() for batch in loader]
    assert torch.equal(
        torch.cat(batches), torch.tensor([[0.0] * 2, [1.0] * 2, [2.0] * 2, [3.0] * 2])
    )


def test_a_parameter_stays_a_parameter() -> None:
    context = mp.get_context("spawn")
    with context.Pool(1) as pool:
        parameter = torch.nn.Parameter(torch.ones(2, device=DEVICES[0]))
        echoed = pool.apply(_echo, (parameter,))
    assert isinstance(echoed, torch.nn.Parameter)
    assert echoed.requires_grad


def _echo(value: torch.Tensor) -> torch.Tensor:
    return value


def test_a_storage_is_opened_once_per_process_and_shares_the_senders_memory() -> None:
    from multiprocessing.reduction import ForkingPickler

    device = DEVICES[0]
    sent = torch.arange(4.0, device=device)
    whole = ForkingPickler.loads(ForkingPickler.dumps(sent))
    view = ForkingPickler.loads(ForkingPickler.dumps(sent[1:]))
    assert whole.untyped_storage().data_ptr() == view.untyped_storage().data_ptr()
    assert whole.untyped_storage().data_ptr() != sent.untyped_storage().data_ptr()
    view.fill_(5.0)
    assert sent.cpu().tolist() == [0.0, 5.0, 5.0, 5.0]


STRICT_SHARING = """
import torch
import torch.multiprocessing as mp

def double(device, queue, done):
    received = queue.get()
    received.mul_(2)
    torch.accelerator.synchronize()
    done.set()

if __name__ == "__main__":
    context = mp.get_context("spawn")
    queue, done = context.Queue(), context.Event()
    child = context.Process(target=double, args=("DEVICE", queue, done))
    child.start()
    tensor = torch.arange(4.0, device="DEVICE")
    queue.put(tensor)
    assert done.wait(120)
    child.join(120)
    print("exit", child.exitcode, tensor.cpu().tolist(), flush=True)
"""


def test_shared_memory_is_protected_in_strict_mode_in_both_processes(tmp_path) -> None:
    script = tmp_path / "strict_sharing.py"
    script.write_text(STRICT_SHARING.replace("DEVICE", DEVICES[0]))
    result = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TORCHPLUG_STRICT_MEMORY": "1"},
        check=False,
    )
    assert "strict mode" not in result.stderr, result.stderr[-2000:]
    assert result.returncode == 0, result.stderr[-2000:]
    assert "exit 0 [0.0, 2.0, 4.0, 6.0]" in result.stdout
