package slots

// Waiting is how many callers wait for one of key's places.
func Waiting(k *Keyed, key string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.wait[key])
}
