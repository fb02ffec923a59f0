"""The simulator's error kinds and random topic (issue 29), without a database: the kinds'
options, the random topic's shape and seed, who holds a misconception, the kinds table."""

from __future__ import annotations

import numpy as np
import pytest

from hag.errors import HagError
from hag_lab.simulate import world as w
from hag_lab.simulate.kinds import ALL_KINDS, error_kinds, folder_name, make_world
from hag_lab.simulate.learners import OutcomeModel, make_learners
from hag_lab.simulate.run import SimulationConfig, error_stream
from hag_lab.simulate.seeds import KIND_COLUMNS, kinds_table
from hag_lab.simulate.tutor import Extractor, give_misconceptions


def test_all_names_the_four_kinds_each_over_the_independent_noise():
    """`all` is independent 0.1 and 0.3, a repeated misreading in 20% of sessions and a
    misconception in 10% of learners, the last two over independent noise 0.1."""
    kinds = {k.name: k.options() for k in error_kinds("all")}
    assert list(kinds) == list(ALL_KINDS)
    assert kinds["independent:0.3"] == {
        "p_miss": 0.3,
        "p_false": 0.3,
        "p_repeat_session": 0.0,
        "misconception_share": 0.0,
        "misconception_shared": False,
    }
    assert kinds["repeated:0.2"]["p_repeat_session"] == 0.2
    assert kinds["misconception:0.1"]["misconception_share"] == 0.1
    assert kinds["misconception:0.1"]["p_false"] == kinds["repeated:0.2"]["p_false"] == 0.1
    assert [k.name for k in error_kinds("repeated:0.3, misconception")] == [
        "repeated:0.3",
        "misconception:0.1",
    ]


@pytest.mark.parametrize(
    "text, says",
    [
        ("sloppy", "takes independent"),
        ("repeated:lots", "not a number"),
        ("misconception:1.5", "outside 0-1"),
        ("repeated,repeated:0.2", "each once"),
    ],
)
def test_a_bad_error_kind_is_refused_in_one_line(text, says):
    """An unknown kind, a value that is no share, or a kind named twice: one line saying so."""
    with pytest.raises(HagError, match=says) as caught:
        error_kinds(text)
    assert "\n" not in str(caught.value)


def test_a_random_topic_repeats_with_its_seed_and_authors_three_wrong_prerequisites():
    """random:30 from one seed is the same world and corpus every time; another seed draws
    another; its corpus authors about 70% of the truth and three false pairs, none the
    reverse of a true one."""
    world, corpus = w.random_topic(7, 30)
    again, corpus_again = w.random_topic(7, 30)
    other, _ = w.random_topic(8, 30)
    assert world.prerequisites == again.prerequisites and corpus == corpus_again
    assert other.prerequisites != world.prerequisites
    assert len(world.concepts) == 30 and world.depth()  # a DAG over 30 concepts
    slug = {e["id"]: e["concept_slug"] for e in corpus["entries"]}
    authored = {(slug[e["source_entry_id"]], slug[e["target_entry_id"]]) for e in corpus["edges"]}
    wrong = authored - world.prerequisites
    assert len(wrong) == 3
    assert not {(t, s) for s, t in wrong} & world.prerequisites
    assert len(authored & world.prerequisites) == round(0.7 * len(world.prerequisites))
    assert {e["source_type"] for e in corpus["edges"]} == {"seed"}


@pytest.mark.parametrize("size", [29, 61])
def test_a_random_topic_outside_30_to_60_concepts_is_refused(size):
    """The random topic's size is 30-60 concepts; anything else is one line naming the range."""
    with pytest.raises(HagError, match="30-60"):
        w.random_topic(7, size)


def test_world_specs_name_the_three_worlds():
    """cryptography, random (bare, --concepts) and random:N resolve; anything else is refused."""
    crypto, corpus = make_world("cryptography", seed=7, concepts=10)
    assert crypto.topic_id == "cryptography" and corpus is not None
    bare, none = make_world("random", seed=7, concepts=10)
    assert len(bare.concepts) == 10 and none is None
    topic, _ = make_world("random:45", seed=7, concepts=10)
    assert len(topic.concepts) == 45 and folder_name("random:45") == "random-45"
    with pytest.raises(HagError, match="random:N"):
        make_world("random:many", seed=7, concepts=10)


