"""Random pretraining clusters: reproducible, 2 to 9 devices, hdp-8gpu's kind left out."""

import numpy as np

from gplace.gnn.random_clusters import random_cluster


def test_random_clusters_are_reproducible_and_in_range():
    sizes, kinds = [], set()
    for seed in range(60):
        c = random_cluster(seed)
        assert c == random_cluster(seed)
        sizes.append(c.num_devices)
        kinds |= {d.kind for d in c.devices}
        c.link_table()  # links name real devices
        assert len({d.tf_device for d in c.devices}) == c.num_devices
    assert min(sizes) >= 2 and max(sizes) <= 9 and len(set(sizes)) >= 5
    assert "k40" not in kinds and len(kinds) >= 3
    assert np.mean([random_cluster(s).name.startswith("random-") for s in range(3)]) == 1
