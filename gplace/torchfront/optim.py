"""The optimizer's update as functional ops of the step graph: one call per parameter, like
TensorFlow's ``ResourceApply*`` ops, so that a parameter, its state and its update form one
colocation group.

The arithmetic is that of ``torch.optim``'s single-tensor CPU paths (``_single_tensor_sgd``
without momentum, ``_single_tensor_adam`` without AMSGrad or weight decay), in the same order,
so that one step of the placed program gives the parameters ``torch.optim`` gives, bit for bit
on one CPU (tests/torchfront/test_placed.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gplace.errors import ConfigError

OPTIMIZERS = ("sgd", "adam")


@dataclass(frozen=True)
class OptimizerConfig:
    """The optimizer that the imported step applies after the backward."""

    name: str = "sgd"      # "sgd" or "adam"; SGD: the cheapest update, no state
    lr: float = 0.01       # learning rate (torch.optim.SGD needs one; Adam's default is 1e-3)
    beta1: float = 0.9     # Adam: first-moment decay (torch.optim.Adam's default)
    beta2: float = 0.999   # Adam: second-moment decay (torch.optim.Adam's default)
    eps: float = 1e-8      # Adam: denominator floor (torch.optim.Adam's default)

    def __post_init__(self) -> None:
        if self.name not in OPTIMIZERS:
            raise ConfigError(f"unknown optimizer {self.name!r}; choose one of "
                              f"{', '.join(OPTIMIZERS)}")
        if not self.lr > 0:
            raise ConfigError(f"optimizer learning rate {self.lr} must be > 0")

    @property
    def state_names(self) -> tuple[str, ...]:
        """The per-parameter state tensors, in the order the update takes and returns them."""
        return ("exp_avg", "exp_avg_sq", "step") if self.name == "adam" else ()

    @property
    def flops_per_element(self) -> int:
        """Arithmetic per parameter element, as gplace.importer.flops counts ApplyGradientDescent
        (2) and ApplyAdam (10)."""
        return 10 if self.name == "adam" else 2

    @property
    def tf_type(self) -> str:
        """The TensorFlow op type of the update, which the policy's vocabulary knows."""
        return "ResourceApplyAdam" if self.name == "adam" else "ResourceApplyGradientDescent"


def optimizer_config(optimizer: str | OptimizerConfig | None) -> OptimizerConfig:
    """An OptimizerConfig from a name (default SGD) or a config."""
    if isinstance(optimizer, OptimizerConfig):
        return optimizer
    return OptimizerConfig(name=(optimizer or "sgd").lower())


def initial_state(config: OptimizerConfig, param: torch.Tensor) -> list[torch.Tensor]:
    """The state torch.optim creates at the first step: zeros, and a float32 step count."""
    if config.name == "adam":
        return [torch.zeros_like(param), torch.zeros_like(param), torch.tensor(0.0)]
    return []


def sgd_update(param: torch.Tensor, grad: torch.Tensor, lr: float) -> torch.Tensor:
    """``param - lr * grad`` as torch.optim.SGD computes it (``param.add_(grad, alpha=-lr)``)."""
    return param.add(grad, alpha=-lr)


def adam_update(param: torch.Tensor, grad: torch.Tensor, exp_avg: torch.Tensor,
                exp_avg_sq: torch.Tensor, step: torch.Tensor, lr: float, beta1: float,
                beta2: float, eps: float) -> tuple[torch.Tensor, ...]:
    """One Adam step (Kingma & Ba, ICLR 2015) as torch.optim.Adam's single-tensor path.
    Returns (param, exp_avg, exp_avg_sq, step), all new tensors."""
    step = step + 1
    exp_avg = exp_avg.lerp(grad, 1 - beta1)
    exp_avg_sq = exp_avg_sq.mul(beta2).addcmul(grad, grad, value=1 - beta2)
    t = step.item()
    step_size = lr / (1 - beta1 ** t)
    denom = (exp_avg_sq.sqrt() / (1 - beta2 ** t) ** 0.5).add(eps)
    return param.addcdiv(exp_avg, denom, value=-step_size), exp_avg, exp_avg_sq, step


def torch_optimizer(config: OptimizerConfig, params) -> torch.optim.Optimizer:
    """The torch.optim optimizer the update ops reproduce (for checks), single-tensor path."""
    if config.name == "adam":
        return torch.optim.Adam(params, lr=config.lr, betas=(config.beta1, config.beta2),
                                eps=config.eps, foreach=False)
    return torch.optim.SGD(params, lr=config.lr, foreach=False)
