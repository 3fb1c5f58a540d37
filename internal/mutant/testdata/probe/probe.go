// Package probe is what the tests of package mutant break: a constant and
// a test that holds it.
package probe

// Answer is what TestAnswer expects.
const Answer = 42
