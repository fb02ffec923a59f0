"""The evidence profile's rules as plain arithmetic (issue 14): no database needed."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from uuid import uuid4

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hag import settings
from hag.errors import SettingsError
from hag.evidence import model
from hag.session import rules
from hag_lab.report import metrics
from hag_lab.simulate.tutor import Extractor, confusable
from hag_lab.simulate.world import Concept, World
from tests import session_builders as builders
from tests.fix_session import EARLIER_ROUNDS, LIFT_PROFILE

pytestmark = pytest.mark.pg_versions  # also run on PostgreSQL 16 (make test-pg16)

EVIDENCE = settings.defaults().with_overrides(**{**settings.PROFILES["evidence"], **EARLIER_ROUNDS})
PROFILE = settings.defaults().with_overrides(**LIFT_PROFILE)
SEED = settings.defaults()
# negative evidence as the first two rounds shipped it: from 12 reports at 2%
STICKY = EVIDENCE.with_overrides(
    prerequisite_unlearn_min_reports=12, prerequisite_unlearn_max_share=0.02
)
N = 28  # concepts in the topic (the demo's Cryptography topic)


def test_lift_keeps_the_seed_ladder_for_an_uncontested_edge():
    """1, 2, 3 uncontested reports give the seed's 0.33, 0.5 and 0.6 (k = 2)."""
    got = [model.lift_confidence(h, h, N, EVIDENCE) for h in (1, 2, 3)]
    assert got == pytest.approx([1 / 3, 0.5, 0.6])


def test_lift_subtracts_the_reports_expected_by_chance():
    """3 reports of c -> m among 29 on c: 26 others spread over the topic's 26 other concepts
    (spread 0, the issue's definition), so h' = 2 -> 0.5; over 8 (the evidence profile), h' = 0."""
    topic_wide = EVIDENCE.with_overrides(prerequisite_lift_chance_spread=0)
    assert model.chance_reports(3, 29, N) == pytest.approx(1.0)
    assert model.lift_confidence(3, 29, N, topic_wide) == pytest.approx(0.5)
    assert model.lift_confidence(3, 29, N, EVIDENCE) == pytest.approx(0.05)


def test_lift_with_a_fixed_chance_spread():
    """prerequisite_lift_chance_spread = 4: 3 of 11 reports -> chance 2, h' = 1 -> 1/3."""
    dials = EVIDENCE.with_overrides(prerequisite_lift_chance_spread=4)
    assert model.lift_confidence(3, 11, N, dials) == pytest.approx(1 / 3)


def test_lift_falls_to_the_edge_floor_when_chance_explains_everything():
    """No evidence beyond chance: the edge floor (0.05), never zero."""
    assert model.lift_confidence(1, 200, N, EVIDENCE) == pytest.approx(0.05)


def test_reverse_evidence_counts_against_a_pair():
    """A learned reverse edge with 2 reports takes 2 from h; without one, nothing."""
    against = model.reverse_evidence(2, "learned", 0.5, EVIDENCE)
    assert against == 2.0
    assert model.lift_confidence(5, 5, N, EVIDENCE, against) == pytest.approx(0.6)
    assert model.lift_confidence(5, 5, N, EVIDENCE) == pytest.approx(5 / 7)


def test_an_authored_reverse_edge_stands_for_the_reports_its_confidence_earns():
    """Authored at 0.9 stands for k c/(1-c) = 18 reports; at 1.0 for any number; none: 0."""
    assert model.reverse_evidence(0, "seed", 0.9, EVIDENCE) == pytest.approx(18.0)
    assert math.isinf(model.reverse_evidence(0, "seed", 1.0, EVIDENCE))
    assert model.reverse_evidence(None, None, None, EVIDENCE) == 0.0
    assert model.lift_confidence(10, 10, N, EVIDENCE, 18.0) == pytest.approx(0.05)


def test_negative_evidence_lowers_an_unsupported_authored_prerequisite():
    """12 reports on c, none naming m or a concept resting on m: 0.9 falls to the floor."""
    assert model.unlearned_confidence(0.9, 0, 12, N, STICKY) == pytest.approx(0.05)


def test_negative_evidence_waits_for_enough_reports_and_spares_supported_edges():
    """11 reports: unchanged; one supporting report in 12 (above 2%): unchanged; off: unchanged."""
    assert model.unlearned_confidence(0.9, 0, 11, N, STICKY) == 0.9
    assert model.unlearned_confidence(0.9, 0, 12, N, STICKY, support=1) == 0.9
    assert model.unlearned_confidence(0.9, 1, 12, N, STICKY) == 0.9
    assert model.unlearned_confidence(0.9, 0, 500, N, SEED) == 0.9


def test_negative_evidence_never_raises():
    """An authored edge already below what its reports earn keeps its confidence."""
    dials = STICKY.with_overrides(prerequisite_unlearn_max_share=0.5)
    assert model.unlearned_confidence(0.1, 5, 12, N, dials) == 0.1


def test_undoable_negative_evidence_keeps_the_authored_value_beside_the_lowered_one():
    """Evidence profile (5 reports at 5%): 4 unsupported reports leave 0.9 alone; at 5 the
    edge falls to the floor and keeps 0.9 beside it; more unsupported reports keep it there."""
    assert model.undoable_unlearning(0.9, None, 0, 4, N, EVIDENCE) == (0.9, None)
    assert model.undoable_unlearning(0.9, None, 0, 5, N, EVIDENCE) == (pytest.approx(0.05), 0.9)
    # 1 of 40 (2.5%, under the 5% line): 39 others over 8 leave nothing net of chance
    assert model.undoable_unlearning(0.05, 0.9, 1, 40, N, EVIDENCE) == (
        pytest.approx(0.05),
        0.9,
    )


def test_undoable_negative_evidence_gives_the_value_back_once_supported():
    """Lowered 0.9 -> 0.05, then 1 report of 6 names m (17%, above 5%): back to 0.9, nothing
    kept beside it; support through a concept resting on m counts the same."""
    assert model.undoable_unlearning(0.05, 0.9, 1, 6, N, EVIDENCE) == (0.9, None)
    assert model.undoable_unlearning(0.05, 0.9, 0, 6, N, EVIDENCE, support=1) == (0.9, None)


