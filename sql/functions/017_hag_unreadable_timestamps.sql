-- hag_unreadable_timestamps: the stored timestamps a client cannot read back (issue 11). A
-- PostgreSQL timestamptz spans 4713 BC to 294276 AD, a Python datetime years 1 to 9999, so
-- a row holding year 0 or year 10000 (in UTC, or in the session's time zone: a day's margin
-- either side) breaks every read that selects it, with an error that names no row. Ingest,
-- the corpus loader, `hag nightly --as-of` and `hag enrich --as-of` keep such values out (dial
-- timestamp_window_years); this finds the ones stored before, or by a direct write, so the
-- error can name the table, the row (its first column, the key of every hag_ table) and the
-- column. Every timestamptz column of every hag_ table is searched.
CREATE OR REPLACE FUNCTION hag_unreadable_timestamps()
RETURNS TABLE (table_name text, row_key text, column_name text, stored text)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    c record;
BEGIN
    FOR c IN
        SELECT col.table_name AS tab, col.column_name AS col,
               (SELECT k.column_name FROM information_schema.columns k
                 WHERE k.table_schema = col.table_schema AND k.table_name = col.table_name
                 ORDER BY k.ordinal_position LIMIT 1) AS key
        FROM information_schema.columns col
        JOIN information_schema.tables t
          ON t.table_schema = col.table_schema AND t.table_name = col.table_name
        WHERE col.table_schema = current_schema() AND col.table_name LIKE 'hag\_%'
          AND t.table_type = 'BASE TABLE'
          AND col.data_type = 'timestamp with time zone'
        ORDER BY 1, 2
    LOOP
        RETURN QUERY EXECUTE format(
            'SELECT %L::text, %I::text, %L::text, %I::text FROM %I '
            'WHERE %I < timestamptz ''0001-01-02 00:00:00+00'' '
            '   OR %I > timestamptz ''9999-12-30 00:00:00+00''',
            c.tab, c.key, c.col, c.col, c.tab, c.col, c.col);
    END LOOP;
END
$$;
