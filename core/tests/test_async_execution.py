"""Kernels run asynchronously on their stream, as on real accelerators.

`torch.foo._sleep(ms)` queues a simulated kernel of that duration, so the
work launched after it is still pending when the launching call returns;
the tests observe that through stream queries and results, never timings.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from stream_bug_corpus import BUGS
from torch.profiler import ProfilerActivity, profile

import torchplug.runtime

LONG_MS = 200


def _operands(device: str) -> tuple[torch.Tensor, torch.Tensor]:
    a = torch.randn(512, 512)
    b = torch.randn(512, 512)
    return a.to(device), b.to(device)


def test_a_launch_returns_before_its_kernel_ran(device: str) -> None:
    a, b = _operands(device)
    torch.foo._sleep(LONG_MS)
    product = a @ b
    assert not torch.foo.current_stream().query()  # still queued behind the sleep
    torch.foo.synchronize()
    assert torch.foo.current_stream().query()
    assert torch.equal(product.cpu(), a.cpu() @ b.cpu())


@pytest.mark.parametrize(
    "read",
    [
        lambda t: t.cpu(),
        lambda t: torch.tensor(t.tolist()),
        lambda t: torch.tensor(t.sum().item()),
        lambda t: torch.tensor(float(re.search(r"tensor\(([-+.\de]+)", repr(t.sum()))[1])),
    ],
    ids=["cpu", "tolist", "item", "repr"],
)
def test_host_reads_wait_for_the_kernels(device: str, read) -> None:
    a, b = _operands(device)
    torch.foo._sleep(LONG_MS)
    result = (a + b) * 2
    expected = read((a.cpu() + b.cpu()) * 2)
    torch.testing.assert_close(read(result), expected)


def test_a_non_blocking_copy_to_the_host_does_not_wait(device: str) -> None:
    a, b = _operands(device)
    host = torch.empty(512, 512).pin_memory()
    torch.foo._sleep(LONG_MS)
    host.copy_(a * b, non_blocking=True)
    assert not torch.foo.current_stream().query()
    torch.foo.current_stream().synchronize()
    assert torch.equal(host, a.cpu() * b.cpu())


def test_events_order_work_across_streams(device: str) -> None:
    a, b = _operands(device)
    side = torch.foo.Stream()
    side.wait_stream(torch.foo.current_stream())
    with torch.foo.stream(side):
        torch.foo._sleep(LONG_MS)
        product = a @ b
        done = torch.foo.Event()
        done.record()
    torch.foo.current_stream().wait_event(done)
    total = product.sum()
    assert torch.equal(total.cpu(), (a.cpu() @ b.cpu()).sum())


def test_a_missing_wait_reads_unfinished_work(device: str) -> None:
    """The bug real hardware shows: without the wait, the default stream reads
    the side stream's output before it is written."""
    ones = torch.ones(1024, 1024, device=device)
    side = torch.foo.Stream()
    side.wait_stream(torch.foo.current_stream())
    with torch.foo.stream(side):
        torch.foo._sleep(LONG_MS)
        doubled = ones * 2
    early = doubled.sum().item()  # no wait_stream
    torch.foo.synchronize()
    assert early != 2 * 1024 * 1024
    assert doubled.sum().item() == 2 * 1024 * 1024


def test_memory_a_queued_kernel_uses_is_freed_at_once(device: str) -> None:
    """As with CUDA's stream-ordered allocator: the program's free counts at
    once, and the memory is reused only in stream order."""
    a = torch.full((1024, 1024), 3.0, device=device)
    torch.foo.synchronize()
    before = torch.foo.memory_allocated()
    torch.foo._sleep(LONG_MS)
    tripled = a * 3
    del a
    assert torch.foo.memory_allocated() == before - 4 * 1024 * 1024 + tripled.nbytes
    reused = torch.full((1024, 1024), 5.0, device=device)  # same stream: after the product
    assert tripled.sum().item() == 9.0 * 1024 * 1024
    assert reused.sum().item() == 5.0 * 1024 * 1024
    torch.foo.empty_cache()  # waits for queued kernels before giving memory back


