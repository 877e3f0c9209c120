"""torchplug: build, auto-load, test and ship out-of-tree PyTorch device backends.

Importing this package is cheap and does not import torch: plugins import it
from their ``torch.backends`` entry point while ``import torch`` is running.
"""

from torchplug.backend import Backend, BackendState, BackendStatus

__version__ = "0.1.0"

__all__ = ["Backend", "BackendState", "BackendStatus", "__version__"]
