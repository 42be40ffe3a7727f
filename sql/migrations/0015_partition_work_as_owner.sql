-- The relay's partition work without DDL privileges of its own (issue 44, item 3; sql/README.md, "Roles and
-- privileges"; docs/decisions.md).
--
-- Retention creates, detaches, moves and drops day partitions of `outbox`: DDL, which PostgreSQL allows only
-- to the tables' owner. So that the relay can run as a role with DML alone, every such step is now a
-- function that runs with its owner's rights (SECURITY DEFINER), and the owner is the role that ran the
-- migrations (sql/roles.sql, "owner"). The functions check their argument, so the right to call them is
-- narrower than the DDL they run: a day table of the expected parent, never a day that can still be
-- written to (yesterday, today, the next day), never a day that holds an unpublished event; a caller can
-- take nothing away that retention would not.
--
-- Each function pins its search_path to pg_catalog, the schema these tables are in (the one this migration
-- runs in, read below) and pg_temp last, so that a caller's search_path (a temporary table or function
-- named like ours) cannot redirect it; the DDL it builds names every table with its schema. EXECUTE goes
-- to the owner alone: sql/roles.sql grants it to the relay's role. outbox_configure_partition (0008) is
-- only called from here, so nobody else keeps EXECUTE on it either.
--
-- The C++ (common/src/outbox/pg/pg_outbox_store.cpp) keeps its transactions, its lock_timeout (SET LOCAL
-- applies inside these functions) and its report: what a pass does is unchanged.

-- The schema of `outbox`, for the DDL the functions build (the search_path pins resolve the rest).
CREATE FUNCTION outbox_schema() RETURNS name
LANGUAGE sql STABLE
RETURN (SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE c.oid = 'outbox'::regclass);

-- UTC days from `part`'s day (the name's last eight digits) to today: 1 is yesterday, negative ahead.
CREATE FUNCTION outbox_day_age(part text) RETURNS integer
LANGUAGE sql STABLE
RETURN (now() AT TIME ZONE 'UTC')::date - to_date(right(part, 8), 'YYYYMMDD');

-- Refuses anything but a day table (`<parent>_YYYYMMDD`) that is a child of `parent` right now.
CREATE FUNCTION outbox_check_day(part text, parent text) RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
  IF part !~ '^outbox_[0-9]{8}$' OR NOT EXISTS (
       SELECT 1 FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent = to_regclass(format('%I.%I', outbox_schema(), parent)) AND c.relname = part) THEN
    RAISE EXCEPTION '% is not a day table under %', part, parent USING ERRCODE = 'invalid_parameter_value';
  END IF;
END;
$$;

-- Detaches the day from `outbox` unless it holds a row (`unpublished_only`: an unpublished row); returns
-- whether it did. A found row undoes the detach (the block's savepoint), so the day stays where it was.
CREATE FUNCTION outbox_detach_day_unless_holding(part text, unpublished_only boolean) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  s name := outbox_schema();
  holding boolean;
BEGIN
  EXECUTE format('ALTER TABLE %I.outbox DETACH PARTITION %I.%I', s, s, part);
  EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I.%I WHERE published_at IS NULL OR NOT $1)', s, part)
    INTO holding USING unpublished_only;
  IF holding THEN
    RAISE EXCEPTION USING ERRCODE = 'CO001';  -- caught below: rolls the detach back
  END IF;
  RETURN true;
EXCEPTION WHEN SQLSTATE 'CO001' THEN
  RETURN false;
END;
$$;

-- As in 0008, now with its owner's rights and schema-qualified DDL.
CREATE OR REPLACE FUNCTION outbox_ensure_partitions(from_day date, to_day date) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
  s name := outbox_schema();
  day date := from_day;
  created integer := 0;
  part text;
  day_start timestamptz;
  day_end timestamptz;
  occupied boolean;
