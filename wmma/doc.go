package wmma

//go:generate go run ./gen