def test_undoable_negative_evidence_keeps_the_higher_of_the_kept_and_a_raised_value():
    """The seed's reinforcement may raise a lowered edge (0.6 at 3 hits): the kept 0.9 stays
    the edge's own value, and a raise above it becomes the new own value."""
    assert model.undoable_unlearning(0.6, 0.9, 3, 100, N, EVIDENCE) == (pytest.approx(0.05), 0.9)
    assert model.undoable_unlearning(0.95, 0.9, 3, 10, N, EVIDENCE) == (0.95, None)


@given(
    st.lists(
        st.tuples(st.integers(0, 2), st.integers(0, 2), st.integers(0, 6)), min_size=1, max_size=30
    )
)
def test_undoable_negative_evidence_depends_on_the_counts_not_their_order(steps):
    """Re-weighed after every batch of reports, the edge ends where the final counts put the
    authored value in one step (the sticky rule of the first rounds does not)."""
    hits = support = reports = 0
    state: tuple[float, float | None] = (0.8, None)
    for h, s, other in steps:
        hits, support, reports = hits + h, support + s, reports + h + s + other
        state = model.undoable_unlearning(*state, hits, reports, N, EVIDENCE, support)
    assert state == model.undoable_unlearning(0.8, None, hits, reports, N, EVIDENCE, support)


def test_negative_evidence_of_the_profile_judges_from_3_reports_and_spares_any_support():
    """The evidence profile since the seventh round: 2 reports on c leave 0.9 alone; 3, none
    supporting m, lower it to the floor and keep 0.9 beside it; a single supporting report
    among 50 (2%: under the earlier rounds' 5% line, which lowered the true authored
    tls-handshake -> message-authentication-codes) keeps 0.9, named or through a concept
    resting on m."""
    assert model.undoable_unlearning(0.9, None, 0, 2, N, PROFILE) == (0.9, None)
    assert model.undoable_unlearning(0.9, None, 0, 3, N, PROFILE) == (pytest.approx(0.05), 0.9)
    assert model.undoable_unlearning(0.9, None, 1, 50, N, PROFILE) == (0.9, None)
    assert model.undoable_unlearning(0.9, None, 0, 50, N, PROFILE, support=1) == (0.9, None)
    assert model.undoable_unlearning(0.9, None, 1, 50, N, EVIDENCE) == (pytest.approx(0.05), 0.9)


def unreported_authored_edge(concept_reports: int) -> model.PrerequisiteEvidence:
    """An authored c -> m at 0.9 that none of c's `concept_reports` live reports supports."""
    return model.PrerequisiteEvidence(
        edge_id=uuid4(),
        source_type="seed",
        confidence=0.9,
        hit_count=0,
        concept_reports=concept_reports,
        n_concepts=N,
        support_hits=0,
        reverse_hits=None,
        reverse_source_type=None,
        reverse_confidence=None,
    )


def test_negative_evidence_counts_the_concepts_culled_reports():
    """2 live reports on c are too few to judge; the audit keeps 1 more of a culled
    prerequisite of c (reversal_reports counts live and culled): 3, so the unsupported
    authored edge falls."""
    fact = unreported_authored_edge(2)
    assert fact.reports_with_culled == 2
    assert model.evidence_state(fact, PROFILE) == (0.9, None)
    culled = replace(fact, reversal_reports=(3, 0))
    assert culled.reports_with_culled == 3
    assert model.evidence_state(culled, PROFILE) == (pytest.approx(0.05), 0.9)


def test_smoothed_success_rate():
    """8 successes, 2 failures, 2 pseudo-turns at 0.5: (8 + 1) / 12 = 0.75."""
    assert rules.smoothed_success_rate(8, 2, EVIDENCE) == pytest.approx(0.75)
    assert rules.smoothed_success_rate(0, 0, EVIDENCE) == pytest.approx(0.5)


def test_baseline_step_moves_by_the_outcome_minus_the_baseline_and_shrinks():
    """b = 0.8: success +2(0.05)(0.2) = +0.02, failure -0.08; after 10 renderings half that."""
    assert rules.baseline_edge_step("success", 0.8, 0, EVIDENCE)(0.5) == pytest.approx(0.52)
    assert rules.baseline_edge_step("failure", 0.8, 0, EVIDENCE)(0.5) == pytest.approx(0.42)
    assert rules.baseline_edge_step("success", 0.8, 10, EVIDENCE)(0.5) == pytest.approx(0.51)
    assert rules.baseline_edge_step(None, 0.8, 0, EVIDENCE)(0.5) == 0.5
    assert rules.baseline_edge_step("failure", 0.8, 0, EVIDENCE)(0.06) == pytest.approx(0.05)


@given(
    st.lists(st.sampled_from(["success", "failure", None]), max_size=12),
    st.floats(0, 1),
    st.floats(0.05, 1),
    st.integers(0, 200),
)
def test_baseline_grading_composed_equals_turn_by_turn(outcomes, baseline, start, renderings):
    """The session's composed shift equals the steps applied in turn order (and stays in bounds)."""
    x = start
    for i, o in enumerate(outcomes):
        x = rules.baseline_edge_step(o, baseline, renderings + i, EVIDENCE)(x)
    composed = rules.baseline_edge_grading(outcomes, baseline, renderings, EVIDENCE)(start)
    assert composed == pytest.approx(x, abs=1e-12)
    assert 0.05 - 1e-12 <= composed <= 1.0 + 1e-12


def test_prerequisites_are_not_outcome_graded_under_lift():
    """lift: prerequisites keep their evidence; other types and the seed profile are graded."""
    assert not rules.outcome_graded("prerequisite", EVIDENCE)
    assert rules.outcome_graded("fallback", EVIDENCE)
    assert rules.outcome_graded("prerequisite", SEED)


