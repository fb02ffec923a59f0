-- Why: three statement triggers join two sets of one statement's rows. The confidence
-- history (migration 229, entries and edges) and the search copy's update (migration 195)
-- join the old and new transition tables; the learner reports' kept sums (migration 222)
-- join the per-learner sums an insert wrote to the reports it added. PL/pgSQL prepares each
-- statement of a function once per connection and keeps its plan: a statement that names
-- no variable keeps the plan of its first call, and one that does may keep a generic plan
-- after five calls. Either was planned for the row counts of that call, so a connection
-- whose first writes changed a row or two joined by a nested loop in every later
-- statement, whatever its size: quadratic. Measured on a 400k + 400k memory, after ten
-- one-row writes on the same connection against none: 20,000 entries updated in 82.2 s
-- against 2.9 s (46.3 s with the history trigger off: the search copy's share); 20,000
-- edges in 40.2 s against 0.67 s; 20,000 learner reports inserted in 47.4 s against 1.8 s
-- (docs/journal/2026-12-07-plans-kept-per-connection.md).
--
-- Those statements now run through EXECUTE, planned on every call for the rows of that
-- statement, so a large one joins by hash. The bodies are otherwise those of migrations
-- 229, 195 and 222; the search copy's rare path (a kept row the copy lacked) tests the kept
-- ids with NOT EXISTS instead of NOT IN, an anti-join that stays hashed however many.

CREATE OR REPLACE FUNCTION hag_record_confidence_changes() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_kind    text := TG_ARGV[0];
    v_reason  text := NULLIF(current_setting('hag.change_reason', true), '');
    v_session text := NULLIF(current_setting('hag.session_id', true), '');
    v_run     uuid := NULLIF(current_setting('hag.run_id', true), '')::uuid;
    v_at      timestamptz := COALESCE(NULLIF(current_setting('hag.event_at', true), '')::timestamptz,
                                      now());
    v_terms   jsonb;
BEGIN
    IF v_kind = 'edge' THEN
        v_terms := NULLIF(current_setting('hag.edge_terms', true), '')::jsonb;
        IF v_terms IS NOT NULL THEN
            PERFORM set_config('hag.edge_terms', '', true);
        END IF;
    END IF;
    IF TG_OP = 'INSERT' THEN
        INSERT INTO hag_confidence_history
            (entity_kind, entity_id, old_value, new_value, reason, session_id, run_id, at, terms)
        SELECT v_kind, n.id, NULL, n.confidence, COALESCE(v_reason, 'created'), v_session,
               v_run, v_at, v_terms -> n.id::text
        FROM new_rows n;  -- one table: no join to plan
    ELSE
        EXECUTE $q$
        INSERT INTO hag_confidence_history
            (entity_kind, entity_id, old_value, new_value, reason, session_id, run_id, at, terms)
        SELECT $1, n.id, o.confidence, n.confidence, COALESCE($2, 'manual update'),
               $3, $4, $5, $6 -> n.id::text
        FROM old_rows o
        JOIN new_rows n ON n.id = o.id
        WHERE o.confidence IS DISTINCT FROM n.confidence
        $q$
        USING v_kind, v_reason, v_session, v_run, v_at, v_terms;
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION hag_entry_search_sync() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_ids          uuid[];
    v_sets         text[];
    v_topics       text[];
    v_scopes       text[];
    v_maturities   text[];
    v_confidences  double precision[];
    v_vectors      halfvec[];
    v_gone_ids     uuid[];
    v_gone_sets    text[];
    v_gone_topics  text[];
    v_add_ids      uuid[];
    v_add_sets     text[];
    v_add_topics   text[];
    v_add_scopes   text[];
    v_add_maturity text[];
    v_add_conf     double precision[];
    v_add_vectors  halfvec[];
    v_kept_ids     uuid[];
    v_kept_keys    text[];
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        TRUNCATE hag_entry_search;
        INSERT INTO hag_entry_search_changes (set_key) VALUES ('*');
        RETURN NULL;
    END IF;
    IF TG_OP = 'DELETE' THEN
        SELECT array_agg(o.id), array_agg(hag_entry_search_set(o.visibility_scope, o.maturity)),
               array_agg(o.topic_id)
        INTO v_ids, v_sets, v_topics
        FROM old_rows o
        WHERE hag_entry_search_set(o.visibility_scope, o.maturity) IS NOT NULL;
        INSERT INTO hag_entry_search_changes (set_key, ids)
        SELECT hag_entry_search_key(f.search_set, f.topic_id), array_agg(f.id)
        FROM hag_entry_search_forget(v_ids, v_sets, v_topics) f
        GROUP BY 1;
        RETURN NULL;
    END IF;
    IF TG_OP = 'UPDATE' THEN
        -- Only rows whose searched columns changed: grading counters, last_matched_at and
        -- texts leave the copy (and its stamps) alone. One join of the old and new rows
        -- sorts each changed row: kept in its set (updated in place), gone from its set
        -- (deleted), searched in a set it was not in (inserted); a move is gone + inserted.
        EXECUTE $q$
        SELECT array_agg(c.id) FILTER (WHERE c.kept),
               array_agg(c.new_set) FILTER (WHERE c.kept),
               array_agg(c.topic_id) FILTER (WHERE c.kept),
               array_agg(c.visibility_scope) FILTER (WHERE c.kept),
               array_agg(c.maturity) FILTER (WHERE c.kept),
               array_agg(CASE WHEN c.new_vector THEN l2_normalize(c.embedding)::halfvec END)
                   FILTER (WHERE c.kept),
               array_agg(c.confidence) FILTER (WHERE c.kept),
               array_agg(c.id) FILTER (WHERE c.old_set IS NOT NULL AND NOT c.kept),
               array_agg(c.old_set) FILTER (WHERE c.old_set IS NOT NULL AND NOT c.kept),
               array_agg(c.old_topic) FILTER (WHERE c.old_set IS NOT NULL AND NOT c.kept),
               array_agg(c.id) FILTER (WHERE c.new_set IS NOT NULL AND NOT c.kept),
               array_agg(c.new_set) FILTER (WHERE c.new_set IS NOT NULL AND NOT c.kept),
               array_agg(c.topic_id) FILTER (WHERE c.new_set IS NOT NULL AND NOT c.kept),
               array_agg(c.visibility_scope) FILTER (WHERE c.new_set IS NOT NULL AND NOT c.kept),
               array_agg(c.maturity) FILTER (WHERE c.new_set IS NOT NULL AND NOT c.kept),
               array_agg(c.confidence) FILTER (WHERE c.new_set IS NOT NULL AND NOT c.kept),
               array_agg(l2_normalize(c.embedding)::halfvec)
                   FILTER (WHERE c.new_set IS NOT NULL AND NOT c.kept)
        FROM (
            SELECT n.id, n.topic_id, n.visibility_scope, n.maturity, n.confidence, n.embedding,
                   n.embedding IS DISTINCT FROM o.embedding AS new_vector,
                   s.old_set, o.topic_id AS old_topic, s.new_set,
                   COALESCE(s.old_set = s.new_set AND o.topic_id = n.topic_id, false) AS kept
            FROM old_rows o
            JOIN new_rows n ON n.id = o.id
            CROSS JOIN LATERAL (
                SELECT hag_entry_search_set(o.visibility_scope, o.maturity) AS old_set,
                       hag_entry_search_set(n.visibility_scope, n.maturity) AS new_set
            ) s
            WHERE (n.topic_id, n.visibility_scope, n.maturity, n.confidence, n.embedding)
                  IS DISTINCT FROM
                  (o.topic_id, o.visibility_scope, o.maturity, o.confidence, o.embedding)
              AND (s.old_set IS NOT NULL OR s.new_set IS NOT NULL)
        ) c
        $q$
        INTO v_ids, v_sets, v_topics, v_scopes, v_maturities, v_vectors, v_confidences,
             v_gone_ids, v_gone_sets, v_gone_topics,
             v_add_ids, v_add_sets, v_add_topics, v_add_scopes, v_add_maturity, v_add_conf,
             v_add_vectors;
        IF v_ids IS NULL AND v_gone_ids IS NULL AND v_add_ids IS NULL THEN
            RETURN NULL;
        END IF;
        SELECT array_agg(r.id), array_agg(hag_entry_search_key(r.search_set, r.topic_id))
        INTO v_kept_ids, v_kept_keys
        FROM hag_entry_search_restate(v_ids, v_sets, v_topics, v_scopes, v_maturities,
                                      v_confidences, v_vectors) r;
        IF cardinality(v_kept_ids) IS DISTINCT FROM cardinality(v_ids) THEN
            -- A kept row the copy lacked (it never should): inserted, as a moved row is.
            EXECUTE $q$
            SELECT $1 || array_agg(c.id), $2 || array_agg(c.search_set),
                   $3 || array_agg(c.topic_id),
                   $4 || array_agg(n.visibility_scope),
                   $5 || array_agg(n.maturity),
                   $6 || array_agg(n.confidence),
                   $7 || array_agg(l2_normalize(n.embedding)::halfvec)
            FROM unnest($8::uuid[], $9::text[], $10::text[]) AS c(id, search_set, topic_id)
            JOIN new_rows n ON n.id = c.id
            WHERE NOT EXISTS (SELECT 1 FROM unnest($11::uuid[]) k (id) WHERE k.id = c.id)
            $q$
            INTO v_add_ids, v_add_sets, v_add_topics, v_add_scopes, v_add_maturity, v_add_conf,
                 v_add_vectors
            USING v_add_ids, v_add_sets, v_add_topics, v_add_scopes, v_add_maturity, v_add_conf,
                  v_add_vectors, v_ids, v_sets, v_topics, v_kept_ids;
        END IF;
        WITH gone AS (
            SELECT f.search_set, f.topic_id, f.id
            FROM hag_entry_search_forget(v_gone_ids, v_gone_sets, v_gone_topics) f
        ), added AS (
            INSERT INTO hag_entry_search
                (search_set, id, topic_id, visibility_scope, maturity, confidence, embedding)
            SELECT * FROM unnest(v_add_sets, v_add_ids, v_add_topics, v_add_scopes,
                                 v_add_maturity, v_add_conf, v_add_vectors)
            RETURNING search_set, topic_id, id
        )
        INSERT INTO hag_entry_search_changes (set_key, ids)
        SELECT set_key, array_agg(id)
        FROM (SELECT k.set_key, k.id FROM unnest(v_kept_keys, v_kept_ids) AS k(set_key, id)
              UNION ALL
              SELECT hag_entry_search_key(search_set, topic_id), id FROM gone
              UNION ALL
              SELECT hag_entry_search_key(search_set, topic_id), id FROM added) changed
        GROUP BY 1;
        RETURN NULL;
    END IF;
    WITH added AS (
        INSERT INTO hag_entry_search
            (search_set, id, topic_id, visibility_scope, maturity, confidence, embedding)
        SELECT hag_entry_search_set(n.visibility_scope, n.maturity), n.id, n.topic_id,
               n.visibility_scope, n.maturity, n.confidence, l2_normalize(n.embedding)::halfvec
        FROM new_rows n
        WHERE hag_entry_search_set(n.visibility_scope, n.maturity) IS NOT NULL
        RETURNING search_set, topic_id, id
    )
    INSERT INTO hag_entry_search_changes (set_key, ids)
    SELECT hag_entry_search_key(search_set, topic_id), array_agg(id)
    FROM added
    GROUP BY 1;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION hag_edge_units_keep() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_cap      double precision := hag_setting_float('prerequisite_learner_cap');
    v_gone     uuid[];
    v_concepts uuid[];
    v_learners text[];
    v_lost     integer[];
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        TRUNCATE hag_edge_learner_units, hag_edge_units, hag_concept_learners;
        RETURN NULL;
    END IF;
    IF TG_OP = 'DELETE' THEN  -- (nested: only a delete defines removed_reports)
        -- the reports of deleted edges (a cull's or an erasure's cascade): their sums whole
        v_gone := ARRAY(SELECT DISTINCT o.edge_id FROM removed_reports o
                        WHERE NOT EXISTS (SELECT 1 FROM hag_edges e WHERE e.id = o.edge_id));
        IF cardinality(v_gone) > 0 THEN
            WITH gone AS (
                DELETE FROM hag_edge_learner_units u
                WHERE u.edge_id = ANY (v_gone)
                RETURNING u.source_entry_id, u.learner_id, u.prerequisite
            )
            SELECT array_agg(g.source_entry_id), array_agg(g.learner_id), array_agg(g.n)
            INTO v_concepts, v_learners, v_lost
            FROM (SELECT source_entry_id, learner_id, count(*)::int AS n
                  FROM gone WHERE prerequisite
                  GROUP BY source_entry_id, learner_id) g;
            IF v_concepts IS NOT NULL THEN
                -- a (concept, learner) count the loss brings to nothing is deleted outright
                -- (the usual case: a learner names one pair of a concept), the others
                -- lowered, each in a statement of its own: a writer that changed a row
                -- meanwhile is seen, and a row it lowered to the loss is deleted last
                DELETE FROM hag_concept_learners cl
                USING unnest(v_concepts, v_learners, v_lost) AS g (source_entry_id, learner_id, n)
                WHERE cl.source_entry_id = g.source_entry_id AND cl.learner_id = g.learner_id
                  AND cl.pairs <= g.n;
                WITH lowered AS (
                    UPDATE hag_concept_learners cl
                    SET pairs = cl.pairs - g.n
                    FROM unnest(v_concepts, v_learners, v_lost)
                         AS g (source_entry_id, learner_id, n)
                    WHERE cl.source_entry_id = g.source_entry_id AND cl.learner_id = g.learner_id
                    RETURNING cl.source_entry_id, cl.learner_id, cl.pairs
                )
                SELECT array_agg(l.source_entry_id), array_agg(l.learner_id)
                INTO v_concepts, v_learners
                FROM lowered l WHERE l.pairs <= 0;
                IF v_concepts IS NOT NULL THEN
                    DELETE FROM hag_concept_learners cl
                    USING unnest(v_concepts, v_learners) AS g (source_entry_id, learner_id)
                    WHERE cl.source_entry_id = g.source_entry_id
                      AND cl.learner_id = g.learner_id AND cl.pairs <= 0;
                END IF;
            END IF;
            DELETE FROM hag_edge_units b WHERE b.edge_id = ANY (v_gone);
        END IF;
        IF NOT EXISTS (
            SELECT 1 FROM removed_reports o
            JOIN hag_edge_learner_units u ON u.edge_id = o.edge_id AND u.learner_id = o.learner_id
        ) THEN
            RETURN NULL;  -- no removed report has sums left (the usual case after the above)
        END IF;
    END IF;
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        WITH d AS (
            SELECT o.edge_id, o.learner_id, sum(o.share) AS ds, count(*)::int AS dn
            FROM removed_reports o GROUP BY o.edge_id, o.learner_id
        ), up AS (
            UPDATE hag_edge_learner_units u
            SET share = u.share - d.ds, sessions = u.sessions - d.dn
            FROM d
            WHERE u.edge_id = d.edge_id AND u.learner_id = d.learner_id
            RETURNING u.edge_id, u.learner_id, u.source_entry_id, u.prerequisite,
                      u.share AS new_share, u.sessions AS new_sessions, d.ds, d.dn
        ), per_edge AS (
            UPDATE hag_edge_units b
            SET units = CASE WHEN b.cap = v_cap THEN b.units
                             ELSE (SELECT COALESCE(sum(least(v_cap, x.share)), 0)
                                   FROM hag_edge_learner_units x WHERE x.edge_id = b.edge_id)
                        END + c.du,
                cap = v_cap, learners = b.learners - c.gone, sessions = b.sessions - c.dn
            FROM (SELECT up.edge_id,
                         sum(CASE WHEN up.new_sessions > 0 THEN least(v_cap, up.new_share)
                                  ELSE 0 END
                             - least(v_cap, up.new_share + up.ds)) AS du,
                         count(*) FILTER (WHERE up.new_sessions <= 0)::int AS gone,
                         sum(up.dn)::int AS dn
                  FROM up GROUP BY up.edge_id) c
            WHERE b.edge_id = c.edge_id
            RETURNING b.edge_id
        )
        UPDATE hag_concept_learners cl
        SET pairs = cl.pairs - c.n
        FROM (SELECT up.source_entry_id, up.learner_id, count(*)::int AS n
              FROM up WHERE up.new_sessions <= 0 AND up.prerequisite
              GROUP BY up.source_entry_id, up.learner_id) c
        WHERE cl.source_entry_id = c.source_entry_id AND cl.learner_id = c.learner_id;
        -- the (concept, learner) rows that fell to nothing go: only those the removed reports
        -- touched, read in a statement of its own so that a writer that changed the same row
        -- meanwhile is seen (its lock waited for, its value read again)
        -- (the fallen (edge, learner) rows found by the removed edges' keys, their
        -- (concept, learner) keys gathered into two arrays, and those rows probed by key)
        WITH fallen AS (
            SELECT array_agg(source_entry_id) AS concepts, array_agg(learner_id) AS learners
            FROM (SELECT DISTINCT u.source_entry_id, u.learner_id
                  FROM hag_edge_learner_units u
                  WHERE u.edge_id = ANY (ARRAY(SELECT DISTINCT o.edge_id
                                               FROM removed_reports o))
                    AND u.sessions <= 0 AND u.prerequisite) k
        )
        DELETE FROM hag_concept_learners cl
        USING unnest((SELECT concepts FROM fallen), (SELECT learners FROM fallen))
              AS g (source_entry_id, learner_id)
        WHERE cl.source_entry_id = g.source_entry_id AND cl.learner_id = g.learner_id
          AND cl.pairs <= 0;
        -- what fell to nothing goes (what would stay of a share is rounding residue)
        DELETE FROM hag_edge_learner_units u
        WHERE u.edge_id = ANY (ARRAY(SELECT DISTINCT o.edge_id FROM removed_reports o))
          AND u.sessions <= 0;
        DELETE FROM hag_edge_units b
        WHERE b.edge_id = ANY (ARRAY(SELECT DISTINCT o.edge_id FROM removed_reports o))
          AND b.sessions <= 0;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        -- (through EXECUTE: the join of `up` and `d` planned for this statement's rows)
        EXECUTE $q$
        WITH d AS (
            SELECT n.edge_id, n.learner_id, e.source_entry_id,
                   e.edge_type = 'prerequisite' AS prerequisite, sum(n.share) AS ds,
                   count(*)::int AS dn
            FROM added_reports n
            JOIN hag_edges e ON e.id = n.edge_id
            GROUP BY n.edge_id, n.learner_id, e.source_entry_id, e.edge_type
        ), up AS (
            INSERT INTO hag_edge_learner_units AS u
                (edge_id, learner_id, source_entry_id, prerequisite, share, sessions)
            SELECT d.edge_id, d.learner_id, d.source_entry_id, d.prerequisite, d.ds, d.dn
            FROM d ORDER BY d.edge_id, d.learner_id
            ON CONFLICT (edge_id, learner_id) DO UPDATE
                SET share = u.share + EXCLUDED.share, sessions = u.sessions + EXCLUDED.sessions
            RETURNING u.edge_id, u.learner_id, u.source_entry_id, u.prerequisite, u.share,
                      u.sessions
        ), ch AS (
            SELECT up.edge_id, up.learner_id, up.source_entry_id, up.prerequisite,
                   up.share AS new_share,
                   up.share - d.ds AS old_share, up.sessions - d.dn AS old_sessions, d.dn
            FROM up JOIN d ON d.edge_id = up.edge_id AND d.learner_id = up.learner_id
        ), per_edge AS (
            INSERT INTO hag_edge_units AS b
                (edge_id, source_entry_id, cap, units, learners, sessions)
            SELECT c.edge_id, c.source_entry_id, $1,
                   sum(least($1, c.new_share)
                       - CASE WHEN c.old_sessions > 0 THEN least($1, c.old_share) ELSE 0 END),
                   count(*) FILTER (WHERE c.old_sessions = 0), sum(c.dn)
            FROM ch c
            GROUP BY c.edge_id, c.source_entry_id
            ORDER BY c.edge_id
            ON CONFLICT (edge_id) DO UPDATE
                SET units = CASE WHEN b.cap = EXCLUDED.cap THEN b.units
                                 ELSE (SELECT COALESCE(sum(least(EXCLUDED.cap, x.share)), 0)
                                       FROM hag_edge_learner_units x
                                       WHERE x.edge_id = b.edge_id)
                            END + EXCLUDED.units,
                    cap = EXCLUDED.cap,
                    learners = b.learners + EXCLUDED.learners,
                    sessions = b.sessions + EXCLUDED.sessions
            RETURNING b.edge_id
        )
        INSERT INTO hag_concept_learners AS cl (source_entry_id, learner_id, pairs)
        SELECT c.source_entry_id, c.learner_id, count(*)
        FROM ch c WHERE c.old_sessions = 0 AND c.prerequisite
        GROUP BY c.source_entry_id, c.learner_id
        ORDER BY c.source_entry_id, c.learner_id
        ON CONFLICT (source_entry_id, learner_id) DO UPDATE SET pairs = cl.pairs + EXCLUDED.pairs
        $q$
        USING v_cap;
    END IF;
    RETURN NULL;
END
$$;