def test_a_queued_kernels_temporaries_reuse_no_memory_freed_after_its_launch(device: str) -> None:
    """A CPU kernel queued on the stream may allocate (softmax's backward
    makes a contiguous copy of a transposed gradient). Memory the program
    freed after the launch is still read by kernels queued between the two;
    the temporary must not take it."""
    output = torch.softmax(torch.randn(128, 128), -1)
    grad = torch.randn(128, 128).t()
    expected = torch._softmax_backward_data(grad, output, -1, torch.float32)
    b_on_cpu = torch.rand(128, 128)
    on_device = [tensor.to(device) for tensor in (output, grad, b_on_cpu)]
    torch.foo.synchronize()
    torch.foo._sleep(LONG_MS)
    result = torch._softmax_backward_data(on_device[1], on_device[0], -1, torch.float32)
    doubled = on_device[2] * 2  # queued after the backward, reads b
    del on_device[2]  # b's memory is free for work queued from now on
    assert torch.equal(doubled.cpu(), b_on_cpu * 2)
    assert torch.equal(result.cpu(), expected)


@pytest.mark.parametrize(("record", "expected"), [(False, 10.0), (True, 6.0)])
def test_record_stream_decides_when_memory_is_reused(
    device: str, record: bool, expected: float
) -> None:
    """Without record_stream the default stream reuses the memory at once and
    the side stream reads the new values, as on real hardware."""
    a = torch.full((1024, 1024), 3.0, device=device)
    side = torch.foo.Stream()
    side.wait_stream(torch.foo.current_stream())
    with torch.foo.stream(side):
        torch.foo._sleep(LONG_MS)
        doubled = a * 2
    if record:
        a.record_stream(side)
    del a
    torch.full((1024, 1024), 5.0, device=device)
    torch.foo.synchronize()
    assert doubled[0, 0].item() == expected


def test_a_kernel_error_surfaces_at_the_next_synchronizing_call(device: str) -> None:
    a, b = _operands(device)
    torch.foo._sleep(LONG_MS)
    torchplug.runtime.inject_kernel_failures(device)
    a @ b  # returns: the kernel has not run yet
    with pytest.raises(RuntimeError) as caught:
        torch.foo.synchronize()
    message = str(caught.value)
    assert "aten::mm" in message
    assert "TORCHPLUG_LAUNCH_BLOCKING=1" in message
    assert torch.equal((a @ b).cpu(), a.cpu() @ b.cpu())  # the device keeps working


def test_sync_debug_mode_flags_host_waits_not_launches(device: str) -> None:
    a, b = _operands(device)
    torch.foo.set_sync_debug_mode("error")
    try:
        product = a @ b
        with pytest.raises(RuntimeError, match="synchroniz"):
            product.sum().item()
    finally:
        torch.foo.set_sync_debug_mode(0)


def _pointwise(x: torch.Tensor) -> torch.Tensor:
    return (x * 2 + 1).relu().sin()


def test_a_compiled_kernel_is_queued_and_gives_the_cpus_values(device: str) -> None:
    pointwise = _pointwise
    x = torch.randn(256, 256)
    expected = torch.compile(pointwise)(x)
    compiled = torch.compile(pointwise)
    on_device = x.to(device)
    compiled(on_device)  # compiles
    torch.foo.synchronize()
    torch.foo._sleep(LONG_MS)
    result = compiled(on_device)
    # It returned with its kernel queued behind the sleep.
    assert not torch.foo.current_stream().query()
    assert torch.equal(result.cpu(), expected)


def test_a_failing_compiled_kernel_is_reported_at_the_next_synchronizing_call(device: str) -> None:
    compiled = torch.compile(_pointwise)
    on_device = torch.randn(256, 256, device=device)
    compiled(on_device)  # compiles
    torch.foo.synchronize()
    torch.foo._sleep(LONG_MS)  # the kernel queues behind it
    torchplug.runtime.inject_kernel_failures(device)
    compiled(on_device)  # returns: the kernel has not run yet
    with pytest.raises(RuntimeError) as caught:
        torch.foo.synchronize()
    message = str(caught.value)
    assert "cpp_fused" in message
    assert "TORCHPLUG_LAUNCH_BLOCKING=1" in message
    assert torch.equal(compiled(on_device).cpu(), torch.compile(_pointwise)(on_device.cpu()))


