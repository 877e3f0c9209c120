"""The ``foo`` device: a simulated accelerator on PrivateUse1, built on torchplug."""

from torchplug import Backend

backend = Backend(name="foo", dispatch_key="privateuse1", distribution="torch_foo")

# The torch.backends entry point of old installs (new ones name
# torchplug:plugin.torch_foo); importing torch_foo explicitly does the same.
_autoload = backend.autoload
_autoload()
