#!/usr/bin/env bash
# Rebuilds finetune/RESULTS.md (does pretraining pay?) from a fresh clone after scripts/setup.sh.
# Every step time is simulated (estimates). About 45 minutes on a 2-core machine.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
CKPT=${CKPT:-gplace/checkpoints/policy.pt}
# ASSEMBLE_ONLY=1: the bars and the page from the records as they are (after pretrain.headroom).
if [ -z "${ASSEMBLE_ONLY:-}" ]; then
# Zero-shot (no samples) on every test and validation graph x post-4gpu, hetero, hdp-8gpu.
$PY -m finetune.study --mode zero-shot --split test --checkpoint "$CKPT" --out finetune
$PY -m finetune.study --mode zero-shot --split validation --checkpoint "$CKPT" --out finetune
# Fine-tuning, the ablation and the local-search baselines on four test graphs (3 families), 3 seeds,
# in two parallel shards (InceptionV3 alone is about half the work) sharing the baseline cache.
mkdir -p finetune/shards/a finetune/shards/b finetune/cache
ln -sfn ../../cache finetune/shards/a/cache
ln -sfn ../../cache finetune/shards/b/cache
$PY -m finetune.study --mode all --split test --graphs inception_v3_b8_96 --seeds 3 \
    --checkpoint "$CKPT" --out finetune/shards/a &
A=$!
$PY -m finetune.study --mode all --split test --graphs nmt_2l nmt_4l transformer_2l_d256 --seeds 3 \
    --checkpoint "$CKPT" --out finetune/shards/b
wait $A
$PY -m finetune.study --split test --out finetune \
    --from-csv finetune/shards/a/results_test.csv finetune/shards/b/results_test.csv
# The same on the validation families: one graph each, 1 seed (the fine-tuning temperature was
# picked on these cases, so they are not independent of it).
$PY -m finetune.study --mode all --split validation --graphs xception_b8_96 --seeds 1 \
    --checkpoint "$CKPT" --out finetune/shards/a &
A=$!
$PY -m finetune.study --mode all --split validation --graphs gru_lm_2l_h512 wide_deep_8x100k \
    --seeds 1 --checkpoint "$CKPT" --out finetune/shards/b
wait $A
$PY -m finetune.study --split validation --out finetune \
    --from-csv finetune/shards/a/results_validation.csv finetune/shards/b/results_validation.csv
rm -rf finetune/shards
fi
# The pretraining bars from these records and the committed ones of pretrain/ and finetune/.
$PY -m finetune.bars > /dev/null
{
  cat finetune/RESULTS.head.md
  echo; echo "## The pretraining bars (tables_bars.md, \`python -m finetune.bars\`)"; echo
  cat finetune/tables_bars.md
  echo; echo "## Zero-shot, test split (tables_test-zero-shot.md)"; echo
  cat finetune/tables_test-zero-shot.md
  echo; echo "## Zero-shot, validation split (tables_validation-zero-shot.md)"; echo
  cat finetune/tables_validation-zero-shot.md
  echo; echo "## Fine-tuning and the ablation, test split (tables_test.md)"; echo
  cat finetune/tables_test.md
  echo; echo "## Fine-tuning and the ablation, validation split (tables_validation.md; 1 seed)"; echo
  cat finetune/tables_validation.md
} > finetune/RESULTS.md
echo "wrote finetune/RESULTS.md"