# Operators without a kernel of the device run the CPU's kernel over the
# device memory (the fallback; hpu's every operator), and a few run it as
# their device kernel (host kernels): queued like native kernels, sized by
# their meta kernels.
QUEUED_ON_HOST = {
    "fallback": lambda x: torch.erfinv(x.clamp(-0.9, 0.9)),
    "fallback-in-place": lambda x: torch.nn.functional.hardswish(x.clone(), inplace=True),
    "fallback-two-results": lambda x: torch.topk(x, 5, dim=1),
    "fallback-list-result": lambda x: torch.ops.aten._histogramdd_bin_edges(x[:, :2], [3, 5]),
    "fallback-index-from-host": lambda x: x[:, torch.tensor([3, 1, 4, 1, 5])],
    "host-kernel": lambda x: torch.nn.functional.gelu(x),
    # Its CPU out= kernel resizes the 0-d output on the way (to the elementwise loss's shape).
    "host-kernel-resizing-its-output": lambda x: torch.nn.functional.mse_loss(x, x.flip(0)),
    "host-kernel-convolution": lambda x: torch.nn.functional.conv2d(
        x.view(4, 4, 64, 64), torch.ones(8, 4, 3, 3, device=x.device)
    ),
}


def _as_tuple(result) -> tuple[torch.Tensor, ...]:
    return tuple(result) if isinstance(result, tuple | list) else (result,)


@pytest.mark.parametrize("operation", QUEUED_ON_HOST.values(), ids=QUEUED_ON_HOST.keys())
def test_a_cpu_kernel_on_device_memory_is_queued_and_gives_the_cpus_values(
    device: str, operation
) -> None:
    x = torch.randn(256, 256)
    expected = _as_tuple(operation(x))
    on_device = x.to(device)
    torch.foo._sleep(1)  # keeps the stream busy: a small call on an idle one runs at once
    operation(on_device)  # runs at once, and the shapes of its results are learned
    torch.foo.synchronize()
    torch.foo._sleep(LONG_MS)
    result = _as_tuple(operation(on_device))
    assert not torch.foo.current_stream().query()  # returned with its kernel queued
    assert [r.device.type for r in result] == [device] * len(expected)
    for got, want in zip(result, expected, strict=True):
        assert torch.equal(got.cpu(), want)
        assert got.stride() == want.stride()


def _draws(device: str, seeds: list[int], busy: bool = False) -> list[torch.Tensor]:
    """Three random operators per seed, each seeded as the program says;
    `busy`: behind a long kernel each time."""
    results = []
    for seed in seeds:
        torch.manual_seed(seed)  # waits for the draws queued before it
        if busy:
            torch.foo._sleep(LONG_MS)
        x = torch.empty(64, 64, device=device)
        results += [x.bernoulli_(0.3).clone(), x.uniform_(), torch.rand_like(x).normal_(2.0, 0.5)]
    return results


def test_random_operators_queue_and_draw_the_cpus_numbers_in_program_order(device: str) -> None:
    expected = _draws("cpu", [1, 2])
    _draws(device, [0])  # the first calls of each signature run at once and are learned
    got = _draws(device, [1, 2], busy=True)
    assert not torch.foo.current_stream().query()  # the last ones returned, queued
    for drawn, want in zip(got, expected, strict=True):
        assert torch.equal(drawn.cpu(), want)