def test_the_seed_profile_is_every_registry_default():
    """`seed` sets the rule dials it has always set to their registry defaults; `evidence`
    names at most 10 rule dials, whose values all validate."""
    assert settings.PROFILES["seed"] == {
        k: settings.REGISTRY[k].default for k in settings.SEED_PROFILE_KEYS
    }
    assert len(settings.PROFILES["evidence"]) <= 10
    for key, value in settings.PROFILES["evidence"].items():
        assert settings.validate(key, value) == value
    profile = settings.defaults().with_overrides(**settings.PROFILES["evidence"])
    assert settings.active_profile(SEED) == "seed"
    assert settings.active_profile(profile) == "evidence"
    assert settings.active_profile(EVIDENCE) is None  # the fifth round's values differ
    assert settings.active_profile(profile.with_overrides(reprieve_idle_days=3)) is None


def test_the_standing_names_the_nearest_profile_and_the_dials_apart_from_it():
    """A memory on the evidence profile but for an older k is nearest `evidence`, with that
    dial apart and the command that sets it; a memory on either profile is that profile; one
    with three of the evidence profile's values on the seed's is nearest the seed, and with
    four as near one as the other: no profile."""
    k = settings.EVIDENCE_PROFILE["prerequisite_lift_k"]
    profile = settings.defaults().with_overrides(**settings.PROFILES["evidence"])
    older = settings.profile_standing(profile.with_overrides(prerequisite_lift_k=1.0))
    assert (older.name, older.apart) == ("evidence", (("prerequisite_lift_k", 1.0, k),))
    assert older.line() == (
        f"profile: nearest evidence, 1 of its 10 dials apart: prerequisite_lift_k 1.0 "
        f"(the profile's {k}); `hag settings profile evidence` sets the profile's values (and "
        "re-weighs the edges under them)"
    )
    assert settings.profile_standing(SEED).line() == "profile: seed"
    assert settings.profile_standing(profile).line() == "profile: evidence"
    three = ("prerequisite_confidence_rule", "prerequisite_lift_k", "edge_grading_rule")
    mixed = settings.profile_standing(
        SEED.with_overrides(**{key: settings.EVIDENCE_PROFILE[key] for key in three})
    )  # 3 dials from seed, 5 from evidence (whose cap and learners are the seed's defaults)
    assert mixed.name == "seed" and [key for key, _, _ in mixed.apart] == sorted(
        three, key=list(settings.PROFILES["seed"]).index
    )
    four = (*three, "prerequisite_lift_chance_spread")
    tied = settings.profile_standing(
        SEED.with_overrides(**{key: settings.EVIDENCE_PROFILE[key] for key in four})
    )  # 4 dials from each profile
    assert tied.name is None and tied.line() == (
        "profile: none, as near one profile as another (4 dials apart)"
    )


def test_an_unknown_profile_is_refused_by_name():
    """An unknown profile name is a one-line error naming the known ones."""
    with pytest.raises(SettingsError, match="unknown profile 'fast'.*evidence, seed"):
        settings.profile_values("fast")


# --- the simulator's structured noise ---------------------------------------------------------

WORLD = World(
    "t",
    {s: Concept(s, s) for s in ("a", "b", "c", "d", "e", "f", "z")},
    # d needs c, c needs b, b needs a; e needs b (e is c's sibling); f needs d
    frozenset({("d", "c"), ("c", "b"), ("b", "a"), ("e", "b"), ("f", "d")}),
)


def test_structured_noise_names_reversed_transitive_and_sibling_concepts():
    """For c: d builds on it (reversed), a is below b (transitive), e shares b (sibling)."""
    assert confusable(WORLD, "c") == {"d", "a", "e"}
    assert Extractor(kind="structured").wrong_candidates(WORLD, "c") == ["a", "d", "e"]


def test_uniform_noise_names_any_non_prerequisite():
    """The earlier simulator: every concept but the taught one and its direct prerequisites."""
    assert Extractor().wrong_candidates(WORLD, "c") == ["a", "d", "e", "f", "z"]


def test_structured_noise_falls_back_to_uniform_without_neighbours():
    """A concept with no neighbours in the truth is blamed uniformly."""
    assert Extractor(kind="structured").wrong_candidates(WORLD, "z") == [
        "a",
        "b",
        "c",
        "d",
        "e",
        "f",
    ]


# --- the report's truth scores ----------------------------------------------------------------


def test_brier_and_auc_worked_example():
    """Claims 0.9 (true), 0.6 (false), 0.2 (false), 0.6 (true): Brier 0.2925, AUC 0.875."""
    predicted, truth = [0.9, 0.6, 0.2, 0.6], [1, 0, 0, 1]
    assert metrics.brier(predicted, truth) == pytest.approx((0.01 + 0.36 + 0.04 + 0.16) / 4)
    # true-false pairs: (0.9, 0.6) win, (0.9, 0.2) win, (0.6, 0.6) half, (0.6, 0.2) win
    assert metrics.auc(predicted, truth) == pytest.approx(3.5 / 4)
    assert metrics.auc([0.5], [1]) is None


def test_truth_scores_only_count_edges_between_known_concepts():
    """An edge to a concept the truth does not know is no claim."""
    facts = [
        metrics.EdgeFact("d", "c", "prerequisite", "learned", 0.8),
        metrics.EdgeFact("d", "a", "prerequisite", "learned", 0.4),
        metrics.EdgeFact("d", "minted", "prerequisite", "learned", 0.9),
        metrics.EdgeFact("d", "c", "prerequisite", "seed", 0.9),
    ]
    got = metrics.truth_scores(facts, WORLD.prerequisites, WORLD.slugs, "prerequisite", ["learned"])
    assert got == {"n": 2, "true": 1, "brier": pytest.approx((0.04 + 0.16) / 2), "auc": 1.0}


def test_spread_of_per_seed_figures():
    """Mean, sample sd, min and max; None values are left out."""
    s = metrics.spread([0.8, 1.0, None, 0.9])
    assert s == {
        "n": 3,
        "mean": pytest.approx(0.9),
        "sd": pytest.approx(0.1),
        "min": 0.8,
        "max": 1.0,
    }
    assert metrics.spread([None])["mean"] is None


# --- who reported it: repetition-weighted evidence (fourth round) ------------------------------


