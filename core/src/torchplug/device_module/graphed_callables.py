"""``torch.<name>.make_graphed_callables``: modules and functions whose forward
and backward passes run as captured graphs (``torch.cuda.make_graphed_callables``
with the device's name).

Each callable is warmed up on a side stream, its forward pass captured over
static inputs, then its backward pass captured over static output gradients;
calls afterwards copy their arguments into the static inputs and replay. The
callables' graphs share one memory pool, captured in call order forward and
in reverse order backward, so they must be called in that order.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._pytree import TreeSpec, tree_flatten, tree_unflatten

PoolId = tuple[int, int]


@dataclass
class _Captured:
    """One callable's two graphs and the static tensors they read and write."""

    forward_graph: Any
    backward_graph: Any
    user_input_count: int
    static_inputs: tuple[torch.Tensor, ...]  # the flattened arguments, then module parameters
    static_outputs: tuple[torch.Tensor, ...]
    output_spec: TreeSpec
    static_grad_outputs: tuple[torch.Tensor | None, ...]
    static_grad_inputs: tuple[torch.Tensor | None, ...]


def functions(name: str, parts: dict[str, Any]) -> dict[str, Any]:
    """``make_graphed_callables`` over the device module's ``parts`` (its
    ``Graph``, ``graph``, ``Stream``, ``stream``, ``synchronize``,
    ``graph_pool_handle``)."""

    def make_graphed_callables(
        callables: Any,
        sample_args: tuple[Any, ...],
        num_warmup_iters: int = 3,
        allow_unused_input: bool = False,
        pool: PoolId | None = None,
    ) -> Any:
        """Graphed versions of ``callables`` (a module or function, or a tuple
        of them), captured with ``sample_args`` (a tuple of arguments per
        callable); a module's forward replays its graphs while the module is in
        the training mode it was captured in."""
        if torch.is_autocast_enabled(name) and torch.is_autocast_cache_enabled():
            raise RuntimeError(
                f"make_graphed_callables cannot capture inside torch.autocast('{name}') with its "
                "weight cache on (the cached casts would be freed after capture): pass "
                "cache_enabled=False to torch.autocast."
            )
        given_one = not isinstance(callables, tuple)
        if given_one:
            callables = (callables,)
            sample_args = (sample_args,)
        if len(callables) != len(sample_args):
            raise ValueError(
                f"make_graphed_callables got {len(callables)} callables but {len(sample_args)} "
                "argument tuples: give one tuple of sample arguments per callable."
            )
        flat_args = [
            _checked_arguments(args, position) for position, args in enumerate(sample_args)
        ]
        parameters = [_checked_module(c, position) for position, c in enumerate(callables)]
        surfaces = [
            tuple(args) + params for args, params in zip(flat_args, parameters, strict=True)
        ]

        _warm_up(callables, sample_args, surfaces, num_warmup_iters, allow_unused_input)
        shared_pool = parts["graph_pool_handle"]() if pool is None else pool
        captured = _capture(
            callables, sample_args, flat_args, surfaces, shared_pool, allow_unused_input
        )

        graphed = []
        for function, capture, params in zip(callables, captured, parameters, strict=True):
            replaying = _replaying_function(capture, params)
            if isinstance(function, torch.nn.Module):
                function.forward = _mode_switch(function, replaying)
                graphed.append(function)
            else:
                graphed.append(replaying)
        return graphed[0] if given_one else tuple(graphed)

    def _checked_arguments(args: Any, position: int) -> list[torch.Tensor]:
        if not isinstance(args, tuple):
            raise TypeError(
                f"make_graphed_callables: the sample arguments of callable {position} must be a "
                f"tuple, got {type(args).__name__}; wrap a single tensor as (tensor,)."
            )
        flat, _ = tree_flatten(args)
        for value in flat:
            if not isinstance(value, torch.Tensor):
                raise TypeError(
                    f"make_graphed_callables: the sample arguments of callable {position} may hold "
                    f"only tensors (the graph reads its inputs from fixed memory), got "
                    f"{type(value).__name__}."
                )
            if value.device.type != name:
                raise ValueError(
                    f"make_graphed_callables: a sample argument of callable {position} is on "
                    f"{value.device}; graphs of torch.{name} read {name} tensors: move it with "
                    f".to('{name}')."
                )
        return flat

    def _checked_module(function: Any, position: int) -> tuple[torch.Tensor, ...]:
        if not isinstance(function, torch.nn.Module):
            return ()
        hooked = function._backward_hooks or function._forward_hooks or function._forward_pre_hooks
        if hooked or any(
            m._backward_hooks or m._forward_hooks or m._forward_pre_hooks
            for m in function.modules()
        ):
            raise ValueError(
                f"make_graphed_callables: module {position} ({type(function).__name__}) has hooks, "
                "which a replay would not run: graph it before registering hooks."
            )
        return tuple(function.parameters())

    def _warm_up(
        callables: Sequence[Callable[..., Any]],
        sample_args: Sequence[tuple[Any, ...]],
        surfaces: Sequence[tuple[torch.Tensor, ...]],
        iterations: int,
        allow_unused_input: bool,
    ) -> None:
        # The side stream lets lazy initialisation (workspaces, learned
        # signatures) happen outside the capture.
        parts["synchronize"]()
        with parts["stream"](parts["Stream"]()):
            for function, args, surface in zip(callables, sample_args, surfaces, strict=True):
                for _ in range(iterations):
                    outputs, _ = tree_flatten(function(*args))
                    _gradients(outputs, surface, None, allow_unused_input)
                    del outputs
        parts["synchronize"]()

    def _capture(
        callables: Sequence[Callable[..., Any]],
        sample_args: Sequence[tuple[Any, ...]],
        flat_args: Sequence[list[torch.Tensor]],
        surfaces: Sequence[tuple[torch.Tensor, ...]],
        pool: PoolId,
        allow_unused_input: bool,
    ) -> list[_Captured]:
        forwards = []
        for function, args in zip(callables, sample_args, strict=True):
            forward_graph = parts["Graph"]()
            with parts["graph"](forward_graph, pool=pool):
                outputs = function(*args)
            flat_outputs, spec = tree_flatten(outputs)
            forwards.append((forward_graph, tuple(flat_outputs), spec))

        captured: list[_Captured | None] = [None] * len(callables)
        # Backward passes run in the reverse order of the forward passes.
        for position in reversed(range(len(callables))):
            forward_graph, static_outputs, spec = forwards.pop()
            static_grad_outputs = tuple(
                torch.empty_like(o) if o.requires_grad else None for o in static_outputs
            )
            backward_graph = parts["Graph"]()
            with parts["graph"](backward_graph, pool=pool):
                static_grad_inputs = _gradients(
                    static_outputs, surfaces[position], static_grad_outputs, allow_unused_input
                )
            # Detached, the outputs no longer keep the captured autograd graph
            # alive, nor the parameters' gradient accumulators it made on the
            # capture stream (autograd would warn at each backward that their
            # stream is not the caller's).
            captured[position] = _Captured(
                forward_graph,
                backward_graph,
                len(flat_args[position]),
                surfaces[position],
                tuple(o.detach() for o in static_outputs),
                spec,
                static_grad_outputs,
                static_grad_inputs,
            )
        return [c for c in captured if c is not None]

    return {"make_graphed_callables": make_graphed_callables}


