-- Why: what the online tutor hands over at session end (SPEC §2 "Sessions") and what the
-- batch jobs keep about their own work. Sessions wait as `pending` until the session-end
-- flow applies them, each in one transaction; the status row is the idempotency ledger.
-- A payload that breaks the contract is never half-applied: it is kept whole in the
-- quarantine table with the reason. Confidence history answers "why is this edge at 0.45"
-- and "what did the memory believe after session N"; runs record every batch job.

CREATE TABLE hag_runs (
    run_id       uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    kind         text NOT NULL CHECK (kind ~ '^[a-z][a-z0-9_]*$'),
    started_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz,
    as_of        timestamptz,
    dry_run      boolean NOT NULL DEFAULT false,
    params       jsonb NOT NULL DEFAULT '{}'::jsonb,
    summary      jsonb NOT NULL DEFAULT '{}'::jsonb,
    status       text NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'done', 'failed'))
);

CREATE INDEX hag_runs_kind_started_idx ON hag_runs (kind, started_at DESC);

CREATE TABLE hag_sessions (
    session_id      text PRIMARY KEY CHECK (length(session_id) BETWEEN 1 AND 200),
    learner_id      text NOT NULL,
    topic_id        text NOT NULL,
    ended_at        timestamptz NOT NULL,
    payload         jsonb NOT NULL,
    payload_sha256  text NOT NULL,
    status          text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'processed')),
    received_at     timestamptz NOT NULL DEFAULT now(),
    processed_at    timestamptz,
    run_id          uuid,
    summary         jsonb
);

CREATE INDEX hag_sessions_pending_idx ON hag_sessions (ended_at, session_id) WHERE status = 'pending';

CREATE TABLE hag_session_quarantine (
    quarantine_id  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    received_at    timestamptz NOT NULL DEFAULT now(),
    source         text NOT NULL,
    session_id     text,
    reason         text NOT NULL,
    field          text,
    turn_index     integer,
    raw            text NOT NULL
);

CREATE TABLE hag_confidence_history (
    history_id   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    entity_kind  text NOT NULL CHECK (entity_kind IN ('entry', 'edge')),
    entity_id    uuid NOT NULL,
    old_value    double precision,
    new_value    double precision NOT NULL,
    reason       text NOT NULL,
    session_id   text,
    run_id       uuid,
    at           timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX hag_confidence_history_entity_idx ON hag_confidence_history (entity_id, at);
CREATE INDEX hag_confidence_history_session_idx ON hag_confidence_history (session_id);

-- Enrichment: which orphan was sent to which model (so a re-run does not pay twice), and
-- what every model call cost.
CREATE TABLE hag_enrichment_ledger (
    entry_id     uuid NOT NULL REFERENCES hag_entries (id),
    model        text NOT NULL,
    run_id       uuid,
    enriched_at  timestamptz NOT NULL DEFAULT now(),
    accepted     integer NOT NULL DEFAULT 0,
    rejected     integer NOT NULL DEFAULT 0,
    detail       jsonb NOT NULL DEFAULT '{}'::jsonb,
    PRIMARY KEY (entry_id, model)
);

CREATE TABLE hag_llm_calls (
    call_id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id             uuid,
    entry_id           uuid,
    model              text NOT NULL,
    prompt_tokens      integer NOT NULL DEFAULT 0,
    completion_tokens  integer NOT NULL DEFAULT 0,
    latency_ms         double precision NOT NULL DEFAULT 0,
    ok                 boolean NOT NULL,
    error              text,
    at                 timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX hag_llm_calls_run_idx ON hag_llm_calls (run_id);
