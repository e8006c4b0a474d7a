package console

import (
	"net/netip"
	"testing"
	"time"
)

// TestThrottleMemoryIsBounded: a client cycling through addresses cannot
// grow the table past maxThrottled, and finished windows are dropped.
func TestThrottleMemoryIsBounded(t *testing.T) {
	t.Parallel()
	th := newSignInThrottle()
	now := time.Now()
	for i := range maxThrottled + 500 {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		th.fail(a, now)
	}
	if n := th.size(); n > maxThrottled {
		t.Fatalf("%d addresses remembered; want at most %d", n, maxThrottled)
	}
	th.fail(netip.MustParseAddr("192.0.2.1"), now.Add(2*signInWindow))
	if n := th.size(); n != 1 {
		t.Errorf("%d addresses remembered after every window ended; want 1", n)
	}
	// One IPv6 client holds a /64: its addresses share one count.
	for i := range signInFailures {
		th.fail(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 15: byte(i)}), now.Add(2*signInWindow))
	}
	if _, blocked := th.blocked(netip.MustParseAddr("2001:db8::ffff"), now.Add(2*signInWindow)); !blocked {
		t.Error("ten failures from one IPv6 /64 did not block it")
	}
}
