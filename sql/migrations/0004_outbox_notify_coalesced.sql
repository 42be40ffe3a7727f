-- Coalesced insert notifications (docs/outbox-relay.md, "Latency"). Migration 0003's trigger sent a NOTIFY
-- from every inserting transaction; a notifying transaction takes a database-wide lock for its commit, so
-- charge-api's transactions committed one at a time (measured: charges/s fell by more than 80%).
--
-- Now a transaction notifies only when the relay that owns the event's shard is asleep waiting for it. A
-- sleeping relay holds the shard's "waiting" advisory lock exclusively; while it is busy it does not, and
-- the writer's shared try succeeds, is held until the writer commits, and no NOTIFY is sent. Before the
-- relay goes back to sleep it takes the exclusive lock, which waits out every writer that skipped notifying,
-- and claims once more: those writers' rows are committed by then, so none is missed.
CREATE OR REPLACE FUNCTION outbox_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  -- 0x0B0C0004 = 185335812: the relay's "waiting" lock space (common/src/outbox).
  IF NOT pg_try_advisory_xact_lock_shared(185335812, NEW.shard::integer) THEN
    PERFORM pg_notify('outbox_inserted', '');
  END IF;
  RETURN NULL;
END;
$$;

DROP TRIGGER outbox_notify ON outbox;
CREATE TRIGGER outbox_notify AFTER INSERT ON outbox
  FOR EACH ROW EXECUTE FUNCTION outbox_notify();
