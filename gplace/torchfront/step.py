"""One training step as one FX graph: forward, backward and the optimizer's updates.

The forward is the exported program; AOT autograd's joint tracing (``aot_export_module(...,
trace_joint=True)``, torch/_functorch/aot_autograd.py) derives the backward as ATen ops, with
buffer mutations (batch-norm running statistics) as outputs; gplace then appends one update
call per parameter (gplace.torchfront.optim). The result is functional:

    step(*params, *buffers, *optimizer_states, *batch)
        -> (loss, *new_params, *new_buffers, *new_optimizer_states)
"""

from __future__ import annotations

import contextlib
import operator
import warnings
from dataclasses import dataclass, field

import torch
from torch import fx, nn

from gplace.errors import GraphError
from gplace.torchfront.optim import OptimizerConfig, initial_state, update_call
from gplace.torchfront.program import one_line

ROLES = ("param", "buffer", "state", "input", "forward", "backward", "optimizer")


@dataclass
class StepGraph:
    """The functional training step and what each of its placeholders and outputs is."""

    module: fx.GraphModule
    param_names: list[str]            # fully qualified, in placeholder order
    buffer_names: list[str]
    state_names: list[str]            # "<param>.<state>", e.g. "fc.weight.exp_avg"
    input_names: list[str]            # the forward's argument names
    params: list[torch.Tensor]        # initial values, in placeholder order
    buffers: list[torch.Tensor]
    states: list[torch.Tensor]
    batch: list[torch.Tensor]         # the example batch saved with the program
    optimizer: OptimizerConfig
    role: dict[str, str] = field(default_factory=dict)         # FX node name -> one of ROLES
    owner: dict[str, str] = field(default_factory=dict)        # placeholder/update -> param
    grad_of: dict[str, str] = field(default_factory=dict)      # param -> gradient node name
    buffer_update: dict[str, str] = field(default_factory=dict)  # buffer -> new-value node name
    unread: set[str] = field(default_factory=set)  # parameters no op reads (unused_parameters)

    @property
    def inputs(self) -> list[torch.Tensor]:
        """The step's arguments at their initial values with the example batch."""
        return [*self.params, *self.buffers, *self.states, *self.batch]

    def run(self, inputs: list[torch.Tensor] | None = None) -> tuple[torch.Tensor, ...]:
        """One step on ``inputs`` (default: :attr:`inputs`), without autograd."""
        with torch.no_grad():
            return tuple(self.module(*(self.inputs if inputs is None else inputs)))

    def split_outputs(self, outputs) -> tuple[torch.Tensor, list, list, list]:
        """(loss, new params, new buffers, new states) from the step's flat outputs."""
        p, b = len(self.params), len(self.buffers)
        return outputs[0], list(outputs[1:1 + p]), list(outputs[1 + p:1 + p + b]), \
            list(outputs[1 + p + b:])


class _Tupled(nn.Module):
    """The exported module with its loss returned as a one-tuple (AOT export wants tuples)."""

    def __init__(self, module: nn.Module):
        super().__init__()
        self.m = module

    def forward(self, *args):  # the one leaf of a (loss,) or {"loss": loss} too
        return tuple(torch.utils._pytree.tree_leaves(self.m(*args)))


