package sdpa

// The transforms' internals, for the external tests' broken variants.
var (
	SmoothKForTest    = smoothK
	RotateRowsForTest = rotateRows
)

// SetSplitRowForTest replaces the outlier split's row function (nil
// restores it), for the broken variants of TestInvarianceCatchesBrokenTransforms.
func SetSplitRowForTest(f func(dst, src []float32, chans []int, scale float32, query bool)) {
	if f == nil {
		f = splitRow
	}
	splitRowFunc = f
}

// SplitRowForTest is the outlier split's row function.
var SplitRowForTest = splitRow