def quoted(concept: str, missing: str) -> dict[str, str]:
    """A struggle with the extractor's quoted evidence."""
    return {"concept_slug": concept, "missing_slug": missing, "evidence": "quoted"}


def ordered_turns(*turns: dict) -> list:
    """One session's turns (`session_builders.turn` dicts) as the contract reads them."""
    from hag.session.contract import SessionPayload

    payload = SessionPayload.model_validate_json(json.dumps(builders.payload("s", list(turns))))
    return payload.ordered_turns()


def test_reported_turns_counts_each_turn_once_per_pair():
    """Two turns name rsa -> primes (one of them twice), one names rsa -> hashing; a pair
    without two distinct topic entries is left out."""
    from hag.session.contract import SessionPayload
    from hag.session.ladder import Catalogue

    a, b, c = uuid4(), uuid4(), uuid4()

    def s(concept, missing):
        return {"concept_slug": concept, "missing_slug": missing, "evidence": "quoted"}

    payload = SessionPayload.model_validate_json(
        json.dumps(
            builders.payload(
                "s",
                [
                    builders.turn(0, outcome="failure", struggles=[s("rsa", "primes")] * 2),
                    builders.turn(
                        1,
                        outcome="failure",
                        struggles=[s("rsa", "primes"), s("rsa", "hashing"), s("rsa", "nowhere")],
                    ),
                    builders.turn(2, outcome="success"),
                ],
            )
        )
    )
    catalogue = Catalogue.from_rows("t", [])
    per_turn, contradicted, *_ = rules.turn_struggles(payload.ordered_turns(), catalogue)
    got = rules.reported_turns(per_turn, {"rsa": a, "primes": b, "hashing": c})
    assert (got, contradicted) == ({(a, b): 2, (a, c): 1}, 0)


def test_a_struggle_at_a_turn_about_other_concepts_counts_only_if_none_about_it_names_one():
    """rsa's turn names primes and hashing; a turn about signatures names rsa -> hashing again
    (left out: a turn about rsa names a struggle on rsa) and signatures -> hashing (kept, its
    own concept); a turn listed with no concept names rsa -> hashing (kept: it is about no
    other concept); a turn about key-exchange names modular-arithmetic -> primes (kept: no
    turn is about modular-arithmetic). The same one struggle is left out with or without
    the learner's record, and the seed's path (no record, `on_turn` off) keeps it."""
    from hag.session.ladder import Catalogue

    turns = ordered_turns(
        builders.turn(0, outcome="failure", concepts=["rsa"],
                      struggles=[quoted("rsa", "primes"), quoted("rsa", "hashing")]),
        builders.turn(1, outcome="failure", concepts=["signatures"],
                      struggles=[quoted("rsa", "hashing"), quoted("signatures", "hashing")]),
        builders.turn(2, outcome="failure", struggles=[quoted("rsa", "hashing")]),
        builders.turn(3, outcome="failure", concepts=["key-exchange"],
                      struggles=[quoted("modular-arithmetic", "primes")]),
    )  # fmt: skip
    catalogue = Catalogue.from_rows("t", [])
    concepts = [rules.turn_concepts(t, catalogue) for t in turns]
    pair = rules.StrugglePair
    assert rules.on_turn_pairs(turns, concepts, catalogue) == [
        [pair("rsa", "primes"), pair("rsa", "hashing")],
        [pair("signatures", "hashing")],
        [pair("rsa", "hashing")],
        [pair("modular-arithmetic", "primes")],
    ]
    for struggles in (
        rules.turn_struggles(turns, catalogue, None, on_turn=True),
        rules.turn_struggles(turns, catalogue, set()),
    ):
        assert struggles.off_turn == 1
        assert sum(len(pairs) for pairs in struggles.per_turn) == 5
    seed = rules.turn_struggles(turns, catalogue, None)
    assert (seed.off_turn, sum(len(pairs) for pairs in seed.per_turn)) == (0, 6)
    exposures = rules.shown_exposures(turns, catalogue, set())
    assert exposures.failed == (
        "key-exchange", "modular-arithmetic", "rsa", "signatures"
    )  # fmt: skip


def test_a_struggle_the_learners_record_contradicts_is_not_reported():
    """rsa blames primes in turns 0 and 2, hashing in turns 0 and 3 (twice, by name and by
    slug); the learner succeeded on hashing in turn 1, and on primes in an earlier session
    (`shown`). Not asked (None) every report counts; with an empty `shown` all but the two
    struggles naming hashing after turn 1; with primes shown, none of primes either."""
    from hag.session.ladder import Catalogue

    a, b, c = uuid4(), uuid4(), uuid4()

    def s(missing):
        return quoted("rsa", missing)

    turns = ordered_turns(
        builders.turn(0, outcome="failure", struggles=[s("primes"), s("hashing")]),
        builders.turn(1, outcome="success", concepts=["hashing"]),
        builders.turn(2, outcome="failure", struggles=[s("primes")]),
        builders.turn(3, outcome="failure", struggles=[s("hashing"), s("Hashing")]),
    )
    catalogue = Catalogue.from_rows("t", [])
    entries = {"rsa": a, "primes": b, "hashing": c}

    def reported(shown):
        per_turn, contradicted, *_ = rules.turn_struggles(turns, catalogue, shown)
        return rules.reported_turns(per_turn, entries), contradicted

    assert reported(None) == ({(a, b): 2, (a, c): 2}, 0)
    assert reported(set()) == ({(a, b): 2, (a, c): 1}, 2)
    assert reported({"primes"}) == ({(a, c): 1}, 4)


def test_the_reversal_share_is_shrunk_toward_its_prior():
    """No reports: the prior; 20 reports, 5 reversed, prior 0.05 over 5 reports: 5.25 / 25."""
    dials = SEED.with_overrides(
        prerequisite_lift_noise_prior=0.05, prerequisite_lift_noise_prior_reports=5.0
    )
    assert model.reversal_share(0, 0, dials) == pytest.approx(0.05)
    assert model.reversal_share(20, 5, dials) == pytest.approx(5.25 / 25)
    weightless = SEED.with_overrides(
        prerequisite_lift_noise_prior=0.3, prerequisite_lift_noise_prior_reports=0
    )
    assert model.reversal_share(20, 5, weightless) == pytest.approx(0.25)
    assert model.reversal_share(0, 0, weightless) == pytest.approx(0.3)


