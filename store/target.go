package store

// An attempt's target: where to send, what, and with which keys, loaded
// alone (LoadTarget) or with the attempt's claim (ClaimTarget).

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"hookrelay/delivery"
	"hookrelay/signing"
)

// Target is everything one attempt needs: where to send, what, and with
// which keys.
type Target struct {
	DeliveryID string
	AppID      string
	EventID    string
	EndpointID string
	URL        string
	Headers    map[string]string
	// Inactive is set when the endpoint is disabled or deleted.
	Inactive bool
	// Paused is set when the endpoint is paused: nothing may be sent.
	Paused bool
	// RateLimit is the endpoint's sends per second (0: none).
	RateLimit int
	// MaxInFlight is the endpoint's bound on concurrent requests (0: none).
	MaxInFlight int
	// EgressProxy is the endpoint's override of the deployment's egress
	// proxy: "" follows the deployment, "direct" uses none, else a proxy
	// URL.
	EgressProxy string
	Payload     []byte
	// Keys are the secrets valid now, current first.
	Keys []signing.Key
	// Sequence is an ordered delivery's place in its sequence (sent as
	// delivery.HeaderSequence); 0 for an unordered delivery.
	Sequence int64
	// TraceContext is the endpoint's choice of the trace context its
	// receiver is sent (delivery.TraceContext*), "" for the deployment's.
	TraceContext string
}

// targetQuery selects each delivery of $1 with its endpoint, frozen
// payload and the signing keys valid at $2: the current one first, then
// previous ones whose grace period has not ended, newest first.
const targetQuery = `
		SELECT d.id, d.app_id, d.event_id, d.endpoint_id, e.url, e.headers, e.headers_sealed,
		       (e.disabled OR e.deleted_at IS NOT NULL), e.paused, COALESCE(e.rate_limit, 0), COALESCE(e.max_in_flight, 0), ev.payload,
		       COALESCE(e.egress_proxy, ''), COALESCE(k.ids, '{}'), COALESCE(k.sealed, '{}'), COALESCE(d.sequence, 0),
		       COALESCE(e.trace_context, '')
		FROM deliveries d
		JOIN endpoints e ON e.id = d.endpoint_id
		JOIN events ev ON ev.app_id = d.app_id AND ev.id = d.event_id
		LEFT JOIN LATERAL (
		  SELECT array_agg(id ORDER BY (status = 'current') DESC, created_at DESC) AS ids,
		         array_agg(sealed ORDER BY (status = 'current') DESC, created_at DESC) AS sealed
		  FROM endpoint_secrets
		  WHERE endpoint_id = e.id AND (status = 'current' OR (status = 'previous' AND valid_until > $2))
		) k ON true
		WHERE d.id = ANY ($1)`

// scanTarget reads one row of targetQuery and opens its sealed parts.
func (s *Store) scanTarget(r pgx.Row) (Target, error) {
	st, err := scanSealed(r)
	if err != nil {
		return Target{}, err
	}
	return s.open(st)
}

// sealedTarget is a row of targetQuery with its sealed parts not opened.
type sealedTarget struct {
	Target
	headers, sealed []byte
	keyIDs          []string
	keysSealed      [][]byte
}

// scanSealed reads one row of targetQuery, and into extra the columns a
// statement adds after it.
func scanSealed(r pgx.Row, extra ...any) (sealedTarget, error) {
	var st sealedTarget
	t := &st.Target
	dest := []any{&t.DeliveryID, &t.AppID, &t.EventID, &t.EndpointID, &t.URL, &st.headers, &st.sealed, &t.Inactive, &t.Paused, &t.RateLimit,
		&t.MaxInFlight, &t.Payload, &t.EgressProxy, &st.keyIDs, &st.keysSealed, &t.Sequence, &t.TraceContext}
	err := r.Scan(append(dest, extra...)...)
	return st, err
}

// open opens st's sealed headers and keys.
func (s *Store) open(st sealedTarget) (Target, error) {
	t := st.Target
	var err error
	if t.Headers, err = s.openHeaders(t.EndpointID, st.sealed, st.headers); err != nil {
		return Target{}, err
	}
	for i, id := range st.keyIDs {
		key, err := s.openSecret(id, st.keysSealed[i])
		if err != nil {
			return Target{}, err
		}
		t.Keys = append(t.Keys, key)
	}
	return t, nil
}

// LoadTarget loads a delivery's endpoint, frozen payload and the signing
// keys valid at now, in one statement (one round trip on the hot path).
func (s *Store) LoadTarget(ctx context.Context, deliveryID string, now time.Time) (Target, error) {
	t, err := s.scanTarget(s.HotPool().QueryRow(ctx, targetQuery, []string{deliveryID}, now))
	if err != nil {
		return Target{}, notFound(err, "load delivery "+deliveryID)
	}
	return t, nil
}

// LoadTargets is LoadTarget for many deliveries in one statement (a
// carrier's); deliveries not found are left out.
func (s *Store) LoadTargets(ctx context.Context, deliveryIDs []string, now time.Time) ([]Target, error) {
	rows, err := s.HotPool().Query(ctx, targetQuery, deliveryIDs, now)
	if err != nil {
		return nil, fmt.Errorf("load %d deliveries: %w", len(deliveryIDs), err)
	}
	ts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Target, error) { return s.scanTarget(r) })
	if err != nil {
		return nil, fmt.Errorf("load %d deliveries: %w", len(deliveryIDs), err)
	}
	return ts, nil
}

func (s *Store) openSecret(id string, sealed []byte) (signing.Key, error) {
	plain, err := s.box.Open(sealed, []byte(id))
	if err != nil {
		return signing.Key{}, fmt.Errorf("secret %s: %w", id, err)
	}
	return signing.ParseKey(id, string(plain))
}

