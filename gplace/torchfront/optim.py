"""The optimizer's update as functional ops of the step graph: one call per parameter, like
TensorFlow's ``ResourceApply*`` ops, so that a parameter, its state and its update form one
colocation group.

Optimizers, by the name ``--optimizer`` and ``load_graph(..., optimizer=)`` take, with
hyperparameters as ``name:key=value,...`` (``sgd:momentum=0.9,nesterov=true``,
``adamw:lr=3e-4,weight_decay=0.1``; :func:`parse_optimizer`):

- ``sgd``: torch.optim.SGD, lr 0.01; keys lr, momentum, dampening, nesterov, weight_decay;
- ``momentum``: ``sgd`` with momentum 0.9 (TensorFlow's MomentumOptimizer's usual setting);
- ``adam``: torch.optim.Adam, lr 0.01; keys lr, beta1, beta2, eps, weight_decay (L2, added
  to the gradient);
- ``adamw``: torch.optim.AdamW (Loshchilov & Hutter, ICLR 2019), lr 0.01, weight_decay 0.01,
  decoupled from the gradient; the same keys as ``adam``.

The arithmetic is that of ``torch.optim``'s single-tensor CPU paths (``_single_tensor_sgd``,
``_single_tensor_adam``), in the same order, so that a step of the placed program gives the
parameters and optimizer state ``torch.optim`` gives, bit for bit on one CPU
(tests/torchfront/test_placed.py). Not covered: AMSGrad, ``maximize``, learning-rate schedules.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from gplace.errors import ConfigError

ALGORITHMS = ("sgd", "adam", "adamw")  # what OptimizerConfig.name holds
ALIASES = {"momentum": {"name": "sgd", "momentum": 0.9}}
NAMES = ("sgd", "momentum", "adam", "adamw")  # what a user may write
SGD_KEYS = ("lr", "momentum", "dampening", "nesterov", "weight_decay")
ADAM_KEYS = ("lr", "beta1", "beta2", "eps", "weight_decay")
KEYS = {"sgd": SGD_KEYS, "adam": ADAM_KEYS, "adamw": ADAM_KEYS}
FLOAT_KEYS = ("lr", "momentum", "dampening", "weight_decay", "beta1", "beta2", "eps")
ADAMW_WEIGHT_DECAY = 0.01  # torch.optim.AdamW's default
TRUE, FALSE = ("true", "1", "yes"), ("false", "0", "no")


@dataclass(frozen=True)
class OptimizerConfig:
    """The optimizer that the imported step applies after the backward (the module docstring
    lists the names)."""

    name: str = "sgd"       # "sgd", "adam" or "adamw"; SGD: the cheapest update, no state
    lr: float = 0.01        # learning rate for every name (torch.optim's default is 1e-3)
    momentum: float = 0.0   # SGD: momentum factor; 0: no momentum buffer
    dampening: float = 0.0  # SGD: the gradient enters the buffer times 1 - dampening
    nesterov: bool = False  # SGD: Nesterov momentum (needs momentum > 0 and dampening 0)
    weight_decay: float | None = None  # L2 for sgd and adam, decoupled for adamw; None: 0.01
    #                                    for adamw (torch.optim.AdamW's default), else 0
    beta1: float = 0.9      # Adam: first-moment decay (torch.optim.Adam's default)
    beta2: float = 0.999    # Adam: second-moment decay (torch.optim.Adam's default)
    eps: float = 1e-8       # Adam: denominator floor (torch.optim.Adam's default)

    def __post_init__(self) -> None:
        if self.name not in ALGORITHMS:
            raise ConfigError(f"unknown optimizer {self.name!r}; OptimizerConfig takes one "
                              f"of {', '.join(ALGORITHMS)} (momentum: sgd with momentum=0.9)")
        if self.weight_decay is None:
            decay = ADAMW_WEIGHT_DECAY if self.name == "adamw" else 0.0
            object.__setattr__(self, "weight_decay", decay)  # frozen: resolved once, here
        _check(self)

    @property
    def is_adam(self) -> bool:
        """Adam or AdamW: the same update, the weight decay aside."""
        return self.name in ("adam", "adamw")

    @property
    def kind(self) -> str:
        """The update's name in the OpGraph: ``sgd``, ``momentum``, ``adam`` or ``adamw``."""
        return "momentum" if self.name == "sgd" and self.momentum else self.name

    @property
    def state_names(self) -> tuple[str, ...]:
        """The per-parameter state tensors, in the order the update takes and returns them:
        torch.optim's state keys; SGD's ``step`` stands for torch's absent buffer at step 1."""
        if self.is_adam:
            return ("exp_avg", "exp_avg_sq", "step")
        return ("momentum_buffer", "step") if self.momentum else ()

    @property
    def flops_per_element(self) -> int:
        """Arithmetic per parameter element, as gplace.importer.flops counts
        ApplyGradientDescent (2), ApplyMomentum (4) and ApplyAdam (10); Nesterov's extra
        ``grad + momentum * buf`` adds 2, L2 weight decay (``grad + wd * param``) 2, AdamW's
        decoupled decay (``param * (1 - lr * wd)``, one scalar) 1."""
        base = 10 if self.is_adam else 4 if self.momentum else 2
        decay = 0 if not self.weight_decay else 1 if self.name == "adamw" else 2
        return base + decay + (2 if self.nesterov else 0)

    @property
    def tf_type(self) -> str:
        """The TensorFlow op type of the update, which the policy's vocabulary knows."""
        if self.is_adam:
            return "ResourceApplyAdam"
        return "ResourceApplyMomentum" if self.momentum else "ResourceApplyGradientDescent"

    def as_dict(self) -> dict:
        """{"name", and each hyperparameter of this optimizer}: what placement.json stores."""
        return {"name": self.name, **{k: getattr(self, k) for k in KEYS[self.name]}}

    def describe(self) -> str:
        """``adamw: lr 0.01, beta1 0.9, ...``: every hyperparameter, for a summary."""
        values = ", ".join(f"{k} {_format(getattr(self, k))}" for k in KEYS[self.name])
        return f"{self.name}: {values}"

    @property
    def spec(self) -> str:
        """The name with the hyperparameters that differ from its defaults, as
        :func:`parse_optimizer` reads it back (``adam``, ``sgd:momentum=0.9``)."""
        default = OptimizerConfig(self.name)
        changed = [f"{k}={_format(getattr(self, k))}" for k in KEYS[self.name]
                   if getattr(self, k) != getattr(default, k)]
        return f"{self.name}:{','.join(changed)}" if changed else self.name


