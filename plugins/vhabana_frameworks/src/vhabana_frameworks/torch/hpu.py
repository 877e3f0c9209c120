"""The device module of the simulated HPU, registered as ``torch.hpu``.

torchplug fills in the ``torch.cuda``-shaped API (``device_count``,
``synchronize``, streams, events, memory, RNG, ...) when the device comes up.
"""
