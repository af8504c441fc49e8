"""Zero-shot as the best of K rollouts by the list schedule's own makespan estimate, and the
fine-tuning cross-entropy weight: the 9 validation cases, ft 100 without heuristic starts
(issue 12's last bar), pretrained and untrained. All simulated. Usage (from the repository
root; CKPT defaults to the shipped policy):
    python finetune/attempts/v19_zero_shot_rollouts/study.py VARIANTS SEEDS OUT.json [BUDGET [CKPT]]"""
import sys
sys.path.insert(0, ".")
from finetune.variants import main

VARIANTS = {  # name: FinetuneConfig fields (learn.* for LearnConfig)
    "base": {"zero_shot_rollouts": 0},   # as before v19: zero-shot is the greedy rollout
    "zs64": {"zero_shot_rollouts": 64},  # the best of 64 rollouts by own estimate (adopted)
    "ce1": {"zero_shot_rollouts": 0, "learn.ce_weight": 1.0},
    "ce0.3": {"zero_shot_rollouts": 0, "learn.ce_weight": 0.3},
    "ce1lr3e-3": {"zero_shot_rollouts": 0, "learn.ce_weight": 1.0, "learn.lr": 3e-3},
    "T0.5": {"learn.temperature": 0.5},
    "T0.15": {"learn.temperature": 0.15},
    # "screen8" and "zs64screen8" ran with an option removed after this study, "suffix0.5" and
    # "suffix1" ({"suffix_moves": 0.5 or 1.0}) with suffix_moves.patch applied (README)
}

if __name__ == "__main__":
    main(VARIANTS, sys.argv[1:])