def test_the_noise_weight_scales_only_the_chance_term():
    """c has 10 other reports over spread 8 (chance 1.25); share 0.2 at weight 10 makes it
    3.75: 4 reports net 0.25, against 2.75 with the weight at 0 (k = 2)."""
    off = SEED.with_overrides(prerequisite_lift_chance_spread=8.0, prerequisite_lift_k=2.0)
    on = off.with_overrides(prerequisite_lift_noise_weight=10.0)
    assert model.lift_confidence(4, 14, 6, off, noise_share=0.2) == pytest.approx(2.75 / 4.75)
    assert model.lift_confidence(4, 14, 6, on, noise_share=0.2) == pytest.approx(0.25 / 2.25)
    assert model.lift_confidence(4, 14, 6, on) == pytest.approx(2.75 / 4.75)


# --- the units rule (issue 29) -----------------------------------------------------------


def test_a_sessions_unit_is_shared_by_the_turns_naming_each_pair():
    """c -> m in 1,000 turns: a share of 1; c -> x in 2 turns and c -> y in 1: 2/3 and 1/3;
    a pair out of another concept d shares d's unit, not c's."""
    c, d, m, x, y = (uuid4() for _ in range(5))
    assert model.session_shares({(c, m): 1000}) == {(c, m): 1.0}
    got = model.session_shares({(c, x): 2, (c, y): 1, (d, m): 4})
    assert got == {(c, x): pytest.approx(2 / 3), (c, y): pytest.approx(1 / 3), (d, m): 1.0}


def learned(units, learners, concept_units, concept_learners, reverse=None, reverse_learners=2):
    return replace(
        unreported_authored_edge(0),
        source_type="learned",
        confidence=0.3,
        units=units,
        learners=learners,
        concept_units=concept_units,
        concept_learners=concept_learners,
        reverse_units=reverse,
        reverse_learners=None if reverse is None else reverse_learners,
        reverse_source_type=None if reverse is None else "learned",
        reverse_hits=None if reverse is None else 1,
        reverse_confidence=None if reverse is None else 0.3,
    )


def test_units_lift_nets_out_chance_and_the_reverse_and_holds_one_learner():
    """3 units from 3 learners, uncontested: 3/(3 + k). 6 units with 24 more on c spread over
    24 concepts (noise share at its prior 0.05, weight 20: x2): chance 2; a reverse of 1 unit
    takes 1 more, net 3. One learner: held at edge_min_confidence x 1/2."""
    k = PROFILE_UNITS.prerequisite_lift_k
    terms = model.unit_terms(learned(3.0, 3, 3.0, 3), PROFILE_UNITS)
    assert terms.confidence == pytest.approx(3 / (3 + k))
    assert terms.hold is None
    contested = model.unit_terms(learned(6.0, 6, 30.0, 9, reverse=1.0), PROFILE_UNITS)
    assert contested.chance == pytest.approx(2.0)
    assert contested.net == pytest.approx(3.0)
    assert contested.confidence == pytest.approx(3 / (3 + k))
    alone = model.unit_terms(learned(1.0, 1, 1.0, 1), PROFILE_UNITS)
    assert alone.confidence == pytest.approx(PROFILE_UNITS.edge_min_confidence / 2)
    assert alone.confidence < PROFILE_UNITS.edge_min_confidence


def test_the_profiles_k_needs_more_than_one_learners_unit_to_hold_an_edge():
    """The evidence profile's k sits where a net of one learner's capped unit stays below
    `prerequisite_lift_noise_held_min` even from two learners and with nothing netted, and
    two learners' whole units reach it: 1/(1 + k) < 0.6 <= 2/(2 + k), i.e. 2/3 < k <= 4/3.
    Two whole units less a whole unit of chance (14 units on c: (14 - 2)/24 x 2) fall back
    below it."""
    held = PROFILE_UNITS.prerequisite_lift_noise_held_min
    cap = PROFILE_UNITS.prerequisite_learner_cap
    one_unit = model.unit_terms(learned(cap, 2, cap, 2), PROFILE_UNITS)
    assert one_unit.hold is None and one_unit.net == pytest.approx(cap)
    assert one_unit.confidence < held
    two_units = model.unit_terms(learned(2 * cap, 2, 2 * cap, 2), PROFILE_UNITS)
    assert two_units.confidence >= held
    less_chance = model.unit_terms(learned(2.0, 2, 14.0, 2), PROFILE_UNITS)
    assert less_chance.chance == pytest.approx(1.0)
    assert less_chance.confidence < held


def test_a_learned_reverse_counts_from_min_learners_learners():
    """3 units from 3 learners against a learned reverse of 1 unit: from one learner it
    counts nothing (3/(3 + k)), from two it takes 1 (2/(2 + k)); with `min_learners` at 3
    two learners count nothing either. An enriched edge read as learned nets out the same
    (nothing from one learner). An authored reverse at 0.5 stands for k x 1 units whatever
    its learners: its 3 units from one learner do not count, its prior does."""
    k = PROFILE_UNITS.prerequisite_lift_k
    one = model.unit_terms(learned(3.0, 3, 3.0, 3, reverse=1.0, reverse_learners=1), PROFILE_UNITS)
    assert (one.reverse, one.reverse_learners) == (0.0, 1)
    assert one.confidence == pytest.approx(3 / (3 + k))
    two = model.unit_terms(learned(3.0, 3, 3.0, 3, reverse=1.0, reverse_learners=2), PROFILE_UNITS)
    assert two.reverse == pytest.approx(1.0)
    assert two.confidence == pytest.approx(2 / (2 + k))
    three = PROFILE_UNITS.with_overrides(prerequisite_min_learners=3)
    assert model.unit_terms(
        learned(3.0, 3, 3.0, 3, reverse=1.0, reverse_learners=2), three
    ).reverse == pytest.approx(0.0)
    enriched = replace(
        learned(3.0, 3, 3.0, 3, reverse=1.0, reverse_learners=1), source_type="enriched", prior=0.45
    )
    as_learned = model.unit_terms(enriched, PROFILE_UNITS).as_learned
    assert as_learned is not None and as_learned.reverse == 0.0
    assert as_learned.confidence == pytest.approx(3 / (3 + k))
    authored = replace(
        learned(3.0, 3, 3.0, 3, reverse=3.0, reverse_learners=1),
        reverse_source_type="seed",
        reverse_confidence=0.5,
    )
    assert model.unit_terms(authored, PROFILE_UNITS).reverse == pytest.approx(k)
    with pytest.raises(ValueError, match="learners"):
        replace(learned(3.0, 3, 3.0, 3), reverse_units=1.0)


