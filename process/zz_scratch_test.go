package process

import (
	"testing"
	"time"
)

func TestScratchTiming(t *testing.T) {
	for i, seed := range []string{validDoc, assignDoc, reorderedDoc} {
		start := time.Now()
		for j := 0; j < 100; j++ {
			p, _ := Parse([]byte(seed))
			if p != nil {
				Check(p, resolver, testLimits)
			}
		}
		t.Log(i, time.Since(start)/100)
	}
}
