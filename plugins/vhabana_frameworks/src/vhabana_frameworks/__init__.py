"""A Habana-like simulated accelerator ("hpu") built on torchplug.

The layout follows habana_frameworks: this package holds the ``is_loaded``
guard and the ``torch.backends`` entry point; ``vhabana_frameworks.torch``
brings the device up.
"""

# True once vhabana_frameworks.torch has been imported, by autoload or by the
# user; guards against re-entering the import while torch itself is importing.
is_loaded = False


def __autoload() -> None:
    """The ``torch.backends`` entry point, called during ``import torch``.

    This module imports nothing, so upstream's loader cannot fail on it; the
    device comes up in ``vhabana_frameworks.torch``, imported under
    torchplug's guard so that an error there is recorded for the ``hpu``
    device instead of breaking ``import torch``.
    """
    if is_loaded:
        return
    from torchplug import import_plugin

    import_plugin("vhabana_frameworks.torch", device="hpu")