// ClaimTarget is LoadTarget and ClaimAttempt in one statement, for an
// attempt that needs nothing between them: it loads the delivery's target
// and claims the attempt until until when the endpoint is enabled, not
// paused, has no rate limit, no max_in_flight and a valid signing key, and
// the delivery may be sent (see ClaimAttempt). claimed is false when any of
// that does not hold; the caller then goes the long way (its share, slot
// and flight, then ClaimAttempt) with the target returned. One round trip
// fewer on every attempt of an endpoint with no limits. A target whose
// sealed parts do not open is an error, as with LoadTarget, and its claim
// is given back before ClaimTarget returns: nothing of it is on the wire.
// Its commit does not wait for the WAL flush (synchronous_commit off for
// its own transaction only): the next synchronous commit (the attempt's
// record, a disable, any ingest) flushes it, and only a crash, immediate
// shutdown or failover of Postgres before then loses it
// (docs/contract.md#5-statuses-and-their-transitions).
func (s *Store) ClaimTarget(ctx context.Context, deliveryID string, now, until time.Time) (t Target, claimed bool, err error) {
	ts, errs, err := s.claimTargets(ctx, []string{deliveryID}, now, []time.Time{until})
	if err == nil {
		err = errs[deliveryID]
	}
	if err != nil {
		return Target{}, false, err
	}
	ct, ok := ts[deliveryID]
	if !ok {
		return Target{}, false, fmt.Errorf("load delivery %s: %w", deliveryID, ErrNotFound)
	}
	return ct.Target, ct.Claimed, nil
}

// ClaimedTarget is one delivery's answer of a batched ClaimTarget.
type ClaimedTarget struct {
	Target
	Claimed bool
}

// claimTargetSQL locks the deliveries of $1 in ID order (as ClaimAttempt
// and RecordAttempts do), reads their targets (targetQuery, keys valid at
// $2) and claims those whose attempts need no share of a limit, each until
// its $3, committing without waiting for the flush (asyncCommit, see
// ClaimTarget).
const claimTargetSQL = `
		WITH v AS (
		  -- A delivery named twice is claimed until its first until.
		  SELECT DISTINCT ON (id) id, until FROM unnest($1::text[], $3::timestamptz[]) WITH ORDINALITY AS v(id, until, n)
		  ORDER BY id, n
		), l AS MATERIALIZED (
		  SELECT d.id FROM deliveries d WHERE d.id = ANY ($1) AND ` + asyncCommit + `
		  ORDER BY d.id FOR UPDATE OF d
		), t (id, app_id, event_id, endpoint_id, url, headers, headers_sealed, inactive, paused, rate_limit, max_in_flight,
		      payload, egress_proxy, key_ids, keys_sealed, sequence, trace_context) AS (` + targetQuery + `
		), upd AS (
		  UPDATE deliveries d SET status = $4, inflight_until = v.until
		  FROM l JOIN v ON v.id = l.id JOIN t ON t.id = l.id
		  WHERE d.id = l.id
		    AND d.status = ANY ($5) AND (d.inflight_until IS NULL OR d.inflight_until < now())
		    AND NOT t.inactive AND NOT t.paused AND t.rate_limit = 0 AND t.max_in_flight = 0 AND cardinality(t.key_ids) > 0
		  RETURNING d.id
		)
		SELECT t.*, t.id IN (SELECT id FROM upd) FROM t`

// claimTargetArgs are claimTargetSQL's parameters.
func claimTargetArgs(ids []string, now time.Time, untils []time.Time) []any {
	return []any{ids, now, untils, delivery.To(delivery.EventClaim), delivery.From(delivery.EventClaim)}
}

// claimTargets is ClaimTarget for many deliveries in one statement;
// deliveries not found are left out. errs holds the deliveries whose
// targets did not open; their claims are given back before it returns.
func (s *Store) claimTargets(ctx context.Context, ids []string, now time.Time, untils []time.Time) (map[string]ClaimedTarget, map[string]error, error) {
	rows, err := s.HotPool().Query(ctx, claimTargetSQL, claimTargetArgs(ids, now, untils)...)
	if err != nil {
		return nil, nil, fmt.Errorf("claim %d targets: %w", len(ids), transitionError(err))
	}
	type scanned struct {
		sealedTarget
		claimed bool
	}
	sts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (scanned, error) {
		var sc scanned
		var err error
		sc.sealedTarget, err = scanSealed(r, &sc.claimed)
		return sc, err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("claim %d targets: %w", len(ids), err)
	}
	until := make(map[string]time.Time, len(ids))
	for i, id := range ids {
		if _, ok := until[id]; !ok {
			until[id] = untils[i]
		}
	}
	out, errs := make(map[string]ClaimedTarget, len(sts)), map[string]error{}
	var back []string
	var backUntil []time.Time
	for _, sc := range sts {
		t, err := s.open(sc.sealedTarget)
		if err != nil {
			errs[sc.DeliveryID] = fmt.Errorf("load delivery %s: %w", sc.DeliveryID, err)
			if sc.claimed {
				back, backUntil = append(back, sc.DeliveryID), append(backUntil, until[sc.DeliveryID])
			}
			continue
		}
		out[t.DeliveryID] = ClaimedTarget{Target: t, Claimed: sc.claimed}
	}
	if len(back) > 0 {
		// Claimed but not to be sent: the claim is given back at once (the
		// delivery stays delivering, as a claim given back does).
		if err := s.releaseClaims(ctx, back, backUntil); err != nil {
			return nil, nil, fmt.Errorf("claim %d targets: %d did not open and their claims lapse: %w", len(ids), len(back), err)
		}
	}
	return out, errs, nil
}
