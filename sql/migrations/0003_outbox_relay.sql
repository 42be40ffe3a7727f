-- What outbox-relay needs beyond the core outbox table: parked (poison) rows, the index that keeps
-- per-charge order cheap to check, and a wake-up notification on insert. Design: docs/outbox-relay.md.

-- A row Kafka refused permanently (too large, invalid) is parked with the error instead of blocking its
-- shard forever; it stays unpublished, so the charge's later events wait behind it. `skipped_at` is an
-- operator's decision to give up on it: it is then marked published without ever having been sent.
ALTER TABLE outbox
  ADD COLUMN parked_at  timestamptz,
  ADD COLUMN park_error text,
  ADD COLUMN skipped_at timestamptz;

-- The relay sends an event only when no earlier event of its charge is unpublished; this index answers
-- that question for one charge in one probe, and like outbox_unpublished it holds only the backlog.
CREATE INDEX outbox_unpublished_charge ON outbox (aggregateid, sequence) WHERE published_at IS NULL;

-- Parked rows, for the parked gauge and `outbox-relay parked list`: normally empty.
CREATE INDEX outbox_parked ON outbox (created_at) WHERE parked_at IS NOT NULL AND published_at IS NULL;

-- Wakes listening relays when events are inserted. One notification per statement, with an empty
-- payload: PostgreSQL folds identical notifications of one transaction into one, so a transaction costs
-- one queue entry however many rows it inserts, and the relay reads the rows from the table anyway.
CREATE FUNCTION outbox_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('outbox_inserted', '');
  RETURN NULL;
END;
$$;

CREATE TRIGGER outbox_notify AFTER INSERT ON outbox
  FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify();
