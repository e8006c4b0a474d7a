package worker

import (
	"bytes"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// goroutineID reads the calling goroutine's number from its stack's header
// ("goroutine 42 [running]:").
func goroutineID(t *testing.T) int {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	field := bytes.Fields(buf)[1]
	id, err := strconv.Atoi(string(field))
	if err != nil {
		t.Errorf("goroutine id in %q: %v", buf, err)
	}
	return id
}

func TestGoroutinesAreKeptBetweenTasks(t *testing.T) {
	g := newGoroutines()
	ids := map[int]bool{}
	for range 100 {
		done := make(chan int)
		g.run(func() { done <- goroutineID(t) })
		ids[<-done] = true
		// The goroutine is idle once it waits for the next task.
		time.Sleep(time.Millisecond)
	}
	g.stop(true)
	// One, unless a task came before its goroutine was back waiting.
	if len(ids) > 10 {
		t.Errorf("100 tasks in turn ran on %d goroutines, want them kept between tasks", len(ids))
	}
}

func TestGoroutinesRunTasksAtOnce(t *testing.T) {
	g := newGoroutines()
	const n = 8
	var running atomic.Int32
	all := make(chan struct{})
	release := make(chan struct{})
	for range n {
		g.run(func() {
			if running.Add(1) == n {
				close(all)
			}
			<-release
		})
	}
	select {
	case <-all:
	case <-time.After(10 * time.Second):
		t.Fatalf("%d of %d tasks running at once", running.Load(), n)
	}
	close(release)
	g.stop(true) // TestMain's leak check fails if any goroutine stays
}
