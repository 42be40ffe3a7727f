-- The daemon that wrote each outbox row: the event's ce_source (docs/events.md; docs/decisions.md, "Event
-- contract"). charge-api for the charges it moves, the reconciler for the ones it resolves or flags.
--
-- It comes from the writing session's application_name: every daemon names every connection after
-- itself (db::ConnectionString sets it and overrides one the URL carries, so pg_stat_activity says which
-- daemon a session is). The charge store's statements, which charge-api and the reconciler share, then
-- need no parameter for it, and a writer that is not one of the daemons (psql, a test) records its own
-- name or nothing. Rows written before this migration keep NULL: the relay gives them its configured
-- cloudevents.source, as it gave every event before.
--
-- The column is added without a default and the default set afterwards: added with one, every existing
-- row would take the migrating session's name. Both statements change the catalog only (no table rewrite),
-- but each takes an exclusive lock on the outbox and its partitions for that moment.
ALTER TABLE outbox ADD COLUMN producer text;
ALTER TABLE outbox ALTER COLUMN producer SET DEFAULT NULLIF(current_setting('application_name'), '');
