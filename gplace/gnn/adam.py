"""Adam (Kingma and Ba, ICLR 2015) for fine-tuning on the CPU, without torch.optim.

``torch.optim.Adam`` on CPU tensors runs its single-tensor loop; this module runs the same
in-place operations in the same order (``lerp_``, ``mul_().addcmul_``, the bias corrections as
Python floats, ``addcdiv_``), so the weights after every step are equal bit for bit
(tests/gnn/test_adam.py). It exists because torch.optim's Optimizer wraps its constructor's
``add_param_group``, ``zero_grad`` and ``step`` in torch._dynamo's guards, which import
torch._dynamo (1.5 s) the first time one runs; a fine-tuning ``gplace place`` needs none of it.
Only what fine-tuning uses is here: no weight decay, amsgrad, maximize or complex parameters.
"""

from __future__ import annotations

import torch


class Adam:
    """``torch.optim.Adam(param_groups)`` with lr, betas and eps per group (defaults as torch's)."""

    def __init__(self, param_groups: list[dict], betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8):
        self.param_groups = [{"betas": betas, "eps": eps, **g, "params": list(g["params"])}
                             for g in param_groups]
        self.state: dict[torch.Tensor, dict] = {}

    def zero_grad(self) -> None:
        """Drops every gradient (torch's default, set_to_none)."""
        for group in self.param_groups:
            for p in group["params"]:
                p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is not None:
                    self._update(p, group["lr"], beta1, beta2, group["eps"])

    def _update(self, p: torch.Tensor, lr: float, beta1: float, beta2: float,
                eps: float) -> None:
        state = self.state.get(p)
        if state is None:
            state = self.state[p] = {"step": torch.tensor(0.0),
                                     "exp_avg": torch.zeros_like(p),
                                     "exp_avg_sq": torch.zeros_like(p)}
        grad, exp_avg, exp_avg_sq = p.grad, state["exp_avg"], state["exp_avg_sq"]
        state["step"] += 1
        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        step = state["step"].item()
        bias_correction1 = 1 - beta1 ** step
        bias_correction2 = 1 - beta2 ** step
        step_size = lr / bias_correction1
        denom = (exp_avg_sq.sqrt() / bias_correction2 ** 0.5).add_(eps)
        p.addcdiv_(exp_avg, denom, value=-step_size)
