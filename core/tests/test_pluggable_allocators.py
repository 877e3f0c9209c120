"""Pluggable allocators (torch.<device>.memory.PluggableAllocator): a shared
library's allocate and free functions serve a MemPool, a graph's pool or,
after change_current_allocator, the whole device; what they give is given
back once the work queued on it has run."""

from __future__ import annotations

import ctypes
import gc
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import torchplug
from device_matrix import active_devices, rerun_as_owner

DEVICES = active_devices()

COUNTING_ALLOCATOR = r"""
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>

#include <torchplug/driver.h>

static atomic_long allocations, frees, live_bytes;

void* counting_alloc(size_t size, int device, void* stream) {
    (void)device; (void)stream;
    atomic_fetch_add(&allocations, 1);
    atomic_fetch_add(&live_bytes, (long)size);
    return aligned_alloc(64, (size + 63) / 64 * 64);
}

void counting_free(void* pointer, size_t size, int device, void* stream) {
    (void)device; (void)stream;
    atomic_fetch_add(&frees, 1);
    atomic_fetch_sub(&live_bytes, (long)size);
    free(pointer);
}

void* refusing_alloc(size_t size, int device, void* stream) {
    (void)size; (void)device; (void)stream;
    return NULL;
}

/* An allocator of the device's own memory: through the driver it is given. */
static const TPD_Api* driver_api;
static TPD_Client* driver_client;

void driver_init(const TPD_Api* api, TPD_Client* client) {
    driver_api = api;
    driver_client = client;
}

void* driver_alloc(size_t size, int device, void* stream) {
    (void)stream;
    TPD_Memory_Allocate_Args args = {TPD_Memory_Allocate_Args_STRUCT_SIZE, driver_client, device, size, NULL};
    TPD_Error* error = driver_api->memory_allocate(&args);
    if (error != NULL) {
        TPD_Error_Destroy_Args destroy = {TPD_Error_Destroy_Args_STRUCT_SIZE, error};
        driver_api->error_destroy(&destroy);
        return NULL;
    }
    atomic_fetch_add(&allocations, 1);
    atomic_fetch_add(&live_bytes, (long)size);
    return args.pointer;
}

void driver_free(void* pointer, size_t size, int device, void* stream) {
    (void)device; (void)stream;
    TPD_Memory_Free_Args args = {TPD_Memory_Free_Args_STRUCT_SIZE, driver_client, pointer};
    TPD_Error* error = driver_api->memory_free(&args);
    if (error != NULL) {
        TPD_Error_Destroy_Args destroy = {TPD_Error_Destroy_Args_STRUCT_SIZE, error};
        driver_api->error_destroy(&destroy);
        return;
    }
    atomic_fetch_add(&frees, 1);
    atomic_fetch_sub(&live_bytes, (long)size);
}

long allocation_count(void) { return atomic_load(&allocations); }
long free_count(void) { return atomic_load(&frees); }
long live_byte_count(void) { return atomic_load(&live_bytes); }
"""


@pytest.fixture(scope="module")
def allocator_library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    assert compiler is not None, "a C compiler builds the test allocator"
    directory = tmp_path_factory.mktemp("allocator")
    source = directory / "counting_allocator.c"
    source.write_text(COUNTING_ALLOCATOR)
    library = directory / "libcounting_allocator.so"
    include = ["-I", torchplug.get_include()]  # torchplug/driver.h
    subprocess.run(
        [
            compiler,
            "-std=c11",
            "-shared",
            "-fPIC",
            "-O1",
            *include,
            "-o",
            str(library),
            str(source),
        ],
        check=True,
    )
    return library


class Counters:
    """The test allocator's counters (the library is loaded once per process)."""

    def __init__(self, library: Path) -> None:
        self._library = ctypes.CDLL(str(library))
        for function in ("allocation_count", "free_count", "live_byte_count"):
            getattr(self._library, function).restype = ctypes.c_long

    @property
    def allocations(self) -> int:
        return self._library.allocation_count()

    @property
    def frees(self) -> int:
        return self._library.free_count()

    @property
    def live_bytes(self) -> int:
        return self._library.live_byte_count()


def module(device: str):
    return getattr(torch, device)


