package probe

import "testing"

func TestAnswer(t *testing.T) {
	if Answer != 42 {
		t.Fatalf("Answer is %d, want 42", Answer)
	}
}
