// Package clamp has a helper with an off-by-one bug its test catches.
package clamp

// Clamp limits v to [lo, hi] — but returns hi-1 for values above hi (bug).
func Clamp(v, lo, hi int) int {
	switch {
	case v < lo:
		return lo
	case v > hi:
		return hi - 1
	}
	return v
}
