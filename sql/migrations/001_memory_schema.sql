-- Why: the tutor's memory itself (SPEC §2). One table of entries holds all three graphs
-- (topic facts, tutor moves, student traits) plus the visual bucket; typed edges between
-- entries turn similarity search into a decision tree. Identity lives in three partial
-- unique indexes, one per graph, exactly as the seed's migrations 081/112/184 define it
-- (ours: `_unanchored_` rows are exempt from the topic identity: they never dedupe).
-- The embedding dimension is fixed here, from the configured embedder, through the
-- transaction setting `hag.embedding_dim` that `hag migrate` sets.

CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE hag_meta (
    key         text PRIMARY KEY,
    value       text NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);

INSERT INTO hag_meta (key, value)
VALUES ('embedding_dim', current_setting('hag.embedding_dim'));

CREATE TABLE hag_topics (
    topic_id    text PRIMARY KEY CHECK (topic_id ~ '^[a-z0-9][a-z0-9_-]*$'),
    title       text NOT NULL CHECK (length(btrim(title)) > 0),
    created_at  timestamptz NOT NULL DEFAULT now()
);

DO $$
DECLARE
    d integer := current_setting('hag.embedding_dim')::integer;
BEGIN
    IF d IS NULL OR d < 2 THEN
        RAISE EXCEPTION 'hag.embedding_dim must be set to the embedder''s dimension';
    END IF;

    EXECUTE format($ddl$
        CREATE TABLE hag_concepts (
            topic_id     text NOT NULL REFERENCES hag_topics (topic_id),
            slug         text NOT NULL CHECK (slug ~ '^[a-z0-9][a-z0-9-]*$'),
            title        text NOT NULL CHECK (length(btrim(title)) > 0),
            description  text NOT NULL DEFAULT '',
            aliases      text[] NOT NULL DEFAULT '{}',
            origin       text NOT NULL DEFAULT 'catalogue' CHECK (origin IN ('catalogue', 'minted')),
            embedding    vector(%1$s),
            created_at   timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (topic_id, slug)
        )$ddl$, d);

    EXECUTE format($ddl$
        CREATE TABLE hag_entries (
            id                     uuid PRIMARY KEY DEFAULT gen_random_uuid(),
            topic_id               text NOT NULL REFERENCES hag_topics (topic_id),
            concept_slug           text NOT NULL
                CHECK (concept_slug = '_unanchored_' OR concept_slug ~ '^[a-z0-9][a-z0-9-]*$'),
            visibility_scope       text NOT NULL
                CHECK (visibility_scope IN ('tutor', 'visual')
                       OR visibility_scope ~ '^student:[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$'
                       OR (visibility_scope ~ '^[a-z][a-z0-9_-]*$'
                           AND visibility_scope NOT LIKE 'student%%')),
            maturity               text NOT NULL DEFAULT 'candidate'
                CHECK (maturity IN ('candidate', 'pattern', 'proven', 'archived')),
            confidence             double precision NOT NULL
                CHECK (confidence >= 0 AND confidence <= 1),
            concept_match_quality  double precision NOT NULL DEFAULT 1.0
                CHECK (concept_match_quality >= 0 AND concept_match_quality <= 1),
            instruction            text NOT NULL CHECK (length(btrim(instruction)) > 0),
            embedding              vector(%1$s) NOT NULL,
            success_count          integer NOT NULL DEFAULT 0 CHECK (success_count >= 0),
            failure_count          integer NOT NULL DEFAULT 0 CHECK (failure_count >= 0),
            last_matched_at        timestamptz,
            created_at             timestamptz NOT NULL DEFAULT now(),
            updated_at             timestamptz NOT NULL DEFAULT now()
        )$ddl$, d);
END
$$;

-- Identity of a topic fact [and of a tutor row]: (topic, concept, scope). Migration 081.
CREATE UNIQUE INDEX hag_entries_topic_concept_slug_uniq
    ON hag_entries (topic_id, concept_slug, visibility_scope)
    WHERE concept_slug <> '_unanchored_';

-- Identity of a student trait drops the topic: one row per trait per learner. Migration 112.
CREATE UNIQUE INDEX hag_entries_student_pattern_uniq
    ON hag_entries (visibility_scope, concept_slug)
    WHERE visibility_scope LIKE 'student:%' AND concept_slug <> '_unanchored_';

-- One curated drawing per concept, platform-wide. Migration 184.
CREATE UNIQUE INDEX hag_entries_visual_concept_uniq
    ON hag_entries (concept_slug) WHERE visibility_scope = 'visual';

-- The topic and by-concept passes filter on these before anything else.
CREATE INDEX hag_entries_topic_scope_idx ON hag_entries (topic_id, visibility_scope);
CREATE INDEX hag_entries_scope_concept_idx ON hag_entries (visibility_scope, concept_slug);

