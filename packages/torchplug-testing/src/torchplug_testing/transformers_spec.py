"""A device spec file for transformers' test suite, for any torchplug device.

transformers' ``testing_utils`` runs its tests on the device a spec file
names (``TRANSFORMERS_TEST_DEVICE_SPEC``), without checking for a vendor
module as ``TRANSFORMERS_TEST_DEVICE`` does for ``npu`` and ``hpu``. It
imports the file by the name the variable gives, up to ``.py``, so the value
must be a bare file name and the tests must run in the directory holding it::

    python -m torchplug_testing.transformers_spec hpu
    TRANSFORMERS_TEST_DEVICE_SPEC=torchplug_hpu_spec.py python -m pytest tests/models/bert
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

log = logging.getLogger("torchplug_testing")

SPEC = '''"""transformers device spec for torchplug's '{device}' device (torchplug_testing.transformers_spec)."""

import torch

DEVICE_NAME = "{device}"
MANUAL_SEED_FN = torch.{device}.manual_seed
EMPTY_CACHE_FN = torch.{device}.empty_cache
DEVICE_COUNT_FN = torch.{device}.device_count
'''


def write(device: str, directory: Path | None = None) -> Path:
    """Writes ``torchplug_<device>_spec.py`` into ``directory`` (the working directory
    by default) and returns its path; set ``TRANSFORMERS_TEST_DEVICE_SPEC`` to its name."""
    if not device.isidentifier():
        raise ValueError(
            f"{device!r} is not a device name; pass one such as 'foo', 'npu' or 'hpu'."
        )
    path = (directory or Path.cwd()) / f"torchplug_{device}_spec.py"
    path.write_text(SPEC.format(device=device))
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("device", help="the torchplug device the tests run on, e.g. hpu")
    arguments = parser.parse_args(argv)
    path = write(arguments.device)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    log.info("wrote %s; run the tests here with TRANSFORMERS_TEST_DEVICE_SPEC=%s", path, path.name)


if __name__ == "__main__":
    main()