def counting_allocator(device: str, library: Path):
    return module(device).memory.PluggableAllocator(library, "counting_alloc", "counting_free")


def settle(device: str) -> None:
    """Lets the device give back what was freed: its work done, a block
    awaiting it is returned at the next allocation."""
    gc.collect()
    module(device).synchronize()
    torch.ones(1, device=device)


# Host memory the library allocates, or the device's own through the driver.
ALLOCATOR_FUNCTIONS = {
    "host-memory": ("counting_alloc", "counting_free"),
    "driver-memory": ("driver_alloc", "driver_free", "driver_init"),
}


@pytest.mark.parametrize("functions", ALLOCATOR_FUNCTIONS.values(), ids=ALLOCATOR_FUNCTIONS)
@pytest.mark.parametrize("device", DEVICES)
def test_a_mem_pool_with_an_allocator_takes_its_memory_from_the_library(
    device: str, functions: tuple[str, ...], allocator_library: Path
) -> None:
    counters = Counters(allocator_library)
    memory = module(device).memory
    allocator = memory.PluggableAllocator(allocator_library, *functions)
    assert allocator.driver_memory == (len(functions) == 3)
    pool = memory.MemPool(allocator=allocator.allocator())
    assert pool.allocator is allocator
    before = counters.allocations
    weight = torch.randn(64, 64)
    with memory.use_mem_pool(pool):
        on_device = weight.to(device)
        product = on_device @ on_device
        bessel = torch.special.bessel_j0(product)  # the CPU fallback's output: copied in
    outside = torch.ones(1024, device=device)  # the caching allocator's
    assert counters.allocations >= before + 3
    assert torch.equal(bessel.cpu(), torch.special.bessel_j0(weight @ weight))
    assert outside.sum().item() == 1024.0
    # The pool caches what its tensors free while it lives; once it and its
    # tensors are gone, each block goes back to the library.
    del on_device, product, bessel, pool
    settle(device)
    assert counters.allocations == counters.frees
    assert counters.live_bytes == 0


@pytest.mark.parametrize("device", DEVICES)
def test_a_graph_captured_into_an_allocators_pool_replays(
    device: str, allocator_library: Path
) -> None:
    pool = module(device).memory.MemPool(counting_allocator(device, allocator_library))
    counters = Counters(allocator_library)
    source = torch.arange(256.0, device=device)
    side = module(device).Stream()
    side.wait_stream(module(device).current_stream())
    with module(device).stream(side):
        (source * 2 + 1).relu()
    module(device).synchronize()
    before = counters.allocations
    graph = module(device).Graph()
    with module(device).graph(graph, pool=pool.id):
        result = (source * 2 + 1).relu()
    assert counters.allocations > before
    source.copy_(torch.arange(256.0) - 100)
    graph.replay()
    assert torch.equal(result.cpu(), ((torch.arange(256.0) - 100) * 2 + 1).relu())
    del result, graph, pool
    settle(device)
    assert counters.allocations == counters.frees


@pytest.mark.parametrize("device", DEVICES)
def test_allocator_mistakes_name_the_fix(
    device: str, allocator_library: Path, tmp_path: Path
) -> None:
    memory = module(device).memory
    with pytest.raises(OSError, match=r"cannot load the allocator library .*missing\.so.*-fPIC"):
        memory.PluggableAllocator(tmp_path / "missing.so", "alloc", "free")
    with pytest.raises(ValueError, match=r"exports no function 'my_free'.*extern \"C\""):
        memory.PluggableAllocator(allocator_library, "counting_alloc", "my_free")
    with pytest.raises(TypeError, match="PluggableAllocator"):
        memory.MemPool(allocator="counting_alloc")
    refusing = memory.PluggableAllocator(allocator_library, "refusing_alloc", "counting_free")
    pool = memory.MemPool(refusing)
    with (
        pytest.raises(
            torch.OutOfMemoryError, match=r"pluggable allocator .*refusing_alloc.*no memory"
        ),
        memory.use_mem_pool(pool),
    ):
        torch.empty(100, device=device)
    assert torch.ones(3, device=device).sum().item() == 3.0  # the device works on
    # Tensors exist on the device already.
    with pytest.raises(RuntimeError, match=r"before the first .* tensor is allocated.*first thing"):
        memory.change_current_allocator(refusing)


