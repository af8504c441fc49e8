"""The ablation at 100 samples without heuristic starts on the page's 12 test fine-tuning
cases (nmt_2l, nmt_4l, transformer_2l_d256, inception_v3_b8_96 x post-4gpu, hetero,
hdp-8gpu), on fine-tuning seeds other than the page's 0-2: does the shipped policy's margin
hold? Run once, after round 7 was shipped and its page made. All simulated. Usage:
    python finetune/attempts/v20_round7/test_seeds.py SEEDS OUT.json [CKPT]"""
import sys
sys.path.insert(0, ".")
from finetune.variants import main

GRAPHS = ("nmt_2l", "nmt_4l", "transformer_2l_d256", "inception_v3_b8_96")

if __name__ == "__main__":
    seeds, out = sys.argv[1], sys.argv[2]
    main({"zs64": {}}, ["zs64", seeds, out, "100", *sys.argv[3:]], graphs=GRAPHS, split="test")
