"""The simulator: hidden truth, learners, the tutor loop and its payloads in the ingest contract."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import numpy as np
import pytest

from hag.operations.corpus import DEMO_CORPUS
from hag_lab.simulate import world as w
from hag_lab.simulate.learners import TRAITS, Learner, OutcomeModel, make_learners
from hag_lab.simulate.tutor import Extractor, TutorPolicy, run_session

ENDED = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def load_world(db, world, **kw):
    """Load a world's corpus (one public entry per concept) into the test database."""
    from hag.operations.corpus import load, parse
    from hag.vectors.embeddings import get_embedder

    load(db, parse(w.world_corpus(world, **kw)), get_embedder().dim)
    db.commit()


def entry_concepts(db, topic):
    rows = db.execute(
        "SELECT id, concept_slug FROM hag_entries WHERE topic_id = %s", (topic,)
    ).fetchall()
    db.rollback()
    return {str(r["id"]): r["concept_slug"] for r in rows}


def play(db, world, learner, rng, *, extractor=None, policy=None, model=None, session_id="s-1"):
    from hag.retrieval import clear_caches, retrieve

    extractor, policy, model = (
        extractor or Extractor(),
        policy or TutorPolicy(),
        model or OutcomeModel(),
    )

    clear_caches()

    def edge_info(ids):
        rows = db.execute(
            "SELECT id, confidence, source_type FROM hag_edges WHERE id = ANY(%s::uuid[])",
            (list(ids),),
        ).fetchall()
        db.rollback()
        return {str(r["id"]): (r["confidence"], r["source_type"]) for r in rows}

    return run_session(
        retrieve=retrieve,
        world=world,
        learner=learner,
        model=model,
        extractor=extractor,
        policy=policy,
        rng=rng,
        session_id=session_id,
        ended_at=ENDED,
        day=0,
        entry_concepts=entry_concepts(db, world.topic_id),
        edge_info=edge_info,
    )


def chain_world():
    """a <- b <- c: c needs b, b needs a."""
    concepts = {s: w.Concept(s, s.title(), f"Concept {s}.") for s in ("alpha", "beta", "gamma")}
    return w.World("chain", concepts, frozenset({("beta", "alpha"), ("gamma", "beta")}))


def test_crypto_truth_is_a_dag_over_the_demo_topic():
    """The hidden Cryptography graph names only concepts with a public entry, and has no cycle."""
    world = w.cryptography_world()
    corpus = json.loads(DEMO_CORPUS.read_text())
    public = {
        e["concept_slug"]
        for e in corpus["entries"]
        if e["topic_id"] == "cryptography" and e["visibility_scope"] == "public"
    }
    assert set(world.concepts) == public - {"_unanchored_"}
    assert len(world.concepts) == 28
    depth = world.depth()
    assert depth["caesar-cipher"] == 0 and depth["substitution-cipher"] == 1
    assert depth["tls-handshake"] > depth["certificates-and-pki"] > depth["digital-signatures"]


def test_crypto_truth_disagrees_with_three_authored_edges_and_adds_missing_ones():
    """The authored mistakes are seed prerequisites absent from the truth; RSA's are true but unauthored."""
    corpus = json.loads(DEMO_CORPUS.read_text())
    slug = {e["id"]: e["concept_slug"] for e in corpus["entries"]}
    seeded = {
        (slug[e["source_entry_id"]], slug[e["target_entry_id"]])
        for e in corpus["edges"]
        if e["edge_type"] == "prerequisite" and e["source_type"] == "seed"
    }
    world = w.cryptography_world(corpus)
    for mistake in w.CRYPTO_AUTHORED_MISTAKES:
        assert mistake in seeded and mistake not in world.prerequisites
    assert ("rsa", "modular-arithmetic") in world.prerequisites - seeded
    assert len(seeded & world.prerequisites) == 27


