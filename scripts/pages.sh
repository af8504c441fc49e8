#!/usr/bin/env bash
# Rebuilds every results page that shows the shipped policy (gplace/checkpoints/policy.pt), after
# a new one is shipped or fine-tuning's settings (FinetuneConfig's defaults) change. Each study's
# records name the policy file and the settings that made them (the start of its SHA-256;
# finetune.study.FINETUNE_TAG), and only the columns they made are recomputed: the searches,
# bounds and exact solutions stay. Every step time is simulated (estimates). Run after
# scripts/setup.sh; each step resumes where it stopped.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
nice $PY -m finetune.outside --seeds 0 1 2        # finetune/OUTSIDE.md
nice $PY -m pretrain.domains                      # pretrain/DOMAINS.md, the shipped columns
nice $PY -m finetune.optimality --refresh-place   # finetune/OPTIMALITY.md
nice $PY -m pretrain.specialize                   # pretrain/SPECIALIZE.md
nice $PY -m pretrain.specialize_torch             # pretrain/SPECIALIZE_PYTORCH.md
nice $PY finetune/pytorch_study.py --finetune 100 --seeds 0   # finetune/PYTORCH.md
nice $PY -m finetune.memory                       # finetune/MEMORY.md
bash finetune/run.sh                              # finetune/RESULTS.md and its bars
$PY -m pretrain.headroom --page-only              # pretrain/HEADROOM.md from the new records
ASSEMBLE_ONLY=1 bash finetune/run.sh              # the bars again, with HEADROOM's new floors
