"""Autocast, checkpoints, RNG and the fork rule on `hpu` (core features, HPU key)."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import torch
import torch.nn.functional as F


def test_autocast_defaults_to_bfloat16_with_cuda_policies() -> None:
    a = torch.randn(8, 8).to("hpu")
    with torch.autocast("hpu"):
        product = a @ a
        probabilities = torch.softmax(product, dim=1)
        activated = torch.relu(product)
        loss = F.mse_loss(product, a.bfloat16())
    assert product.dtype == torch.bfloat16
    assert probabilities.dtype == torch.float32
    assert activated.dtype == torch.bfloat16
    assert loss.dtype == torch.float32
    expected = a.cpu().bfloat16() @ a.cpu().bfloat16()
    torch.testing.assert_close(product.cpu(), expected, rtol=0, atol=0)


def test_autocast_float16_inference_of_a_model() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 6), torch.nn.LayerNorm(6)).eval()
    x = torch.randn(3, 6)
    with torch.no_grad(), torch.autocast("hpu", dtype=torch.float16):
        out = model.to("hpu")(x.to("hpu"))
    assert out.dtype == torch.float32  # layer_norm runs in float32


def test_checkpoint_round_trip_and_map_location(tmp_path: Path) -> None:
    path = tmp_path / "hpu.pt"
    torch.save({"w": torch.arange(4.0).to("hpu")}, path)
    assert torch.load(path, weights_only=True)["w"].device.type == "hpu"
    assert torch.load(path, map_location="cpu", weights_only=True)["w"].tolist() == [
        0.0,
        1.0,
        2.0,
        3.0,
    ]


def test_hpu_seeding_and_fork_rng() -> None:
    torch.hpu.manual_seed_all(21)
    first = torch.rand(4, device="hpu")
    torch.hpu.manual_seed_all(21)
    assert torch.equal(torch.rand(4, device="hpu").cpu(), first.cpu())
    torch.manual_seed(21)  # upstream seeds PrivateUse1 only; torchplug extends it to hpu
    assert torch.equal(torch.rand(4, device="hpu").cpu(), first.cpu())
    with torch.random.fork_rng(devices=[0], device_type="hpu"):
        torch.rand(8, device="hpu")
    after_fork = torch.rand(4, device="hpu")
    torch.hpu.manual_seed_all(21)
    torch.rand(4, device="hpu")
    assert torch.equal(torch.rand(4, device="hpu").cpu(), after_fork.cpu())


def test_fork_after_init_refuses_and_spawn_works(tmp_path: Path) -> None:
    code = textwrap.dedent(
        """
        import multiprocessing as mp
        import torch

        def child(queue):
            try:
                queue.put(str(torch.ones(2, device="hpu").sum().item()))
            except RuntimeError as error:
                queue.put(str(error))

        if __name__ == "__main__":
            torch.ones(1, device="hpu")  # the parent initialises the device
            for method in ("fork", "spawn"):
                ctx = mp.get_context(method)
                queue = ctx.Queue()
                process = ctx.Process(target=child, args=(queue,))
                process.start()
                print(method, queue.get(timeout=120))
                process.join()
        """
    )
    # A script file, so spawned children can import __main__.
    script = tmp_path / "scenario.py"
    script.write_text(code)
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr
    fork, spawn = result.stdout.splitlines()
    assert fork.startswith("fork Cannot re-initialize hpu in forked subprocess")
    assert spawn == "spawn 2.0"


def test_profiler_records_hpu_ops_on_the_cpu_side_only(tmp_path: Path) -> None:
    from torch.profiler import ProfilerActivity, profile

    a = torch.randn(16, 16).to("hpu")
    activities = [ProfilerActivity.CPU, ProfilerActivity.HPU, ProfilerActivity.PrivateUse1]
    with profile(activities=activities) as prof:
        torch.mm(a, a)
    names = {event.key for event in prof.key_averages()}
    assert "aten::mm" in names
    trace = tmp_path / "trace.json"
    prof.export_chrome_trace(str(trace))
    events = json.loads(trace.read_text())["traceEvents"]
    # No device-side hook exists for the HPU key; its kernels must not be
    # reported as another device's time.
    assert not [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy")]