def test_leads_to_and_fallback_truths_follow_the_prerequisites():
    """leads_to A->B is true when A is a prerequisite of B; fallback A->B when B is one of A."""
    world = chain_world()
    assert world.leads_to_truth() == {("alpha", "beta"), ("beta", "gamma")}
    assert world.fallback_truth() == {("beta", "alpha"), ("gamma", "beta")}
    assert world.truth_for("related") is None


def test_a_cyclic_truth_is_refused():
    """A truth with a prerequisite cycle cannot be built."""
    from hag.errors import HagError

    concepts = {s: w.Concept(s, s) for s in ("a", "b")}
    with pytest.raises(HagError, match="cycle"):
        w.World("t", concepts, frozenset({("a", "b"), ("b", "a")}))


def test_truth_round_trips_through_its_file(tmp_path):
    """truth.json written from a world reads back as the same world."""
    world = w.random_world(np.random.default_rng(3), 9)
    (tmp_path / "truth.json").write_text(json.dumps(world.as_dict()))
    again = w.load_truth(tmp_path / "truth.json")
    assert again.prerequisites == world.prerequisites and again.slugs == world.slugs


def test_random_world_and_learners_repeat_with_the_seed():
    """The same seed draws the same hidden graph and the same learners; another seed does not."""

    def draw(seed):
        rng = np.random.default_rng(seed)
        world = w.random_world(rng, 12)
        learners = make_learners(world, 5, rng, OutcomeModel())
        return world.prerequisites, [(lr.trait.slug, sorted(lr.mastered)) for lr in learners]

    assert draw(11) == draw(11)
    assert draw(11) != draw(12)


def test_initial_mastery_respects_the_prerequisites():
    """No learner starts knowing a concept without knowing all of its prerequisites."""
    rng = np.random.default_rng(5)
    world = w.random_world(rng, 15, edge_probability=0.4)
    for learner in make_learners(
        world, 50, rng, OutcomeModel(p_root_mastered=0.8, p_inner_mastered=0.8)
    ):
        for slug in learner.mastered:
            assert set(world.prerequisites_of(slug)) <= learner.mastered


def test_outcome_model_rewards_mastered_prerequisites():
    """A turn on a concept is likelier to succeed when its prerequisites are mastered."""
    world = chain_world()
    model = OutcomeModel(p_ready=0.9, p_unready=0.2, trait_bonus=0.05)
    ready = Learner("x", TRAITS[0], {"alpha"})
    unready = Learner("y", TRAITS[0], set())
    assert model.success_probability(ready, "beta", world) == 0.9
    assert model.success_probability(unready, "beta", world) == 0.2
    assert model.success_probability(unready, "beta", world, trait_in_prompt=True) == pytest.approx(
        0.25
    )


def test_a_prompt_naming_the_missing_prerequisite_helps_an_unready_learner():
    """The bridge bonus applies only when a shown edge target is one of the missing prerequisites."""
    world = chain_world()
    model = OutcomeModel(p_ready=0.9, p_unready=0.2, bridge_bonus=0.25)
    unready = Learner("y", TRAITS[0], set())
    assert model.success_probability(unready, "beta", world, shown={"alpha"}) == pytest.approx(0.45)
    assert model.success_probability(unready, "beta", world, shown={"gamma"}) == pytest.approx(0.2)
    ready = Learner("x", TRAITS[0], {"alpha"})
    assert model.success_probability(ready, "beta", world, shown={"alpha"}) == pytest.approx(0.9)


def test_a_session_payload_is_accepted_by_ingest(db):
    """A played session is a payload in the SPEC §2 contract: ingest queues it as pending."""
    from hag.session.ingest import ingest_payload

    world = chain_world()
    load_world(db, world)
    learner = Learner("sim-0001", TRAITS[0], set())
    record = play(
        db,
        world,
        learner,
        np.random.default_rng(1),
        policy=TutorPolicy(min_turns=6, max_turns=6, p_student_observation=1.0),
    )
    p = record.payload
    assert set(p) == {"session_id", "learner_id", "topic_id", "ended_at", "turns"}
    assert [t["turn_index"] for t in p["turns"]] == list(range(6))
    for t in p["turns"]:
        assert set(t) == {
            "turn_index",
            "student_message",
            "concept_slugs",
            "decision_entry_id",
            "used_entry_ids",
            "rendered_edge_ids",
            "outcome",
            "outcome_strength",
            "struggles",
            "observations",
        }
        assert t["outcome"] in ("success", "failure")
        assert t["decision_entry_id"] in t["used_entry_ids"]
    assert any(o["graph"] == "student" for t in p["turns"] for o in t["observations"])
    result = ingest_payload(db, p, source="simulator")
    db.commit()
    assert result.status == "accepted", result
    row = db.execute("SELECT status FROM hag_sessions WHERE session_id = 's-1'").fetchone()
    assert row["status"] == "pending"


