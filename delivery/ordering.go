package delivery

// Ordering is an endpoint's delivery order (docs/contract.md#14-ordered-delivery).
type Ordering string

// Orderings an endpoint may have.
const (
	// OrderingNone sends every delivery on its own (the default).
	OrderingNone Ordering = "none"
	// OrderingFIFO sends the deliveries of one ordering key one at a time,
	// in the order their events were accepted.
	OrderingFIFO Ordering = "fifo"
)

// Valid reports whether o is a known ordering.
func (o Ordering) Valid() bool { return o == OrderingNone || o == OrderingFIFO }

// DeadLetterChoice is what a fifo sequence does when its head
// dead-letters.
type DeadLetterChoice string

// Dead-letter choices of a fifo endpoint.
const (
	// DeadLetterSkip moves the sequence on (the default).
	DeadLetterSkip DeadLetterChoice = "skip"
	// DeadLetterBlock holds the sequence until the dead letter is
	// replayed and succeeds, or is released.
	DeadLetterBlock DeadLetterChoice = "block"
)

// Valid reports whether c is a known choice.
func (c DeadLetterChoice) Valid() bool { return c == DeadLetterSkip || c == DeadLetterBlock }

// HeaderSequence carries an ordered delivery's place in its sequence
// (1-based per endpoint and ordering key, the same on every retry).
const HeaderSequence = "webhook-sequence"
