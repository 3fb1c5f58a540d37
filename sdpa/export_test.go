package sdpa

// The transforms' internals, for the external tests' broken variants.
var (
	SmoothKForTest    = smoothK
	RotateRowsForTest = rotateRows
)