CREATE TABLE hag_edges (
    id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    source_entry_id    uuid NOT NULL REFERENCES hag_entries (id),
    target_entry_id    uuid NOT NULL REFERENCES hag_entries (id),
    edge_type          text NOT NULL
        CHECK (edge_type IN ('prerequisite', 'fallback', 'leads_to', 'related', 'supersedes')),
    condition          text,
    -- Seed floor 0.05 once graded; nothing may sit at or below zero.
    confidence         double precision NOT NULL CHECK (confidence > 0 AND confidence <= 1),
    hit_count          integer NOT NULL DEFAULT 0 CHECK (hit_count >= 0),
    -- Provenance. Known classes: seed, learned, enriched. The column takes any slug so that
    -- a new class can exist before anyone allows the cull to touch it.
    source_type        text NOT NULL CHECK (source_type ~ '^[a-z][a-z0-9_]*$'),
    source_session_id  text,
    traversal_count    integer NOT NULL DEFAULT 0 CHECK (traversal_count >= 0),
    last_traversed_at  timestamptz,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT hag_edges_no_self_loop CHECK (source_entry_id <> target_entry_id),
    CONSTRAINT hag_edges_identity UNIQUE (source_entry_id, target_entry_id, edge_type)
);

CREATE INDEX hag_edges_target_idx ON hag_edges (target_entry_id);

-- Every deleted edge, copied in full in the same transaction as its delete, by the
-- statement trigger below: the cull cannot forget to audit, and neither can a hand-typed
-- DELETE. Who and why come from transaction settings (`hag.run_id`, `hag.delete_reason`,
-- `hag.rule_values`) that the deleting code sets with set_config(..., true).
CREATE TABLE hag_edge_audit (
    audit_id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id             uuid,
    reason             text NOT NULL,
    rule_values        jsonb NOT NULL DEFAULT '{}'::jsonb,
    deleted_at         timestamptz NOT NULL DEFAULT now(),
    edge_id            uuid NOT NULL,
    source_entry_id    uuid NOT NULL,
    target_entry_id    uuid NOT NULL,
    edge_type          text NOT NULL,
    condition          text,
    confidence         double precision NOT NULL,
    hit_count          integer NOT NULL,
    source_type        text NOT NULL,
    source_session_id  text,
    traversal_count    integer NOT NULL,
    last_traversed_at  timestamptz,
    created_at         timestamptz NOT NULL,
    updated_at         timestamptz NOT NULL,
    restored_at        timestamptz,
    restored_by        text
);

CREATE INDEX hag_edge_audit_run_idx ON hag_edge_audit (run_id);
CREATE INDEX hag_edge_audit_edge_idx ON hag_edge_audit (edge_id);
CREATE INDEX hag_edge_audit_deleted_at_idx ON hag_edge_audit (deleted_at);

CREATE FUNCTION hag_audit_deleted_edges() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO hag_edge_audit (
        run_id, reason, rule_values, deleted_at,
        edge_id, source_entry_id, target_entry_id, edge_type, condition, confidence,
        hit_count, source_type, source_session_id, traversal_count, last_traversed_at,
        created_at, updated_at)
    SELECT NULLIF(current_setting('hag.run_id', true), '')::uuid,
           COALESCE(NULLIF(current_setting('hag.delete_reason', true), ''), 'manual delete'),
           COALESCE(NULLIF(current_setting('hag.rule_values', true), ''), '{}')::jsonb,
           COALESCE(NULLIF(current_setting('hag.deleted_at', true), '')::timestamptz, now()),
           o.id, o.source_entry_id, o.target_entry_id, o.edge_type, o.condition, o.confidence,
           o.hit_count, o.source_type, o.source_session_id, o.traversal_count,
           o.last_traversed_at, o.created_at, o.updated_at
    FROM old_edges o;
    RETURN NULL;
END
$$;

CREATE TRIGGER hag_edges_audit_delete
    AFTER DELETE ON hag_edges
    REFERENCING OLD TABLE AS old_edges
    FOR EACH STATEMENT EXECUTE FUNCTION hag_audit_deleted_edges();

-- Every dial. Rows are written by `hag migrate` from the registry in hag/settings.py
-- (new keys get their defaults, edited values are kept); `hag settings set` validates.
CREATE TABLE hag_settings (
    key            text PRIMARY KEY CHECK (key ~ '^[a-z][a-z0-9_]*$'),
    value          jsonb NOT NULL,
    value_type     text NOT NULL CHECK (value_type IN ('float', 'int', 'bool', 'str', 'list')),
    default_value  jsonb NOT NULL,
    min_value      double precision,
    max_value      double precision,
    description    text NOT NULL,
    consumer       text NOT NULL,
    updated_at     timestamptz NOT NULL DEFAULT now(),
    updated_by     text NOT NULL DEFAULT 'registry'
);
