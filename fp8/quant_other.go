//go:build (!amd64 && !arm64) || purego

package fp8

// amaxVector, encodeE4M3Vector and roundE4M3Vector do nothing: this build has only the Go
// loops.
func amaxVector([]float32) (float32, int) { return 0, 0 }

func encodeE4M3Vector([]E4M3, []float32, float32, Mode) int { return 0 }

func roundE4M3Vector([]float32, []float32, float32, Mode) int { return 0 }
