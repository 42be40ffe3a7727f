-- The charges database's roles and grants: one login role per runtime component, each with the least it
-- needs, beside the owner that owns the schema and runs the migrations (sql/README.md, "Roles and
-- privileges"; docs/operations.md, "Installing").
--
-- Run it with psql after `charge-migrate up`, and again after every upgrade (it is idempotent: it creates
-- what is missing, grants what is due, and resets the runtime roles' attributes):
--
--   CHARGE_API_DB_PASSWORD=... CHARGE_RECONCILER_DB_PASSWORD=... OUTBOX_RELAY_DB_PASSWORD=... \
--   CHARGE_OPERATOR_DB_PASSWORD=... \
--   psql "postgresql://ADMIN@HOST/charges" -v ON_ERROR_STOP=1 -v owner=charge_owner -f sql/roles.sql
--
-- Who runs it: a role that may create roles (CREATEROLE or superuser) and is a member of the owner (or a
-- superuser): the grants are made as the owner (SET ROLE), the schema's and the database's owner.
--
-- psql variables (-v NAME=VALUE):
--   owner            required: the role that ran the migrations and owns the tables and the database
--   schema           where the tables are (default public); the runtime roles' search_path is set to it
--   api_role         charge-api                                        (default charge_api)
--   reconciler_role  reconciler: the sweep and the window report        (default charge_reconciler)
--   relay_role       outbox-relay                                      (default outbox_relay)
--   operator_role    charge-admin, and outbox-relay's `parked` commands (default charge_operator)
-- Passwords come from the environment, never from the command line (which `ps` shows): each of
-- CHARGE_API_DB_PASSWORD, CHARGE_RECONCILER_DB_PASSWORD, OUTBOX_RELAY_DB_PASSWORD and
-- CHARGE_OPERATOR_DB_PASSWORD, when set, becomes its role's password; unset leaves the password as it is
-- (certificates, an IAM plugin, or `\password` by hand). The statement that sets it carries it: where the
-- server logs DDL (log_statement = ddl or all), give a SCRAM verifier ('SCRAM-SHA-256$4096:...') instead of
-- the clear text.
--
-- Not default privileges: ALTER DEFAULT PRIVILEGES would give each role its rights on every table a later
-- migration creates, whoever needs it. A migration that adds a table adds its grants here, in the same
-- change; tests/sql/roles_e2etest.cpp fails while a table or sequence of the schema has no line below, and
-- runs every daemon as its role.

\set ON_ERROR_STOP on
\if :{?owner}
\else
  DO $$ BEGIN RAISE EXCEPTION 'sql/roles.sql needs -v owner=ROLE: the role that ran the migrations'; END $$;
\endif
\if :{?schema}
\else
  \set schema public
\endif
\if :{?api_role}
\else
  \set api_role charge_api
\endif
\if :{?reconciler_role}
\else
  \set reconciler_role charge_reconciler
\endif
\if :{?relay_role}
\else
  \set relay_role outbox_relay
\endif
\if :{?operator_role}
\else
  \set operator_role charge_operator
\endif
\getenv api_password CHARGE_API_DB_PASSWORD
\getenv reconciler_password CHARGE_RECONCILER_DB_PASSWORD
\getenv relay_password OUTBOX_RELAY_DB_PASSWORD
\getenv operator_password CHARGE_OPERATOR_DB_PASSWORD

-- The runtime roles: log in, nothing else (no superuser, no role or database creation, no replication, no
-- row-level-security bypass), their tables found in the schema whatever their URL says.
SELECT format('CREATE ROLE %I', r) FROM unnest(ARRAY[:'api_role', :'reconciler_role', :'relay_role', :'operator_role']) AS r
 WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = r) \gexec
SELECT format('ALTER ROLE %I LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS', r),
       format('ALTER ROLE %I IN DATABASE %I SET search_path = %I', r, current_database(), :'schema')
  FROM unnest(ARRAY[:'api_role', :'reconciler_role', :'relay_role', :'operator_role']) AS r \gexec
\if :{?api_password}
  ALTER ROLE :"api_role" PASSWORD :'api_password';
\endif
\if :{?reconciler_password}
  ALTER ROLE :"reconciler_role" PASSWORD :'reconciler_password';
\endif
\if :{?relay_password}
  ALTER ROLE :"relay_role" PASSWORD :'relay_password';
\endif
\if :{?operator_password}
  ALTER ROLE :"operator_role" PASSWORD :'operator_password';
\endif

-- Everything below is granted by the owner.
SET ROLE :"owner";
SET search_path = :"schema";

-- The database and the schema: our roles connect and find the tables; nobody else connects by default,
-- and nobody but the owner creates anything in the schema.
SELECT format('REVOKE ALL ON DATABASE %I FROM PUBLIC', current_database()),
       format('GRANT CONNECT ON DATABASE %I TO %I, %I, %I, %I', current_database(),
              :'api_role', :'reconciler_role', :'relay_role', :'operator_role') \gexec
REVOKE CREATE ON SCHEMA :"schema" FROM PUBLIC;
GRANT USAGE ON SCHEMA :"schema" TO :"api_role", :"reconciler_role", :"relay_role", :"operator_role";

-- Every daemon checks the schema's version at start.
GRANT SELECT ON schema_migrations TO :"api_role", :"reconciler_role", :"relay_role", :"operator_role";

-- charge-api: authenticates keys, takes charges (the charge, its attempts and its events in one
-- transaction), counts pending and needs_review charges for its gauges.
GRANT SELECT ON api_keys TO :"api_role";
GRANT SELECT, INSERT, UPDATE ON charges, acquirer_attempts TO :"api_role";
GRANT INSERT ON outbox TO :"api_role";

-- reconciler: resolves pending charges (their attempts and events) and reads the window report's charges.
GRANT SELECT, UPDATE ON charges TO :"reconciler_role";
GRANT SELECT, INSERT, UPDATE ON acquirer_attempts TO :"reconciler_role";
GRANT INSERT ON outbox TO :"reconciler_role";

-- Writers of events draw their position from the outbox's sequence (its column default).
GRANT USAGE ON SEQUENCE outbox_position_seq TO :"api_role", :"reconciler_role", :"operator_role";

-- outbox-relay: claims and marks events, gauges the backlog, reads the sequence for the claims' floor
-- (docs/outbox-relay.md, "The claim's floor"), deletes published rows of outbox_default; its partition
-- work runs as the owner through these functions (migration 0015), which check what they are given.
GRANT SELECT, UPDATE ON outbox TO :"relay_role";
GRANT SELECT, DELETE ON outbox_default TO :"relay_role";
GRANT SELECT ON SEQUENCE outbox_position_seq TO :"relay_role";
GRANT EXECUTE ON FUNCTION outbox_ensure_partitions(date, date), outbox_retire_day(text, boolean),
  outbox_trim_day_ahead(text), outbox_drop_history_day(text) TO :"relay_role";

-- charge-admin (a person, or the audit-prune CronJob): merchants and keys, review decisions (the charge,
-- its event, the acquirer attempts it makes, the audit row), the audit trail and its pruning, a charge's
-- story (outbox and outbox_history); and outbox-relay's `parked list|retry|skip`, a person's commands,
-- run with this role (they write operator_actions).
GRANT SELECT, INSERT ON merchants TO :"operator_role";
GRANT SELECT, INSERT, UPDATE ON api_keys TO :"operator_role";
GRANT SELECT, UPDATE ON charges TO :"operator_role";
GRANT SELECT, INSERT, UPDATE ON acquirer_attempts TO :"operator_role";
GRANT SELECT, INSERT, UPDATE ON outbox TO :"operator_role";
GRANT SELECT ON outbox_history TO :"operator_role";
GRANT SELECT, INSERT, DELETE ON operator_actions TO :"operator_role";

-- Captures the acquirer holds that no charge of ours names (migration 0014): the window report records
-- them, a person voids or adopts them (an adoption writes the charge back, with its event).
GRANT SELECT, INSERT, UPDATE ON orphan_captures TO :"reconciler_role";
GRANT SELECT, UPDATE ON orphan_captures TO :"operator_role";
GRANT INSERT ON charges TO :"operator_role";

RESET search_path;
RESET ROLE;
