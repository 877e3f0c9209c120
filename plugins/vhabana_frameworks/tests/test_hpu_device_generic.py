"""Device-generic calls with only the hpu backend active (and beside foo), in fresh interpreters.

PyPI's torch is a CUDA build: there torch refuses HPU as the accelerator
("Cannot have both HPU and cuda."), so torchplug answers what it can for hpu
and explains the rest (docs/hpu.md). Each case prints one line, ``ok: <value>``
or ``<ExceptionType>: <message>``, and states what that line must contain.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
import torch

from torchplug_testing import child

pytestmark = pytest.mark.skipif(
    not torch.backends.cuda.is_built(),
    reason="the limits tested here are those of a torch built with CUDA (PyPI's)",
)

HPU_ALONE = {"TORCHPLUG_DISABLE": "foo,npu"}
BESIDE_FOO = {"TORCHPLUG_DISABLE": "npu", "TORCHPLUG_PRIVATEUSE1": "foo"}
# What torch raises where torchplug cannot reach: torch's C++ asks for the accelerator.
TORCH_LIMIT = "RuntimeError: Cannot have both HPU and cuda."
UNREACHABLE = "AcceleratorUnreachableError: torch.accelerator."


@dataclass(frozen=True)
class Call:
    id: str
    code: str  # evaluates to the value printed, or raises
    expected: str  # what the printed line starts with
    also: tuple[str, ...] = ()  # what it must contain besides
    setup: str = ""


# One child per environment runs every call, each in a namespace of its own:
# a fresh interpreter per call would cost the suite minutes of `import torch`.
CHILD = """
import json, logging, warnings
import torch
logging.disable(logging.WARNING)
warnings.simplefilter("ignore")
for ident, setup, code in json.loads(CALLS):
    namespace = {"torch": torch, "warnings": warnings}
    try:
        exec(setup, namespace)
        line = "ok: " + str(eval(code, namespace))
    except Exception as error:
        line = f"{type(error).__name__}: {error}"
    print(json.dumps([ident, line]), flush=True)
