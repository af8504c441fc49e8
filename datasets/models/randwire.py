"""Randomly wired networks (Xie et al. 2019, "Exploring Randomly Wired Neural Networks"):
a random graph (Erdos-Renyi, Barabasi-Albert or Watts-Strogatz) oriented by node index is the
DAG of a stage; each node sums its inputs with learned sigmoid weights, then applies
ReLU-conv-BN (images) or dense-LayerNorm-ReLU (vectors). Nodes without predecessors read the
stage input; nodes without successors are averaged into the stage output.
"""

from __future__ import annotations

import random

import tensorflow as tf

from datasets.models.tfops import Net, class_loss, image_head
from datasets.tfstep import training_step_graph


def random_dag(kind: str, nodes: int, rng: random.Random, p: float = 0.2, k: int = 4,
               m: int = 2) -> list[tuple[int, int]]:
    """Undirected random graph of ``kind`` ("er", "ba", "ws"), edges oriented low -> high."""
    edges: set[tuple[int, int]] = set()
    if kind == "er":
        edges = {(i, j) for i in range(nodes) for j in range(i + 1, nodes) if rng.random() < p}
    elif kind == "ba":
        degree = [0] * nodes
        for j in range(m, nodes):
            targets: set[int] = set()
            while len(targets) < m:
                weights = [degree[i] + 1 for i in range(j)]
                targets.add(rng.choices(range(j), weights)[0])
            for i in targets:
                edges.add((i, j))
                degree[i] += 1
                degree[j] += 1
    elif kind == "ws":
        ring = {(i, (i + d) % nodes) for i in range(nodes) for d in range(1, k // 2 + 1)}
        for a, b in sorted(ring):
            if rng.random() < p:
                b = rng.choice([c for c in range(nodes) if c != a])
            edges.add((min(a, b), max(a, b)))
    else:
        raise ValueError(f"unknown random graph kind {kind!r}; known: er, ba, ws")
    return sorted(edges)


def wire(x, dag: list[tuple[int, int]], nodes: int, net: Net, node_fn, name: str):
    """Evaluates the DAG on ``x``; ``node_fn(h, i, first)`` is one node's transform."""
    preds = {j: [i for i, jj in dag if jj == j] for j in range(nodes)}
    succs = {i for i, _ in dag}
    out = {}
    with tf.name_scope(name):
        for j in range(nodes):
            with tf.name_scope(f"node{j}"):
                ins = [out[i] for i in preds[j]] or [x]
                if len(ins) > 1:
                    w = tf.sigmoid(net.var("agg", (len(ins),), scale=0.0))
                    h = tf.add_n([w[t] * v for t, v in enumerate(ins)])
                else:
                    h = ins[0]
                out[j] = node_fn(h, j, not preds[j])
        sinks = [out[j] for j in range(nodes) if j not in succs]
        return tf.add_n(sinks) / float(len(sinks))


def randwire_conv(graph: str, nodes: int, stages: int, width: int, batch: int, size: int,
                  seed: int, p: float = 0.2, k: int = 4, m: int = 2, classes: int = 100,
                  optimizer: str = "momentum"):
    """``stages`` randomly wired stages; the first node of a stage strides by 2."""
    rng = random.Random(seed)

    def build():
        net = Net()
        x = net.conv_bn_relu(net.input((batch, size, size, 3)), width // 2, 3, "stem", 2)
        for s in range(stages):
            dag = random_dag(graph, nodes, rng, p, k, m)
            c = width * 2 ** s

            def node(h, j, first, c=c, s=s):
                h = tf.nn.relu(h)
                h = net.sep_conv(h, c, 3, "sep", stride=2 if first else 1)
                return net.batch_norm(h, "bn")
            x = wire(x, dag, nodes, net, node, f"stage{s}")
        return image_head(net, tf.nn.relu(x), classes), net.variables
    return training_step_graph(build, optimizer=optimizer)


def randwire_mlp(graph: str, nodes: int, stages: int, width: int, batch: int, features: int,
                 seed: int, p: float = 0.2, k: int = 4, m: int = 2, classes: int = 100,
                 optimizer: str = "adam"):
    """The same wiring over vectors: each node is dense-LayerNorm-ReLU of ``width`` units."""
    rng = random.Random(seed)

    def build():
        net = Net()
        x = net.dense(net.input((batch, features)), width, "stem", tf.nn.relu)
        for s in range(stages):
            dag = random_dag(graph, nodes, rng, p, k, m)

            def node(h, j, first):
                return tf.nn.relu(net.layer_norm(net.dense(h, width, "fc"), "ln"))
            x = wire(x, dag, nodes, net, node, f"stage{s}")
        return class_loss(net.dense(x, classes, "head"), classes, (batch,)), net.variables
    return training_step_graph(build, optimizer=optimizer)
