-- settlement-projection's database: the daemon's login role and its grants, beside the owner that owns the
-- schema and runs `settlement-projection migrate` (the chart's init container). The inbox's part (its
-- tables and its two partition functions, sql/inbox) is what any consumer built on the inbox library
-- grants its own daemon; the last block is this projection's own tables.
--
-- Run it with psql after `settlement-projection migrate`, and again after every upgrade (idempotent):
--
--   SETTLEMENT_PROJECTION_DB_PASSWORD=... \
--   psql "postgresql://ADMIN@HOST/settlement" -v ON_ERROR_STOP=1 -v owner=settlement_owner \
--     -f services/settlement-projection/roles.sql
--
-- Who runs it: a role that may create roles (CREATEROLE or superuser) and is a member of the owner (or a
-- superuser). Variables: owner (required), schema (default public), projection_role (default
-- settlement_projection). The password comes from SETTLEMENT_PROJECTION_DB_PASSWORD when set (a SCRAM
-- verifier where the server logs DDL); unset leaves it as it is. Why grants and not default privileges:
-- sql/roles.sql.

\set ON_ERROR_STOP on
\if :{?owner}
\else
  DO $$ BEGIN RAISE EXCEPTION 'roles.sql needs -v owner=ROLE: the role that ran settlement-projection migrate'; END $$;
\endif
\if :{?schema}
\else
  \set schema public
\endif
\if :{?projection_role}
\else
  \set projection_role settlement_projection
\endif
\getenv projection_password SETTLEMENT_PROJECTION_DB_PASSWORD

SELECT format('CREATE ROLE %I', :'projection_role')
 WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'projection_role') \gexec
ALTER ROLE :"projection_role" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS;
SELECT format('ALTER ROLE %I IN DATABASE %I SET search_path = %I', :'projection_role', current_database(),
              :'schema') \gexec
\if :{?projection_password}
  ALTER ROLE :"projection_role" PASSWORD :'projection_password';
\endif

SET ROLE :"owner";
SET search_path = :"schema";

SELECT format('REVOKE ALL ON DATABASE %I FROM PUBLIC', current_database()),
       format('GRANT CONNECT ON DATABASE %I TO %I', current_database(), :'projection_role') \gexec
REVOKE CREATE ON SCHEMA :"schema" FROM PUBLIC;
GRANT USAGE ON SCHEMA :"schema" TO :"projection_role";

-- The inbox (sql/inbox): the schema check reads its ledger; a batch applies events, holds them past a gap,
-- records gaps, rejects and expired events; retention deletes from the default partition and forgets old
-- progress, and makes and drops day partitions as the owner (sql/inbox/0003).
GRANT SELECT ON inbox_schema_migrations TO :"projection_role";
GRANT SELECT, INSERT ON inbox, inbox_expired TO :"projection_role";
GRANT INSERT ON inbox_rejected TO :"projection_role";
GRANT SELECT, DELETE ON inbox_default TO :"projection_role";
GRANT SELECT, INSERT, UPDATE, DELETE ON inbox_charges TO :"projection_role";
GRANT SELECT, INSERT, DELETE ON inbox_held, inbox_gaps TO :"projection_role";
GRANT EXECUTE ON FUNCTION inbox_ensure_partitions(date, date), inbox_drop_day(text) TO :"projection_role";

-- settlement-projection's own tables (services/settlement-projection/sql) and its ledger.
GRANT SELECT ON schema_migrations TO :"projection_role";
GRANT SELECT, INSERT, UPDATE, DELETE ON settlement_charges TO :"projection_role";
GRANT SELECT, INSERT, UPDATE ON captured_totals TO :"projection_role";

RESET search_path;
RESET ROLE;
