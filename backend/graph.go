package backend

// Capturer is implemented by a Memory backend that can record the device
// work of a sequence of calls once and replay it (cuda: a CUDA graph), so
// that a repeated step (a model's decode step) costs one launch instead of
// one per kernel.
//
// While issue runs inside Capture, the calls it makes from its own
// goroutine are recorded, not run: their host-side checks happen, their
// device work goes into the graph. Calls from other goroutines on the same
// device wait until the capture ends. Calls that move host memory (Write,
// Read, a cache's Append) fail with ErrUnsupported inside a capture, with
// one exception: a cache's Attention re-reads its PagedProblem's SeqLens
// and BlockTable slices at every replay (see PagedProblem.MaxSeqLen).
//
// The buffers a graph uses and the caches it reads stay pinned while it
// lives: freeing or closing one fails with ErrInvalid until the graph is
// closed. Buffers allocated and freed inside issue (a call's temporaries)
// belong to the graph and are released with it.
type Capturer interface {
	// Capture records issue's device work into a graph. If issue fails,
	// nothing is recorded and its error is returned.
	Capture(issue func() error) (Graph, error)
	// Capturing reports whether the calling goroutine is inside the issue
	// function of a Capture on this backend.
	Capturing() bool
}

// Graph is recorded device work (Capturer.Capture).
type Graph interface {
	// Replay runs the recorded work again, on the device's stream, after
	// the work issued before it, and returns without waiting: errors of the
	// device work surface at the next Read, as for the calls themselves.
	Replay() error
	// Close waits for the graph's replays and releases it, unpinning its
	// buffers and caches. A second Close does nothing.
	Close() error
}
