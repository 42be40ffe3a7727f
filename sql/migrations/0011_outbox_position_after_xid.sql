-- An outbox row's writer holds a transaction id before it draws the row's position, so that the relay
-- can tell when every position up to a value it read has been committed or abandoned (docs/outbox-relay.md,
-- "The claim's floor").
--
-- PostgreSQL gives a transaction its id at its first row write, which comes after the row's defaults are
-- computed: a writer whose first write is this insert drew its position while it had no id, and no
-- snapshot could show that it was still running. The CASE evaluates pg_current_xact_id() (which assigns
-- the id) before nextval(); it is never NULL, so the CASE always yields the position.
--
-- The floor's argument also needs every value the sequence has handed out to be no greater than its
-- last_value: no backend may hold cached values (CACHE 1, the default, set here explicitly). The relay
-- checks both at every refresh of the floor and claims without one if either is changed.
--
-- SET DEFAULT on the partitioned table changes every partition too, and new partitions take the parent's
-- default. Catalog only, no rewrite; it takes an exclusive lock on the outbox and its partitions for that
-- moment.
ALTER SEQUENCE outbox_position_seq CACHE 1;
ALTER TABLE outbox ALTER COLUMN position SET DEFAULT
  CASE WHEN pg_current_xact_id() IS NOT NULL THEN nextval('outbox_position_seq') END;
