"""`hag simulate`: simulated learners against the memory, then the report on whether it learns."""

from __future__ import annotations

from pathlib import Path

import click

from hag.cli._common import echo_json, json_option, note


@click.command()
@click.option(
    "--learners",
    default=40,
    show_default=True,
    type=click.IntRange(1, 100000),
    help="Simulated learners.",
)
@click.option(
    "--sessions",
    default=1200,
    show_default=True,
    type=click.IntRange(1, 10_000_000),
    help="Sessions in total, spread evenly over the days.",
)
@click.option(
    "--days",
    default=28,
    show_default=True,
    type=click.IntRange(1, 3650),
    help="Simulated days (the nightly sweeps run after each).",
)
@click.option(
    "--noise",
    default=0.1,
    show_default=True,
    type=click.FloatRange(0, 1),
    help="Extractor noise: true struggles dropped AND false ones invented (per failed turn) "
    "with this probability, unless --p-miss / --p-false say otherwise.",
)
@click.option(
    "--p-miss", type=click.FloatRange(0, 1), help="Probability a true struggle goes unreported."
)
@click.option(
    "--p-false",
    type=click.FloatRange(0, 1),
    help="Per failed turn: probability of an invented struggle.",
)
@click.option(
    "--noise-kind",
    type=click.Choice(["structured", "uniform"]),
    default="structured",
    show_default=True,
    help="Where invented struggles point: structured = a reversed, transitive or sibling "
    "concept of the taught one; uniform = any non-prerequisite (the earlier simulator).",
)
@click.option(
    "--repeat-sessions",
    default=0.0,
    show_default=True,
    type=click.FloatRange(0, 1),
    help="Share of sessions whose extractor misreads one pair at the first failed turn and "
    "reports it again on every later failed turn of the session.",
)
@click.option(
    "--misconception-share",
    default=0.0,
    show_default=True,
    type=click.FloatRange(0, 1),
    help="Share of learners holding one persistent misconception (a wrong prerequisite of "
    "one concept) that the extractor reports whenever they fail at that concept.",
)
@click.option(
    "--tutor-notices",
    type=click.Choice(["learner", "extractor"]),
    default="learner",
    show_default=True,
    help="With no edge to walk after a failed turn, the tutor retreats half the time to the "
    "concept it noticed missing: learner: the one the learner lacks (the hidden truth); "
    "extractor: one the turn's extractor reported, so the tutor errs where it errs.",
)
@click.option(
    "--error-kinds",
    help="Run each extractor error kind (comma-separated: independent[:NOISE], "
    "repeated[:SHARE], misconception[:SHARE], shared-misconception[:SHARE]; or all) on each --world, each profile and "
    "each seed (default seeds 43,47,53,59,61; profiles --compare, --profile, else seed and "
    "evidence); the kinds set the noise options. Prints one table, writes OUT/kinds.md.",
)
@click.option(
    "--jobs",
    default=1,
    show_default=True,
    type=click.IntRange(1, 64),
    help="With --error-kinds: runs at once, each in its own process and private database "
    "(about 0.5 GB each).",
)
@click.option(
    "--seed",
    default=7,
    show_default=True,
    type=int,
    help="Random seed: the same seed repeats the run.",
)
@click.option(
    "--world",
    "world_name",
    default="cryptography",
    show_default=True,
    help="cryptography: the demo corpus's Cryptography topic with its hidden graph; "
    "random: a random hidden graph over --concepts made-up concepts, no authored edges; "
    "random:N: a random topic of N concepts (30-60) with authored prerequisites, three of "
    "them wrong. Drawn from --seed. With --error-kinds, a comma-separated list.",
)
@click.option(
    "--concepts",
    default=15,
    show_default=True,
    type=click.IntRange(2, 500),
    help="Concepts of a random world.",
)
@click.option(
    "--enrich-every",
    default=7,
    show_default=True,
    type=click.IntRange(0, 3650),
    help="Run enrichment of orphans every N simulated days (0: never).",
)
@click.option(
    "--flows",
    "use_flows",
    is_flag=True,
    help="Run processing, sweeps and enrichment through their Prefect flows "
    "(about 1 s per flow run) instead of calling the functions.",
)
@click.option(
    "--database",
    type=click.Choice(["private", "configured"]),
    default="private",
    show_default=True,
    help="private: a fresh embedded database under OUT/db (stopped afterwards), so "
    "the figures depend only on the seed; configured: the configured database "
    "(it receives every simulated session).",
)
@click.option(
    "--drop-databases",
    is_flag=True,
    help="With a private database: remove each run's database once its report is written "
    "(about 0.7 GB a run at demo size), keeping only the reports; `hag explain` then has no "
    "run memory to read.",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=Path("reports/simulation"),
    show_default=True,
    help="Report folder (report.md, report.json, PNG plots): new, empty, or made by an "
    "earlier simulate (a folder with other files is refused).",
)
@click.option(
    "--profile",
    type=click.Choice(["seed", "evidence"]),
    help="Set this rule profile on the memory before the run (default: the dials as they are; "
    "on a private database, the registry defaults, i.e. seed).",
)
@click.option(
    "--seeds",
    help="Comma-separated seeds (e.g. 7,11,13,17,19): one run per seed, each on its own "
    "private database; report.json holds the mean of every headline figure and its spread.",
)
@click.option(
    "--compare",
    help="Comma-separated profiles (e.g. seed,evidence) run on the same seeds; prints one "
    "table and writes OUT/compare.md and OUT/compare.json.",
)
@json_option
def simulate(
    learners: int,
    sessions: int,
    days: int,
    noise: float,
    p_miss: float | None,
    p_false: float | None,
    noise_kind: str,
    repeat_sessions: float,
    misconception_share: float,
    tutor_notices: str,
    error_kinds: str | None,
    jobs: int,
    seed: int,
    world_name: str,
    concepts: int,
    enrich_every: int,
    use_flows: bool,
    database: str,
    drop_databases: bool,
    out: Path,
    profile: str | None,
    seeds: str | None,
    compare: str | None,
    as_json: bool,
) -> None:
    """Simulate learners taught through the memory, and report whether it learns the truth.

    A hidden prerequisite graph decides outcomes; a tutor reads the memory with `retrieve`
    every turn; sessions go in through ingest and session-end processing; the nightly sweeps
    run as the simulated days pass. The report scores the learned graph against the hidden
    one and the confidences against the outcomes.
    """
    from hag.support import extras

    extras.require("lab", "hag simulate")  # the report's plots
    if database == "private":  # a fresh embedded database of its own
        extras.require("embedded", "hag simulate --database private")
    from hag.errors import HagError
    from hag.vectors.embeddings import announce
    from hag_lab.report.build import summary_lines
    from hag_lab.simulate.experiment import Experiment, run_experiment
    from hag_lab.simulate.kinds import error_kinds as parse_kinds
    from hag_lab.simulate.kinds import make_world
    from hag_lab.simulate.run import SimulationConfig
    from hag_lab.simulate.sandbox import claim_folder, private_database
    from hag_lab.simulate.tutor import TutorPolicy

    seed_list = _int_list(seeds, "--seeds") if seeds else [seed]
    profiles = _profile_list(compare) if compare else []
    if (len(seed_list) > 1 or profiles or error_kinds) and database != "private":
        raise click.UsageError("--seeds, --compare and --error-kinds run on private databases only")
    if drop_databases and database != "private":
        raise click.UsageError(
            "--drop-databases removes private databases only, never the configured one"
        )
    world_specs = [part.strip() for part in world_name.split(",") if part.strip()]
    try:
        kinds = parse_kinds(error_kinds) if error_kinds else []
    except HagError as exc:
        raise click.BadParameter(str(exc), param_hint="--error-kinds") from None
    if len(world_specs) != 1 and not kinds:
        raise click.BadParameter(
            f"takes one world (several only with --error-kinds), not {world_name!r}",
            param_hint="--world",
        )
    try:
        worlds = [(spec, *make_world(spec, seed=seed, concepts=concepts)) for spec in world_specs]
    except HagError as exc:
        raise click.BadParameter(str(exc), param_hint="--world") from None
    config = SimulationConfig(
        learners=learners,
        sessions=sessions,
        days=days,
        p_miss=noise if p_miss is None else p_miss,
        p_false=noise if p_false is None else p_false,
        noise_kind=noise_kind,
        p_repeat_session=repeat_sessions,
        misconception_share=misconception_share,
        seed=seed_list[0],
        profile=profile,
        enrich_every_days=enrich_every,
        use_flows=use_flows,
        policy=TutorPolicy(notices=tutor_notices),
    )
    _, world, corpus = worlds[0]
    claim_folder(out, "--out")  # before anything is written or cleared under it
    announce()
    if kinds:
        from hag_lab.simulate.seeds import DEFAULT_KIND_SEEDS, kinds_table, run_kinds

        result = run_kinds(
            worlds,
            kinds,
            profiles or ([profile] if profile else ["seed", "evidence"]),
            config,
            seed_list if seeds else DEFAULT_KIND_SEEDS,
            out,
            jobs=jobs,
            note=note,
            drop_databases=drop_databases,
        )
        if as_json:
            echo_json(result["rows"])
        else:
            for line in kinds_table(result):
                click.echo(line)
            click.echo(f"reports: {out / 'kinds.md'}, {out}/<world>/<kind>/<profile>/")
        return
    if profiles or len(seed_list) > 1:
        from hag_lab.simulate.seeds import compare_table, run_compare, run_seeds

        if profiles:
            comparison = run_compare(
                world,
                config,
                profiles,
                seed_list,
                out,
                corpus=corpus,
                note=note,
                drop_databases=drop_databases,
            )
            if as_json:
                echo_json({n: r["spread"] for n, r in comparison["results"].items()})
            else:
                for line in compare_table(comparison):
                    click.echo(line)
                click.echo(f"reports: {out / 'compare.md'}, {out}/<profile>/seed-<seed>/")
            return
        aggregate = run_seeds(
            world, config, seed_list, out, corpus=corpus, note=note, drop_databases=drop_databases
        )
        if as_json:
            echo_json(aggregate["headline"])
        else:
            for key, s in aggregate["spread"].items():
                if s["mean"] is not None:
                    sd = "" if s["sd"] is None else f" ± {s['sd']:.3f}"
                    click.echo(f"{key}: {s['mean']:.3f}{sd} (n={s['n']})")
            click.echo(f"report: {out / 'report.json'}")
        return
    experiment = Experiment(world, config, out_dir=out, name=out.name, corpus=corpus, note=note)
    if database == "private":
        with private_database(out / "db", drop=drop_databases):
            outcome = run_experiment(experiment)
    else:
        from hag.cli._common import ready

        ready()
        outcome = run_experiment(experiment)
    assert outcome.report is not None
    if as_json:
        echo_json(outcome.report["headline"])
    else:
        for line in summary_lines(outcome.report, out):
            click.echo(line)


def _int_list(text: str, option: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise click.BadParameter(
            f"takes comma-separated whole numbers, not {text!r}", param_hint=option
        ) from None
    if not values or len(set(values)) != len(values):
        raise click.BadParameter(f"takes distinct seeds, not {text!r}", param_hint=option)
    return values


def _profile_list(text: str) -> list[str]:
    names = [part.strip() for part in text.split(",") if part.strip()]
    bad = [n for n in names if n not in ("seed", "evidence")]
    if bad or not names or len(set(names)) != len(names):
        raise click.BadParameter(
            f"takes distinct profiles among seed, evidence; not {text!r}", param_hint="--compare"
        )
    return names
