-- name: topic_title
-- The title of one topic: it goes into the query context string (SPEC §3). No row means
-- the topic is unknown.
SELECT title FROM hag_topics WHERE topic_id = %(topic_id)s

-- name: semantic_exact
-- The seed's semantic pass exactly (match_hag_entries with every dial bound): the filter is
-- confidence per maturity tier, topic and scope; the order is similarity times the maturity
-- boost. It can use no vector index (the order is not a distance), so it runs where the
-- eligible set is small enough to scan (a btree narrows it to the topic or the learner) and
-- as the fallback of the approximate query below.
SELECT id, topic_id, concept_slug, visibility_scope, maturity, confidence, instruction,
       similarity
FROM match_hag_entries(
    %(query)b, %(topic_id)s, %(scopes)s::text[],
    p_min_confidence => %(retrieval_min_confidence)s, p_floor_proven => %(floor_proven)s,
    p_floor_pattern => %(floor_pattern)s, p_floor_candidate => %(floor_candidate)s,
    p_match_count => %(match_count)s, p_boost_proven => %(boost_proven)s,
    p_boost_pattern => %(boost_pattern)s, p_boost_candidate => %(boost_candidate)s)

-- name: semantic_candidates
-- The approximate form of the semantic pass: the same filter, ordered by plain cosine
-- distance so that an HNSW index (partial per topic, or on the tutor scope) drives it with an
-- iterative scan, limited to `candidates` rows; the caller re-ranks them by the maturity
-- boost, checks the candidates' contrast and that the re-ranked top rows hold against any
-- row outside the candidates (or falls back to the exact query). Rows may come back slightly
-- out of distance order (relaxed iterative scan): the caller sorts them.
-- `similarity` is computed exactly as match_hag_entries computes it.
SELECT c.id, c.topic_id, c.concept_slug, c.visibility_scope, c.maturity, c.confidence,
       c.instruction, 1 - c.distance AS similarity
FROM (
    SELECT e.id, e.topic_id, e.concept_slug, e.visibility_scope, e.maturity, e.confidence,
           e.instruction, e.embedding <=> %(query)b AS distance
    FROM hag_entries e
    WHERE hag_entry_visible(e.maturity, e.confidence, %(retrieval_min_confidence)s, %(floor_proven)s,
                            %(floor_pattern)s, %(floor_candidate)s)
      AND (%(topic_id)s::text IS NULL OR e.topic_id = %(topic_id)s)
      AND e.visibility_scope = ANY (%(scopes)s::text[])
    ORDER BY e.embedding <=> %(query)b
    LIMIT %(candidates)s
) c

-- name: compact_candidates
-- The exact-shaped semantic pass through the half-precision search copy (migration 080):
-- the seed's filter on the copy's columns, ordered by the seed's boosted similarity computed
-- in half precision (`approximate`: the inner product of the two unit vectors, which is
-- their cosine and costs one product per dimension where the cosine costs three),
-- `candidates` rows; each then read from hag_entries for
-- its exact similarity, computed as match_hag_entries computes it. The caller re-ranks by
-- the exact score and proves the answer equal to the seed's query, or falls back to it
-- (hag.retrieval.ranking.rerank_compact). `search_set` ('topic' or 'tutor') names the
-- partition: rows searched together are stored together.
-- The filter is written as one range per maturity tier, the third form of
-- hag_entry_visible (its first two clauses follow from the third), each tier a branch of
-- its own: every branch is one range of the copy's (topic, scope,) maturity, confidence
-- index, over pages the nightly CLUSTER keeps in that order, so a row the filter refuses
-- is never read and no row pays for the filter's expressions (measured at 1M x 1,536, the
-- tutor scope of a query near nothing: 32.7 ms for the whole-partition scan with the
-- filter, 18.5 ms through the three ranges; docs/retrieval.md). The branches are written
-- out rather than joined to a VALUES list of tiers: with the tier as a join column the
-- planner scanned the whole tutor partition again (34 ms against 21.8 for these branches).
-- Each branch's floor and boost are the tier functions' (014_hag_maturity_tiers.sql) for a
-- constant maturity, which the planner folds to the one dial each names.
SELECT e.id, e.topic_id, e.concept_slug, e.visibility_scope, e.maturity, e.confidence,
       e.instruction, 1 - (e.embedding <=> %(query)b) AS similarity, c.approximate
