package bug

import (
	"strings"
	"sync"
	"testing"
)

func TestCatchHandsThePanicAndItsStackToTheHandler(t *testing.T) {
	var got any
	var stack []byte
	SetHandler(func(v any, s []byte) { got, stack = v, s; panic("handled") })
	defer SetHandler(nil)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer func() { recover() }() // stands in for the handler's os.Exit
		defer Catch()
		boom()
	}()
	wg.Wait()
	if got != "boom" {
		t.Fatalf("handler got %v, want boom", got)
	}
	if !strings.Contains(string(stack), "bug.boom") {
		t.Fatalf("stack does not show where it panicked:\n%s", stack)
	}
}

func boom() { panic("boom") }
