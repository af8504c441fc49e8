"""Image classifiers from ``keras.applications`` (Keras 3) and ``tf_keras.applications`` (classic).

Keras 3 writes batch norm as primitive ops (moments, Rsqrt, Mul); classic tf-keras writes
``FusedBatchNormV3`` and ``AssignMovingAvg``, the op vocabulary of TF1-era graphs that Post and
HDP placed. Weights are random (``weights=None``): nothing is downloaded, and values do not
change op times.
"""

from __future__ import annotations

from datasets.tfstep import keras_classifier_step


def _applications(classic: bool):
    if classic:
        import tf_keras
        return tf_keras.applications
    import keras
    return keras.applications


def keras_app(arch: str, batch: int, size: int, classes: int = 1000, classic: bool = False,
              optimizer: str = "momentum", **kwargs):
    """``arch`` is a ``keras.applications`` constructor name, e.g. "InceptionV3"."""
    ctor = getattr(_applications(classic), arch)
    shape = (size, size, 3)
    return keras_classifier_step(
        lambda: ctor(weights=None, input_shape=shape, classes=classes, **kwargs),
        shape, classes, batch, optimizer=optimizer)
