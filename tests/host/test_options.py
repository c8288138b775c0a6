"""Options as data (snapuq.options): the command line, config.json and a second seed's argv are one spec."""

import argparse
import dataclasses

import pytest

from snapuq.commands.flags import add_options, given, to_argv
from snapuq.errors import SnapuqError
from snapuq.nn.training import head_config
from snapuq.options import CalibOptions, HeadOptions, TrainOptions

NON_DEFAULT = {
    TrainOptions: TrainOptions(epochs=7, head_epochs=3, batch_size=32, lr=0.05, optimizer="sgd", momentum=0.8,
                               schedule="cosine", warmup_epochs=1, augment="shift", baseline_epochs=4,
                               distill_alpha=0.5, distill_temperature=2.0, swa_epochs=2),
    HeadOptions: HeadOptions(rank=16, detach=False, joint=True, qat_frac=0.5, lambda_ss=3e-3, lambda_reg=0.0,
                             eps=0.05, floor="softplus", nll="huber", cov_rank=2),
    CalibOptions: CalibOptions(alpha=0.5, quantile=0.99, variant="literal", input_tap=False, alarm_rate=1e-6),
}  # fmt: skip


@pytest.mark.parametrize("cls", list(NON_DEFAULT), ids=lambda c: c.__name__)
def test_every_field_round_trips_through_the_command_line(cls):
    """Every field (not one left at its default) parses back from to_argv to the same options."""
    opts = NON_DEFAULT[cls]
    for f in dataclasses.fields(cls):
        assert getattr(opts, f.name) != f.default, f"{f.name} is at its default: the test would not see it"
    for recipe in (False, True):
        p = argparse.ArgumentParser()
        add_options(p, cls, recipe=recipe)
        assert cls(**given(cls, p.parse_args(to_argv(opts)))) == opts
    p = argparse.ArgumentParser()
    add_options(p, cls, recipe=True)
    assert given(cls, p.parse_args([])) == {}  # recipe mode: nothing given, the dataset's recipe decides


def test_config_json_records_the_head_options_whole():
    h = NON_DEFAULT[HeadOptions]
    cfg = head_config(h, "literal", [{"layer": "relu1"}], 5, 2)
    assert cfg["frozen_backbone"] is False and cfg["logvar_offset"] == pytest.approx(2 * -2.995732, abs=1e-5)
    assert HeadOptions.from_config(cfg) == h
    assert HeadOptions.from_config({}) == HeadOptions()  # a config from before a key existed: the defaults
    c = NON_DEFAULT[CalibOptions]
    assert CalibOptions.from_dict(c.to_dict()) == c
    assert CalibOptions.from_dict({**c.to_dict(), "later_key": 1}) == c  # a later version's key passes over


@pytest.mark.parametrize(
    "cls, bad, msg",
    [
        (HeadOptions, {"rank": 0}, "--rank must be an integer in [1, 1024]"),
        (HeadOptions, {"rank": 2.5}, "--rank must be an integer"),
        (HeadOptions, {"qat_frac": 1.5}, "--qat-frac must be a finite number in [0, 1]"),
        (HeadOptions, {"eps": 0.0}, "--eps must be a finite number > 0"),
        (HeadOptions, {"lambda_reg": float("nan")}, "--lambda-reg must be a finite number >= 0"),
        (HeadOptions, {"nll": "cauchy"}, "--nll must be one of gauss, student_t, huber"),
        (CalibOptions, {"alarm_rate": 0.7}, "--alarm-rate must be a finite number in [0, 0.5)"),
        (CalibOptions, {"quantile": 0.2}, "--hinge-q must be a finite number in [0.5, 1]"),
        (CalibOptions, {"variant": "odds"}, "--variant must be one of best, literal"),
        (TrainOptions, {"momentum": 1.0}, "--momentum must be a finite number in [0, 1)"),
        (TrainOptions, {"distill_alpha": 1.0}, "--distill-alpha must be a finite number in [0, 1)"),
        (TrainOptions, {"distill_temperature": 0.0}, "--distill-temperature must be a finite number > 0"),
        (TrainOptions, {"warmup_epochs": 11}, "--warmup-epochs must be an integer in [0, 10]"),
        (TrainOptions, {"swa_epochs": -1}, "--swa-epochs must be an integer in [0, 1000]"),
    ],
)
def test_bad_values_are_one_line_errors_naming_the_flag(cls, bad, msg):
    with pytest.raises(SnapuqError) as e:
        cls(**bad)
    assert msg in str(e.value) and "\n" not in str(e.value)