def test_an_enriched_edge_stands_at_the_larger_of_its_prior_and_its_reports():
    """An enriched c -> m at 0.45 with 3 units from 3 learners, nothing else on c: its reports
    as a learned edge's give 3/(3 + k), and it stands there. Its own write (one session no
    learner is recorded for) is the author's, not a learner's: with it, the same 3/(3 + k).
    From one learner it stays at 0.45, and so does a prior of 0.1 below the one-learner hold
    (one learner never lifts it). An authored one keeps its value under the same reports,
    at 0.9 and at 0.45. Judged unsupported, it is lowered whatever its reports would give."""
    k = PROFILE_UNITS.prerequisite_lift_k
    enriched = replace(learned(3.0, 3, 3.0, 3), source_type="enriched", prior=0.45)
    terms = model.unit_terms(enriched, PROFILE_UNITS)
    assert terms.raised == pytest.approx(3 / (3 + k))
    assert terms.confidence == pytest.approx(3 / (3 + k))
    written = replace(enriched, units=4.0, concept_units=3.0, unattributed=1)  # as read
    assert model.unit_terms(written, PROFILE_UNITS).confidence == pytest.approx(3 / (3 + k))
    alone = replace(learned(1.0, 1, 1.0, 1), source_type="enriched", prior=0.45)
    assert model.unit_terms(alone, PROFILE_UNITS).raised is None
    assert model.unit_terms(alone, PROFILE_UNITS).confidence == pytest.approx(0.45)
    low = model.unit_terms(replace(alone, prior=0.1), PROFILE_UNITS)
    assert low.confidence == pytest.approx(0.1)
    assert PROFILE_UNITS.edge_min_confidence / PROFILE_UNITS.prerequisite_min_learners > 0.1
    authored = model.unit_terms(replace(enriched, source_type="seed", prior=0.9), PROFILE_UNITS)
    assert authored.confidence == pytest.approx(0.9)
    # an author's value moves by negative evidence alone: a low one stays under these reports
    low_authored = model.unit_terms(replace(enriched, source_type="seed"), PROFILE_UNITS)
    assert (low_authored.raised, low_authored.confidence) == (None, pytest.approx(0.45))
    assert model.unit_terms(learned(3.0, 3, 3.0, 3), PROFILE_UNITS).raised is None
    judged = replace(unreported_authored_edge(0), concept_units=30.0, concept_learners=9,
                     reported_units=30.0, prior=0.45)  # fmt: skip
    lowered = model.unit_terms(judged, PROFILE_UNITS)
    assert lowered.judged and lowered.confidence < 0.45


def test_a_sum_of_shares_that_rounds_under_the_dial_still_reaches_it():
    """Units are sums of shares kept in whatever order reports arrive: 1 + 1/3 + 1 + 2/3
    reads 2.9999999999999996 in that order. Three units from three learners judge an authored
    edge none names, however the sum rounded; a concept with 2.9 units does not."""
    rounded = 0.0
    for share in (1.0, 1 / 3, 1.0, 2 / 3):
        rounded += share
    assert rounded < 3 == PROFILE_UNITS.prerequisite_unlearn_min_reports
    edge = replace(unreported_authored_edge(0), concept_units=rounded, concept_learners=3,
                   reported_units=rounded, prior=0.9)  # fmt: skip
    assert model.unit_terms(edge, PROFILE_UNITS).judged
    short = replace(edge, concept_units=2.9, reported_units=2.9)
    assert not model.unit_terms(short, PROFILE_UNITS).judged


def test_the_invented_term_scales_the_shown_learners_rate_to_the_others():
    """10 failed sessions on c, 4 by learners who had shown m, 1 of those named m anyway:
    (10 - 4) x 1/4 = 1.5 invented reports, before any shown learner: none. With 6 units from
    6 learners and chance 2 (as above), invented 1.5 leaves chance the larger (net 4); with 3
    of the 4 shown sessions naming m, invented 4.5 takes net to 1.5. With
    `prerequisite_drop_shown` off the shown sessions' reports are evidence too, so the rate
    applies to all 10: 7.5. An authored edge's judgement does not read it."""
    k = PROFILE_UNITS.prerequisite_lift_k
    assert model.invented_reports(10, 4, 1) == pytest.approx(1.5)
    assert model.invented_reports(10, 0, 0) == 0.0
    assert model.invented_reports(3, 3, 3) == 0.0
    base = learned(6.0, 6, 30.0, 9)
    low = model.unit_terms(replace(base, failed_sessions=10, shown_sessions=4, shown_named=1),
                           PROFILE_UNITS)  # fmt: skip
    assert (low.chance, low.invented, low.net) == pytest.approx((2.0, 1.5, 4.0))
    high = model.unit_terms(replace(base, failed_sessions=10, shown_sessions=4, shown_named=3),
                            PROFILE_UNITS)  # fmt: skip
    assert (high.invented, high.net) == pytest.approx((4.5, 1.5))
    assert high.confidence == pytest.approx(1.5 / (1.5 + k))
    kept = PROFILE_UNITS.with_overrides(prerequisite_drop_shown=False)
    assert model.invented_reports(10, 4, 1, shown_dropped=False) == pytest.approx(2.5)
    both = model.unit_terms(replace(base, failed_sessions=10, shown_sessions=4, shown_named=3),
                            kept)  # fmt: skip
    assert both.invented == pytest.approx(7.5)
    authored = replace(unreported_authored_edge(0), concept_units=3.0, concept_learners=2,
                       prior=0.9, failed_sessions=10, shown_sessions=4, shown_named=3)  # fmt: skip
    assert model.unit_terms(authored, PROFILE_UNITS).invented == 0.0


