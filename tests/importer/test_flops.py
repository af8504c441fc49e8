"""The FLOPs estimates of gplace.importer.flops for ops TensorFlow's registry does not price."""

import math

import pytest

from gplace.importer.flops import estimate


@pytest.mark.parametrize("op, per_element", [("RandomUniform", 4), ("RandomStandardNormal", 12),
                                             ("TruncatedNormal", 16), ("Erfc", 4),
                                             ("CropAndResize", 8), ("Atan2", 4)])
def test_ops_that_compute_are_not_priced_at_zero(op, per_element):
    assert estimate(op, [(8, 16)], [(2,)], {}, 1) == per_element * 8 * 16


def test_an_fft_costs_5_n_log2_points_over_its_transformed_dimensions():
    assert estimate("FFT", [(4, 1024)], [(4, 1024)], {}, 1) == 5 * 4 * 1024 * 10
    assert estimate("FFT2D", [(2, 32, 64)], [(2, 32, 64)], {}, 1) == 5 * 2 * 32 * 64 * 11
    # RFFT: the real input is the larger side; its points decide the log
    assert estimate("RFFT", [(3, 65)], [(3, 128)], {}, 1) == pytest.approx(5 * 3 * 128 * 7)
    assert estimate("IFFT", [None], [None], {}, 1) == 0.0  # unknown rank: no figure
    assert math.isfinite(estimate("FFT3D", [(1, 1, 1)], [(1, 1, 1)], {}, 1))


def test_data_movement_stays_free():
    assert estimate("Identity", [(1000,)], [(1000,)], {}, 1) == 0.0


def test_a_cudnn_rnn_costs_its_gates_matrix_products():
    """A 2-layer bidirectional LSTM: input [T=5, B=2, I=8], state [2 layers x 2 directions,
    B, H=16]; the first layer reads I + H per row, the second 2H + H."""
    from tensorflow.core.framework import attr_value_pb2
    attrs = {"rnn_mode": attr_value_pb2.AttrValue(s=b"lstm"),
             "direction": attr_value_pb2.AttrValue(s=b"bidirectional")}
    forward = estimate("CudnnRNNV3", [(5, 2, 32)], [(5, 2, 8), (4, 2, 16)], attrs, 1)
    assert forward == 2 * 4 * 16 * ((8 + 16) + (32 + 16)) * 5 * 2 * 2
    assert estimate("CudnnRNNBackpropV3", [], [(5, 2, 8), (4, 2, 16)], attrs, 1) == 2 * forward
    attrs["rnn_mode"] = attr_value_pb2.AttrValue(s=b"gru")
    attrs["time_major"] = attr_value_pb2.AttrValue(b=False)  # [B, T, I]
    assert estimate("CudnnRNNV3", [], [(2, 5, 8), (4, 2, 16)], attrs, 1) == forward * 3 / 4
