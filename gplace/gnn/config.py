"""Settings of the learned placer, one dataclass per component (no torch here, so that the
CLI builds its options from these defaults without importing the network)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class LearnConfig:
    samples: int = 16            # K: placements rolled out per problem per step
    ppo_epochs: int = 4          # gradient steps on each rollout (Post: ~10 for its table)
    clip: float = 0.2            # PPO clip range, per decision
    ce_weight: float = 1.0       # weight of the elite cross-entropy (per decision)
    entropy_coef: float = 0.01   # keeps exploration alive while the elites pull the policy
    elite_size: int = 4          # placements kept in each problem's elite set
    lr: float = 1e-3             # Adam
    w0_lr_scale: float = 10.0    # the global decision weights' lr / lr (GNNPolicy.param_groups)
    temperature: float = 1.0     # rollouts and the loss use softmax(logits / temperature)
    dagger: float = 0.0          # weight of the cross-entropy towards the best elite along the
                                 # policy's own greedy schedule (learn.onpolicy_loss)
    dagger_follow: float = 0.5   # ... which follows the elite at each decision with this
                                 # probability (0: the policy's own states only)
    dagger_temperature: float = 0.0  # > 0: ... and otherwise samples the policy at this
                                     # temperature instead of taking its argmax
    ce_work: float = 0.0         # share of each imitation cross-entropy's weight spread over
                                 # the decisions by the unit's work (learn.decision_weights;
                                 # 0: every decision counts the same)


@dataclass(frozen=True)
class PretrainConfig:
    corpus: str = "datasets"
    clusters: tuple[str, ...] = ("post-2gpu", "post-4gpu", "hetero")  # hdp-8gpu, nvlink-8gpu
                                              # stay unseen for the generalization study
    random_clusters: int = 2       # random clusters per training graph (and 1 per validation
                                   # graph), besides the presets
    problems_per_step: int = 2     # (graph, cluster) problems per training step
    max_steps: int = 300
    val_every: int = 50            # training steps between validations
    hidden_channels: int = 64
    num_layers: int = 3
    seed: int = 0
    max_graph_ops: int = 14_000    # skip larger graphs: a step on NASNet (26k ops) costs ~5x
                                   # one on ResNet-50, and the 2-core machine is the limit
    threads: int = 1               # torch intra-op threads; more were slower on 2 busy cores
    expert_budget: int = 0         # > 0: each training problem's elite set also holds an expert
                                   # placement from a search of this many samples (experts.py)
    expert_from: str | None = None # the expert search starts from this policy checkpoint
                                   # (None: the untrained network), the next round of
                                   # expert iteration
    init_from: str | None = None   # start from this policy checkpoint's weights (its network
                                   # shape) instead of a fresh network: the next round of
                                   # expert iteration continues the last one's policy
    ema_decay: float = 0.0         # > 0: validate and ship an exponential moving average of
                                   # the weights (per training step); the greedy placement
                                   # swings with every step's weights, their average less
    learn: LearnConfig = field(default_factory=lambda: LearnConfig(
        samples=12, ppo_epochs=3, lr=1e-3, ce_weight=0.1))


@dataclass(frozen=True)
class FinetuneConfig:
    # temperature 0.25: picked on the 18 validation cases at 100 samples (geomean / best
    # heuristic: T=1 0.766, 0.5 0.748, 0.25 0.742, 0.1 0.749); an imitation-pretrained policy is
    # diffuse (1.1 nats per decision against 0.28 untrained on nmt_4l/hdp-8gpu), and its samples
    # at T=1 are mostly noise. lr 1e-3: picked on the 9 validation cases at 100 samples, 6 seeds
    # (finetune/HISTORY.md, the learning-rate side study): the pretrained pipeline
    # 0.717x the best heuristic against 0.736x at 1e-2 (3e-4: 0.716x; no learning: 0.730x), the
    # same on 6 more seeds and at 300 samples. At 1e-2 Adam's first round moved the pretrained
    # policy 0.3-1.4 nats per decision: it washed out what pretraining gave.
    learn: LearnConfig = field(default_factory=lambda: LearnConfig(
        samples=10, ppo_epochs=2, lr=1e-3, ce_weight=0.1, temperature=0.25))
    local_fraction: float = 0.8  # share of a round spent on local moves once ramped up
    local_start: float = 0.2     # local share of the first round
    local_ramp: int = 150        # samples over which the local share reaches local_fraction
    policy_mix: float = 0.5      # weight of the policy in the local moves' device distribution
    zero_shot_rollouts: int = 64 # zero-shot: the best of the greedy rollout and this many
                                 # sampled ones by the list schedule's own makespan estimate
                                 # (nothing measured; 0: the greedy rollout). 64: picked on the
                                 # 48 wider validation problems (greedy 0.757x the best
                                 # heuristic, 16: 0.742x, 64: 0.739x; finetune/HISTORY.md)
    chain_moves: float = 0.5     # share of local moves that also move the heaviest-traffic
                                 # neighbours (a geometric number of steps along them)
