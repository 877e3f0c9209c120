"""``dsc``: a device whose memory the host cannot address, loaded as a pytest plugin.

The conformance suite's run on it (``test_conformance_discrete.py``) loads this
module into its child pytest and workers (``-p discrete_backend`` with this
directory on the path, ``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` so that no installed
backend takes PrivateUse1 first): the simulator with its host-addressable
capability hidden, so every byte moves through the driver's copies.
"""

from torchplug import Backend

STATUS = Backend(
    name="dsc", distribution="torch_dsc", driver_options="hidden_capabilities=1"
).autoload()
assert STATUS.active, STATUS.reason
