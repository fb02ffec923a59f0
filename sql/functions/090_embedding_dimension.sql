-- Why: `hag reembed` (hag.operations.reembed) may move a memory to an embedder of another dimension,
-- inside the one transaction of its switch. The vector columns are first relaxed to any
-- dimension (`hag_relax_embedding_dim`), the new vectors written, then the columns fixed
-- at the new dimension and the tutor scope's HNSW index built again as migration 010 does
-- (`hag_fix_embedding_dim`). The caller drops the indexes over the vectors before and
-- rebuilds the per-topic ones after (hag.retrieval.ann).

CREATE OR REPLACE FUNCTION hag_relax_embedding_dim() RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v record;
BEGIN
    -- A view over a vector column (hag_orphan_entries: `e.*`) forbids changing its type: each
    -- is dropped here and made again, from its own definition, by hag_fix_embedding_dim.
    CREATE TEMP TABLE hag_reembed_views ON COMMIT DROP AS
    SELECT DISTINCT c.oid::regclass::text AS name, pg_get_viewdef(c.oid) AS definition,
           obj_description(c.oid, 'pg_class') AS comment
    FROM pg_depend d
    JOIN pg_rewrite r ON r.oid = d.objid
    JOIN pg_class c ON c.oid = r.ev_class
    JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
    WHERE d.classid = 'pg_rewrite'::regclass
      AND d.refobjid IN ('hag_entries'::regclass, 'hag_concepts'::regclass,
                         'hag_entry_search'::regclass)
      AND a.attname = 'embedding'
      AND c.oid <> d.refobjid;
    FOR v IN SELECT name FROM hag_reembed_views LOOP
        EXECUTE format('DROP VIEW %s', v.name);
    END LOOP;
    ALTER TABLE hag_entries ALTER COLUMN embedding TYPE vector;
    ALTER TABLE hag_concepts ALTER COLUMN embedding TYPE vector;
    ALTER TABLE hag_entry_search ALTER COLUMN embedding TYPE halfvec;
END
$$;

CREATE OR REPLACE FUNCTION hag_fix_embedding_dim(d integer) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v record;
BEGIN
    IF d IS NULL OR d < 2 THEN
        RAISE EXCEPTION 'an embedding dimension is at least 2, not %', d;
    END IF;
    EXECUTE format('ALTER TABLE hag_entries ALTER COLUMN embedding TYPE vector(%s)', d);
    EXECUTE format('ALTER TABLE hag_concepts ALTER COLUMN embedding TYPE vector(%s)', d);
    EXECUTE format('ALTER TABLE hag_entry_search ALTER COLUMN embedding TYPE halfvec(%s)', d);
    UPDATE hag_meta SET value = d::text, updated_at = now() WHERE key = 'embedding_dim';
    FOR v IN SELECT name, definition, comment FROM hag_reembed_views LOOP
        EXECUTE format('CREATE VIEW %s AS %s', v.name, v.definition);
        IF v.comment IS NOT NULL THEN
            EXECUTE format('COMMENT ON VIEW %s IS %L', v.name, v.comment);
        END IF;
    END LOOP;
    IF d <= 2000 THEN
        CREATE INDEX hag_entries_tutor_ann_idx ON hag_entries
            USING hnsw (embedding vector_cosine_ops) WHERE visibility_scope = 'tutor';
        COMMENT ON INDEX hag_entries_tutor_ann_idx IS 'hag-ann scope:tutor';
    END IF;
END
$$;