def test_a_random_operator_on_another_stream_waits_for_the_queued_draws(device: str) -> None:
    torch.manual_seed(3)
    want = [torch.empty(64, 64).bernoulli_(0.3) for _ in range(2)]
    _draws(device, [0])
    torch.manual_seed(3)
    torchplug.runtime.reset_host_synchronizations(device)
    torch.foo._sleep(LONG_MS)
    first = torch.empty(64, 64, device=device).bernoulli_(0.3)
    with torch.foo.stream(torch.foo.Stream()):
        second = torch.empty(64, 64, device=device).bernoulli_(0.3)  # runs now, after the first
        torch.foo.current_stream().synchronize()
    assert torchplug.runtime.host_synchronizations(device).implicit == 1
    assert torch.equal(first.cpu(), want[0])
    assert torch.equal(second.cpu(), want[1])


def test_reading_the_generator_state_waits_for_the_queued_draws(device: str) -> None:
    _draws(device, [0])
    torch.manual_seed(4)
    torch.foo._sleep(LONG_MS)
    torch.empty(64, 64, device=device).bernoulli_(0.3)
    state = torch.foo.get_rng_state()  # after the queued draw
    after = torch.empty(64, 64, device=device).bernoulli_(0.3)
    torch.foo.set_rng_state(state)
    assert torch.equal(torch.empty(64, 64, device=device).bernoulli_(0.3).cpu(), after.cpu())


def test_a_call_with_a_sparse_result_runs_on_the_host_every_time(device: str) -> None:
    x = torch.arange(24.0).view(4, 6)
    for _ in range(2):
        torch.foo._sleep(LONG_MS)
        sparse = x.to(device).to_sparse_csr()  # nothing to learn: a sparse result has no strides
        assert torch.equal(sparse.to_dense().cpu(), x)


def test_a_queued_host_call_raises_its_shape_errors_at_the_launch(device: str) -> None:
    x = torch.randn(256, 256, device=device)
    torch.foo._sleep(LONG_MS)
    with pytest.raises(RuntimeError, match="must match the size of tensor"):
        torch.ops.aten.hardswish_backward(x, torch.randn(3, device=device))
    torch.foo.synchronize()


def test_a_queued_host_calls_data_error_surfaces_at_the_next_synchronizing_call(
    device: str,
) -> None:
    x = torch.randn(256, 256, device=device)
    index = torch.zeros(256, 64, dtype=torch.int64, device=device)
    torch.gather(x, 1, index)  # runs at once: the shapes of its results are learned
    index.fill_(999)  # out of range
    torch.foo._sleep(LONG_MS)
    torch.gather(x, 1, index)  # returns: its kernel is queued
    with pytest.raises(RuntimeError) as caught:
        torch.foo.synchronize()
    assert "out of bounds" in str(caught.value)
    assert "TORCHPLUG_LAUNCH_BLOCKING=1" in str(caught.value)


def test_host_synchronizations_counts_each_wait_by_its_cause(device: str) -> None:
    a, b = _operands(device)
    pinned = torch.ones(512, 512).pin_memory()
    torch.foo.synchronize()
    torchplug.runtime.reset_host_synchronizations(device)
    torch.foo._sleep(LONG_MS)
    product = (a @ b).add_(pinned.to(device, non_blocking=True))  # queued: no wait
    assert torchplug.runtime.host_synchronizations(device) == (0, 0)
    # The first call of a signature runs on the host, after the queued kernels
    # (the shapes of its results are learned from it).
    torch.special.bessel_j0(product[:3, :101])
    assert torchplug.runtime.host_synchronizations(device) == (0, 1)
    product.nonzero()  # its size depends on the data: the program's choice, as on CUDA
    product.sum().item()  # the program reads a result
    product.cpu()
    assert torchplug.runtime.host_synchronizations(device) == (3, 1)
    assert torchplug.runtime.host_synchronizations("hpu") == (0, 0)  # per device type
    torchplug.runtime.reset_host_synchronizations(device)
    assert torchplug.runtime.host_synchronizations(device) == (0, 0)


