"""``dsc``: a device whose memory the host cannot address, loaded as a pytest plugin.

The conformance suite's run on it (``test_conformance_discrete.py``) loads this
module into its child pytest and workers (``-p discrete_backend`` with this
directory on the path, ``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` so that no installed
backend takes PrivateUse1 first): the remote driver, whose device memory lives
in its device process, so every byte moves through the driver's copies.
"""

from torchplug import Backend, get_remote_driver

STATUS = Backend(name="dsc", distribution="torch_dsc", driver=get_remote_driver()).autoload()
assert STATUS.active, STATUS.reason
