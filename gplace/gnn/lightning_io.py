"""The Lightning side of a pretraining run (gplace.gnn.pretrain): the EMA callback, the
checkpoint to resume from, the best validation checkpoint's weights, a Lightning checkpoint
exported as a policy file that ``gplace.load`` reads, and Lightning's advertisement kept out of
the output."""

from __future__ import annotations

import logging
from pathlib import Path

import lightning as L

from gplace.gnn.config import PretrainConfig
from gplace.gnn.policy import GNNPolicy, upgraded
from gplace.io import read_checkpoint


def averaging(cfg: PretrainConfig) -> list:
    """The EMA callback (validation, checkpoints and the written policy use the average)."""
    if cfg.ema_decay <= 0:
        return []
    return [L.pytorch.callbacks.EMAWeightAveraging(decay=cfg.ema_decay)]


class ResumeCheckpoint(L.pytorch.callbacks.ModelCheckpoint):
    """``last.ckpt`` every ``every`` optimizer steps, except that a step followed by a
    validation is saved after the validation and the best-checkpoint callback listed before
    this one, so that a run stopped during a validation resumes before it and runs it
    (Lightning's own rule saves before it)."""

    def __init__(self, dirpath: Path, every: int, validation_every: int):
        super().__init__(dirpath=dirpath, save_last=True, every_n_train_steps=every)
        self._validation_every = validation_every

    def on_train_batch_end(self, trainer, pl_module, *args, **kwargs) -> None:
        if trainer.global_step % self._validation_every:
            super().on_train_batch_end(trainer, pl_module, *args, **kwargs)

    def on_validation_end(self, trainer, pl_module) -> None:
        if not self._should_skip_saving_checkpoint(trainer):
            self._save_last_checkpoint(trainer, self._monitor_candidates(trainer))

    def on_train_end(self, trainer, pl_module) -> None:  # the last step, whatever came before
        if not self._should_skip_saving_checkpoint(trainer):
            self._save_last_checkpoint(trainer, self._monitor_candidates(trainer))


def select_best(policy: GNNPolicy, callback) -> tuple[str, float] | None:
    """Loads the weights of the best validation checkpoint into ``policy`` (model selection
    on the validation split); (checkpoint name, its validation figure), or None."""
    path = getattr(callback, "best_model_path", "")
    if not path or not Path(path).exists():
        return None
    state = read_checkpoint(path, "Lightning checkpoint")["state_dict"]
    policy.load_state_dict(upgraded({k[len("policy."):]: v for k, v in state.items()
                                     if k.startswith("policy.")}))
    return Path(path).name, float(callback.best_model_score)


def export_checkpoint(ckpt: str | Path, out: str | Path, meta: dict | None = None) -> Path:
    """Writes the policy of a pretraining run's Lightning checkpoint (gplace.gnn.pretrain's
    ``checkpoints/``: ``best-step=...ckpt`` or ``last.ckpt``) as a policy file that
    ``gplace.load`` reads, e.g. to take a run's weights before it ends."""
    record = read_checkpoint(ckpt, "Lightning checkpoint")
    cfg = record["hyper_parameters"]["config"]
    policy = GNNPolicy(cfg["hidden_channels"], cfg["num_layers"], cfg.get("type_channels", 16),
                       head_hidden=cfg.get("head_hidden", 0), order=cfg.get("order", "rank"))
    policy.load_state_dict(upgraded({k[len("policy."):]: v
                                     for k, v in record["state_dict"].items()
                                     if k.startswith("policy.")}))
    steps = int(record["global_step"]) // int(cfg["learn"]["ppo_epochs"])
    policy.save(out, meta={"config": cfg, "steps": steps, "exported_from": Path(ckpt).name,
                           **(meta or {})})
    return Path(out)


class NoTips(logging.Filter):
    """Drops Lightning's lines that say nothing to a gplace user: the advertisement of its cloud
    logger, "TPU available: False ...", and the lines that say a checkpoint is restored or that
    ``max_steps`` is reached (pretraining's own lines say so, with the round and the step). Its
    GPU line stays."""

    DROPPED = ("\N{ELECTRIC LIGHT BULB} Tip", "TPU available: False",
               "`Trainer.fit` stopped: `max_steps", "Restoring states from the checkpoint",
               "Restored all states", "Found current_model_state in the checkpoint")

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(self.DROPPED)


def quiet_lightning_tips() -> None:
    """Installs :class:`NoTips` on Lightning's rank-zero logger (once)."""
    rank_zero = logging.getLogger("lightning.pytorch.utilities.rank_zero")
    if not any(isinstance(f, NoTips) for f in rank_zero.filters):
        rank_zero.addFilter(NoTips())
