package push

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"
)

// SignatureHeader carries a signed destination's signature of a call.
const SignatureHeader = "Relais-Signature"

// Signature is the Relais-Signature of a call whose body is body, sent at
// t: "t=<Unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>" keyed by the
// secret>". The time is signed with the body, so a destination refuses a
// call replayed later than it tolerates (five minutes, say); v1 names the
// scheme, so that another can be sent beside it one day.
func Signature(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}
