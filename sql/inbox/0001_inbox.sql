-- The inbox: what a consumer of charge-events has applied, in the consumer's own database, so that an
-- event delivered again is acknowledged without effect and a charge's events are applied in sequence
-- order. Owned by the inbox library (common/include/charge_outbox/inbox/); design: docs/inbox.md.

-- One row per applied event. Partitioned by the event's own time (its ce_time), not by when it arrived:
-- a re-delivery carries the same time, so it meets its first delivery in the same partition and the
-- primary key (event_time, event_id) is as strict as event_id alone. Time first: events arrive roughly
-- in time order, so the key's index grows at its right edge instead of at random pages (measured: the
-- insert is the inbox's costliest statement). Retention drops whole days.
--
-- Charge ids are compared byte for byte (COLLATE "C") in every inbox table: they are identifiers, and
-- the database's collation would only make every lookup and sort slower.
CREATE TABLE inbox (
  event_id     uuid        NOT NULL,  -- ce_id
  event_time   timestamptz NOT NULL,  -- ce_time
  charge_id    text COLLATE "C" NOT NULL,  -- the Kafka key, ce_subject
  sequence     integer     NOT NULL,
  event_type   text        NOT NULL,  -- ce_type
  gap_before   integer,               -- events missing just before this one when it was applied
  processed_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (event_time, event_id)
) PARTITION BY RANGE (event_time);

-- Rows land here only if no daily partition covers their day (retention makes them ahead).
CREATE TABLE inbox_default PARTITION OF inbox DEFAULT;

-- Where each charge stands: the last sequence applied, written once per charge per batch and only if it
-- still says what the batch read (an optimistic check: a batch that finds it moved by another consumer
-- instance, during a rebalance, is rolled back and tried again). No index on updated_at: updates stay
-- HOT, and retention's rare scan pays instead. docs/inbox.md, "Why it is exactly once in effect".
CREATE TABLE inbox_charges (
  charge_id     text COLLATE "C" PRIMARY KEY,
  last_sequence integer     NOT NULL,
  updated_at    timestamptz NOT NULL DEFAULT now()
) WITH (fillfactor = 80);

-- Events that arrived past a gap (sequence > last + 1), waiting for the missing ones; kept whole so
-- their offsets can be committed and they can be applied later from here. Normally empty.
CREATE TABLE inbox_held (
  event_id   uuid        PRIMARY KEY,
  event_time timestamptz NOT NULL,
  charge_id  text COLLATE "C" NOT NULL,
  sequence   integer     NOT NULL,
  event_type text        NOT NULL,
  payload    text        NOT NULL,
  kafka_partition integer NOT NULL,  -- where it was read from: the partition whose lock applies it later
  held_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX inbox_held_charge ON inbox_held (charge_id, sequence);
CREATE INDEX inbox_held_since ON inbox_held (held_at);

-- Gaps the consumer applied past (policy `apply`), for a person to look at: the events
-- (after_sequence, before_sequence) exclusive were never applied.
CREATE TABLE inbox_gaps (
  charge_id       text COLLATE "C" NOT NULL,
  after_sequence  integer     NOT NULL,
  before_sequence integer     NOT NULL,
  event_id        uuid        NOT NULL,  -- the event applied past the gap
  detected_at     timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (charge_id, before_sequence)
);

-- Messages that are not a charge event this consumer can read (no ce_id, no sequence, bad JSON): kept
-- for a person, never retried, never blocking the partition.
CREATE TABLE inbox_rejected (
  topic       text        NOT NULL,
  kafka_partition integer NOT NULL,
  kafka_offset bigint     NOT NULL,
  reason      text        NOT NULL,
  message_key text,
  value       text,
  rejected_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (topic, kafka_partition, kafka_offset)
);

-- Creates the daily partitions of inbox covering the UTC days [from_day, to_day]; days that already
-- have one, or whose rows sit in the default partition, are skipped. Returns the number created.
CREATE FUNCTION inbox_ensure_partitions(from_day date, to_day date) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  day date := from_day;
  created integer := 0;
  part text;
  day_start timestamptz;
  day_end timestamptz;
BEGIN
  WHILE day <= to_day LOOP
    part := 'inbox_' || to_char(day, 'YYYYMMDD');
    day_start := day::timestamp AT TIME ZONE 'UTC';
    day_end := (day + 1)::timestamp AT TIME ZONE 'UTC';
    IF to_regclass(part) IS NULL AND NOT EXISTS (
         SELECT 1 FROM inbox_default WHERE event_time >= day_start AND event_time < day_end) THEN
      EXECUTE format('CREATE TABLE %I PARTITION OF inbox FOR VALUES FROM (%L) TO (%L)', part, day_start, day_end);
      created := created + 1;
    END IF;
    day := day + 1;
  END LOOP;
  RETURN created;
END;
$$;

SELECT inbox_ensure_partitions((now() AT TIME ZONE 'UTC')::date - 1, (now() AT TIME ZONE 'UTC')::date + 7);
