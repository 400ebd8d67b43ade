package activities

// ShareWaiting is how many attempts wait for a place in endpointID's share.
func ShareWaiting(s *Shares, endpointID string) int { return s.places().Waiting(endpointID) }
