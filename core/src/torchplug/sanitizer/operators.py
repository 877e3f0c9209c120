"""What an operator touches: its schema read once per overload, its tensors per call."""

from __future__ import annotations

from collections.abc import Iterator

import torch

# Operators that touch no memory though their schema lists tensors.
_NO_ACCESS = frozenset({"record_stream", "is_pinned", "is_same_size", "is_set_to"})
# Operators whose result the host needs before it can go on: it waits for the
# stream (as torch.cuda's sync debug mode counts them).
_HOST_SYNC = frozenset(
    {
        "_local_scalar_dense",
        "equal",
        "nonzero",
        "masked_select",
        "_unique2",
        "unique_dim",
        "unique_consecutive",
        "repeat_interleave",
    }
)


class OpInfo:
    """What an operator's schema says about the memory it touches (once per overload)."""

    __slots__ = (
        "fresh_returns",
        "host_sync",
        "name",
        "names",
        "no_access",
        "non_blocking",
        "writes",
    )

    def __init__(self, func: torch._ops.OpOverload) -> None:
        schema = func._schema
        self.name = schema.name + (f".{schema.overload_name}" if schema.overload_name else "")
        self.names = tuple(argument.name for argument in schema.arguments)
        self.writes = frozenset(
            argument.name
            for argument in schema.arguments
            if argument.alias_info is not None and argument.alias_info.is_write
        )
        # A return with no alias annotation is new memory the operator wrote.
        self.fresh_returns = tuple(ret.alias_info is None for ret in schema.returns)
        short = schema.name.split("::", 1)[-1]
        aliases_only = bool(schema.returns) and not any(self.fresh_returns) and not self.writes
        # Views and queries read no data: only their results' later uses do.
        self.no_access = short in _NO_ACCESS or aliases_only
        self.host_sync = short in _HOST_SYNC
        self.non_blocking = "non_blocking" in self.names


def tensor_arguments(info: OpInfo, args: tuple, kwargs: dict) -> Iterator[tuple[str, torch.Tensor]]:
    """The operator's tensor arguments by schema name, lists of tensors included."""
    names = info.names
    for position, value in enumerate(args):
        name = names[position] if position < len(names) else f"#{position}"
        yield from _named(name, value)
    for name, value in kwargs.items():
        yield from _named(name, value)


def _named(name: str, value: object) -> Iterator[tuple[str, torch.Tensor]]:
    # Sparse layouts have no one storage to key their memory by: not tracked.
    if isinstance(value, torch.Tensor):
        if value.layout == torch.strided:
            yield name, value
    elif isinstance(value, list | tuple):
        for position, item in enumerate(value):
            if isinstance(item, torch.Tensor) and item.layout == torch.strided:
                yield f"{name}[{position}]", item


def fresh_results(info: OpInfo, result: object) -> Iterator[tuple[str, torch.Tensor]]:
    """The operator's fresh results (new memory it wrote)."""
    results = result if isinstance(result, tuple) else (result,)
    for position, (value, fresh) in enumerate(zip(results, info.fresh_returns, strict=False)):
        if fresh:
            yield from _named(f"result {position}", value)


def is_non_blocking(info: OpInfo, args: tuple, kwargs: dict) -> bool:
    """Whether this call is a non-blocking copy (its host memory belongs to the stream)."""
    if not info.non_blocking:
        return False
    if "non_blocking" in kwargs:
        return bool(kwargs["non_blocking"])
    position = info.names.index("non_blocking")
    return position < len(args) and bool(args[position])


def is_written(info: OpInfo, name: str) -> bool:
    """Whether the argument `name` (an element of a list argument too) is written."""
    return name.split("[", 1)[0] in info.writes