FROM (
    SELECT t.id, t.approximate
    FROM (
        SELECT s.id, -(s.embedding <#> l2_normalize(%(query)b)::halfvec)
                   * hag_maturity_boost('proven', %(boost_proven)s, %(boost_pattern)s,
                                        %(boost_candidate)s)
                   AS approximate
        FROM hag_entry_search s
        WHERE s.search_set = %(search_set)s
          AND (%(topic_id)s::text IS NULL OR s.topic_id = %(topic_id)s)
          AND s.visibility_scope = ANY (%(scopes)s::text[])
          AND s.maturity = 'proven'
          AND s.confidence >= hag_entry_retrieval_floor('proven', %(retrieval_min_confidence)s,
                                   %(floor_proven)s, %(floor_pattern)s, %(floor_candidate)s)
        UNION ALL
        SELECT s.id, -(s.embedding <#> l2_normalize(%(query)b)::halfvec)
                   * hag_maturity_boost('pattern', %(boost_proven)s, %(boost_pattern)s,
                                        %(boost_candidate)s)
        FROM hag_entry_search s
        WHERE s.search_set = %(search_set)s
          AND (%(topic_id)s::text IS NULL OR s.topic_id = %(topic_id)s)
          AND s.visibility_scope = ANY (%(scopes)s::text[])
          AND s.maturity = 'pattern'
          AND s.confidence >= hag_entry_retrieval_floor('pattern', %(retrieval_min_confidence)s,
                                   %(floor_proven)s, %(floor_pattern)s, %(floor_candidate)s)
        UNION ALL
        SELECT s.id, -(s.embedding <#> l2_normalize(%(query)b)::halfvec)
                   * hag_maturity_boost('candidate', %(boost_proven)s, %(boost_pattern)s,
                                        %(boost_candidate)s)
        FROM hag_entry_search s
        WHERE s.search_set = %(search_set)s
          AND (%(topic_id)s::text IS NULL OR s.topic_id = %(topic_id)s)
          AND s.visibility_scope = ANY (%(scopes)s::text[])
          AND s.maturity = 'candidate'
          AND s.confidence >= hag_entry_retrieval_floor('candidate', %(retrieval_min_confidence)s,
                                   %(floor_proven)s, %(floor_pattern)s, %(floor_candidate)s)
    ) t
    ORDER BY t.approximate DESC, t.id
    LIMIT %(candidates)s
) c
JOIN hag_entries e ON e.id = c.id

-- name: resident_rows
-- Every eligible row of one searched set of the copy, for the read path to keep in memory
-- (hag.retrieval.resident): the id and vector in their binary forms (16 bytes; 4 + 2 x dim
-- bytes, half precision), the maturity tier (hag_maturity_tier: 0 proven, 1 pattern,
-- 2 candidate, by which hag.retrieval.tiers indexes the boosts), and on every row the set's stamp (migration 095) and the database's identity
-- (hag_database_identity), read in the same snapshot as the rows, and that snapshot
-- (pg_current_snapshot: the changes since it are read by resident_changes); one row with a
-- NULL id when the set has none. The filter is the seed's
-- (hag_entry_visible, whose tier ranges the copy's index serves); a load is a one-off
-- background read, so it is not written out per tier as compact_candidates is.
SELECT s.stamp, s.identity, s.snapshot, uuid_send(t.id) AS id, t.tier,
       halfvec_send(t.embedding) AS vector
FROM (
    SELECT coalesce(sum(c.changes), 0) AS stamp, hag_database_identity() AS identity,
           pg_current_snapshot()::text AS snapshot
    FROM hag_entry_search_changes c
    WHERE c.set_key IN (hag_entry_search_key(%(search_set)s, %(topic_id)s), '*')
) s
LEFT JOIN (
    SELECT c.id, hag_maturity_tier(c.maturity) AS tier, c.embedding
    FROM hag_entry_search c
    WHERE c.search_set = %(search_set)s
      AND (%(topic_id)s::text IS NULL OR c.topic_id = %(topic_id)s)
      AND c.visibility_scope = ANY (%(scopes)s::text[])
      AND hag_entry_visible(c.maturity, c.confidence, %(retrieval_min_confidence)s, %(floor_proven)s,
                            %(floor_pattern)s, %(floor_candidate)s)
) t ON true

-- name: resident_rerank
-- The candidates a resident set chose in memory, read from hag_entries for their exact
-- similarity (as match_hag_entries computes it), beside the set's stamp and the database's
-- identity in the same snapshot: the caller uses the rows only when both are the ones its
-- resident rows were read at (hag.retrieval.resident). Each candidate must still pass the set's own filter (as
-- resident_rows reads it): at an equal stamp they all do, and a candidate that does not
-- makes the caller drop the set rather than answer from it. One row with a NULL id when no
-- candidate is left.
SELECT s.stamp, s.identity, r.id, r.topic_id, r.concept_slug, r.visibility_scope, r.maturity,
       r.confidence, r.instruction, r.similarity, r.approximate
FROM (
    SELECT coalesce(sum(c.changes), 0) AS stamp, hag_database_identity() AS identity
    FROM hag_entry_search_changes c
    WHERE c.set_key IN (hag_entry_search_key(%(search_set)s, %(topic_id)s), '*')
) s
LEFT JOIN (
    SELECT e.id, e.topic_id, e.concept_slug, e.visibility_scope, e.maturity, e.confidence,
           e.instruction, 1 - (e.embedding <=> %(query)b) AS similarity, c.approximate
    FROM unnest(%(ids)s::uuid[], %(approximate)s::float8[]) AS c (id, approximate)
    JOIN hag_entries e ON e.id = c.id
    WHERE hag_entry_search_set(e.visibility_scope, e.maturity) = %(search_set)s
      AND (%(topic_id)s::text IS NULL OR e.topic_id = %(topic_id)s)
      AND e.visibility_scope = ANY (%(scopes)s::text[])
      AND hag_entry_visible(e.maturity, e.confidence, %(retrieval_min_confidence)s, %(floor_proven)s,
                            %(floor_pattern)s, %(floor_candidate)s)
) r ON true

-- name: resident_changes
-- What changed in a resident set since the snapshot it was read in (`snapshot`, from
-- resident_rows or an earlier call of this one), for the reader to apply to the rows it
-- holds (hag.retrieval.resident, migration 185): the set's change rows written by
-- transactions that snapshot does not see, and in this statement's snapshot (returned, for
-- the next call) the set's stamp, the database's identity, the sum of those rows' changes
-- (`added`: the old stamp plus it must be the new one), whether any of them does not name
-- its rows (`unknown`: a fold, a TRUNCATE, a backfill), and the number of distinct rows
-- they name (`changed`). Then, when that is at most `max_rows`, one row per changed id:
-- its tier and its unit vector in half precision as the copy holds it (the copy's trigger
-- computes the same from hag_entries, in the same transaction), both NULL when the row is
-- no longer in the set (gone, moved, archived, below its floor, out of these scopes). One
-- row with a NULL id when nothing is listed. hag_entries is read by primary key: one probe
-- per changed row, where the copy's id index would probe every partition.
WITH since AS (
    SELECT c.changes, c.ids
    FROM hag_entry_search_changes c
    WHERE c.set_key IN (hag_entry_search_key(%(search_set)s, %(topic_id)s), '*')
      AND c.xid >= pg_snapshot_xmin(%(snapshot)s::pg_snapshot)
      AND NOT pg_visible_in_snapshot(c.xid, %(snapshot)s::pg_snapshot)
), changed AS (
    SELECT DISTINCT u.id FROM since, unnest(since.ids) AS u (id)
), head AS (
    SELECT (SELECT coalesce(sum(c.changes), 0)
            FROM hag_entry_search_changes c
            WHERE c.set_key IN (hag_entry_search_key(%(search_set)s, %(topic_id)s), '*'))
               AS stamp,
           hag_database_identity() AS identity,
           pg_current_snapshot()::text AS snapshot,
           (SELECT coalesce(sum(changes), 0) FROM since) AS added,
           coalesce((SELECT bool_or(ids IS NULL) FROM since), false) AS unknown,
           (SELECT count(*) FROM changed) AS changed
)
SELECT h.stamp, h.identity, h.snapshot, h.added, h.unknown, h.changed, uuid_send(r.id) AS id,
       r.tier, halfvec_send(r.embedding) AS vector
FROM head h
LEFT JOIN (
    SELECT ch.id, e.tier, e.embedding
    FROM changed ch
    LEFT JOIN (
        SELECT e.id, hag_maturity_tier(e.maturity) AS tier,
               l2_normalize(e.embedding)::halfvec AS embedding
        FROM hag_entries e
        WHERE e.id IN (SELECT id FROM changed)
          AND hag_entry_search_set(e.visibility_scope, e.maturity) = %(search_set)s
          AND (%(topic_id)s::text IS NULL OR e.topic_id = %(topic_id)s)
          AND e.visibility_scope = ANY (%(scopes)s::text[])
          AND hag_entry_visible(e.maturity, e.confidence, %(retrieval_min_confidence)s,
                                %(floor_proven)s, %(floor_pattern)s, %(floor_candidate)s)
    ) e ON e.id = ch.id
    WHERE (SELECT changed FROM head) <= %(max_rows)s
) r ON true

-- name: mean_vector
-- The mean of the unit vectors an approximate pass searches (its topic, or every topic, and
-- its scopes; archived rows left out): the query's cosine with it is its mean cosine with
-- those rows, the reference of the relative-contrast test (hag.retrieval.ranking). NULL
-- when there are no such rows.
SELECT avg(l2_normalize(e.embedding)) AS mean
FROM hag_entries e
WHERE e.maturity <> 'archived'
  AND (%(topic_id)s::text IS NULL OR e.topic_id = %(topic_id)s)
  AND e.visibility_scope = ANY (%(scopes)s::text[])

-- name: contrast_sample
-- Up to `rows` random unit vectors of the set an approximate pass searches (the same rows
-- as mean_vector): the read path keeps them in memory to see, before any index walk,
-- whether a query stands near anything at all (hag.retrieval.store.Catalog.contrast_sample).
SELECT l2_normalize(e.embedding) AS vector
FROM hag_entries e
WHERE e.maturity <> 'archived'
  AND (%(topic_id)s::text IS NULL OR e.topic_id = %(topic_id)s)
  AND e.visibility_scope = ANY (%(scopes)s::text[])
ORDER BY random()
LIMIT %(rows)s

-- name: concept_pass
-- The seed's by-name pass (match_hag_entries_by_concept with every dial bound): entries
-- whose concept slug is among the recent turns' slugs, similarity 1.0 by fiat, ordered by
-- maturity boost times confidence, then most recently matched.
SELECT id, topic_id, concept_slug, visibility_scope, maturity, confidence, instruction,
       similarity
FROM match_hag_entries_by_concept(
    %(slugs)s::text[], %(topic_id)s, %(scopes)s::text[],
    p_min_confidence => %(retrieval_min_confidence)s, p_floor_proven => %(floor_proven)s,
    p_floor_pattern => %(floor_pattern)s, p_floor_candidate => %(floor_candidate)s,
    p_match_count => %(concept_match_count)s, p_boost_proven => %(boost_proven)s,
    p_boost_pattern => %(boost_pattern)s, p_boost_candidate => %(boost_candidate)s)

-- name: catalogue_pass
-- The relevance ranking's concept pass (retrieval_ranking = relevance, docs/retrieval.md):
-- the topic's `concept_count` catalogue concepts nearest the query (`near`), and the recent
-- turns' `slugs` beside them (catalogued or not); for each, its cosine to the query
-- (`concept_similarity`, NULL for a recent slug without a catalogue vector) and
-- its eligible entries in the topic scopes, each with its own cosine (`similarity`, computed
-- as match_hag_entries computes it, never 1.0 by fiat), and the concept's title, description
-- and aliases (NULL for a recent slug not in the catalogue): the lexical signal's documents. A concept with no eligible entry
-- still gives one row (its entry columns NULL): its similarity bounds the concepts beyond
-- the nearest. The catalogue of a topic is narrowed by its primary key; `_unanchored_` has
-- no catalogue row and is never read here. At most `row_limit` rows, nearest concepts first.
WITH near AS (
    SELECT c.slug, c.embedding <=> %(query)b AS distance
    FROM hag_concepts c
    WHERE c.topic_id = %(topic_id)s AND c.embedding IS NOT NULL
    ORDER BY c.embedding <=> %(query)b, c.slug
    LIMIT %(concept_count)s
), wanted AS (
    SELECT slug, distance, true AS near FROM near
    UNION ALL
    SELECT s.slug, c.embedding <=> %(query)b, false
    FROM unnest(%(slugs)s::text[]) AS s (slug)
    LEFT JOIN hag_concepts c ON c.topic_id = %(topic_id)s AND c.slug = s.slug
    WHERE s.slug <> '_unanchored_' AND s.slug NOT IN (SELECT slug FROM near)
)
SELECT e.id, e.topic_id, w.slug AS concept_slug, e.visibility_scope, e.maturity,
       e.confidence, e.instruction, 1 - (e.embedding <=> %(query)b) AS similarity,
       1 - w.distance AS concept_similarity, w.near,
       c.title AS concept_title, c.description AS concept_description,
       c.aliases AS concept_aliases
FROM wanted w
LEFT JOIN hag_concepts c ON c.topic_id = %(topic_id)s AND c.slug = w.slug
LEFT JOIN hag_entries e
       ON e.topic_id = %(topic_id)s AND e.concept_slug = w.slug
      AND hag_entry_visible(e.maturity, e.confidence, %(retrieval_min_confidence)s, %(floor_proven)s,
                            %(floor_pattern)s, %(floor_candidate)s)
      AND e.visibility_scope = ANY (%(scopes)s::text[])
ORDER BY w.distance NULLS LAST, w.slug, e.id
LIMIT %(row_limit)s

-- name: edge_walk
-- The seed's edge walk (hag_edge_walk, which alone holds its filter and order; traverse_hag_edges
-- reads it too) for several entries in one round trip, each entry's edges in the walk's
-- order, at most `edge_walk_max_edges_per_entry` each. `rank` is the source's position in
-- the ranking (1 = top match).
-- Targets are limited to what this learner may read in this topic (hag_entry_readable: the
-- topic's entries in the topic scopes, `tutor`, this learner's `student:` scope), the same
-- rule that bounds what a session may name or write: another learner's pattern, a drawing
-- or another topic's entry never reaches this prompt.
SELECT r.rank, r.edge_id, r.source_entry_id, r.target_entry_id, r.edge_type, r.condition,
       r.confidence, r.target_instruction
FROM (
    SELECT w.*, row_number() OVER (PARTITION BY w.rank ORDER BY w.walk_position) AS position
    FROM hag_edge_walk(%(entry_ids)s::uuid[], %(edge_min_confidence)s,
                       %(edge_include_candidate_targets)s) AS w
    WHERE hag_entry_readable(w.target_visibility_scope, w.target_topic_id,
                             %(reader_learner_id)s, %(reader_topic_id)s,
                             %(reader_topic_scopes)s::text[])
) r
WHERE r.position <= %(edge_walk_max_edges_per_entry)s
ORDER BY r.rank, r.position

-- name: visual_for
-- The visual bucket's own read (get_hag_visual): the curated drawing for a concept.
SELECT id, concept_slug, maturity, confidence, instruction
FROM get_hag_visual(%(concept_slug)s)

-- name: ann_indexes
-- The approximate-search indexes on hag_entries, found by the comment the index builder
-- (and migration 010) leaves on each: 'hag-ann topic:<topic_id>' or 'hag-ann scope:tutor'.
-- Only valid (fully built) indexes count. `rows` is the planner's count of the rows each
-- index holds (kept by CREATE INDEX, VACUUM and ANALYZE): small ones are not worth using.
SELECT c.relname AS index_name, obj_description(c.oid, 'pg_class') AS label,
       c.reltuples AS rows
FROM pg_index i
JOIN pg_class c ON c.oid = i.indexrelid
WHERE i.indrelid = 'hag_entries'::regclass
  AND i.indisvalid
  AND obj_description(c.oid, 'pg_class') LIKE 'hag-ann %%'

-- name: topic_sizes
-- Rows per topic in the topic scopes (not archived): the index builder gives a topic its
-- own HNSW index when this passes the topic_exact_scan_max_rows dial.
SELECT topic_id, count(*) AS n
FROM hag_entries
WHERE visibility_scope = ANY (%(scopes)s::text[])
  AND maturity <> 'archived'
GROUP BY topic_id
ORDER BY topic_id

-- name: search_copy_backfill
-- Fill the search copy (migration 080) from hag_entries in one statement, for a bulk loader
-- that loaded with its insert trigger disabled (the benchmark); migration 080 does the same
-- for the memory it finds.
-- Every set's stamp moves (migration 095: set '*'), so no reader keeps rows it read before.
WITH every_set AS (
    INSERT INTO hag_entry_search_changes (set_key) VALUES ('*')
)
INSERT INTO hag_entry_search
    (search_set, id, topic_id, visibility_scope, maturity, confidence, embedding)
SELECT hag_entry_search_set(e.visibility_scope, e.maturity), e.id, e.topic_id,
       e.visibility_scope, e.maturity, e.confidence, l2_normalize(e.embedding)::halfvec
FROM hag_entries e
WHERE hag_entry_search_set(e.visibility_scope, e.maturity) IS NOT NULL

-- name: bench_storage
-- Bytes on disk of hag_entries and of its search copy (every partition), indexes included.
SELECT pg_total_relation_size('hag_entries') AS entries,
       (SELECT sum(pg_total_relation_size(relid)) FROM pg_partition_tree('hag_entry_search'))
           AS search

-- name: search_copy_partitions
-- The leaf partitions of the search copy (migration 080), each with its rows (the larger of
-- the planner's count and the statistics collector's: either may lag) and the index in whose order
-- its passes read it: the tutor partition by its eligible ranges (maturity, confidence), a
-- topic partition by (topic_id, visibility_scope, maturity, confidence), so that one topic's
-- eligible rows lie on consecutive pages. The nightly run CLUSTERs them by it
-- (hag.retrieval.ann.cluster_search_copy).
SELECT c.relname AS partition,
       greatest(c.reltuples, coalesce(s.n_live_tup, 0), 0) AS rows,
       coalesce(
           (SELECT i.relname FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
            WHERE x.indrelid = t.relid
              AND x.indexrelid = to_regclass('hag_entry_search_tutor_eligible_idx')),
           (SELECT i.relname FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
            WHERE x.indrelid = t.relid
              AND EXISTS (SELECT 1 FROM pg_partition_ancestors(x.indexrelid) a
                          WHERE a.relid = 'hag_entry_search_eligible_idx'::regclass))
       ) AS index_name
FROM pg_partition_tree('hag_entry_search') t
JOIN pg_class c ON c.oid = t.relid
LEFT JOIN pg_stat_user_tables s ON s.relid = t.relid
WHERE t.isleaf
ORDER BY c.relname

-- name: search_changes_fold
-- Fold each set's rows of hag_entry_search_changes into one carrying their sum (migration
-- 095), in one statement: every snapshot sees the same sum before and after. Rows a
-- concurrent writer adds meanwhile are not in this statement's snapshot and stay as they are.
WITH gone AS (
    DELETE FROM hag_entry_search_changes RETURNING set_key, changes
)
INSERT INTO hag_entry_search_changes (set_key, changes)
SELECT set_key, sum(changes) FROM gone GROUP BY set_key
