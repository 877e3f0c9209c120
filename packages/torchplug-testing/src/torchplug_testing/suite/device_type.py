"""PyTorch's own device-generic test machinery (instantiate_device_type_tests) on the device.

A test written once against ``device`` is instantiated by torch for every
available device type: the CPU, and this backend (through PrivateUse1TestBase
or the in-tree base of its key), which needs ``torch.<name>.is_available()``
when common_device_type is imported.
"""

# PyTorch's TestCase.assertEqual is the point here: it compares tensors across devices.
# ruff: noqa: PT009

import torch
from torch.testing._internal.common_device_type import dtypes, instantiate_device_type_tests
from torch.testing._internal.common_utils import TestCase

from torchplug_testing.session import device_under_test


class TestDeviceGeneric(TestCase):
    @dtypes(torch.float32, torch.int64)
    def test_add_and_compare(self, device, dtype):
        values = torch.arange(6, dtype=dtype, device=device).reshape(2, 3)
        self.assertEqual(values + values, torch.arange(0, 12, 2, dtype=dtype).reshape(2, 3))
        self.assertEqual(torch.device(device).type, self.device_type)

    def test_matmul_against_cpu(self, device):
        torch.manual_seed(0)
        a, b = torch.randn(5, 4), torch.randn(4, 3)
        self.assertEqual((a.to(device) @ b.to(device)).cpu(), a @ b)

    def test_the_instantiated_device_is_the_primary_one(self, device):
        primary = self.get_primary_device()
        self.assertEqual(torch.device(device), torch.device(primary))


instantiate_device_type_tests(TestDeviceGeneric, globals(), only_for=[device_under_test()])

# instantiate_device_type_tests replaces the generic class by one class per device type.
if not any(name.startswith("TestDeviceGeneric") for name in list(globals())):

    def test_device_type_is_instantiated() -> None:
        raise AssertionError(
            f"instantiate_device_type_tests created no test class for '{device_under_test()}': "
            "torch.testing._internal.common_device_type found no test base for it (PrivateUse1 "
            "needs torch.<name>.is_available() to be True when common_device_type is imported)."
        )