def test_a_sessions_exposures_are_what_its_learner_had_shown_at_its_first_failure():
    """The learner had shown primes and modular before the session. Turn 0 succeeds on
    hashing; turn 1 fails on rsa naming hashing and primes as missing; turn 2 fails on hashing
    (itself excepted); turn 3, with no outcome, shows nothing (signatures); turn 4 succeeds on
    key-exchange; turn 5 fails on rsa again (its first failure decided) and on key-exchange
    (itself excepted)."""
    from hag.session.ladder import Catalogue

    turns = ordered_turns(
        builders.turn(0, outcome="success", concepts=["hashing"]),
        builders.turn(1, outcome="failure", concepts=["rsa"],
                      struggles=[quoted("rsa", "hashing"), quoted("rsa", "primes")]),
        builders.turn(2, outcome="failure", concepts=["hashing"]),
        builders.turn(3, concepts=["signatures"]),
        builders.turn(4, outcome="success", concepts=["key-exchange"]),
        builders.turn(5, outcome="failure", concepts=["rsa", "key-exchange"]),
    )  # fmt: skip
    catalogue = Catalogue.from_rows("t", [])
    got = rules.shown_exposures(turns, catalogue, {"primes", "modular"})
    assert rules.failed_slugs(turns, catalogue) == ["hashing", "key-exchange", "rsa"]
    assert got.failed == ("hashing", "key-exchange", "rsa")
    assert dict(got.named) == {
        ("hashing", "modular"): False,
        ("hashing", "primes"): False,
        ("key-exchange", "hashing"): False,
        ("key-exchange", "modular"): False,
        ("key-exchange", "primes"): False,
        ("rsa", "hashing"): True,
        ("rsa", "modular"): False,
        ("rsa", "primes"): True,
    }


def test_a_struggle_in_a_failed_turn_is_a_failure_on_its_concept():
    """Turn 0 fails listing no concept, with a struggle on rsa naming primes; turn 1 fails on
    hashing with a struggle on signatures; turn 2 (no outcome) names a struggle on modular.
    The failed concepts are rsa, hashing and signatures: a struggle on c in a failed turn is a
    failure on c whether or not the tutor listed c, and a struggle outside a failed turn is
    none."""
    from hag.session.ladder import Catalogue

    turns = ordered_turns(
        builders.turn(0, outcome="failure", struggles=[quoted("rsa", "primes")]),
        builders.turn(1, outcome="failure", concepts=["hashing"],
                      struggles=[quoted("signatures", "hashing")]),
        builders.turn(2, struggles=[quoted("modular", "primes")]),
    )  # fmt: skip
    catalogue = Catalogue.from_rows("t", [])
    assert rules.failed_slugs(turns, catalogue) == ["hashing", "rsa", "signatures"]
    assert rules.shown_exposures(turns, catalogue, set()).failed == (
        "hashing", "rsa", "signatures"
    )  # fmt: skip


def test_only_a_report_made_after_its_concept_was_shown_counts_as_named():
    """Turn 0 (no outcome) names primes missing for rsa before the learner shows primes in
    turn 1; turn 2 fails on rsa. The report is evidence (kept by `turn_struggles`), so the
    shown session does not count it as named: one report is never both. An earlier success
    recorded under an alias (`prime numbers`) counts as primes shown."""
    from hag.session.ladder import Catalogue

    turns = ordered_turns(
        builders.turn(0, struggles=[quoted("rsa", "primes")]),
        builders.turn(1, outcome="success", concepts=["primes"]),
        builders.turn(2, outcome="failure", concepts=["rsa"]),
    )
    plain = Catalogue.from_rows("t", [])
    assert dict(rules.shown_exposures(turns, plain, set()).named) == {("rsa", "primes"): False}
    kept, contradicted, *_ = rules.turn_struggles(turns, plain, set())
    assert (kept[0], contradicted) == ([rules.StrugglePair("rsa", "primes")], 0)
    aliased = Catalogue.from_rows(
        "t", [{"slug": "primes", "title": "Primes", "aliases": ["prime numbers"]}]
    )
    early = rules.shown_exposures(turns, aliased, {"prime numbers"})
    assert dict(early.named) == {("rsa", "primes"): True}
    assert rules.turn_struggles(turns, aliased, {"prime numbers"})[1] == 1


def test_units_negative_evidence_needs_units_and_learners():
    """An unsupported authored edge written at 0.9 (its prior): 3 units from 1 learner are
    not judged; from 2 learners it falls to the floor with 0.9 said beside it; support brings
    0.9 back, from the prior alone (no kept value is read: `unlearned_from` is None here)."""
    one = replace(unreported_authored_edge(0), concept_units=3.0, concept_learners=1, prior=0.9)
    assert model.evidence_state(one, PROFILE_UNITS) == (0.9, None)
    two = replace(one, concept_learners=2)
    assert model.evidence_state(two, PROFILE_UNITS) == (pytest.approx(0.05), 0.9)
    lowered = replace(two, confidence=0.05, unlearned_from=None, support_units=0.5)
    assert model.evidence_state(lowered, PROFILE_UNITS) == (0.9, None)
    still = replace(two, confidence=0.05, unlearned_from=None)
    assert model.evidence_state(still, PROFILE_UNITS) == (pytest.approx(0.05), 0.9)


PROFILE_UNITS = settings.defaults().with_overrides(**settings.PROFILES["evidence"])


