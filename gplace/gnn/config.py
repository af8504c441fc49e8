"""Settings of the learned placer, one dataclass per component (no torch here, so that the
CLI builds its options from these dataclasses without importing the network: a field's name is
its option, its default the option's default, and the comment beside it the option's help).
"""

from __future__ import annotations

import inspect
import io
import tokenize
from dataclasses import dataclass, field

from gplace.errors import ConfigError

ORDERS = ("rank", "dispatch")  # the list scheduler's op orders (gplace.gnn.schedule.build_sched)
VALIDATIONS = ("zero-shot", "greedy")  # what pretraining validates (PretrainConfig.validate)


def _check(rules) -> None:
    """Raises ConfigError with the first rule that fails: (bad, message) pairs."""
    for bad, message in rules:
        if bad:
            raise ConfigError(message)


@dataclass(frozen=True)
class LearnConfig:
    """Post's objective as fine-tuning runs it (its defaults); pretraining overrides them with
    IMITATION. Temperature 0.25: picked on the 18 validation cases at 100 samples (geomean /
    best heuristic: T=1 0.766, 0.5 0.748, 0.25 0.742, 0.1 0.749); an imitation-pretrained
    policy is diffuse (1.1 nats per decision against 0.28 untrained on nmt_4l/hdp-8gpu), and
    its samples at T=1 are mostly noise. lr 1e-3: picked on the 9 validation cases at 100
    samples, 6 seeds (finetune/HISTORY.md): 0.717x the best heuristic against 0.736x at 1e-2
    (3e-4: 0.716x; no learning: 0.730x); at 1e-2 Adam's first round moved the pretrained
    policy 0.3-1.4 nats per decision and washed out what pretraining gave."""

    samples: int = 10            # K: placements rolled out per problem per step; 0: imitation
                                 # of the elites only
    ppo_epochs: int = 2          # gradient steps on each rollout (Post: ~10 for its table)
    clip: float = 0.2            # PPO clip range, per decision
    ce_weight: float = 0.1       # weight of the elite cross-entropy (per decision)
    entropy_coef: float = 0.01   # keeps exploration alive while the elites pull the policy
    elite_size: int = 4          # placements kept in each problem's elite set
    lr: float = 1e-3             # Adam learning rate
    w0_lr_scale: float = 10.0    # the global decision weights' learning rate / lr
                                 # (GNNPolicy.param_groups)
    temperature: float = 0.25    # rollouts and the loss use softmax(logits / temperature)
    dagger: float = 0.0          # weight of the cross-entropy towards the best elite along the
                                 # policy's own greedy schedule (learn.onpolicy_loss; DAgger,
                                 # Ross et al. 2011)
    dagger_follow: float = 0.5   # ... which follows the elite at each decision with this
                                 # probability (0: the policy's own states only)
    dagger_temperature: float = 0.0  # > 0: ... and otherwise samples the policy at this
                                     # temperature instead of taking its argmax
    ce_work: float = 0.0         # share of each imitation cross-entropy's weight spread over
                                 # the decisions by the unit's work (learn.decision_weights;
                                 # 0: every decision counts the same)

    def __post_init__(self):
        _check([(self.samples == 1 or self.samples < 0, "--samples must be 0 or >= 2"),
                (self.ppo_epochs < 1, "--ppo-epochs must be >= 1"),
                (not self.ce_weight >= 0, "--ce-weight must be >= 0"),
                (not 0 < self.clip < 10, "--clip must be in (0, 10)"),
                (not 0 <= self.entropy_coef < 1e3, "--entropy-coef must be in [0, 1000)"),
                (not 0 < self.w0_lr_scale < 1e6, "--w0-lr-scale must be in (0, 1e6)"),
                (self.elite_size < 1, "--elite-size must be >= 1"),
                (not self.lr > 0, "--lr must be > 0"),
                (not self.temperature > 0, "--temperature must be > 0"),
                (not self.dagger >= 0, "--dagger must be >= 0"),
                (not 0 <= self.dagger_follow <= 1, "--dagger-follow must be in [0, 1]"),
                (not self.dagger_temperature >= 0, "--dagger-temperature must be >= 0"),
                (not 0 <= self.ce_work <= 1, "--ce-work must be in [0, 1]")])


# The recipe of the shipped policy (pretrain/README.md): imitation of the experts only, along
# their schedules and the policy's own, each decision weighted by its unit's work.
IMITATION = dict(samples=0, ppo_epochs=1, ce_weight=1.0, elite_size=1, lr=1e-3,
                 temperature=1.0, dagger=1.0, dagger_follow=0.5, ce_work=1.0)


