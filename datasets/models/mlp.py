"""Multi-layer perceptrons: a few large MatMuls, the simplest placement problem."""

from __future__ import annotations

from datasets.tfstep import keras_classifier_step


def mlp(batch: int, features: int, hidden: int, layers: int, classes: int = 1000,
        optimizer: str = "momentum"):
    import keras

    def model():
        stack = [keras.layers.Dense(hidden, activation="relu") for _ in range(layers)]
        return keras.Sequential([keras.Input((features,)), *stack, keras.layers.Dense(classes)])
    return keras_classifier_step(model, (features,), classes, batch, optimizer=optimizer)


def small_cnn(batch: int, size: int, width: int = 32, classes: int = 10,
              optimizer: str = "momentum"):
    """Conv-BN-ReLU ×3 and a dense head; the smallest graph with Keras 3 batch norm."""
    import keras
    L = keras.layers

    def model():
        body = []
        for i in range(3):
            body += [L.Conv2D(width * 2 ** i, 3, padding="same"), L.BatchNormalization(),
                     L.ReLU(), L.MaxPooling2D()]
        return keras.Sequential([keras.Input((size, size, 3)), *body, L.Flatten(),
                                 L.Dense(classes)])
    return keras_classifier_step(model, (size, size, 3), classes, batch, optimizer=optimizer)
