-- settlement-projection's tables: each merchant's captured totals per UTC day and currency, kept from
-- the charge events by the inbox (sql/inbox holds the inbox's own tables). Design: README.md.

-- What each charge contributes now: a charge counts in the totals while its status is `captured`, on
-- the day it was captured. Its row is what lets a later event (a `needs_review` after the capture) take
-- the contribution back out of the right day.
CREATE TABLE settlement_charges (
  charge_id    text COLLATE "C" PRIMARY KEY,  -- an identifier: compared byte for byte
  merchant_id  text        NOT NULL,
  currency     text        NOT NULL,
  amount       bigint      NOT NULL,  -- minor units
  status       text        NOT NULL,
  captured_day date,                  -- the UTC day of its capture while it counts; NULL otherwise
  sequence     integer     NOT NULL,
  updated_at   timestamptz NOT NULL
);

CREATE TABLE captured_totals (
  merchant_id     text COLLATE "C" NOT NULL,
  day             date   NOT NULL,  -- UTC
  currency        text   NOT NULL,
  captured_count  bigint NOT NULL,
  captured_amount bigint NOT NULL,  -- minor units
  PRIMARY KEY (merchant_id, day, currency)
);
