"""No suggestion crosses quantities (issue 35, "own names blind the engine"; registry/quantity.py):
a logged name whose words state what it is (a loss, a coefficient, a learning rate, a spread...)
is offered only metrics of that quantity, and the last word that states one decides
(`ent_coef_loss` is a loss of a coefficient). Names that state their quantity plainly are still
offered the metric they mean."""

from __future__ import annotations

from pathlib import Path

import pytest

import registry
from registry.quantity import QUANTITIES

ROOT = Path(__file__).resolve().parents[2]
MINI = ROOT / "tests" / "fixtures" / "mini_registry"


@pytest.fixture(scope="module")
def reg() -> registry.Registry:
    return registry.load()


def _offered(s: registry.Suggestion | None) -> tuple[str, ...]:
    return () if s is None else (s.metric, *s.alternatives)


@pytest.mark.parametrize("values", [None, (-3.0, 2.5)])
def test_a_coefficients_loss_is_offered_neither_the_coefficient_nor_an_entropy(
    reg: registry.Registry, values: tuple[float, float] | None
) -> None:
    """SAC's `train/ent_coef_loss` is the loss that tunes the entropy coefficient: the registry
    says the coefficient is not it, and an entropy is not a loss. No metric of the registry is
    that loss (the losses are the policy's, the value's and their total), so nothing fits."""
    coef = reg.metric("entropy_coef")
    assert any("ent_coef_loss" in c.en for c in coef.confusions)  # the registry's own word
    found = registry.suggest(reg, "train/ent_coef_loss", values)
    assert found is None, found
    # CleanRL's SAC spells it losses/alpha_loss (its coefficient is losses/alpha)
    assert registry.suggest(reg, "losses/alpha_loss", values) is None


def test_a_policys_loss_is_offered_the_policy_loss_and_never_a_kl(reg: registry.Registry) -> None:
    found = registry.suggest(reg, "policy/loss")
    assert found is not None and found.metric == "policy_loss" and found.alternatives == ()
    assert registry.suggest(reg, "loss/policy") == found.__class__(
        "loss/policy", "policy_loss", found.score, found.values_fit
    )


@pytest.mark.parametrize(
    ("name", "meant"),
    [
        ("train/entropy", "policy_entropy"),
        ("losses/entropy", "policy_entropy"),  # CleanRL's losses/ holds the entropy itself
        ("charts/episodic_return", "episodic_return"),
        ("loss/policy", "policy_loss"),
        ("train/actor_loss", "policy_loss"),
        ("optim/value_loss", "value_loss"),
        ("train/ent_coef", "entropy_coef"),
        ("losses/alpha", "entropy_coef"),
        ("critic/lr", "critic_learning_rate"),
        ("train/learning_rate", "learning_rate"),
        ("optim/grad_norm", "grad_norm"),
        ("adv_std", "advantage_std"),
        ("stats/zero_std_frac", "zero_std_group_fraction"),
        ("perf/episode_len", "episode_length"),
        ("length_penalty", "length_reward"),  # a penalty on length is a reward term, not a length
    ],
)
def test_a_name_that_states_its_quantity_is_still_offered_the_metric_it_means(
    reg: registry.Registry, name: str, meant: str
) -> None:
    found = registry.suggest(reg, name)
    assert found is not None and found.metric == meant, found


def test_no_entropy_loss_is_registered_so_losses_entropy_reads_as_the_entropy(
    reg: registry.Registry,
) -> None:
    """The brief's `losses/entropy` -> an entropy loss if one is registered: none is (no loss's
    id says entropy), and CleanRL logs the entropy itself there."""
    assert not [m.id for m in reg.metrics if m.quantity == "loss" and "entropy" in m.id]
    assert reg.resolve("losses/entropy", "cleanrl").metric == "policy_entropy"


# what a suffix makes of any name before it, by its meaning
SUFFIXES = {
    "_loss": "loss",
    "_coef": "coefficient",
    "/lr": "learning_rate",
    "_std": "spread",
    "_grad_norm": "gradient_norm",
    "/kl": "divergence",
    "_entropy": "entropy",
}


@pytest.mark.parametrize(("suffix", "quantity"), SUFFIXES.items())
def test_a_name_ending_in_a_word_of_a_quantity_is_offered_only_metrics_of_that_quantity(
    reg: registry.Registry, suffix: str, quantity: str
) -> None:
    """Every registered spelling of every metric, with a word that states a quantity after it:
    whatever is offered (first choice and tied alternatives) is of that quantity."""
    stems = sorted(
        {a.key for m in reg.metrics for a in m.aliases if not a.is_pattern}
        | {m.id for m in reg.metrics}
    )
    crossing = []
    for stem in stems:
        name = stem + suffix
        try:
            reg.resolve(name)
            continue  # a registered spelling is no suggestion
        except (registry.UnknownName, registry.AmbiguousName):
            pass
        for metric in _offered(registry.suggest(reg, name)):
            if reg.metric(metric).quantity != quantity:
                crossing.append(f"{name} -> {metric} ({reg.metric(metric).quantity})")
    assert not crossing, crossing


def test_every_metric_declares_a_quantity_its_id_agrees_with(reg: registry.Registry) -> None:
    """The id's own words, read by the rule names are read by, state the declared quantity
    where they state one. Derived metrics are never offered (a logged name cannot be one) and
    may be named after what they derive from (entropy_gradient is a trend of an entropy).
    reward_consistency's id says what it is of (rewards), not what it is (a correlation), so a
    name like `reward/mean` is never offered it."""
    from registry.quantity import stated_quantity, words

    disagree = []
    for m in reg.metrics:
        assert m.quantity in QUANTITIES, m.id
        said = stated_quantity(words(m.id))
        if m.kind == "derived" or m.id == "reward_consistency":
            continue
        if said is not None and said != m.quantity:
            disagree.append(f"{m.id}: id says {said}, declared {m.quantity}")
    assert not disagree, disagree
    assert reg.metric("reward_consistency").quantity == "correlation"


def test_a_user_metric_has_the_quantity_its_id_states_and_is_offered_only_for_it(
    tmp_path: Path,
) -> None:
    mine = tmp_path / "mine.yaml"
    mine.write_text(
        "metrics:\n"
        "  - {id: world_model_loss, title: World-model loss, unit: none}\n"
        "  - {id: goal_distance, title: Distance to goal, unit: none}\n"
    )
    reg = registry.load(MINI, extensions=[mine])
    assert reg.metric("world_model_loss").quantity == "loss"
    assert reg.metric("goal_distance").quantity == "unstated"
    found = registry.suggest(reg, "wm/world_model_loss_total")
    assert found is not None and found.metric == "world_model_loss"
    # a name that states a quantity is never offered a metric that states none
    assert "goal_distance" not in _offered(registry.suggest(reg, "goal/distance_std"))
    assert "goal_distance" in _offered(registry.suggest(reg, "goal/distance"))


def test_an_objective_is_offered_no_loss_and_a_step_size_no_step_counter(
    builtin: registry.Registry,
) -> None:
    """TRPO's `train/policy_objective` is the surrogate it maximises (a loss's opposite sign: a
    policy loss would be drawn upside down), ARS's `train/step_size` its optimiser's step (a
    learning rate, not a count of steps)."""
    assert _offered(registry.suggest(builtin, "train/policy_objective")) == ()
    offered = _offered(registry.suggest(builtin, "train/step_size"))
    assert "global_step" not in offered
    assert offered in ((), ("learning_rate",))
