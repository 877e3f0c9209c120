"""The policy for a PrivateUse1 backend next to CUDA (pytorch/pytorch#161129), with CUDA simulated."""

from __future__ import annotations

import logging

import pytest
import torch

from torchplug import cuda_coexistence, doctor


@pytest.fixture(autouse=True)
def _fresh_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cuda_coexistence, "_warned", False)


def cuda(present: bool):
    def answer() -> bool:
        return present

    return answer


def test_without_cuda_nothing_is_said() -> None:
    finding = cuda_coexistence.assess("foo", cuda(False))
    assert not finding.cuda_autograd_broken
    assert finding.message == ""


def test_without_a_privateuse1_backend_cuda_is_not_even_asked() -> None:
    def never() -> bool:
        raise AssertionError("CUDA was queried")

    assert not cuda_coexistence.assess(None, never).cuda_autograd_broken


def test_with_cuda_the_finding_names_the_breakage_and_the_way_out() -> None:
    finding = cuda_coexistence.assess("npu", cuda(True))
    assert finding.cuda_autograd_broken
    assert "TORCHPLUG_DISABLE=npu" in finding.message
    assert "161129" in finding.message
    assert "backward" in finding.message


def test_activation_warns_once_per_process(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="torchplug"):
        cuda_coexistence.warn_at_activation("foo", "privateuse1", cuda(True))
        cuda_coexistence.warn_at_activation("foo", "privateuse1", cuda(True))
    warnings = [r for r in caplog.records if "TORCHPLUG_DISABLE=foo" in r.getMessage()]
    assert len(warnings) == 1


def test_activation_without_cuda_is_silent(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="torchplug"):
        cuda_coexistence.warn_at_activation("foo", "privateuse1", cuda(False))
    assert not caplog.records


def test_an_hpu_backend_is_not_concerned(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="torchplug"):
        finding = cuda_coexistence.warn_at_activation("hpu", "hpu", cuda(True))
    assert not finding.cuda_autograd_broken
    assert not caplog.records


def test_doctor_shows_the_finding(monkeypatch: pytest.MonkeyPatch) -> None:
    # A CUDA build on a machine with an NVIDIA GPU's device nodes.
    monkeypatch.setattr(torch.backends.cuda, "is_built", lambda: True)
    monkeypatch.setattr(cuda_coexistence.glob, "glob", lambda pattern: ["/dev/nvidia0"])
    report = doctor.collect()
    assert report.as_dict()["cuda"]["cuda_autograd_broken"]
    assert "cuda: torchplug backend 'foo'" in doctor.render(report)
