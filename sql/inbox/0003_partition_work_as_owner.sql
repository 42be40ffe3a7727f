-- The inbox's partition work without DDL privileges of the consumer's own (issue 44, item 3;
-- sql/README.md, "Roles and privileges"; docs/inbox.md).
--
-- Retention makes the days ahead and drops days past retention: DDL, which PostgreSQL allows only to the
-- tables' owner. Both are now functions that run with their owner's rights (SECURITY DEFINER), the owner
-- being the role that ran the consumer's `migrate`, so the consumer's daemon can run as a role with DML
-- alone. inbox_drop_day checks its argument: a day table under `inbox` older than yesterday, nothing else.
-- Each function pins its search_path to pg_catalog, the schema the inbox is in (the one this migration runs
-- in) and pg_temp last; the DDL names every table with its schema. EXECUTE goes to the owner alone: the
-- consumer grants it to its daemon's role (services/settlement-projection/roles.sql does).

-- The schema of `inbox`, for the DDL the functions build.
CREATE FUNCTION inbox_schema() RETURNS name
LANGUAGE sql STABLE
RETURN (SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE c.oid = 'inbox'::regclass);

-- As in 0001, now with its owner's rights and schema-qualified DDL.
CREATE OR REPLACE FUNCTION inbox_ensure_partitions(from_day date, to_day date) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
  s name := inbox_schema();
  day date := from_day;
  created integer := 0;
  part text;
  day_start timestamptz;
  day_end timestamptz;
  occupied boolean;
BEGIN
  WHILE day <= to_day LOOP
    part := 'inbox_' || to_char(day, 'YYYYMMDD');
    day_start := day::timestamp AT TIME ZONE 'UTC';
    day_end := (day + 1)::timestamp AT TIME ZONE 'UTC';
    IF to_regclass(format('%I.%I', s, part)) IS NULL THEN
      EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I.inbox_default WHERE event_time >= $1 AND event_time < $2)', s)
        INTO occupied USING day_start, day_end;
      IF NOT occupied THEN
        EXECUTE format('CREATE TABLE %I.%I PARTITION OF %I.inbox FOR VALUES FROM (%L) TO (%L)',
                       s, part, s, day_start, day_end);
        created := created + 1;
      END IF;
    END IF;
    day := day + 1;
  END LOOP;
  RETURN created;
END;
$$;

-- Drops a day partition of `inbox` older than yesterday. A lock wait past the caller's lock_timeout is an
-- error (55P03), as the DROP was before.
CREATE FUNCTION inbox_drop_day(part text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
  IF part !~ '^inbox_[0-9]{8}$' OR NOT EXISTS (
       SELECT 1 FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent = 'inbox'::regclass AND c.relname = part) THEN
    RAISE EXCEPTION '% is not a day partition of inbox', part USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF (now() AT TIME ZONE 'UTC')::date - to_date(right(part, 8), 'YYYYMMDD') < 2 THEN
    RAISE EXCEPTION '% is not older than yesterday', part USING ERRCODE = 'invalid_parameter_value';
  END IF;
  EXECUTE format('DROP TABLE %I.%I', inbox_schema(), part);
END;
$$;

DO $$
DECLARE
  f text;
BEGIN
  FOREACH f IN ARRAY ARRAY['inbox_schema()', 'inbox_ensure_partitions(date, date)', 'inbox_drop_day(text)'] LOOP
    EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp', f, current_schema());
    EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
  END LOOP;
END;
$$;