def test_misconceptions_go_to_the_share_of_learners_asked_and_name_no_prerequisite():
    """A share of 0.25 of 20 learners: five hold one misconception each, on a concept they
    have not mastered, naming a concept that is not its prerequisite; the same stream gives
    the same five."""
    world = w.cryptography_world()

    def give(seed):
        learners = make_learners(world, 20, np.random.default_rng(1), OutcomeModel())
        give_misconceptions(learners, world, 0.25, Extractor(kind="structured"), error_stream(seed))
        return learners

    learners = give(3)
    holders = [lr for lr in learners if lr.misconception is not None]
    assert len(holders) == 5
    for lr in holders:
        concept, wrong = lr.misconception
        assert concept not in lr.mastered and world.prerequisites_of(concept)
        assert (concept, wrong) not in world.prerequisites and concept != wrong
    assert [lr.misconception for lr in give(3)] == [lr.misconception for lr in learners]


def test_a_shared_misconception_is_one_wrong_pair_held_by_every_chosen_learner_open_on_it():
    """`shared-misconception:0.25` of 20 learners: the chosen learners who have not mastered
    the pair's concept all hold the one pair drawn for the world, which is no prerequisite."""
    world = w.cryptography_world()
    [kind] = error_kinds("shared-misconception:0.25")
    assert kind.options()["misconception_shared"] and kind.options()["p_false"] == 0.1
    learners = make_learners(world, 20, np.random.default_rng(1), OutcomeModel())
    given = give_misconceptions(
        learners, world, 0.25, Extractor(kind="structured"), error_stream(3), shared=True
    )
    pairs = {lr.misconception for lr in given}
    assert len(given) >= 2 and len(pairs) == 1
    [(concept, wrong)] = pairs
    assert (concept, wrong) not in world.prerequisites and world.prerequisites_of(concept)
    assert all(concept not in lr.mastered for lr in given)


def test_no_misconception_draws_nothing_from_the_stream():
    """Share 0: nobody holds one and the error stream is left where it was."""
    world = w.cryptography_world()
    learners = make_learners(world, 10, np.random.default_rng(1), OutcomeModel())
    stream = error_stream(5)
    assert give_misconceptions(learners, world, 0.0, Extractor(), stream) == []
    assert stream.random() == error_stream(5).random()
    assert error_stream(5).random() != np.random.default_rng(5).random()


def test_the_persistent_kinds_are_off_by_default():
    """A default configuration (the demo's, the benchmark's) has neither persistent kind."""
    config = SimulationConfig()
    assert (config.p_repeat_session, config.misconception_share) == (0.0, 0.0)
    assert Extractor().p_repeat_session == 0.0


def test_kinds_table_has_a_row_per_world_kind_and_profile():
    """One row per (world, kind, profile), mean ± sd per column, wrong authored 'of N'."""
    spread = {"n": 5, "mean": 0.5, "sd": 0.1, "min": 0.4, "max": 0.6}
    result = {
        "seeds": [43, 47],
        "size": {"learners": 3, "sessions": 10, "days": 2},
        "noise_kind": "structured",
        "rows": [
            {
                "world": "random:30",
                "kind": "repeated:0.2",
                "profile": "evidence",
                "spread": {k: spread for k, _, _ in KIND_COLUMNS},
                "authored_false": 3.0,
            }
        ],
    }
    lines = kinds_table(result)
    assert lines[0].startswith("seeds 43, 47; 10 sessions, 3 learners, 2 days")
    header = [c.strip() for c in lines[2].strip("|").split("|")]
    assert header[:3] == ["world", "error kind", "profile"] and len(header) == 3 + len(KIND_COLUMNS)
    row = [c.strip() for c in lines[4].strip("|").split("|")]
    assert row[:4] == ["random:30", "repeated:0.2", "evidence", "0.50 ± 0.10"]
    by_header = dict(zip(header, row, strict=True))
    assert by_header["wrong authored < 0.5"] == "0.5 ± 0.1 of 3"
    assert by_header["true authored < 0.5"] == "0.5 ± 0.1"