BEGIN
  WHILE day <= to_day LOOP
    part := 'outbox_' || to_char(day, 'YYYYMMDD');
    day_start := day::timestamp AT TIME ZONE 'UTC';
    day_end := (day + 1)::timestamp AT TIME ZONE 'UTC';
    IF to_regclass(format('%I.%I', s, part)) IS NULL THEN
      EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I.outbox_default WHERE created_at >= $1 AND created_at < $2)', s)
        INTO occupied USING day_start, day_end;
      IF NOT occupied THEN
        EXECUTE format('CREATE TABLE %I.%I PARTITION OF %I.outbox FOR VALUES FROM (%L) TO (%L)',
                       s, part, s, day_start, day_end);
        PERFORM outbox_configure_partition(format('%I.%I', s, part)::regclass);
        created := created + 1;
      END IF;
    END IF;
    day := day + 1;
  END LOOP;
  RETURN created;
END;
$$;

-- A day older than yesterday leaves `outbox` once every row in it is published: dropped (`drop_it`) or
-- moved under outbox_history (INHERIT: catalog only). Returns 'kept' (it holds an unpublished event: looked
-- at first without the detach's lock, then again under it, the detach then undone), 'dropped' or 'moved'.
-- A lock wait past the caller's lock_timeout (55P03) and a day whose columns differ from outbox_history's
-- are errors, as the statements were before.
CREATE FUNCTION outbox_retire_day(part text, drop_it boolean) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
  s name := outbox_schema();
  unpublished boolean;
BEGIN
  PERFORM outbox_check_day(part, 'outbox');
  IF outbox_day_age(part) < 2 THEN
    RAISE EXCEPTION '% may still be written to: only days older than yesterday leave outbox', part
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I.%I WHERE published_at IS NULL)', s, part) INTO unpublished;
  IF unpublished THEN
    RETURN 'kept';
  END IF;
  IF NOT outbox_detach_day_unless_holding(part, true) THEN
    RETURN 'kept';
  END IF;
  IF drop_it THEN
    EXECUTE format('DROP TABLE %I.%I', s, part);
    RETURN 'dropped';
  END IF;
  EXECUTE format('ALTER TABLE %I.%I INHERIT %I.outbox_history', s, part, s);
  RETURN 'moved';
END;
$$;

-- An empty day at least two days ahead leaves `outbox` for good (retention.days_ahead was lowered). Returns
-- false, changing nothing, when the day holds a row (a writer's clock ahead).
CREATE FUNCTION outbox_trim_day_ahead(part text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
  PERFORM outbox_check_day(part, 'outbox');
  IF outbox_day_age(part) > -2 THEN
    RAISE EXCEPTION '% is not at least two days ahead', part USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF NOT outbox_detach_day_unless_holding(part, false) THEN
    RETURN false;
  END IF;
  EXECUTE format('DROP TABLE %I.%I', outbox_schema(), part);
  RETURN true;
END;
$$;

-- A day under outbox_history past retention is dropped.
CREATE FUNCTION outbox_drop_history_day(part text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
  PERFORM outbox_check_day(part, 'outbox_history');
  IF outbox_day_age(part) < 2 THEN
    RAISE EXCEPTION '% is not older than yesterday', part USING ERRCODE = 'invalid_parameter_value';
  END IF;
  EXECUTE format('DROP TABLE %I.%I', outbox_schema(), part);
END;
$$;

DO $$
DECLARE
  f text;
BEGIN
  FOREACH f IN ARRAY ARRAY['outbox_schema()', 'outbox_day_age(text)', 'outbox_check_day(text, text)',
                           'outbox_detach_day_unless_holding(text, boolean)', 'outbox_configure_partition(regclass)',
                           'outbox_ensure_partitions(date, date)',
                           'outbox_retire_day(text, boolean)', 'outbox_trim_day_ahead(text)',
                           'outbox_drop_history_day(text)'] LOOP
    EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp', f, current_schema());
    EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
  END LOOP;
END;
$$;