def test_explain_says_which_condition_spares_an_authored_prerequisite():
    """`hag explain` names the unmet condition of negative evidence: too few units or learners
    on the concept, or support above the share; a judged edge says so; with the minimum at 0
    it is never judged."""
    from hag.evidence.model import authored_verdict as _authored_verdict

    dials = SEED.with_overrides(
        prerequisite_unlearn_min_reports=3, prerequisite_unlearn_max_share=0.0
    )
    base = {"judged": False, "min_learners": 2, "units": 0.25, "support": 0.0}
    few = _authored_verdict({**base, "concept_units": 2.0, "concept_learners": 5}, dials)
    assert few == "not judged (its concept needs 3 units from 2 learners)"
    alone = _authored_verdict({**base, "concept_units": 9.0, "concept_learners": 1}, dials)
    assert alone == few
    spared = _authored_verdict({**base, "concept_units": 15.0, "concept_learners": 15}, dials)
    assert spared == "not judged (its own and supporting units 0.2500 are above 0 of its concept's)"
    judged = {**base, "judged": True, "concept_units": 15.0, "concept_learners": 15}
    assert _authored_verdict(judged, dials) == "judged unsupported"
    never = SEED.with_overrides(prerequisite_unlearn_min_reports=0)
    assert "never" in _authored_verdict(
        {**base, "concept_units": 15.0, "concept_learners": 15}, never
    )


def test_a_struggle_its_learner_contradicts_later_is_not_reported():
    """rsa blames primes in turn 0 and hashing in turn 1; turn 2 succeeds on hashing, turn 3
    on rsa. The hashing report stands (hashing shown before the success on rsa), the primes
    one is contradicted by turn 3, unless turn 3's prompt had a line to primes (the tutor
    supplied it: that success is passed over). Without `later` (not asked) nothing is read
    forward. A report the session leaves undecided is decided by the first later session
    that succeeds on primes, or on rsa with no line to primes, read as a whole."""
    from hag.session.ladder import Catalogue

    a, b, c = uuid4(), uuid4(), uuid4()
    turns = ordered_turns(
        builders.turn(0, outcome="failure", struggles=[quoted("rsa", "primes")]),
        builders.turn(1, outcome="failure", struggles=[quoted("rsa", "hashing")]),
        builders.turn(2, outcome="success", concepts=["hashing"]),
        builders.turn(3, outcome="success", concepts=["rsa"]),
    )
    catalogue = Catalogue.from_rows("t", [])
    entries = {"rsa": a, "primes": b, "hashing": c}

    def reported(later, supplied=None):
        per_turn, contradicted, *_ = rules.turn_struggles(turns, catalogue, set(), later, supplied)
        return rules.reported_turns(per_turn, entries), contradicted

    assert reported(None) == ({(a, b): 1, (a, c): 1}, 0)
    assert reported([]) == ({(a, c): 1}, 1)
    assert reported([], [[], [], [], ["primes"]]) == ({(a, b): 1, (a, c): 1}, 0)
    # contradicted by a later turn of its own session it counts nothing (that session is no
    # failure on rsa at all); contradicted by a later session it is withheld, turn by turn,
    # and counted on its edge as the report that session would withdraw
    primes = rules.StrugglePair("rsa", "primes")
    assert rules.turn_struggles(turns, catalogue, set(), []).withheld == [[], [], [], []]
    assert rules.turn_struggles(turns, catalogue, set(), []).forward == frozenset()
    assert rules.turn_struggles(turns, catalogue, None).forward == frozenset()
    twice = ordered_turns(
        builders.turn(0, outcome="failure", struggles=[quoted("rsa", "primes")]),
        builders.turn(1, outcome="success", concepts=["hashing"]),
        builders.turn(2, outcome="failure", struggles=[quoted("rsa", "primes")]),
    )
    withheld = rules.turn_struggles(twice, catalogue, set(), [rules.Success(frozenset({"rsa"}))])
    assert withheld.withheld == [[primes], [], [primes]]
    assert (withheld.contradicted, withheld.forward) == (2, {primes})
    assert rules.reported_turns(withheld.withheld, entries) == {(a, b): 2}

    alone = ordered_turns(builders.turn(0, outcome="failure", struggles=[quoted("rsa", "primes")]))

    def later(*sessions):
        return [rules.Success(frozenset(s), frozenset(p)) for s, p in sessions]

    def dropped(*sessions):
        return rules.turn_struggles(alone, catalogue, set(), later(*sessions))[1]

    assert dropped() == 0
    assert dropped(({"hashing"}, ()), ({"rsa"}, ())) == 1
    assert dropped(({"primes"}, ()), ({"rsa"}, ())) == 0
    assert dropped(({"rsa", "primes"}, ())) == 0
    assert dropped(({"rsa"}, {("rsa", "primes")})) == 0
    assert dropped(({"rsa"}, {("rsa", "primes")}), ({"rsa"}, ())) == 1
    assert dropped(({"rsa"}, {("rsa", "primes")}), ({"primes"}, ())) == 0
    assert dropped(({"rsa"}, {("rsa", "hashing")})) == 1


def test_a_success_withdraws_only_the_reports_nothing_has_answered_since():
    """Four recorded reports out of rsa, made on days 1, 2, 3 and 3, and one out of aes; this
    session succeeds on rsa. primes was succeeded on day 2: the day-1 and day-2 reports of
    rsa -> primes stand (a success on the report's own day came after it), the day-3 one is
    withdrawn. The hashing report stands when this session's success on rsa had a line to
    hashing (passed over: the report waits for the next success); a report out of a concept
    this session did not succeed on is never withdrawn."""
    from dataclasses import dataclass
    from datetime import UTC, datetime

    @dataclass(frozen=True)
    class Report:
        source_slug: str
        target_slug: str
        reported_at: datetime

    def day(d):
        return datetime(2026, 1, d, tzinfo=UTC)

    reports = [Report("rsa", "primes", day(1)), Report("rsa", "primes", day(2)),
               Report("rsa", "primes", day(3)), Report("rsa", "hashing", day(3)),
               Report("aes", "primes", day(3))]  # fmt: skip
    here = rules.Success(frozenset({"rsa"}), frozenset({("rsa", "hashing")}))
    between = [(day(2), rules.Success(frozenset({"primes"})))]
    assert rules.withdrawn_reports(reports, here, between) == [reports[2]]
    plain = rules.Success(frozenset({"rsa"}))
    assert rules.withdrawn_reports(reports, plain, between) == [reports[2], reports[3]]
    assert rules.withdrawn_reports(reports, plain, []) == reports[:4]
