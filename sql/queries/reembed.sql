-- name: target
-- The embedder a `hag reembed` under way moves the memory to (NULL: none under way).
SELECT (SELECT identity FROM hag_reembed_target) AS identity

-- name: clear
-- Forget a move under way (another target, or the move is done).
TRUNCATE hag_reembed_target, hag_reembed_entries, hag_reembed_concepts

-- name: set_target
INSERT INTO hag_reembed_target (identity) VALUES (%(identity)s)

-- name: entries_to_embed
-- Entries with no staged vector, or whose text changed since it was staged, in id order.
SELECT e.id, e.instruction AS text
FROM hag_entries e
LEFT JOIN hag_reembed_entries s ON s.id = e.id
WHERE s.id IS NULL OR s.text_md5 <> md5(e.instruction)
ORDER BY e.id
LIMIT %(limit)s

-- name: concepts_to_embed
-- Concepts with a vector and none staged (or a changed text). The text each was embedded
-- from: a catalogue concept's "title: description" (hag.operations.corpus), a minted one's description
-- (the observation text, hag.session.rules).
SELECT c.topic_id, c.slug, t.text
FROM hag_concepts c
CROSS JOIN LATERAL (
    SELECT CASE c.origin WHEN 'minted' THEN c.description
                         ELSE c.title || ': ' || c.description END AS text
) t
LEFT JOIN hag_reembed_concepts s ON (s.topic_id, s.slug) = (c.topic_id, c.slug)
WHERE c.embedding IS NOT NULL AND (s.slug IS NULL OR s.text_md5 <> md5(t.text))
ORDER BY c.topic_id, c.slug
LIMIT %(limit)s

-- name: stage_entries
INSERT INTO hag_reembed_entries (id, text_md5, embedding)
SELECT n.id, md5(n.text), n.embedding
FROM unnest(%(ids)s::uuid[], %(texts)s::text[], %(embeddings)s::vector[]) AS n (id, text, embedding)
ON CONFLICT (id) DO UPDATE SET text_md5 = EXCLUDED.text_md5, embedding = EXCLUDED.embedding

-- name: stage_concepts
INSERT INTO hag_reembed_concepts (topic_id, slug, text_md5, embedding)
SELECT n.topic_id, n.slug, md5(n.text), n.embedding
FROM unnest(%(topic_ids)s::text[], %(slugs)s::text[], %(texts)s::text[],
            %(embeddings)s::vector[]) AS n (topic_id, slug, text, embedding)
ON CONFLICT (topic_id, slug) DO UPDATE
SET text_md5 = EXCLUDED.text_md5, embedding = EXCLUDED.embedding

-- name: progress
-- How many entries and concepts the move covers, and how many are staged and current.
SELECT (SELECT count(*) FROM hag_entries) AS entries,
       (SELECT count(*) FROM hag_reembed_entries s JOIN hag_entries e USING (id)
        WHERE s.text_md5 = md5(e.instruction)) AS entries_staged,
       (SELECT count(*) FROM hag_concepts WHERE embedding IS NOT NULL) AS concepts,
       (SELECT count(*) FROM hag_reembed_concepts) AS concepts_staged

-- name: lock_writers
-- The switch: no session, sweep or load writes an entry or a concept until it commits;
-- readers go on reading the old vectors until then.
LOCK TABLE hag_entries, hag_concepts IN SHARE ROW EXCLUSIVE MODE

-- name: vector_indexes
-- The indexes over the vectors (the tutor scope's and each topic's HNSW index), with the
-- comment the read path finds them by; a change of dimension drops and rebuilds them.
SELECT i.relname AS index_name, obj_description(i.oid, 'pg_class') AS label
FROM pg_index x
JOIN pg_class i ON i.oid = x.indexrelid
JOIN pg_am am ON am.oid = i.relam
WHERE x.indrelid = 'hag_entries'::regclass AND am.amname IN ('hnsw', 'ivfflat')

-- name: swap_entries
-- Every entry takes its staged vector; the search copy and its change stamps follow
-- through the copy's trigger (migrations 080, 095, 185), so no resident set answers from the
-- old vectors (each follows the change or is read again).
UPDATE hag_entries e
SET embedding = s.embedding
FROM hag_reembed_entries s
WHERE s.id = e.id AND e.embedding IS DISTINCT FROM s.embedding

-- name: swap_concepts
UPDATE hag_concepts c
SET embedding = s.embedding
FROM hag_reembed_concepts s
WHERE (s.topic_id, s.slug) = (c.topic_id, c.slug) AND c.embedding IS DISTINCT FROM s.embedding