def run_script(script: str, device: str, **environment: str) -> str:
    completed = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        env=dict(os.environ, **environment),
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = completed.stdout + completed.stderr
    assert completed.returncode == 0, output
    return completed.stdout


@pytest.mark.parametrize("device", DEVICES)
def test_the_current_allocator_serves_every_allocation_and_gets_it_back(
    device: str, allocator_library: Path
) -> None:
    script = f"""
        import ctypes, gc
        import torch
        import torch.nn.functional as F
        memory = torch.{device}.memory
        library = ctypes.CDLL({str(allocator_library)!r})
        library.allocation_count.restype = ctypes.c_long
        library.free_count.restype = ctypes.c_long
        memory.change_current_allocator(
            memory.PluggableAllocator({str(allocator_library)!r}, "counting_alloc", "counting_free")
        )
        torch.manual_seed(0)
        network = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 2))
        x, y = torch.randn(4, 8), torch.randn(4, 2)
        with torch.no_grad():  # an autograd graph would keep the parameters alive
            expected = F.mse_loss(network(x), y)
        network.to("{device}")
        with torch.no_grad():
            loss = F.mse_loss(network(x.to("{device}")), y.to("{device}"))
        assert torch.equal(loss.cpu(), expected), (loss, expected)
        allocations = library.allocation_count()
        print("allocations", allocations, "allocated", memory.memory_allocated() > 0)
        try:
            memory.change_current_allocator(
                memory.PluggableAllocator({str(allocator_library)!r}, "counting_alloc", "counting_free")
            )
        except RuntimeError as error:
            print("again:", error)
        del network, loss
        gc.collect()
        torch.{device}.synchronize()
        torch.{device}.empty_cache()
        print("unfreed", library.allocation_count() - library.free_count())
        """
    stdout = run_script(script, device)
    allocations = int(stdout.split("allocations ")[1].split()[0])
    assert allocations >= 6, stdout  # four parameters, the inputs, activations
    assert "allocated True" in stdout
    assert "again: torch" in stdout, stdout
    assert "called already" in stdout, stdout
    assert "unfreed 0" in stdout, stdout


def test_a_device_the_host_cannot_address_takes_allocators_of_driver_memory(
    allocator_library: Path,
) -> None:
    """On the remote driver's device: host memory is refused, an allocator
    that allocates through the driver (its init function) serves."""
    script = f"""
        import ctypes, gc
        import torch
        from torchplug import Backend, get_remote_driver
        status = Backend(name="dsc", driver=get_remote_driver()).autoload()
        assert status.active, status.reason
        memory = torch.dsc.memory
        library = {str(allocator_library)!r}
        host = memory.PluggableAllocator(library, "counting_alloc", "counting_free")
        for attempt in (lambda: memory.MemPool(host), lambda: memory.change_current_allocator(host)):
            try:
                attempt()
            except RuntimeError as error:
                print("ERROR", error)
        counters = ctypes.CDLL(library)
        driver = memory.PluggableAllocator(library, "driver_alloc", "driver_free", "driver_init")
        pool = memory.MemPool(driver)
        x = torch.randn(64, 64)
        with memory.use_mem_pool(pool):
            on_device = x.to("dsc")
            result = torch.special.bessel_j0(on_device @ on_device).relu()
        print("allocations", counters.allocation_count())
        print("equal", torch.equal(result.cpu(), torch.special.bessel_j0(x @ x).relu()))
        del on_device, result, pool
        gc.collect()
        torch.dsc.synchronize()
        torch.ones(1, device="dsc")
        print("unfreed", counters.allocation_count() - counters.free_count())
        """
    stdout = run_script(
        script, "dsc", TORCH_DEVICE_BACKEND_AUTOLOAD="0", TORCHPLUG_PRIVATEUSE1="dsc"
    )
    assert stdout.count("ERROR The pluggable allocator") == 2, stdout
    assert "keeps its memory on the device: give PluggableAllocator an init_fn_name" in stdout
    assert "equal True" in stdout, stdout
    assert int(stdout.split("allocations ")[1].split()[0]) >= 3, stdout
    assert "unfreed 0" in stdout, stdout


def test_npu_in_its_own_process() -> None:
    rerun_as_owner(__file__, "npu")
