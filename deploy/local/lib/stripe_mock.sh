# stripe-mock, Stripe's own mock of its API v1, built from the Go module proxy into the project's cache: it
# checks each request against Stripe's OpenAPI spec (paths, parameters, types, authentication) and answers
# with fixtures, so the Stripe adapter's contract test (tests/stripe_mock) sends every request shape the
# adapter has to it. Sourced; needs common.sh and helm.sh (helm_go_install).
#
#   stripe_mock_fetch   stripe-mock into the cache (idempotent, locked); sets STRIPE_MOCK_BIN

STRIPE_MOCK_VERSION=${STRIPE_MOCK_VERSION:-v0.203.0}

stripe_mock_fetch() {
  STRIPE_MOCK_BIN=$CHARGE_OUTBOX_CACHE/stripe-mock-$STRIPE_MOCK_VERSION/bin/stripe-mock
  helm_go_install "$STRIPE_MOCK_BIN" "github.com/stripe/stripe-mock@$STRIPE_MOCK_VERSION" stripe-mock \
    "about a minute"
}