def _check(c: OptimizerConfig) -> None:
    """Refuses values torch.optim refuses, and hyperparameters of the other algorithm."""
    label = f"optimizer {c.name}"
    for key in FLOAT_KEYS:
        value = getattr(c, key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                not math.isfinite(value):
            raise ConfigError(f"{label}: {key} = {value!r} must be a finite number")
    if not isinstance(c.nesterov, bool):
        raise ConfigError(f"{label}: nesterov = {c.nesterov!r} must be true or false")
    if not c.lr > 0:
        raise ConfigError(f"{label}: learning rate {c.lr} must be > 0")
    for key in ("momentum", "weight_decay", "eps"):
        if getattr(c, key) < 0:
            raise ConfigError(f"{label}: {key} = {getattr(c, key)} must be >= 0")
    for key in ("beta1", "beta2"):
        if not 0 <= getattr(c, key) < 1:
            raise ConfigError(f"{label}: {key} = {getattr(c, key)} must be in [0, 1)")
    if c.nesterov and (c.momentum <= 0 or c.dampening != 0):
        raise ConfigError(f"{label}: nesterov needs momentum > 0 and dampening 0 "
                          f"(momentum {c.momentum}, dampening {c.dampening})")
    default = OptimizerConfig.__dataclass_fields__
    foreign = [k for k in SGD_KEYS + ADAM_KEYS if k not in KEYS[c.name] and
               getattr(c, k) != default[k].default]
    if foreign:
        raise ConfigError(f"{label}: {', '.join(foreign)} do not apply; it takes "
                          f"{', '.join(KEYS[c.name])}")


def _format(value) -> str:
    return str(value).lower() if isinstance(value, bool) else repr(value)


def parse_optimizer(spec: str) -> OptimizerConfig:
    """The config of ``name`` or ``name:key=value,...`` (the module docstring lists names and
    keys); one ConfigError line for an unknown name or key or a bad value."""
    name, _, rest = spec.strip().partition(":")
    name = name.strip().lower()
    if name not in NAMES:
        raise ConfigError(f"unknown optimizer {name!r} in {spec!r}; choose one of "
                          f"{', '.join(NAMES)} (hyperparameters as name:key=value,...)")
    values, given = dict(ALIASES.get(name, {"name": name})), set()
    for item in rest.split(",") if rest.strip() else []:
        key, eq, raw = (s.strip() for s in item.partition("="))
        if not eq or not key:
            raise ConfigError(f"optimizer {spec!r}: {item.strip()!r} is not key=value")
        if key in given:
            raise ConfigError(f"optimizer {spec!r}: {key} is given twice")
        values[key] = _value(spec, values["name"], key, raw)
        given.add(key)
    return OptimizerConfig(**values)


def _value(spec: str, algorithm: str, key: str, raw: str) -> float | bool:
    """``raw`` as the type of hyperparameter ``key`` of ``algorithm``."""
    if key not in KEYS[algorithm]:
        raise ConfigError(f"optimizer {spec!r}: unknown hyperparameter {key!r}; "
                          f"{algorithm} takes {', '.join(KEYS[algorithm])}")
    if key == "nesterov":
        if raw.lower() not in TRUE + FALSE:
            raise ConfigError(f"optimizer {spec!r}: nesterov={raw!r} must be true or false")
        return raw.lower() in TRUE
    try:
        return float(raw)
    except ValueError:
        raise ConfigError(f"optimizer {spec!r}: {key}={raw!r} is not a number") from None


def optimizer_config(optimizer: str | dict | OptimizerConfig | None) -> OptimizerConfig:
    """An OptimizerConfig from a name or spec (default SGD), a config, or the dict a
    placement.json holds (:meth:`OptimizerConfig.as_dict`)."""
    if isinstance(optimizer, OptimizerConfig):
        return optimizer
    if isinstance(optimizer, dict):
        name = str(optimizer.get("name", "")).lower()
        if name not in KEYS:
            raise ConfigError(f"optimizer record {optimizer}: unknown optimizer {name!r}; "
                              f"choose one of {', '.join(ALGORITHMS)}")
        unknown = sorted(set(optimizer) - {"name", *KEYS[name]})
        if unknown:
            raise ConfigError(f"optimizer record {optimizer}: unknown hyperparameter(s) "
                              f"{', '.join(unknown)}; {name} takes {', '.join(KEYS[name])}")
        return OptimizerConfig(**{**optimizer, "name": name})
    if optimizer is None or isinstance(optimizer, str):
        return parse_optimizer(optimizer or "sgd")
    raise ConfigError(f"optimizer {optimizer!r}: give a name such as 'adam' or an "
                      "OptimizerConfig")


def initial_state(config: OptimizerConfig, param: torch.Tensor) -> list[torch.Tensor]:
    """The state before the first step: zeros, and a float32 step count (torch.optim's
    dtype for Adam's)."""
    if config.is_adam:
        return [torch.zeros_like(param), torch.zeros_like(param), torch.tensor(0.0)]
    if config.momentum:
        return [torch.zeros_like(param), torch.tensor(0.0)]
    return []


def update_call(config: OptimizerConfig) -> tuple:
    """(update function, its hyperparameter arguments): the step graph calls
    ``function(param, grad, *state, *arguments)``, which returns the new parameter (and the
    new state, in :attr:`OptimizerConfig.state_names` order, when there is state)."""
    c = config
    if c.is_adam:
        return adam_update, (c.lr, c.beta1, c.beta2, c.eps, c.weight_decay, c.name == "adamw")
    if c.momentum:
        return momentum_update, (c.lr, c.momentum, c.dampening, c.nesterov, c.weight_decay)
    return sgd_update, (c.lr, c.weight_decay)


def sgd_update(param: torch.Tensor, grad: torch.Tensor, lr: float,
               weight_decay: float = 0.0) -> torch.Tensor:
    """``param - lr * (grad + weight_decay * param)`` as torch.optim.SGD computes it."""
    if weight_decay != 0:
        grad = grad.add(param, alpha=weight_decay)
    return param.add(grad, alpha=-lr)


def momentum_update(param: torch.Tensor, grad: torch.Tensor, buf: torch.Tensor,
                    step: torch.Tensor, lr: float, momentum: float, dampening: float,
                    nesterov: bool, weight_decay: float) -> tuple[torch.Tensor, ...]:
    """One step of SGD with momentum (Sutskever et al., ICML 2013) as torch.optim.SGD's
    single-tensor path. At ``step`` 0 the buffer becomes a copy of the gradient, as torch
    creates it. Returns (param, momentum_buffer, step), all new tensors."""
    if weight_decay != 0:
        grad = grad.add(param, alpha=weight_decay)
    if step.item() == 0:
        buf = grad.clone()
    else:
        buf = buf.mul(momentum).add(grad, alpha=1 - dampening)
    grad = grad.add(buf, alpha=momentum) if nesterov else buf
    return param.add(grad, alpha=-lr), buf, step + 1


def adam_update(param: torch.Tensor, grad: torch.Tensor, exp_avg: torch.Tensor,
                exp_avg_sq: torch.Tensor, step: torch.Tensor, lr: float, beta1: float,
                beta2: float, eps: float, weight_decay: float = 0.0,
                decoupled: bool = False) -> tuple[torch.Tensor, ...]:
    """One Adam step (Kingma & Ba, ICLR 2015) as torch.optim.Adam's single-tensor path; with
    ``decoupled`` the weight decay of AdamW. Returns (param, exp_avg, exp_avg_sq, step), all
    new tensors."""
    step = step + 1
    if weight_decay != 0:
        if decoupled:
            param = param.mul(1 - lr * weight_decay)
        else:
            grad = grad.add(param, alpha=weight_decay)
    exp_avg = exp_avg.lerp(grad, 1 - beta1)
    exp_avg_sq = exp_avg_sq.mul(beta2).addcmul(grad, grad, value=1 - beta2)
    t = step.item()
    step_size = lr / (1 - beta1 ** t)
    denom = (exp_avg_sq.sqrt() / (1 - beta2 ** t) ** 0.5).add(eps)
    return param.addcdiv(exp_avg, denom, value=-step_size), exp_avg, exp_avg_sq, step


def torch_optimizer(config: OptimizerConfig, params) -> torch.optim.Optimizer:
    """The torch.optim optimizer the update ops reproduce (for checks), single-tensor path."""
    c = config
    if c.is_adam:
        kind = torch.optim.AdamW if c.name == "adamw" else torch.optim.Adam
        return kind(params, lr=c.lr, betas=(c.beta1, c.beta2), eps=c.eps,
                    weight_decay=c.weight_decay, foreach=False)
    return torch.optim.SGD(params, lr=c.lr, momentum=c.momentum, dampening=c.dampening,
                           nesterov=c.nesterov, weight_decay=c.weight_decay, foreach=False)