def test_decision_is_the_retrieved_entry_of_the_taught_concept(db):
    """The tutor acts on the retrieved advisory for the concept it teaches that turn."""
    world = chain_world()
    load_world(db, world)
    concepts = entry_concepts(db, "chain")
    record = play(db, world, Learner("sim-0002", TRAITS[1], set()), np.random.default_rng(2))
    for t in record.payload["turns"]:
        assert concepts[t["decision_entry_id"]] == t["concept_slugs"][0]
    decisions = [u for u in record.uses if u.kind == "decision"]
    assert len(decisions) == record.turns and all(
        u.confidence == pytest.approx(0.8) for u in decisions
    )


def test_true_struggles_name_unmastered_prerequisites_and_p_miss_drops_them(db):
    """Without noise every reported struggle is a true missing prerequisite; p_miss=1 drops all."""
    world = chain_world()
    load_world(db, world)
    policy = TutorPolicy(min_turns=8, max_turns=8, p_notice_struggle=0.0)
    reckless = OutcomeModel(p_overreach=1.0)
    clean = play(
        db,
        world,
        Learner("sim-0003", TRAITS[0], set()),
        np.random.default_rng(4),
        policy=policy,
        model=reckless,
    )
    reported = [
        (s["concept_slug"], s["missing_slug"])
        for t in clean.payload["turns"]
        for s in t["struggles"]
    ]
    assert reported and set(reported) <= world.prerequisites
    assert all(s["evidence"] for t in clean.payload["turns"] for s in t["struggles"])
    assert [(c, m) for c, m, _ in clean.reported_struggles] == clean.true_struggles
    muted = play(
        db,
        world,
        Learner("sim-0003", TRAITS[0], set()),
        np.random.default_rng(4),
        policy=policy,
        extractor=Extractor(p_miss=1.0),
        model=reckless,
    )
    assert muted.true_struggles and not any(t["struggles"] for t in muted.payload["turns"])


def fork_world():
    """gamma needs alpha and beta; alpha and beta are roots."""
    concepts = {s: w.Concept(s, s.title(), f"Concept {s}.") for s in ("alpha", "beta", "gamma")}
    return w.World("fork", concepts, frozenset({("gamma", "alpha"), ("gamma", "beta")}))


def test_a_failed_turn_records_every_prerequisite_its_learner_lacked(db):
    """`lacking` holds, for each failed turn, every true prerequisite of its concept the
    learner had not mastered, whichever one the struggle names (here none: p_miss = 1): a
    learner who masters nothing lacks both alpha and beta on each failed turn on gamma, and
    nothing on the roots."""
    world = fork_world()
    load_world(db, world)
    record = play(
        db,
        world,
        Learner("sim-0004", TRAITS[0], set()),
        np.random.default_rng(4),
        policy=TutorPolicy(min_turns=8, max_turns=8, p_notice_struggle=0.0),
        extractor=Extractor(p_miss=1.0),
        model=OutcomeModel(p_overreach=1.0, p_learn=0.0),
    )
    failed = [
        (t["turn_index"], c)
        for t in record.payload["turns"]
        if t["outcome"] == "failure"
        for c in t["concept_slugs"]
    ]
    assert "gamma" in {c for _, c in failed}  # a failure with two gaps: the check has teeth
    expected = [(i, "gamma", m) for i, c in failed if c == "gamma" for m in ("alpha", "beta")]
    assert sorted(record.lacking) == expected


