-- Why: the online read path (SPEC §3) spends its time reading vectors, not comparing them
-- (measured before this migration, docs/retrieval.md: an exact topic scan at 100k rows was 8.6 ms with the vectors in
-- TOAST and 4.4 ms with them inline). Two changes, both measured in bench/bench_retrieval.py:
--
-- 1. toast_tuple_target = 8160 (the maximum): a row is only toasted when it no longer fits
--    a page, so a 1,536-d vector (6 KB) stays in the heap row next to the columns the filter
--    reads, uncompressed, and an exact scan reads one page per row instead of a heap page
--    plus a chain of TOAST chunks. Larger vectors (3,072-d) are still toasted as before.
--    Existing rows keep their layout until rewritten; new and reloaded rows are inline.
--
-- 2. An HNSW index for the tutor pass, partial on its scope. The tutor pass reads every
--    topic (p_topic_id NULL), so its eligible set grows with the whole platform; no btree
--    narrows it. The retrieval module queries it by distance first and re-ranks after (the
--    seed's boosted ORDER BY can use no vector index), with iterative scans and an exact
--    fallback whenever the approximate answer could be short or reordered. HNSW over
--    `vector` stops at 2,000 dimensions: above that the index is skipped and the tutor
--    pass scans exactly (still correct, only slower).
--    Topic passes get per-topic partial HNSW indexes only when a topic outgrows the
--    exact_scan_max_rows dial (hag.retrieval.ann.build_topic_indexes), built by operators
--    after loading, never by a migration (topics are data, not schema).

ALTER TABLE hag_entries SET (toast_tuple_target = 8160);

DO $$
DECLARE
    d integer := (SELECT value::integer FROM hag_meta WHERE key = 'embedding_dim');
BEGIN
    IF d <= 2000 THEN
        EXECUTE 'CREATE INDEX hag_entries_tutor_ann_idx ON hag_entries '
                'USING hnsw (embedding vector_cosine_ops) WHERE visibility_scope = ''tutor''';
        EXECUTE 'COMMENT ON INDEX hag_entries_tutor_ann_idx IS ''hag-ann scope:tutor''';
    END IF;
END
$$;
