package push

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"
)

// A write the database's absence refuses is tried again until it lands;
// one refused for another reason, or once the replica stops, is not.
func TestUntilReached(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fails := func(n int, err error) func(context.Context) error {
		return func(context.Context) error {
			if n > 0 {
				n--
				return err
			}
			return nil
		}
	}
	lost := io.ErrUnexpectedEOF // a connection closed under a statement
	if tries, err := untilReached(ctx, nil, fails(2, lost)); tries != 3 || err != nil {
		t.Errorf("two outages then success: %d tries, %v; want 3, nil", tries, err)
	}
	other := errors.New("no such occurrence")
	if tries, err := untilReached(ctx, nil, fails(2, other)); tries != 1 || err != other {
		t.Errorf("another error: %d tries, %v; want 1 and it", tries, err)
	}
	stopping := make(chan struct{})
	close(stopping)
	if tries, err := untilReached(ctx, stopping, fails(5, lost)); tries != 1 || !errors.Is(err, lost) {
		t.Errorf("a stopping replica: %d tries, %v; want 1 and the outage", tries, err)
	}
	short, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
	defer cancel()
	if tries, err := untilReached(short, nil, fails(1000, lost)); tries < 2 || tries > 4 || !errors.Is(err, lost) {
		t.Errorf("an outage past the window: %d tries, %v; want a few, then the outage", tries, err)
	}
}