@dataclass(frozen=True)
class PretrainConfig:
    corpus: str = "pretrain/corpus139"  # corpus folder: a manifest.yaml or any folder of
                                        # .pb/.pbtxt/SavedModel graphs and .pt2 programs,
                                        # where experts are cached (.gplace-cache/ beside
                                        # the graphs); the default is the shipped policy's
                                        # 139 graphs
    unknown_dim: int = 1           # the size of the graphs' unknown dimensions, such as a
                                   # SavedModel signature's None batch (as `gplace place
                                   # --unknown-dim`): give the batch the graphs train at
    optimizer: str = "sgd"         # the optimizer whose updates the step of a PyTorch (.pt2)
                                   # program adds (as `gplace place --optimizer`: sgd,
                                   # momentum, adam or adamw[:key=value,...]); a TensorFlow
                                   # graph has its own
    trust_pt2: bool = False        # load the .pt2 programs without gplace's checks, as
                                   # `gplace place --trust-pt2`: unpickling can run any code,
                                   # so only for files you made or trust
    clusters: tuple[str, ...] = ("post-2gpu", "post-4gpu", "hetero")  # cluster presets or
                                   # YAML files to train on (hdp-8gpu and nvlink-8gpu stay
                                   # unseen for the generalization study)
    random_clusters: int = 2       # random clusters per training graph (and 1 per validation
                                   # graph), besides the presets
    problems_per_step: int = 4     # (graph, cluster) problems per training step
    max_steps: int = 1600          # training steps of each round's imitation (the shipped
                                   # round's best validation was at its last, step 1,600)
    val_every: int = 100           # training steps between validations
    validate: str = "zero-shot"    # the placement validated (and the rounds and checkpoints
                                   # chosen by): "zero-shot", the best of the policy's own
                                   # rollouts (seed 0; without the rollouts of the untrained
                                   # network, the polish and the link queues that `gplace
                                   # place` adds: gplace.gnn.validation.VALIDATION_RULE), or
                                   # "greedy",
                                   # the greedy rollout in the policy's order alone
    hidden_channels: int = 64      # width of the network's layers
    num_layers: int = 3            # message-passing layers of the graph encoder
    type_channels: int = 16        # width of the units' op-type embedding; 0: the network
                                   # reads no op types, only the units' numbers
    head_hidden: int = 0           # > 0: a state head of this width adds a nonlinear function
                                   # of the partial schedule to each decision's logits
                                   # (gplace.gnn.policy.Scores); 0: the linear policy
    order: str = "rank"            # the list scheduler's op order: HEFT's upward "rank" or
                                   # the simulator's "dispatch" order, in which the rollout's
                                   # schedule is the simulated one
    train_orders: str = "policy"   # "policy": learn in the policy's order only; "both": every
                                   # other problem of a step in the other order too (zero-shot
                                   # rolls the policy out in both)
    seed: int = 0                  # problems, rollouts and expert searches; 0 <= seed < 2**32
    max_graph_ops: int = 14_000    # skip larger graphs: a step on NASNet (26k ops) costs ~5x
                                   # one on ResNet-50
    threads: int = 1               # torch intra-op threads per process; the weights depend on
    #                                it (float sums in another order): same count, same weights
    expert_budget: int = 400       # samples of each training problem's expert search, whose
                                   # result joins its elite set (gplace.gnn.experts); 0: none
    expert_from: str | None = None # the first round's expert searches start from this policy
                                   # checkpoint (default: --init, else the untrained network)
    init_from: str | None = None   # every round's imitation starts from this checkpoint's
                                   # weights and network shape instead of a fresh network; it
                                   # is validated first and written back unchanged where no
                                   # round beats it
    ema_decay: float = 0.98        # > 0: validate and ship an exponential moving average of
                                   # the weights (per step); the validated placement swings
                                   # with every step's weights, their average less
    rounds: int = 0                # rounds of expert iteration; 0: until a round improves
                                   # validation by less than min_gain
    min_gain: float = 0.01         # with rounds 0, the least relative improvement of the
                                   # best validation figure that earns another round (a round
                                   # of the whole corpus costs about an hour on 2 cores)
    learn: LearnConfig = field(default_factory=lambda: LearnConfig(**IMITATION))

    def check_rounds_validate(self) -> None:
        """A ConfigError where a round of expert iteration would never validate: rounds are
        kept or dropped by their validation figure (imitation alone may skip it)."""
        _check([(self.val_every > self.max_steps,
                 f"--val-every {self.val_every} is over --max-steps {self.max_steps}: a round "
                 f"would never validate, and rounds are compared by their validation; lower "
                 f"--val-every to at most {self.max_steps}")])

    def __post_init__(self):
        lc = self.learn
        _check([(self.max_steps < 1, "--max-steps must be >= 1"),
                (self.unknown_dim < 1, "--unknown-dim must be >= 1"),
                (self.max_graph_ops < 1, "--max-graph-ops must be >= 1"),
                (self.val_every < 1, "--val-every must be >= 1"),
                (self.problems_per_step < 1, "--problems-per-step must be >= 1"),
                (self.random_clusters < 0, "--random-clusters must be >= 0"),
                (self.expert_budget < 0, "--expert-budget must be >= 0"),
                (self.hidden_channels < 1, "--hidden-channels must be >= 1"),
                (self.num_layers < 1, "--num-layers must be >= 1"),
                (self.type_channels < 0, "--type-channels must be >= 0"),
                (self.head_hidden < 0, "--head-hidden must be >= 0"),
                (self.order not in ORDERS, f"--order must be {' or '.join(ORDERS)}"),
                (self.train_orders not in ("policy", "both"),
                 "--train-orders must be policy or both"),
                (self.validate not in VALIDATIONS,
                 f"--validate must be {' or '.join(VALIDATIONS)}"),
                (self.threads < 1, "--threads must be >= 1"),
                (self.rounds < 0, "--rounds must be >= 0"),
                (not 0 <= self.min_gain < 1, "--min-gain must be in [0, 1)"),
                (not 0 <= self.seed < 2**32, "--seed must be in [0, 2**32)"),
                (not 0 <= self.ema_decay < 1, "--ema-decay must be in [0, 1)"),
                (self.expert_from is not None and self.expert_budget == 0,
                 "--expert-from needs --expert-budget > 0"),
                (lc.samples == 0 and (self.expert_budget == 0 or lc.ce_weight == lc.dagger == 0),
                 "--samples 0 (imitation only) needs --expert-budget > 0 and --ce-weight or "
                 "--dagger > 0: there would be nothing to learn from")])