@contextlib.contextmanager
def without_onednn():
    """oneDNN off, quietly: its fused CPU kernels (an LSTM's ``mkldnn_rnn_layer``, taken when
    the batch feeds the LSTM directly) return one gradient for two biases, which AOT export
    cannot map to its parameters, and FlopCounterMode has no formula for them. torch warns
    about TF32 on Intel GPUs each time the flag changes."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="TF32 acceleration on top of oneDNN")
        with torch.backends.mkldnn.flags(enabled=False):
            yield


def build_step(program, optimizer: OptimizerConfig, label: str = "program") -> StepGraph:
    """The StepGraph of an ExportedProgram whose forward returns the scalar loss."""
    args, kwargs = program.example_inputs or ((), {})
    if kwargs:
        raise GraphError(f"{label}: the forward takes keyword arguments ({', '.join(kwargs)}); "
                         "export it with the batch as positional arguments")
    for k, arg in enumerate(args):
        if not isinstance(arg, torch.Tensor):
            raise GraphError(f"{label}: argument {k} of the forward is of type "
                             f"{type(arg).__name__}, not a tensor; export it with the batch as "
                             "positional tensors (a dict or list of tensors spread out as "
                             "arguments, numbers set on the module)")
    _check_loss(program, label)
    module = program.module()
    _constants_as_buffers(module, program)
    unread = set(unused_parameters(program))
    for name in unread:  # no gradient reaches it: frozen, as eager is
        module.get_parameter(name).requires_grad_(False)
    if not any(p.requires_grad for p in module.parameters()):
        raise GraphError(f"{label}: no parameter of the program takes a gradient from the loss: "
                         "there is no training step to place")
    wrapped = _Tupled(module)
    try:
        from torch._functorch.aot_autograd import aot_export_module
        with without_onednn():
            joint, sig = aot_export_module(wrapped, list(args), trace_joint=True,
                                           output_loss_index=0)
    except Exception as e:  # noqa: BLE001 - tracing raises many types; the user gets one line
        raise GraphError(f"{label}: cannot derive the backward of the exported forward "
                         f"(data-dependent shapes, custom or non-differentiable ops?): "
                         f"{one_line(e)}") from None
    state = dict(wrapped.named_parameters(remove_duplicate=False))
    state.update(wrapped.named_buffers(remove_duplicate=False))
    strip = lambda n: n[2:] if n.startswith("m.") else n  # noqa: E731 - _Tupled's prefix
    step = StepGraph(
        module=joint, param_names=[strip(n) for n in sig.parameters],
        buffer_names=[strip(n) for n in sig.buffers], state_names=[],
        input_names=list(program.graph_signature.user_inputs),
        params=[state[n].detach().clone() for n in sig.parameters],
        buffers=[state[n].detach().clone() for n in sig.buffers], states=[],
        batch=[a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args],
        optimizer=optimizer, unread=unread)
    _rewrite(step, sig)
    return step


def _constants_as_buffers(module: nn.Module, program) -> None:
    """A plain tensor attribute the forward reads (class weights, a mask) is a lifted constant
    of the program, a real tensor AOT's fake tracing refuses; as a non-persistent buffer it
    becomes an input of the step like any buffer, which the step never updates."""
    for fqn in program.graph_signature.inputs_to_lifted_tensor_constants.values():
        owner_name, _, attr = fqn.rpartition(".")
        owner = module.get_submodule(owner_name) if owner_name else module
        value = getattr(owner, attr, None)
        if isinstance(value, torch.Tensor) and not isinstance(value, nn.Parameter) and \
                attr not in owner._buffers:
            delattr(owner, attr)
            owner.register_buffer(attr, value, persistent=False)


def unused_parameters(program) -> list[str]:
    """The parameters no op of the program reads: one a model declares and never uses, or
    one side of a tied pair (``head.weight = embed.weight``), which torch.export's saved
    program keeps as two entries, one of them read by every use. Eager training gives an
    unused parameter no gradient and leaves it as it is; so does the step."""
    users = {n.name: len(n.users) for n in program.graph.nodes if n.op == "placeholder"}
    return [fqn for ph, fqn in program.graph_signature.inputs_to_parameters.items()
            if users.get(ph, 0) == 0]


def _check_loss(program, label: str) -> None:
    outs = program.graph_signature.user_outputs
    node = next((n for n in program.graph.nodes if n.name in outs), None) if len(outs) == 1 \
        else None
    val = node.meta.get("val") if node is not None else None
    if not isinstance(val, torch.Tensor) or val.dim() != 0 or not val.is_floating_point():
        shape = f" of shape {list(val.shape)}" if isinstance(val, torch.Tensor) else ""
        raise GraphError(f"{label}: the forward must return one scalar floating-point loss "
                         f"(it returns {len(outs)} output(s){shape})")


def _rewrite(step: StepGraph, sig) -> None:
    """Drops detach, adds optimizer-state placeholders and update calls, and sets the outputs
    to (loss, new params, new buffers, new states). Fills the role tables."""
    graph = step.module.graph
    _drop_detach(graph)
    nodes = {n.name: n for n in graph.nodes}
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    n_p, n_b = len(step.param_names), len(step.buffer_names)
    p_nodes, b_nodes = placeholders[:n_p], placeholders[n_p:n_p + n_b]
    i_nodes = placeholders[n_p + n_b:]
    grads = {sig.backward_signature.gradients_to_parameters[g]: g
             for g in sig.backward_signature.gradients_to_parameters}
    output = graph.find_nodes(op="output")[0]
    loss = nodes[sig.user_outputs[0]]
    for node, name in zip(p_nodes, sig.parameters):
        step.role[node.name], step.owner[node.name] = "param", _strip(name)
    for node in b_nodes:
        step.role[node.name] = "buffer"
    for node in i_nodes:
        step.role[node.name] = "input"
    state_nodes = _add_states(step, graph, p_nodes, sig.parameters, grads, i_nodes)
    new_params = _add_updates(step, graph, output, p_nodes, sig.parameters, grads, nodes,
                              state_nodes)
    new_buffers = []
    for node, name in zip(b_nodes, sig.buffers):
        upd = next((k for k, v in sig.buffers_to_mutate.items() if v == name), None)
        new_buffers.append(nodes[upd] if upd else node)
        if upd:
            step.buffer_update[_strip(name)] = upd
    new_states = [n for group in state_nodes for n in group[1]]
    output.args = ((loss, *new_params, *new_buffers, *new_states),)
    graph.eliminate_dead_code()
    graph.lint()
    step.module.recompile()
    _label_passes(step, loss, new_buffers)


def _strip(name: str) -> str:
    return name[2:] if name.startswith("m.") else name


def _drop_detach(graph: fx.Graph) -> None:
    """AOT autograd's detach calls are identities in a graph run without autograd; export's
    dtype/device checks (``_assert_tensor_metadata``, after a ``.to``) compute nothing and, kept,
    would be placed like ops and pull their input across devices."""
    checks = getattr(torch.ops.aten, "_assert_tensor_metadata", None)
    check = getattr(checks, "default", None)
    for node in list(graph.nodes):
        if node.op == "call_function" and node.target is torch.ops.aten.detach.default:
            node.replace_all_uses_with(node.args[0])
            graph.erase_node(node)
        elif node.op == "call_function" and check is not None and node.target is check \
                and not node.users:
            graph.erase_node(node)


def _add_states(step, graph, p_nodes, names, grads, i_nodes):
    """Placeholders for the optimizer state of every parameter with a gradient, before the
    batch placeholders. Returns [(param node, [state nodes])]."""
    result = []
    anchor = i_nodes[0] if i_nodes else graph.find_nodes(op="output")[0]
    for p_node, name, value in zip(p_nodes, names, step.params):
        if name not in grads:
            continue
        nodes = []
        for sname, init in zip(step.optimizer.state_names, initial_state(step.optimizer, value)):
            with graph.inserting_before(anchor):
                node = graph.placeholder(f"state_{len(step.state_names)}")
            node.meta["val"] = torch.empty_like(init, device="meta")
            step.state_names.append(f"{_strip(name)}.{sname}")
            step.states.append(init)
            step.role[node.name], step.owner[node.name] = "state", _strip(name)
            nodes.append(node)
        result.append((p_node, nodes))
    return result


def _add_updates(step, graph, output, p_nodes, names, grads, nodes, state_nodes):
    """One update call per parameter with a gradient; returns the new-parameter nodes. The
    new states replace the state placeholders in ``state_nodes`` (the step's outputs)."""
    states = {p.name: s for p, s in state_nodes}
    function, hyper = update_call(step.optimizer)
    new_params = []
    for p_node, name in zip(p_nodes, names):
        if name not in grads:
            new_params.append(p_node)
            continue
        grad = nodes[grads[name]]
        step.grad_of[_strip(name)] = grad.name
        s = states[p_node.name]
        with graph.inserting_before(output):
            call = graph.call_function(function, (p_node, grad, *s, *hyper))
            new_params.append(_update_outputs(graph, call, p_node, s))
        step.role[call.name], step.owner[call.name] = "optimizer", _strip(name)
    return new_params


def _update_outputs(graph, call, p_node, states: list) -> fx.Node:
    """Sets the update call's meta values; with state, indexes its outputs (new parameter,
    new states) and puts the new states in ``states``. Returns the new-parameter node."""
    vals = [p_node.meta["val"], *(s.meta["val"] for s in states)]
    if not states:
        call.meta["val"] = torch.empty_like(vals[0], device="meta")
        return call
    outs = [graph.call_function(operator.getitem, (call, i)) for i in range(len(vals))]
    for o, v in zip(outs, vals):
        o.meta["val"] = torch.empty_like(v, device="meta")
    call.meta["val"] = tuple(o.meta["val"] for o in outs)
    states[:] = outs[1:]
    return outs[0]


def _label_passes(step: StepGraph, loss: fx.Node, new_buffers: list[fx.Node]) -> None:
    """Forward: every op the loss or a buffer update depends on; the rest is backward."""
    forward: set[str] = set()
    stack = [loss, *new_buffers]
    while stack:
        node = stack.pop()
        if node.name in forward:
            continue
        forward.add(node.name)
        stack.extend(node.all_input_nodes)
    for node in step.module.graph.nodes:
        if node.op == "output" or node.name in step.role:
            continue
        if node.op == "call_function" and node.target is operator.getitem and \
                node.args[0].name in step.role and step.role[node.args[0].name] == "optimizer":
            step.role[node.name] = "optimizer"
            continue
        step.role[node.name] = "forward" if node.name in forward else "backward"