"""


def run(calls: list[Call], env: dict[str, str]) -> dict[str, str]:
    """What each call printed, by id, from one child with ``env``."""
    environment = child.child_environment(drop=("TORCHPLUG_", "TORCH_DEVICE_BACKEND"), **env)
    script = json.dumps([(call.id, call.setup, call.code) for call in calls])
    result = child.run_python(f"CALLS = {script!r}\n" + CHILD, environment, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    lines = (json.loads(line) for line in result.stdout.splitlines() if line.startswith("["))
    return dict(lines)


def check(call: Call, printed: dict[str, str]) -> None:
    line = printed[call.id]
    assert line.startswith(call.expected), line
    for part in call.also:
        assert part in line, line


STREAM = "s = torch.hpu.current_stream()"
LOADER = (
    "data = torch.utils.data.TensorDataset(torch.randn(8, 2))\n"
    "def batches(**kw):\n"
    "    with warnings.catch_warnings(record=True) as caught:\n"
    "        warnings.simplefilter('always')\n"
    "        pinned = [b.is_pinned() for (b,) in torch.utils.data.DataLoader(data, 4, **kw)]\n"
    "    return pinned, sorted({str(w.message).split(',')[0] for w in caught})"
)
AUTOCAST = (
    "a = torch.randn(4, 4, device='hpu')\n"
    "def autocast():\n"
    "    with torch.autocast('hpu'):\n"
    "        inside = ((a @ a).dtype, torch.softmax(a @ a, 1).dtype, torch.is_autocast_enabled('hpu'))\n"
    "    return inside, (a @ a).dtype, torch.is_autocast_enabled('hpu')"
)
ACC = "torch.accelerator."

HPU_ALONE_CALLS = [
    Call("current_accelerator", ACC + "current_accelerator()", "ok: None"),
    Call("current_accelerator_checked", ACC + "current_accelerator(True)", "ok: None"),
    Call("is_available", ACC + "is_available()", "ok: False"),
    Call("device_count", ACC + "device_count()", "ok: 0"),
    Call(
        "current_device_index",
        ACC + "current_device_index()",
        UNREACHABLE,
        ("Cannot have both HPU and cuda", "torch.hpu.current_device()"),
    ),
    Call("set_device_index", ACC + "set_device_index(1)", UNREACHABLE, ("torch.hpu.set_device",)),
    Call("device_index", ACC + "device_index(1).__enter__()", UNREACHABLE, ("torch.hpu.device",)),
    Call("current_stream", ACC + "current_stream(0)", UNREACHABLE, ("torch.hpu.current_stream",)),
    Call("set_stream", ACC + "set_stream(s)", UNREACHABLE, ("torch.hpu.set_stream",), STREAM),
    Call("synchronize", ACC + "synchronize(0)", UNREACHABLE, ("torch.hpu.synchronize",)),
    Call("memory_allocated", ACC + "memory_allocated()", "ok: 0"),
    Call("max_memory_allocated", ACC + "max_memory_allocated()", "ok: 0"),
    Call("memory_reserved", ACC + "memory_reserved()", "ok: 0"),
    Call("memory_stats", ACC + "memory_stats()", "ok: OrderedDict()"),
    Call("reset_peak_memory_stats", ACC + "reset_peak_memory_stats()", "ok: None"),
    Call("empty_cache", ACC + "empty_cache()", "ok: None"),
    Call("get_memory_info", ACC + "get_memory_info(0)", UNREACHABLE, ("torch.hpu.mem_get_info",)),
    Call("torch_Stream_hpu", "torch.Stream(device='hpu')", TORCH_LIMIT),
    Call("hpu_Stream", "torch.hpu.Stream()", "RuntimeError: torch.hpu.Stream() cannot create"),
    Call(
        "hpu_streams_and_events",
        "(e.record(s), e.synchronize(), e.query(), s == torch.hpu.current_stream())[2:]",
        "ok: (True, True)",
        setup=STREAM
        + "\ne = torch.hpu.Event()\nwith torch.hpu.stream(s): torch.ones(4, device='hpu')",
    ),
    Call(
        "torch_Event_hpu",
        "(e.record(), e.synchronize(), e.query())[2]",
        "ok: True",
        setup="e = torch.Event(device='hpu')",
    ),
    Call("torch_Event_default", "torch.Event()", TORCH_LIMIT),
    Call(
        "pin_memory",
        "(p.is_pinned(), p.to('hpu', non_blocking=True).cpu().equal(p))",
        "ok: (True, True)",
        setup="p = torch.arange(6.0).pin_memory()",
    ),
    Call("is_pinned", "torch.ones(3).is_pinned()", "ok: False"),
    Call("pin_memory_hpu", "torch.ones(3).pin_memory('hpu').is_pinned()", "ok: True"),
    Call("empty_pin_memory", "torch.empty(3, pin_memory=True)", TORCH_LIMIT),
    Call(
        "DataLoader_pin_memory",
        "batches(pin_memory=True)",
        "ok: ([False, False], [\"'pin_memory' argument is set as true but no accelerator",
        setup=LOADER,
    ),
    Call(
        "DataLoader_pin_memory_device",
        "batches(pin_memory=True, pin_memory_device='hpu')",
        "ok: ([False, False], [\"'pin_memory' argument is set as true but no accelerator",
        ("pin_memory_device is deprecated",),
        setup=LOADER,
    ),
    Call(
        "autocast",
        "autocast()",
        "ok: ((torch.bfloat16, torch.float32, True), torch.float32, False)",
        setup=AUTOCAST,
    ),
    Call(
        "autocast_cpu",
        "cpu_autocast()",
        "ok: torch.bfloat16",
        setup="def cpu_autocast():\n    with torch.autocast('cpu'):\n"
        "        return (torch.ones(2, 2) @ torch.ones(2, 2)).dtype",
    ),
    Call(
        "compile",
        "torch.compile(lambda t: (t * 2).relu().sum())(torch.ones(4, device='hpu')).item()",
        "ok: 8.0",
    ),
    Call(
        "get_device_module_hpu",
        "torch.get_device_module('hpu').__name__",
        "ok: vhabana_frameworks.torch.hpu",
    ),
    Call("get_device_module_default", "torch.get_device_module().__name__", "ok: torch.cpu"),
    Call(
        "GradScaler",
        "(g.is_enabled(), g.scale(torch.ones(1, device='hpu')).item())",
        "ok: (True, 65536.0)",
        setup="g = torch.amp.GradScaler('hpu')",
    ),
    Call("fork_rng", "torch.random.fork_rng().__enter__()", "ok: None"),
    Call(
        "hpu_module",
        "(torch.hpu.is_available(), torch.hpu.device_count(), torch.hpu.memory_allocated() > 0)",
        "ok: (True, 2, True)",
        setup="x = torch.ones(256, device='hpu')\ntorch.hpu.synchronize()",
    ),
    Call(
        "doctor",
        "[(r.device, r.reason) for r in collect().backends if r.device == 'hpu']",
        "ok: [('hpu', ",
        ("torch 2.", "Cannot have both HPU and cuda", "reports no accelerator", "docs/hpu.md"),
        setup="from torchplug.doctor import collect",
    ),
]

BESIDE_FOO_CALLS = [
    Call("current_accelerator", ACC + "current_accelerator()", "ok: foo"),
    Call(
        "set_stream_hpu",
        ACC + "set_stream(s)",
        "RuntimeError: stream's device type HPU doesn't match the current accelerator FOO",
        setup=STREAM,
    ),
    Call("hpu_Stream", "torch.hpu.Stream().device", "ok: hpu:0"),
    Call("torch_Stream_hpu", "torch.Stream(device='hpu').device", "ok: hpu:0"),
    Call("pin_memory_foo", "torch.ones(3).pin_memory().is_pinned()", "ok: True"),
    Call("autocast", "autocast()[0]", "ok: (torch.bfloat16, torch.float32, True)", setup=AUTOCAST),
    Call(
        "doctor",
        "[(r.device, r.reason) for r in collect().backends if r.device == 'hpu']",
        "ok: [('hpu', '')]",
        setup="from torchplug.doctor import collect",
    ),
    Call(
        "nothing_replaced",
        "torch.Tensor.pin_memory is torch._C.TensorBase.pin_memory",
        "ok: True",
    ),
]


@pytest.fixture(scope="module")
def hpu_alone() -> dict[str, str]:
    return run(HPU_ALONE_CALLS, HPU_ALONE)


@pytest.fixture(scope="module")
def beside_foo() -> dict[str, str]:
    return run(BESIDE_FOO_CALLS, BESIDE_FOO)


@pytest.mark.parametrize("call", HPU_ALONE_CALLS, ids=lambda call: call.id)
def test_hpu_alone(call: Call, hpu_alone: dict[str, str]) -> None:
    check(call, hpu_alone)


@pytest.mark.parametrize("call", BESIDE_FOO_CALLS, ids=lambda call: call.id)
def test_hpu_beside_foo(call: Call, beside_foo: dict[str, str]) -> None:
    check(call, beside_foo)


def test_replaced_torch_symbols_are_those_verified() -> None:
    """Each torch function replaced for hpu alone exists in the installed torch as
    the builtin it was verified as; a new torch release needs verifying
    (docs/hpu.md) and adding to HPU_VERIFIED_IN."""
    from torchplug.activation import torch_patches

    assert torch.__version__.split("+")[0] in torch_patches.HPU_VERIFIED_IN
    owners = {"torch._C": torch._C, "torch": torch, "torch.Tensor": torch._C.TensorBase}
    for replaced in torch_patches.HPU_REPLACED:
        original = getattr(owners[replaced.owner], replaced.name)
        assert type(original).__name__ in ("builtin_function_or_method", "method_descriptor"), (
            replaced.symbol
        )


def test_only_the_conflict_is_answered() -> None:
    """A replacement passes every other error through unchanged."""
    from torchplug.activation import torch_patches

    def failing(*args: object, **kwargs: object) -> None:
        raise RuntimeError("Found no NVIDIA driver on your system.")

    for replaced in torch_patches.HPU_REPLACED:
        with pytest.raises(RuntimeError, match="no NVIDIA driver"):
            replaced.make(failing, "hpu")("hpu")
    assert torch_patches.conflicting_accelerator(
        RuntimeError("Cannot have both HPU and cuda.")
    ) == ("cuda")
    assert torch_patches.conflicting_accelerator(RuntimeError("Cannot have both XPU and HPU.")) == (
        "XPU"
    )
