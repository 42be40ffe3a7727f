-- Core tables from seed 000: merchants and their hashed API keys, charges with a per-merchant
-- idempotency key, every acquirer attempt, and the transactional outbox partitioned by day.
-- Owners of each table's SQL are listed in sql/README.md.

CREATE TABLE merchants (
  id          uuid        PRIMARY KEY,
  name        text        NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  created_at  timestamptz NOT NULL DEFAULT now()
);

-- API keys are random 256-bit secrets, so a plain SHA-256 is enough to make a stolen table useless
-- (no dictionary to attack), and it keeps authentication to one indexed lookup per request.
CREATE TABLE api_keys (
  key_hash    bytea       PRIMARY KEY CHECK (length(key_hash) = 32),
  merchant_id uuid        NOT NULL REFERENCES merchants (id),
  key_prefix  text        NOT NULL,  -- first characters, to recognise a key in a console; never enough to use it
  created_at  timestamptz NOT NULL DEFAULT now(),
  revoked_at  timestamptz
);
CREATE INDEX api_keys_merchant ON api_keys (merchant_id);

CREATE TYPE charge_status AS ENUM ('pending', 'captured', 'failed', 'canceled', 'needs_review');

CREATE TABLE charges (
  id                  uuid          PRIMARY KEY,
  merchant_id         uuid          NOT NULL REFERENCES merchants (id),
  idempotency_key     text          NOT NULL CHECK (length(idempotency_key) BETWEEN 1 AND 255),
  -- SHA-256 of the canonical request: the same key with other parameters is refused, not replayed.
  request_fingerprint bytea         NOT NULL CHECK (length(request_fingerprint) = 32),
  order_id            text          NOT NULL,
  amount              bigint        NOT NULL CHECK (amount > 0),
  currency            char(3)       NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
  payment_method      text          NOT NULL,  -- an acquirer token, never a card number
  description         text,
  status              charge_status NOT NULL DEFAULT 'pending',
  acquirer_capture_id text,
  decline_code        text,
  failure_reason      text,
  -- The instance working on a pending charge, until its lease expires: a retry that finds a live
  -- owner gets 409; one that finds an expired lease takes the charge over.
  owner_id            text,
  lease_expires_at    timestamptz,
  -- The first response, replayed byte for byte to every repeat of the same key.
  response_status     smallint,
  response_body       bytea,
  -- Per-charge event counter; the outbox `sequence` of the next event is last_sequence + 1.
  last_sequence       integer       NOT NULL DEFAULT 0,
  traceparent         text,
  -- Reconciler bookkeeping: when to look again and how often it has looked.
  next_check_at       timestamptz,
  check_count         integer       NOT NULL DEFAULT 0,
  created_at          timestamptz   NOT NULL DEFAULT now(),
  updated_at          timestamptz   NOT NULL DEFAULT now(),
  -- The database, not the application, decides who is first: no check-then-insert window.
  CONSTRAINT charges_merchant_idempotency_key UNIQUE (merchant_id, idempotency_key)
);
-- The reconciler's sweep and the charges_pending_overdue gauge read only pending rows.
CREATE INDEX charges_pending_created ON charges (created_at) WHERE status = 'pending';
CREATE INDEX charges_merchant_order ON charges (merchant_id, order_id);

CREATE TYPE evidence_class AS ENUM ('not_sent', 'unknown', 'declined', 'approved');

-- Every call to the acquirer: an attempt is not the business operation, and the record of what
-- each attempt proved is what reconciliation and support read.
CREATE TABLE acquirer_attempts (
  charge_id    uuid           NOT NULL REFERENCES charges (id),
  attempt_no   integer        NOT NULL CHECK (attempt_no > 0),
  request_id   uuid           NOT NULL UNIQUE,
  operation    text           NOT NULL CHECK (operation IN ('capture', 'lookup', 'void')),
  actor        text           NOT NULL,  -- charge-api or reconciler
  started_at   timestamptz    NOT NULL,
  finished_at  timestamptz,
  outcome      text,
  http_status  smallint,
  evidence     evidence_class,
  PRIMARY KEY (charge_id, attempt_no)
);

-- The transactional outbox. Column names id, aggregatetype, aggregateid, type and payload are the
-- ones Debezium's Outbox Event Router expects, so CDC can replace polling without a migration.
CREATE SEQUENCE outbox_position_seq AS bigint;
CREATE TABLE outbox (
  id            uuid        NOT NULL,  -- the event id, CloudEvents ce_id, stable across re-publication
  aggregatetype text        NOT NULL DEFAULT 'charge',
  aggregateid   text        NOT NULL,  -- the charge id: the Kafka key
  type          text        NOT NULL,  -- CloudEvents ce_type
  payload       jsonb       NOT NULL,
  sequence      integer     NOT NULL CHECK (sequence > 0),
  shard         smallint    NOT NULL CHECK (shard >= 0),  -- derived from the charge id, for ordered relaying
  position      bigint      NOT NULL DEFAULT nextval('outbox_position_seq'),
  traceparent   text,
  created_at    timestamptz NOT NULL DEFAULT now(),
  published_at  timestamptz,
  PRIMARY KEY (id, created_at)
) PARTITION BY RANGE (created_at);
ALTER SEQUENCE outbox_position_seq OWNED BY outbox.position;

-- The relay reads only what is unpublished; this index stays as small as the backlog.
CREATE INDEX outbox_unpublished ON outbox (shard, position) WHERE published_at IS NULL;

-- Rows land here only if no daily partition covers their day (the relay creates them ahead), so an
-- insert never fails for want of a partition.
CREATE TABLE outbox_default PARTITION OF outbox DEFAULT;

-- Creates the daily partitions covering the UTC days [from_day, to_day]; days that already have one,
-- or whose rows already sit in the default partition, are skipped. Returns the number created.
-- Boundaries are UTC midnights whatever the session's TimeZone, so every replica agrees on them.
CREATE FUNCTION outbox_ensure_partitions(from_day date, to_day date) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  day date := from_day;
  created integer := 0;
  part text;
  day_start timestamptz;
  day_end timestamptz;
BEGIN
  WHILE day <= to_day LOOP
    part := 'outbox_' || to_char(day, 'YYYYMMDD');
    day_start := day::timestamp AT TIME ZONE 'UTC';
    day_end := (day + 1)::timestamp AT TIME ZONE 'UTC';
    IF to_regclass(part) IS NULL AND NOT EXISTS (
         SELECT 1 FROM outbox_default WHERE created_at >= day_start AND created_at < day_end) THEN
      EXECUTE format('CREATE TABLE %I PARTITION OF outbox FOR VALUES FROM (%L) TO (%L)',
                     part, day_start, day_end);
      created := created + 1;
    END IF;
    day := day + 1;
  END LOOP;
  RETURN created;
END;
$$;

SELECT outbox_ensure_partitions((now() AT TIME ZONE 'UTC')::date - 1, (now() AT TIME ZONE 'UTC')::date + 7);
