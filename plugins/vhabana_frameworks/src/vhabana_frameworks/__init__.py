"""A Habana-like simulated accelerator ("hpu") built on torchplug.

The layout follows habana_frameworks: this package holds the ``is_loaded``
guard and the ``torch.backends`` entry point; ``vhabana_frameworks.torch``
brings the device up.
"""

# True once vhabana_frameworks.torch has been imported, by autoload or by the
# user; guards against re-entering the import while torch itself is importing.
is_loaded = False


def __autoload() -> None:
    """The ``torch.backends`` entry point, called during ``import torch``."""
    if is_loaded:
        return
    import vhabana_frameworks.torch  # noqa: F401 - importing it brings the device up
