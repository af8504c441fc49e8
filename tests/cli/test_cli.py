"""gplace.cli's parsing: a value that starts with '-' reaches its option's own check."""

import pytest

from gplace.cli import _attach_negative_values, parse


def test_a_negative_value_reaches_the_options_check(capsys):
    with pytest.raises(SystemExit) as exit_:
        parse(["place", "m.pb", "--memory-limit", "-5MB"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "memory limit '-5MB' is not a size" in err and "expected one argument" not in err


def test_only_values_of_options_that_take_one_are_attached():
    takes = {"--finetune", "--seed"}
    assert _attach_negative_values(["place", "m.pb", "--finetune", "-1e3", "-h"], takes) == [
        "place", "m.pb", "--finetune=-1e3", "-h"]
    assert _attach_negative_values(["--seed=1", "-2", "--", "-3", "--json", "-4"], takes) == [
        "--seed=1", "-2", "--", "-3", "--json", "-4"]


def test_a_model_named_like_a_number_after_a_flag_is_the_model():
    assert parse(["inspect", "--json", "-1"]).model == "-1"


def test_plain_values_are_left_alone():
    args = parse(["place", "m.pb", "--memory-limit", "5MB", "--seed", "3"])
    assert args.seed == 3 and args.memory_limit is not None