@dataclass(frozen=True)
class FinetuneConfig:
    learn: LearnConfig = field(default_factory=LearnConfig)
    local_fraction: float = 0.8  # share of a round spent on local moves once ramped up
    local_start: float = 0.2     # local share of the first round
    local_ramp: int = 150        # samples over which the local share reaches local_fraction
    policy_mix: float = 0.5      # weight of the policy in the local moves' device distribution
    zero_shot_rollouts: int = 16 # zero-shot: the best of the greedy rollout and this many
                                 # sampled ones in each order by the dispatch-order list
                                 # schedule's makespan estimate (nothing measured; 0: the
                                 # greedy rollouts). 16 per order, the replays and the
                                 # untrained network's (zero_shot_prior): 1.4-1.8x the time
                                 # of 64 in one order (benchmarks/policy_speed.py)
    zero_shot_both_orders: bool = True  # zero-shot rolls out in HEFT's rank order and the
                                 # simulator's dispatch order (gplace.gnn.infer.best_rollout);
                                 # False: the policy's own order and its own estimate
    zero_shot_prior: bool = True  # with both orders: as many rollouts again of the untrained
                                 # network's scores (each unit to the device where it
                                 # finishes first) in the order the policy was not trained in
                                 # (pretrain/DOMAINS.md: less negative transfer on domains
                                 # the corpus lacks)
    zero_shot_polish: int = 3200  # zero-shot then hill-climbs on the dispatch-order
                                 # schedule's estimate, this many replays (moves of one unit or
                                 # a chain; nothing measured; 0: none). 3,200 chosen on the
                                 # validation split: 6,400 gained a little more with twice the
                                 # replays (finetune/HISTORY.md)
    chain_moves: float = 0.5     # share of local moves that also move the heaviest-traffic
                                 # neighbours (a geometric number of steps along them)
    local_screen: int = 16       # each round's local moves: this many times as many drawn,
                                 # the distinct ones of lowest dispatch-order estimate measured
                                 # (gplace.gnn.replay; nothing measured to rank them; 1: every
                                 # drawn move measured). 16 chosen on the validation split
                                 # (finetune/HISTORY.md)
    estimate_contention: bool = True  # the dispatch-order estimate (zero-shot's choice and
                                 # polish, the local moves' screen) books each transfer on its
                                 # link's FIFO channel, as the simulator does (gplace.gnn.dispatch;
                                 # finetune/HISTORY.md); off: transfers never wait (the rule
                                 # expert searches and pretraining's validation keep)


def field_help(cls) -> dict[str, str]:
    """Each field's comment in the source of dataclass ``cls`` (continuation comment lines
    joined): the help text of its command-line option."""
    helps: dict[str, list[str]] = {}
    current, depth = None, 0
    tokens = tokenize.generate_tokens(io.StringIO(inspect.getsource(cls)).readline)
    line_start = True
    for tok in tokens:
        if tok.type in (tokenize.NEWLINE, tokenize.NL):
            line_start = True
            continue
        if tok.type == tokenize.INDENT or tok.type == tokenize.DEDENT:
            continue
        if tok.type == tokenize.NAME and line_start and tok.start[1] == 4 and tok.string not in (
                "def", "return", "class"):
            current = tok.string
        elif tok.type == tokenize.NAME and tok.string == "def" and tok.start[1] == 4:
            break
        if tok.type == tokenize.COMMENT and current is not None:
            helps.setdefault(current, []).append(tok.string.lstrip("#").strip())
        line_start = False
    return {k: " ".join(v) for k, v in helps.items()}