@pytest.mark.parametrize(
    ("operation", "why"),
    [
        (lambda t: t.bernoulli_(0.5), "aten::bernoulli_ on foo:0: it runs on the host and waited"),
        (
            lambda t: t.nonzero(),
            "aten::nonzero on foo:0: the size of its result depends on the data",
        ),
    ],
    ids=["runs-on-host", "data-dependent"],
)
def test_sync_debug_mode_names_an_operator_that_waited_for_queued_work(
    device: str, operation, why: str
) -> None:
    a, b = _operands(device)
    torch.foo._sleep(LONG_MS)
    product = a @ b
    torch.foo.set_sync_debug_mode("warn")
    try:
        with pytest.warns(UserWarning, match=re.escape(why)):
            operation(product)
    finally:
        torch.foo.set_sync_debug_mode("default")


def test_profiler_shows_kernels_of_two_streams_overlapping(device: str, tmp_path: Path) -> None:
    big = torch.randn(1024, 1024, device=device)
    side = torch.foo.Stream()
    torch.foo.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        with torch.foo.stream(side):
            for _ in range(3):
                big @ big
        for _ in range(3):
            big @ big
        torch.foo.synchronize()
    trace = tmp_path / "trace.json"
    prof.export_chrome_trace(str(trace))
    kernels = [e for e in json.loads(trace.read_text())["traceEvents"] if e.get("cat") == "kernel"]
    by_stream: dict[object, list[tuple[float, float]]] = {}
    for kernel in kernels:
        by_stream.setdefault(kernel["tid"], []).append((kernel["ts"], kernel["ts"] + kernel["dur"]))
    assert len(by_stream) == 2
    first, second = by_stream.values()
    assert any(s1 < e2 and s2 < e1 for s1, e1 in first for s2, e2 in second)


def _child(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=300,
    )


def test_launch_blocking_runs_kernels_at_launch() -> None:
    child = _child(
        """
        import torch, torchplug.runtime
        assert torchplug.runtime.launch_blocking()
        a = torch.randn(512, 512, device="foo")
        torch.foo._sleep(200)
        a @ a
        assert torch.foo.current_stream().query()  # ran, after the sleep, before returning
        torchplug.runtime.inject_kernel_failures("foo")
        try:
            a @ a
        except RuntimeError as error:
            assert "aten::mm" in str(error) and "injected" in str(error), error
        else:
            raise AssertionError("the failing launch returned")
        """,
        TORCHPLUG_LAUNCH_BLOCKING="1",
    )
    assert child.returncode == 0, child.stderr


def test_strict_memory_mode_runs_kernels_at_launch() -> None:
    child = _child(
        """
        import torch, torchplug.runtime
        assert torchplug.runtime.launch_blocking()
        a = torch.randn(256, 256, device="foo")
        assert torch.equal((a @ a).cpu(), a.cpu() @ a.cpu())
        """,
        TORCHPLUG_STRICT_MEMORY="1",
    )
    assert child.returncode == 0, child.stderr


def test_launches_are_asynchronous_by_default() -> None:
    assert not torchplug.runtime.launch_blocking() or os.environ.get("TORCHPLUG_LAUNCH_BLOCKING")


MISTAKE_CHILD = """
import sys
import torch
sys.path.insert(0, {tests!r})
import stream_bug_corpus
from stream_bug_corpus import BUGS

stream_bug_corpus.SLOW_MS = 200  # a wide window, whatever the machine's load
bug = next(b for b in BUGS if b.name == {name!r})


def value(result):
    return result.detach().cpu().clone() if isinstance(result, torch.Tensor) else torch.tensor(result)


try:
    got = value(bug.buggy("foo"))
    torch.foo.synchronize()
except RuntimeError as error:
    print("error:", error)
else:
    expected = value(bug.fixed("foo"))
    print("wrong" if not torch.equal(got, expected) else "right")
"""


@pytest.mark.parametrize("name", [bug.name for bug in BUGS])
def test_each_corpus_mistake_goes_wrong_without_the_sanitizer(name: str) -> None:
    """Run first in a fresh process (no earlier run left the right values in
    the memory it reads), the buggy program computes a wrong result."""
    child = _child(MISTAKE_CHILD.format(tests=str(Path(__file__).parent), name=name))
    assert child.returncode == 0, child.stderr
    outcome = child.stdout.strip().splitlines()[-1]
    assert outcome == "wrong" or outcome.startswith("error:"), child.stdout
