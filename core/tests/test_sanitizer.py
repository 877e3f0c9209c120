"""The stream sanitizer reports every mistake of the bug corpus on every torchplug
device, passes their corrected versions and correct training code, and turns on
with TORCHPLUG_SANITIZER=1."""

from __future__ import annotations

import os
import re

import pytest
import torch
from stream_bug_corpus import BUGS, Bug

from device_matrix import CUDA_BUILD_HPU_AUTOGRAD, active_devices, rerun_as_owner, with_backward
from torchplug import sanitizer
from torchplug_testing import child
from torchplug_testing.plugin import SUITE_DIR

DEVICES = active_devices()


def corpus_params() -> list:
    params = []
    for device in DEVICES:
        for bug in BUGS:
            marks = [CUDA_BUILD_HPU_AUTOGRAD] if bug.backward and device == "hpu" else []
            params.append(pytest.param(device, bug, marks=marks, id=f"{device}-{bug.name}"))
    return params


def streams_named(message: str) -> set[str]:
    return set(re.findall(r"\w+:\d+ stream \d+|the host", message))


@pytest.mark.parametrize(("device", "bug"), corpus_params())
def test_buggy_program_is_reported(device: str, bug: Bug) -> None:
    with sanitizer.enabled(), pytest.raises(sanitizer.StreamRaceError) as raised:
        bug.buggy(device)
    message = str(raised.value)
    for expected in bug.expected:
        assert expected in message, message
    assert len(streams_named(message)) == 2, message
    # Both launches' stacks point into the corpus program.
    assert message.count("stream_bug_corpus.py") >= 2, message
    assert "Fix to consider:" in message


@pytest.mark.parametrize(("device", "bug"), corpus_params())
def test_fixed_program_runs_clean(device: str, bug: Bug) -> None:
    with sanitizer.enabled():
        bug.fixed(device)


def test_npu_in_its_own_process() -> None:
    rerun_as_owner(__file__, "npu")


def test_enable_and_disable(device: str) -> None:
    assert not sanitizer.is_enabled()
    sanitizer.enable()
    try:
        assert sanitizer.is_enabled()
        sanitizer.enable()  # again: harmless
        with pytest.raises(sanitizer.StreamRaceError):
            BUGS[0].buggy(device)
    finally:
        sanitizer.disable()
    assert not sanitizer.is_enabled()
    BUGS[0].buggy(device)  # unchecked now


def test_context_manager_nests_and_ends(device: str) -> None:
    with sanitizer.enabled():
        with sanitizer.enabled():
            assert sanitizer.is_enabled()
        assert sanitizer.is_enabled()
    assert not sanitizer.is_enabled()


def test_same_stream_and_host_synchronized_use_is_clean(device: str) -> None:
    m = getattr(torch, device)
    with sanitizer.enabled():
        x = torch.ones(8, device=device)
        x.add_(1)
        host = x.to("cpu", non_blocking=True)
        done = m.Event()
        done.record()
        done.synchronize()
        assert host.sum().item() == 16
        assert x.sum().item() == 16  # item() waits for the stream


def test_copy_between_devices_is_ordered_on_both(device: str) -> None:
    with sanitizer.enabled():
        x = torch.randn(64, device=f"{device}:0")
        y = x.to(f"{device}:1")
        doubled = y * 2  # device 1's current stream: after the copy
        x.add_(1)  # device 0's current stream: after the copy read x
        back = doubled.to(f"{device}:0")
        assert back.device.index == 0


def mlp_training(device: str) -> None:
    """Default stream for compute, a side stream for the next batch's upload."""
    m = getattr(torch, device)
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4)
    ).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    copy_stream = m.Stream()
    batches = [(torch.randn(16, 32).pin_memory(), torch.randint(0, 4, (16,))) for _ in range(4)]

    def upload(batch: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        with m.stream(copy_stream):
            return batch[0].to(device, non_blocking=True), batch[1].to(device)

    upcoming = upload(batches[0])
    for step in range(len(batches)):
        m.current_stream().wait_stream(copy_stream)
        inputs, targets = upcoming
        for tensor in upcoming:
            tensor.record_stream(m.current_stream())
        if step + 1 < len(batches):
            upcoming = upload(batches[step + 1])
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(inputs), targets)
        loss.backward()
        optimizer.step()
    assert torch.isfinite(loss).item()