def test_a_learner_the_memory_saw_succeed_on_the_target_is_not_counted_as_lacking_it(db):
    """`note_reports` counts a learner for (c, m) only when the memory had not seen it succeed
    on m: neither in an earlier session (the rows ingest wrote) nor in an earlier turn of the
    same session. A learner who succeeded on alpha last session is not counted for
    (gamma, alpha) but is for (gamma, beta) until a turn succeeds on beta; each pair counts a
    learner once."""
    from hag.session.ingest import ingest_payload
    from hag.session.ladder import Catalogue
    from hag_lab.simulate.run import SimulationRun

    world = fork_world()
    load_world(db, world)

    def turn(i, concept, outcome):
        return {
            "turn_index": i,
            "student_message": f"About {concept}?",
            "concept_slugs": [concept],
            "outcome": outcome,
            "struggles": [],
        }

    def payload(session_id, hour, turns):
        return {
            "session_id": session_id,
            "learner_id": "sim-0005",
            "topic_id": "fork",
            "ended_at": ENDED.replace(hour=hour).isoformat(),
            "turns": turns,
        }

    earlier = payload("s-early", 9, [turn(0, "alpha", "success")])
    assert ingest_payload(db, earlier, source="simulator").status == "accepted"
    db.commit()
    later = payload(
        "s-late",
        10,
        [turn(0, "gamma", "failure"), turn(1, "beta", "success"), turn(2, "gamma", "failure")],
    )
    catalogue = Catalogue.load(db, "fork")
    run = SimulationRun.__new__(SimulationRun)
    run.unshown_namers, run.lacking_unshown = {}, {}
    lacking = [(0, "gamma", "alpha"), (2, "gamma", "alpha"), (2, "gamma", "beta")]
    run.note_reports(db, later, catalogue, lacking)
    assert run.lacking_counts() == {}  # alpha shown last session, beta in turn 1
    run.note_reports(db, later, catalogue, [(0, "gamma", "beta")])
    run.note_reports(db, later, catalogue, [(0, "gamma", "beta")])  # again: counted once
    assert run.lacking_counts() == {("gamma", "beta"): 1}


def test_p_false_invents_struggles_on_non_prerequisites(db):
    """With p_false=1 every failed turn also blames a concept that is no prerequisite."""
    world = chain_world()
    load_world(db, world)
    record = play(
        db,
        world,
        Learner("sim-0004", TRAITS[0], set()),
        np.random.default_rng(6),
        extractor=Extractor(p_false=1.0),
        policy=TutorPolicy(min_turns=8, max_turns=8),
    )
    invented = [(c, m) for c, m, true in record.reported_struggles if not true]
    failed = [t for t in record.payload["turns"] if t["outcome"] == "failure"]
    assert failed and len(invented) == len(failed)
    assert not set(invented) & world.prerequisites and all(c != m for c, m in invented)


def test_the_same_seed_plays_the_same_session(db):
    """Two plays from the same seed on the same memory give byte-identical payloads."""
    world = w.random_world(np.random.default_rng(8), 8)
    load_world(db, world)

    def once():
        rng = np.random.default_rng(99)
        learner = make_learners(world, 1, rng, OutcomeModel())[0]
        return json.dumps(play(db, world, learner, rng).payload, sort_keys=True)

    assert once() == once()


def repeated_play(db, extractor, seed=4):
    """A reckless learner on the chain world, eight turns, the extractor as given."""
    return play(
        db,
        chain_world(),
        Learner("sim-0006", TRAITS[0], set()),
        np.random.default_rng(seed),
        extractor=extractor,
        policy=TutorPolicy(min_turns=8, max_turns=8, p_notice_struggle=0.0),
        model=OutcomeModel(p_overreach=1.0),
    )


