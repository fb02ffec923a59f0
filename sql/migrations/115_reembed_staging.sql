-- Why: the embedder is part of the memory (docs/embedders.md), and `hag reembed` moves a
-- memory to another one. It embeds every entry's and concept's text again, in batches, and
-- keeps each new vector here, committed batch by batch: a kill loses at most one batch and
-- the next run resumes where it stopped, while every reader keeps using the memory's own
-- vectors. The switch is one transaction that moves these vectors into place, records the
-- new embedder in hag_meta and empties these tables. `vector` without a dimension: the new
-- embedder's may differ from the memory's. `text_md5` is the hash of the text embedded, so a
-- text that a session changed meanwhile is embedded again before the switch.

-- The embedder being moved to (its identity as hag_meta 'embedder' holds it); one row at most.
CREATE TABLE hag_reembed_target (
    identity    text NOT NULL,
    started_at  timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX hag_reembed_target_one_row ON hag_reembed_target ((true));

CREATE TABLE hag_reembed_entries (
    id         uuid PRIMARY KEY,
    text_md5   text NOT NULL,
    embedding  vector NOT NULL
);

CREATE TABLE hag_reembed_concepts (
    topic_id   text NOT NULL,
    slug       text NOT NULL,
    text_md5   text NOT NULL,
    embedding  vector NOT NULL,
    PRIMARY KEY (topic_id, slug)
);
