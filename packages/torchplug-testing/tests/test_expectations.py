"""The expectation file: parsing, matching, and errors that name the fix."""

import pytest

from torchplug_testing import expectations


def test_test_and_op_entries_match_suite_ids() -> None:
    parsed = expectations.parse(
        """
        [[expected_failure]]
        test = "nn::test_module[lstm]"
        reason = "fused LSTM cell missing"

        [[expected_failure]]
        op = "fft.hfft"
        reason = "crashes"

        [[expected_failure]]
        op = "linalg.eigh"
        mode = "backward"
        dtype = "float32"
        reason = "eigh backward"

        [[expected_failure]]
        test = "autograd::*"
        reason = "no autograd"
        """,
        "inline",
    )
    assert parsed.find("nn::test_module[lstm]").reason == "fused LSTM cell missing"
    assert parsed.find("nn::test_module[gru]") is None
    assert parsed.find("opinfo_forward::test_forward[fft.hfft-float32]").reason == "crashes"
    assert parsed.find("opinfo_backward::test_backward[fft.hfft-float64]").reason == "crashes"
    assert parsed.find("opinfo_backward::test_backward[linalg.eigh-float32]") is not None
    assert parsed.find("opinfo_forward::test_forward[linalg.eigh-float32]") is None
    assert parsed.find("autograd::test_double_backward").reason == "no autograd"
    # '[' and '.' are literal, only '*' is a wildcard.
    assert parsed.find("opinfo_forward::test_forward[fftXhfft-float32]") is None


@pytest.mark.parametrize(
    ("selector", "test_id"),
    [
        ('op = "addmm"', "opinfo_forward::test_forward[addmm-float16]"),
        ('test = "moduleinfo_forward::*"', "moduleinfo_forward::test_forward[nn.Linear-float16]"),
    ],
    ids=["op", "test"],
)
def test_full_only_entries_apply_to_full_runs_only(selector: str, test_id: str) -> None:
    parsed = expectations.parse(
        f'[[expected_failure]]\n{selector}\nfull_only = true\nreason = "a later sample"\n',
        "inline",
    )
    assert parsed.find(test_id, full=True).reason == "a later sample"
    assert parsed.find(test_id, full=False) is None
    assert parsed.applicable(full=False) == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[[expected_failure]]\ntest = "a::b"\n', "has no reason"),
        ('[[expected_failure]]\ntest = "a::b"\nop = "add"\nreason = "x"\n', "exactly one of"),
        ('[[expected_failure]]\nop = "add"\nmode = "sideways"\nreason = "x"\n', "not one of"),
        ('[[expected_failure]]\ntest = "a"\nwhy = "x"\nreason = "x"\n', "unknown key(s) why"),
        ('[[expected_failure]]\ntest = "a"\ndtype = "float32"\nreason = "x"\n', "go with 'op'"),
        ('[[expected_failure]]\nop = "add"\nfull_only = "yes"\nreason = "x"\n', "true or false"),
        ('[[xfail]]\ntest = "a"\n', "unknown top-level key(s) xfail"),
        ("[[expected_failure]\n", "not valid TOML"),
    ],
)
def test_malformed_files_name_the_problem(text: str, message: str) -> None:
    with pytest.raises(expectations.ExpectationFileError, match="inline") as caught:
        expectations.parse(text, "inline")
    assert message in str(caught.value)


def test_missing_file_says_what_to_pass(tmp_path) -> None:
    with pytest.raises(expectations.ExpectationFileError, match="does not exist"):
        expectations.load(tmp_path / "nope.toml")


def test_backends_in_the_workspace_ship_their_files() -> None:
    for device in ("foo", "hpu"):
        shipped = expectations.discover(device)
        assert shipped.source is not None, device
        assert shipped.entries, device
    assert expectations.discover("no_such_device").source is None