def test_a_repeating_extractor_names_one_misread_pair_on_every_later_failed_turn(db):
    """p_repeat_session 1: from the first failed turn on, every failed turn's payload names
    the same pair, which is no prerequisite; successful turns never do."""
    world = chain_world()
    load_world(db, world)
    record = repeated_play(db, Extractor(kind="structured", p_repeat_session=1.0))
    turns = record.payload["turns"]
    first = next(i for i, t in enumerate(turns) if t["outcome"] == "failure")
    pair = (turns[first]["concept_slugs"][0], record.error_reports[0][1])
    assert record.repeating and pair not in world.prerequisites
    assert record.misread == pair  # what the run counts as a session that repeated one
    named = [
        i
        for i, t in enumerate(turns)
        if any((s["concept_slug"], s["missing_slug"]) == pair for s in t["struggles"])
    ]
    failed_after = [i for i, t in enumerate(turns[first:], first) if t["outcome"] == "failure"]
    assert len(failed_after) >= 2 and named == failed_after
    assert record.error_reports == [(*pair, "repeated")] * len(failed_after)


def test_a_repeating_extractor_replays_with_its_seed_and_is_absent_at_zero(db):
    """The same seed gives the same repeated misreading; at share 0 the payload is the one
    of an extractor without the option (nothing extra is drawn)."""
    load_world(db, chain_world())

    def payload(extractor):
        return json.dumps(repeated_play(db, extractor).payload, sort_keys=True)

    repeating = Extractor(kind="structured", p_repeat_session=1.0)
    assert payload(repeating) == payload(repeating)
    assert payload(Extractor(kind="structured", p_repeat_session=0.0)) == payload(
        Extractor(kind="structured")
    )
    assert payload(repeating) != payload(Extractor(kind="structured"))


def test_a_learner_names_their_misconception_on_every_failed_turn_there(db):
    """A learner holding gamma <- alpha: every failed turn on gamma reports that pair, no
    other turn does, and it is reported at least once over three sessions."""
    world = chain_world()
    load_world(db, world)
    named = 0
    for seed in (1, 2, 3):
        learner = Learner("sim-0007", TRAITS[0], set(), misconception=("gamma", "alpha"))
        record = play(
            db,
            world,
            learner,
            np.random.default_rng(seed),
            policy=TutorPolicy(min_turns=8, max_turns=8, p_notice_struggle=0.0),
            model=OutcomeModel(p_overreach=1.0),
            session_id=f"s-{seed}",
        )
        for t in record.payload["turns"]:
            says = ("gamma", "alpha") in {
                (s["concept_slug"], s["missing_slug"]) for s in t["struggles"]
            }
            assert says == (t["outcome"] == "failure" and t["concept_slugs"] == ["gamma"])
            named += says
        assert all(kind == "misconception" for _, _, kind in record.error_reports)
    assert named > 0


def _moves_after_failures(db, world, notices, extractor):
    record = play(
        db,
        world,
        Learner("sim-0005", TRAITS[0], set()),
        np.random.default_rng(11),
        extractor=extractor,
        policy=TutorPolicy(min_turns=8, max_turns=8, p_notice_struggle=1.0, notices=notices),
    )
    turns = record.payload["turns"]
    return [
        (a["concept_slugs"][0], b["concept_slugs"][0])
        for a, b in zip(turns, turns[1:], strict=False)
        if a["outcome"] == "failure"
    ]


def test_a_tutor_noticing_through_the_extractor_retreats_only_where_it_reported(db):
    """`notices=learner` retreats to the gap the learner has though nothing reported it (the
    hidden truth); `notices=extractor` retreats only to a concept the turn's extractor
    reported: nowhere when it reported nothing, to an invented concept when it invented."""
    world = chain_world()
    load_world(db, world)
    silent = Extractor(p_miss=1.0, p_false=0.0)
    assert any(a != b for a, b in _moves_after_failures(db, world, "learner", silent))
    stays = _moves_after_failures(db, world, "extractor", silent)
    assert stays and all(a == b for a, b in stays)
    inventing = Extractor(p_miss=1.0, p_false=1.0)
    retreats = [m for m in _moves_after_failures(db, world, "extractor", inventing) if m[0] != m[1]]
    assert retreats and not set(retreats) & world.prerequisites
