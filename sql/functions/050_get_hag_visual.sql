-- get_hag_visual: the visual bucket's own read: the curated drawing for a concept
-- (SPEC §3). It never appears in the prompt blocks.
CREATE OR REPLACE FUNCTION get_hag_visual(p_concept_slug text)
RETURNS TABLE (
    id uuid, concept_slug text, maturity text, confidence double precision, instruction text
)
LANGUAGE sql STABLE AS $$
    SELECT e.id, e.concept_slug, e.maturity, e.confidence, e.instruction
    FROM hag_entries e
    WHERE e.visibility_scope = 'visual'
      AND e.concept_slug = p_concept_slug
      AND e.maturity <> 'archived'
$$;
