"""How fine-tuning splits its samples between policy rollouts and local moves, and how much the
local moves lean on the policy: the 9 validation cases, ft 100 without heuristic starts (issue
12's last bar), pretrained and untrained. All simulated. Usage (from the repository root):
    python finetune/attempts/v14_search_mix/study.py VARIANTS SEEDS OUT.json"""
import sys
sys.path.insert(0, ".")
from finetune.variants import main

VARIANTS = {  # name: FinetuneConfig fields (learn.* for LearnConfig)
    "base": {},
    "local0.5": {"local_fraction": 0.5},
    "local0.2": {"local_fraction": 0.2, "local_start": 0.2},
    "local0.95": {"local_fraction": 0.95, "local_start": 0.5},
    "mix0.9": {"policy_mix": 0.9},
    "mix0.2": {"policy_mix": 0.2},
    "round20": {"learn.samples": 20},
}
# made when zero-shot was the greedy rollout (before v19's zero_shot_rollouts)
VARIANTS = {name: {"zero_shot_rollouts": 0, **fields} for name, fields in VARIANTS.items()}

if __name__ == "__main__":
    main(VARIANTS, sys.argv[1:])
