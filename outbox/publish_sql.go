package outbox

// publishSQL is one publish in one statement: the event, its catalog
// entry, a delivery per subscribed endpoint whose filter accepts it (the
// verdicts $15–$18 and $28 were evaluated on the filters as the Publisher
// last read them, only those of endpoints subscribed to the event's type,
// with the trace context $19–$20, see TraceContext), the
// sequence numbers of its deliveries to fifo endpoints (key $21), their
// outbox rows, leased to the publishing process's sender when it asked
// ($22–$24, see Handoff) or until the probe of an endpoint its breaker
// holds ($23 and $25, the milliseconds left until it; $26 the default
// deadline, $27 delivery.HeldLead), and the
// dispatcher's wake-up. When an
// enabled endpoint's filter is not among the verdicts (added or changed
// since), it writes nothing and says so (the second column).
const publishSQL = `
	WITH fl AS (
	  SELECT * FROM unnest($15::text[], $16::text[], $17::bool[], $18::text[], $28::bool[]) AS f(id, filter, matched, error, evaluated)
	), stale AS (
	  -- A filter the publisher did not evaluate (its endpoint, as last
	  -- read, not subscribed to the type) is current only while the
	  -- endpoint still is not.
	  SELECT 1 FROM endpoints e
	  WHERE e.app_id = $1 AND $10 = '' AND e.filter <> '' AND NOT e.disabled AND e.deleted_at IS NULL
	    AND NOT EXISTS (SELECT 1 FROM fl WHERE fl.id = e.id AND fl.filter = e.filter
	                    AND (fl.evaluated OR NOT (cardinality(e.event_types) = 0 OR $3 = ANY (e.event_types))))
	  LIMIT 1
	), skipped AS (
	  SELECT e.id, fl.error FROM endpoints e JOIN fl ON fl.id = e.id AND fl.filter = e.filter
	  WHERE e.app_id = $1 AND $10 = '' AND NOT fl.matched AND NOT e.disabled AND e.deleted_at IS NULL
	    AND (cardinality(e.event_types) = 0 OR $3 = ANY (e.event_types))
	), ev AS (
	  INSERT INTO events (app_id, id, type, payload, payload_hash, created, filtered_out, traceparent, tracestate, ordering_key)
	  SELECT $1, $2, $3, $4, $5, $6,
	         (SELECT jsonb_agg(jsonb_build_object('endpoint_id', id, 'error', NULLIF(error, '')) ORDER BY id) FROM skipped),
	         NULLIF($19::text, ''), NULLIF($20::text, ''), NULLIF($21::text, '')
	  WHERE NOT EXISTS (SELECT 1 FROM stale)
	  ON CONFLICT (app_id, id) DO NOTHING
	  RETURNING app_id, id, type, filtered_out
	), et AS (
	  -- Checked first: a known type (the usual case) costs no insert attempt.
	  INSERT INTO event_types (name) SELECT type FROM ev
	  WHERE NOT EXISTS (SELECT 1 FROM event_types t WHERE t.name = ev.type)
	  ON CONFLICT DO NOTHING
	), tg AS (
	  SELECT ev.app_id, ev.id AS event_id, e.id AS endpoint_id, e.ordering, e.fifo_on_dead_letter
	  FROM ev JOIN endpoints e ON e.app_id = ev.app_id
	  WHERE NOT e.disabled AND e.deleted_at IS NULL
	    AND CASE WHEN $10 = '' THEN (cardinality(e.event_types) = 0 OR ev.type = ANY (e.event_types))
	                              AND (e.filter = '' OR EXISTS (SELECT 1 FROM fl WHERE fl.id = e.id AND fl.filter = e.filter AND fl.matched))
	             ELSE e.id = $10 END
	), sq AS (
	  -- The next number of each fifo endpoint's sequence for the key ($21,
	  -- '' for the default sequence), in endpoint order (no deadlock
	  -- between two publishers of one key). The row's lock, held to
	  -- commit, makes a later publisher of the key wait: sequence order
	  -- is commit order. Unordered endpoints write nothing here, and
	  -- neither does a test event ($10, sent to one endpoint on demand):
	  -- it never joins a sequence, so a failing test blocks no real event.
	  INSERT INTO sequences (endpoint_id, ordering_key, last)
	  SELECT endpoint_id, $21, 1 FROM tg WHERE ordering = 'fifo' AND $10 = '' ORDER BY endpoint_id
	  ON CONFLICT (endpoint_id, ordering_key) DO UPDATE SET last = sequences.last + 1, touched_at = now()
	  RETURNING endpoint_id, last
	), dl AS (
	  INSERT INTO deliveries (id, app_id, event_id, endpoint_id, ordering_key, sequence, fifo_block)
	  SELECT hookrelay_id($8), tg.app_id, tg.event_id, tg.endpoint_id, CASE WHEN sq.last IS NOT NULL THEN $21 END, sq.last,
	         CASE WHEN sq.last IS NOT NULL THEN tg.fifo_on_dead_letter = 'block' END
	  FROM tg LEFT JOIN sq ON sq.endpoint_id = tg.endpoint_id
	  RETURNING id, endpoint_id, sequence
	), de AS (
	  -- Each new delivery with its endpoint, read once, its first
	  -- attempt's earliest due (the first wait less its jitter), its
	  -- deadline and request timeout ($26 and $24 by default), whether its
	  -- row is the sender's to take (neither ordered nor paused), whether
	  -- it is leased to the sender (due at once; see Handoff), and how long
	  -- the sender's breaker holds it (hold_ms, $23 and $25), unless its
	  -- deadline leaves no attempt.
	  SELECT dl.id, dl.sequence, e.id AS endpoint_id, e.url, e.paused, e.retry_schedule_ms, e.deadline_ms, e.request_timeout_ms,
	         x.earliest, x.timeout, h.left_ms AS hold_ms, now() + h.left_ms * interval '1 millisecond' AS probe_at,
	         $22::bigint > 0 AND x.sendable AND NOT (e.id = ANY (COALESCE($23::text[], '{}'))) AND x.earliest <= $13 AS to_sender,
	         now() + (x.deadline - x.timeout) * interval '1 millisecond' AS last_start
	  FROM dl JOIN endpoints e ON e.id = dl.endpoint_id
	  CROSS JOIN LATERAL (
	    SELECT COALESCE(e.retry_schedule_ms[1], $11) * (1 - $12::float8) AS earliest,
	           COALESCE(NULLIF(e.deadline_ms, 0), $26) AS deadline, COALESCE(NULLIF(e.request_timeout_ms, 0), $24) AS timeout,
	           dl.sequence IS NULL AND NOT e.paused AS sendable) x
	  LEFT JOIN LATERAL (
	    SELECT h.left_ms FROM unnest($23::text[], $25::bigint[]) AS h(endpoint_id, left_ms)
	    WHERE h.endpoint_id = e.id AND h.left_ms > 0 AND x.sendable AND x.deadline > x.timeout
	    LIMIT 1) h ON true
	), cb AS (
	  -- The latest a dispatcher may claim the rows left to the rounds and
	  -- still send each first attempt on time: the earliest due, less
	  -- ClaimGuard, at most ClaimAheadMax away (now when there are none).
	  -- A paused endpoint's row is held, not claimed: it does not count.
	  -- claimable: some row is one a round will claim (ob writes it
	  -- unleased and not held); only then is there a claim time, and a
	  -- NOTIFY.
	  SELECT now() + LEAST(GREATEST(m.earliest - $13, 0), $14) * interval '1 millisecond' AS at, m.earliest IS NOT NULL AS claimable
	  FROM (SELECT min(earliest) FILTER (WHERE hold_ms IS NULL AND NOT to_sender AND NOT paused) AS earliest FROM de) m
	), ob AS (
	  -- A paused endpoint's row is held (store.HoldRows). A row the
	  -- breaker holds is leased until probe_at, spread over the next
	  -- 2 × $12 of hold_ms (as delivery.HeldWait), the spread ending $27
	  -- before its last start at the latest, the lease never past it (as
	  -- delivery.HeldEnd). A row
	  -- due at once is leased to the publishing process's sender, for $22
	  -- past its request timeout, when it asked (Handoff).
	  INSERT INTO outbox (delivery_id, kind, app_id, claim_by, held, ordered, leased_until)
	  SELECT de.id, $9, $1, (SELECT at FROM cb), de.paused, de.sequence IS NOT NULL AND $21 <> '',
	         CASE WHEN de.hold_ms IS NOT NULL
	              THEN LEAST(de.probe_at + de.hold_ms * 2 * $12::float8 * random() * interval '1 millisecond',
	                         GREATEST(de.probe_at, de.last_start - $27 * interval '1 millisecond'), de.last_start)
	              WHEN de.to_sender
	              THEN now() + ($22 + de.timeout) * interval '1 millisecond' END
	  FROM de
	  RETURNING id, delivery_id, held, leased_until, created_at
	), wake AS (
	  -- Only a dispatcher that would not claim these rows in time needs
	  -- waking: one with an unleased start row (of an endpoint that is
	  -- not paused, so claimable) to claim no later than these takes
	  -- them in that round. NOTIFY serialises commits on a global
	  -- lock, so skipping it under load lifts ingest (913 → 3029
	  -- events/s measured). The payload says by when to claim.
	  SELECT pg_notify($7, (extract(epoch FROM (SELECT at FROM cb)) * 1000)::bigint::text)
	  FROM cb
	  WHERE cb.claimable AND NOT EXISTS (
	    SELECT 1 FROM outbox o JOIN deliveries d ON d.id = o.delivery_id JOIN endpoints e ON e.id = d.endpoint_id
	    WHERE o.leased_until IS NULL AND NOT o.held AND o.kind = $9 AND o.claim_by <= (SELECT at FROM cb) AND NOT e.paused)
	)
	SELECT (SELECT count(*) FROM ev), (SELECT count(*) FROM stale), (SELECT count(*) FROM wake),
	       coalesce(array_agg(id ORDER BY endpoint_id), '{}'), coalesce(array_agg(endpoint_id ORDER BY endpoint_id), '{}'),
	       count(*) FILTER (WHERE sequence IS NOT NULL AND $21 <> ''),
	       (SELECT filtered_out FROM ev), (SELECT at FROM cb WHERE claimable),
	       (SELECT jsonb_agg(jsonb_build_object('id', ob.id, 'delivery', ob.delivery_id, 'endpoint', de.endpoint_id, 'url', de.url,
	                 'schedule', de.retry_schedule_ms, 'deadline', de.deadline_ms, 'timeout', de.request_timeout_ms, 'app', a.name,
	                 'created', (extract(epoch FROM ob.created_at) * 1000000)::bigint, 'until', (extract(epoch FROM ob.leased_until) * 1000000)::bigint,
	                 'held', de.hold_ms IS NOT NULL)
	                 ORDER BY ob.id)
	        FROM ob JOIN de ON de.id = ob.delivery_id JOIN apps a ON a.id = $1
	        WHERE ob.leased_until IS NOT NULL)
	FROM dl`