def _gradients(
    outputs: Sequence[torch.Tensor],
    inputs: Sequence[torch.Tensor],
    grad_outputs: Sequence[torch.Tensor | None] | None,
    allow_unused_input: bool,
) -> tuple[torch.Tensor | None, ...]:
    """The gradients of ``outputs`` toward each of ``inputs`` (None for an
    input that needs none); ``grad_outputs`` None means uninitialised ones."""
    differentiable = [o for o in outputs if o.requires_grad]
    wanted = [i for i in inputs if i.requires_grad]
    if not differentiable or not wanted:
        return tuple(None for _ in inputs)
    if grad_outputs is None:
        seeds = [torch.empty_like(o) for o in differentiable]
    else:
        seeds = [g for g in grad_outputs if g is not None]
    grads = iter(
        torch.autograd.grad(
            outputs=differentiable,
            inputs=wanted,
            grad_outputs=seeds,
            only_inputs=True,
            allow_unused=allow_unused_input,
        )
    )
    return tuple(next(grads) if i.requires_grad else None for i in inputs)


def _replaying_function(
    capture: _Captured, parameters: tuple[torch.Tensor, ...]
) -> Callable[..., Any]:
    """A function of the callable's arguments that replays its graphs, with
    autograd through them."""

    class Replay(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
            for static, given in zip(
                capture.static_inputs[: capture.user_input_count],
                inputs[: capture.user_input_count],
                strict=True,
            ):
                if static.data_ptr() != given.data_ptr():
                    static.copy_(given)
            capture.forward_graph.replay()
            return tuple(o.detach() for o in capture.static_outputs)

        @staticmethod
        @torch.autograd.function.once_differentiable
        def backward(ctx: Any, *grads: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
            for static, given in zip(capture.static_grad_outputs, grads, strict=True):
                if (
                    static is not None
                    and given is not None
                    and static.data_ptr() != given.data_ptr()
                ):
                    static.copy_(given)
            capture.backward_graph.replay()
            return tuple(g.detach() if g is not None else None for g in capture.static_grad_inputs)

    def replaying(*args: Any) -> Any:
        flat, _ = tree_flatten(args)
        if len(flat) != capture.user_input_count:
            raise ValueError(
                f"This graphed callable was captured with {capture.user_input_count} tensor "
                f"arguments and was called with {len(flat)}: call it as it was captured."
            )
        outputs = Replay.apply(*flat, *parameters)
        return tree_unflatten(list(outputs), capture.output_spec)

    return replaying


def _mode_switch(module: torch.nn.Module, replaying: Callable[..., Any]) -> Callable[..., Any]:
    """A forward that replays while ``module`` is in the training mode it was
    captured in, and runs its own forward otherwise.

    It holds the module weakly and its class's forward rather than the bound
    method: the module holds this forward, and a cycle would leave the graphs
    to the cyclic collector, which may free them at any moment (inside another
    capture, say)."""
    captured_training = module.training
    held = weakref.ref(module)
    bound = getattr(module.forward, "__self__", None) is module
    eager_forward = module.forward.__func__ if bound else module.forward  # type: ignore[attr-defined]

    def forward(*args: Any, **kwargs: Any) -> Any:
        target = held()
        if target is None:
            raise RuntimeError("This graphed module was freed; its forward cannot run on its own.")
        if target.training != captured_training:
            return (
                eager_forward(target, *args, **kwargs) if bound else eager_forward(*args, **kwargs)
            )
        if kwargs:
            raise TypeError(
                f"This graphed {type(target).__name__} was captured with positional tensor "
                f"arguments and was called with keyword arguments ({', '.join(kwargs)}), which "
                "a replay cannot take: call it as it was captured, or graph a module that its "
                "caller calls with positional arguments only."
            )
        return replaying(*args)

    return forward
