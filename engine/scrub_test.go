package engine

import "testing"

func TestRedactCode(t *testing.T) {
	t.Parallel()
	protected := []string{"tok-S3CR3T-7f3a", "5", "1234", "737"}
	for code, want := range map[string]string{
		"tok-S3CR3T-7f3a":        redactedCode, // the value itself
		"AUTH_tok-S3CR3T-7f3a":   redactedCode, // holding it
		"tok-s3cr3t-7f3a":        redactedCode, // in another letter case
		"AUTH_TOK-S3CR3T-7F3A":   redactedCode,
		"PIN_1234_REFUSED":       redactedCode, // a value of minCodeMatch characters
		"5":                      redactedCode, // a short value only as the whole code
		"HTTP_503":               "HTTP_503",   // holds "5", too short to look for inside
		"CVV_737_REJECTED":       redactedCode, // a short value as a piece of the code
		"CVV737":                 redactedCode, // … or a run of digits among letters
		"ERR737X":                redactedCode,
		"E7370":                  "E7370", // … but not inside a longer piece
		"ERR.5":                  redactedCode,
		"CRM_DOWN":               "CRM_DOWN",
		"destination_unreliable": "destination_unreliable",
	} {
		if got := redactCode(code, protected); got != want {
			t.Errorf("redactCode(%q) = %q, want %q", code, got, want)
		}
	}
}