def transformer_block(device: str) -> None:
    torch.manual_seed(0)
    block = torch.nn.TransformerEncoderLayer(
        d_model=32, nhead=4, dim_feedforward=64, dropout=0.1, batch_first=True
    ).to(device)
    optimizer = torch.optim.SGD(block.parameters(), lr=0.01)
    tokens = torch.randn(2, 8, 32, device=device)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(8, device=device)
    for _ in range(2):
        optimizer.zero_grad()
        block(tokens, src_mask=mask, is_causal=True).pow(2).mean().backward()
        optimizer.step()


@pytest.mark.parametrize("device", with_backward(DEVICES))
@pytest.mark.parametrize("program", [mlp_training, transformer_block], ids=lambda p: p.__name__)
def test_training_runs_clean(device: str, program) -> None:
    with sanitizer.enabled():
        program(device)


@pytest.mark.parametrize("device", with_backward(DEVICES))
@pytest.mark.parametrize("threads", [False, True], ids=["calling-thread", "device-threads"])
def test_backward_writes_are_seen(device: str, threads: bool) -> None:
    """Autograd's backward ops are checked, also when autograd runs them on its
    own device threads: the gradient is consumed on a side stream that never
    waited for the backward pass."""
    m = getattr(torch, device)
    weight = torch.randn(64, 64, device=device, requires_grad=True)
    side = m.Stream()
    with torch.autograd.set_multithreading_enabled(threads), sanitizer.enabled():
        side.wait_stream(m.current_stream())
        (weight * 2).sum().backward()
        with m.stream(side), pytest.raises(sanitizer.StreamRaceError) as raised:
            weight.grad.mul(2)
    message = str(raised.value)
    assert f"(read, {device}:0 stream {side.stream_id})" in message, message
    assert f"(write, {device}:0 stream 0)" in message, message


def test_environment_variable_turns_it_on(device: str) -> None:
    result = child.run_python(
        f"""
        import sys
        import torch
        from torchplug import settings, sanitizer
        assert sanitizer.is_enabled()
        assert settings.current().as_dict()["TORCHPLUG_SANITIZER"] is True
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        from stream_bug_corpus import BUGS
        try:
            BUGS[0].buggy({device!r})
        except sanitizer.StreamRaceError:
            pass
        else:
            raise SystemExit("not reported")
        """,
        child.child_environment(drop=("TORCHPLUG_",), TORCHPLUG_SANITIZER="1"),
    )
    assert result.returncode == 0, result.stderr


def test_import_torch_does_not_load_the_sanitizer() -> None:
    result = child.run_python(
        """
        import sys
        import torch
        torch.ones(1, device="foo")
        assert "torchplug.sanitizer" not in sys.modules
        """,
        child.child_environment(drop=("TORCHPLUG_",)),
    )
    assert result.returncode == 0, result.stderr


def test_conformance_slice_runs_clean(device: str, tmp_path) -> None:
    """The suite's streams, copies, views, memory, nn, optimizer and autograd
    tests, all under the sanitizer."""
    names = ("streams.py", "copies.py", "views.py", "memory.py", "nn.py", "optim.py", "autograd.py")
    modules = [str(SUITE_DIR / name) for name in names]
    completed = child.run_pytest(
        [
            *child.isolated_config(tmp_path),
            "--device",
            device,
            "-q",
            "-p",
            "no:xdist",
            *modules,
        ],
        child.child_environment(drop=("TORCHPLUG_",), TORCHPLUG_SANITIZER="1"),
        cwd=tmp_path,
        timeout=300,
    )
    report = completed.stdout[-4000:] + completed.stderr[-2000:]
    assert completed.returncode == 0, f"({completed.status})\n{report}"
    assert " passed" in completed.stdout, report
    assert "StreamRaceError" not in completed.output, report
