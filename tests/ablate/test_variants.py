"""An ablation's variants are the commands' own options: each goes to the stage that defines it, what must stay the
same across variants is refused with the option that sets it, and every variant is scored on the base's cuts."""

import pytest

from pipeline.ablate.settings import sized
from pipeline.ablate.variants import BASE, parse_variant, parse_variants
from pipeline.debugger.policy import DIRECTIONS


def test_each_option_reaches_the_stage_that_defines_it():
    variant = parse_variant(
        "mix=--per-trace 8 --full-locals --directions forward --loss all --tokenizer bpe "
        "--vocab-size 512 --seq-len 256 --go-objective ce",
        1024,
    )
    assert variant.name == "mix"
    assert variant.sampling.per_trace == 8
    assert variant.sampling.policy.locals_delta is False and variant.sampling.policy.directions == ("forward",)
    assert variant.pack["packing"].loss == "all" and variant.seq_len == 256
    assert (variant.pack["tokenizer"], variant.pack["vocab_size"]) == ("bpe", 512)
    assert variant.objective == {"go_objective": "ce", "go_balance": "none"}
    assert variant.pack_config(0.25).holdout == 0.25


def test_the_base_is_every_default_at_the_ablations_sample_length():
    base, other = parse_variants(["bytes=--tokenizer bytes"], 512)
    assert base.name == BASE and base.options == "" and base.seq_len == 512
    assert base.sampling == parse_variant("x", 512).sampling and base.pack["tokenizer"] == "bpe"
    assert other.seq_len == 512 and other.pack["tokenizer"] == "bytes"


def test_every_variant_is_scored_on_the_base_sampling_written_in_its_own_format():
    base, full, forward, more = parse_variants(
        ["full=--full-locals", "forward=--directions forward", "more=--per-trace 8 --seed 3"], 1024
    )
    assert forward.evaluation_sampling(base) == base.sampling  # both directions, the base's draws
    assert more.evaluation_sampling(base) == base.sampling
    scored = full.evaluation_sampling(base)
    assert scored.policy.locals_delta is False and scored.policy.directions == DIRECTIONS
    assert (scored.seed, scored.per_trace) == (base.sampling.seed, base.sampling.per_trace)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("held=--holdout 0.5", "--holdout is not an option a variant may change"),
        ("big=--layers 8", "--layers is not an option a variant may change"),
        ("x=--per-trace", "expected one argument"),
        ("x=--loss some", "invalid choice"),
        ("x=--seq-len 4", "--seq-len must be an int in 16"),
        ("x=--per-trace 0", "per_trace"),
        ("x=stray", "stray is not an option value"),
        ("bad name=--full-locals", "name it NAME=OPTIONS"),
        ("x=--full-locals 'unclosed", "do not split"),
    ],
)
def test_a_bad_variant_is_refused_naming_it_and_the_fix(spec, message):
    with pytest.raises(ValueError, match=message):
        parse_variants([spec], 1024)


def test_two_variants_of_one_name_are_refused():
    with pytest.raises(ValueError, match="given twice"):
        parse_variants(["a=--full-locals", "a=--loss all"], 1024)
    with pytest.raises(ValueError, match="'base' is the base's"):
        parse_variants(["base=--loss all"], 1024)


def test_the_presets_spend_the_token_budget_in_whole_steps():
    cpu = sized("cpu")
    assert cpu.steps(1024) == 4_000_000 // (16 * 1024)
    small = sized("cpu", tokens=10, layers=3)
    assert small.steps(1024) == 1 and small.model == {"layers": 3, "width": 128, "heads": 4}
    gpu = sized("gpu", tokens=None)
    assert gpu.gpu and gpu.model["layers"] == 14 and gpu.tokens == 1_000_000_000
    with pytest.raises(ValueError, match="--size"):
        sized("tpu")
    with pytest.raises(ValueError, match="--holdout"):
        sized("cpu", holdout=0.0)
