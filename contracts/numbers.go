package contracts

import (
	"encoding/json"

	"github.com/relais/relais/internal/jsontree"
)

// Numbers are compared as exact decimals straight from their JSON literal:
// float64 would blur bounds such as 100.00000000000000001 against 100, and
// big.Rat allocates and refuses large exponents. The helpers are generic
// so that the validator's fast path can work on raw bytes without copying.

type literal interface{ ~string | ~[]byte }

// decimal is a JSON number literal split into digit runs:
// value = ±(ip.fp) × 10^exp.
type decimal[S literal] struct {
	neg    bool
	ip, fp S
	exp    int
}

// expLimit saturates exponents so that hostile literals cannot overflow.
const expLimit = 1 << 30

// parseDecimal splits a literal that follows the JSON number grammar.
func parseDecimal[S literal](s S) (decimal[S], bool) {
	var d decimal[S]
	i := 0
	if i < len(s) && s[i] == '-' {
		d.neg = true
		i++
	}
	start := i
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	default:
		return d, false
	}
	d.ip = s[start:i]
	if i < len(s) && s[i] == '.' {
		i++
		start = i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == start {
			return d, false
		}
		d.fp = s[start:i]
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		neg := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			neg = s[i] == '-'
			i++
		}
		start = i
		e := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			if e < expLimit {
				e = e*10 + int(s[i]-'0')
			}
			i++
		}
		if i == start {
			return d, false
		}
		if neg {
			e = -e
		}
		d.exp = e
	}
	return d, i == len(s)
}

// digit returns the i-th digit of ip followed by fp, '0' past the end.
func (d decimal[S]) digit(i int) byte {
	if i < len(d.ip) {
		return d.ip[i]
	}
	i -= len(d.ip)
	if i < len(d.fp) {
		return d.fp[i]
	}
	return '0'
}

// norm returns the index of the first significant digit, the digit count,
// and the position of the decimal point relative to that first digit
// (value = 0.ddd × 10^point). zero is true when every digit is 0.
func (d decimal[S]) norm() (lead, n, point int, zero bool) {
	n = len(d.ip) + len(d.fp)
	for lead < n && d.digit(lead) == '0' {
		lead++
	}
	if lead == n {
		return lead, n, 0, true
	}
	return lead, n, len(d.ip) - lead + d.exp, false
}

func (d decimal[S]) integral() bool {
	lead, n, point, zero := d.norm()
	if zero {
		return true
	}
	for i := lead + max(point, 0); i < n; i++ {
		if d.digit(i) != '0' {
			return false
		}
	}
	return true
}

func cmpDecimal[S, T literal](a decimal[S], b decimal[T]) int {
	la, na, pa, za := a.norm()
	lb, nb, pb, zb := b.norm()
	sa, sb := sign(a.neg, za), sign(b.neg, zb)
	if sa != sb {
		if sa < sb {
			return -1
		}
		return 1
	}
	if sa == 0 {
		return 0
	}
	// Same sign, both non-zero: compare magnitudes, then apply the sign.
	m := 0
	switch {
	case pa > pb:
		m = 1
	case pa < pb:
		m = -1
	default:
		for k := 0; la+k < na || lb+k < nb; k++ {
			da, db := a.digit(la+k), b.digit(lb+k)
			if da != db {
				if da > db {
					m = 1
				} else {
					m = -1
				}
				break
			}
		}
	}
	return m * sa
}

func sign(neg, zero bool) int {
	switch {
	case zero:
		return 0
	case neg:
		return -1
	}
	return 1
}

// validNumberLiteral reports whether s follows the JSON number grammar.
func validNumberLiteral[S literal](s S) bool {
	_, ok := parseDecimal(s)
	return ok
}

// MaxNumberOrder bounds the magnitude of a nonzero number: at least
// 1e-40, below 1e41. PostgreSQL stores numbers as numeric and writes them
// out in full, so a wider range would let a short literal come back
// hundreds of times longer (1e-999, six bytes, read back as a thousand
// digits, on every read of the value); the range holds the constants of
// physics and any amount of money.
const MaxNumberOrder = 40

// MaxNumberLiteral is the longest number literal taken, in characters
// (whatever its value: 0.1 written with 600 digits is refused).
const MaxNumberLiteral = 512

// literalTooLong reports whether s is longer than MaxNumberLiteral even
// written in its shortest form: PostgreSQL writes a value out with its
// scale's zeros (1.000…e-40 read back as 0.0000…1000…), and a value taken
// from one node's outputs must pass the next node's inputs.
func literalTooLong[S literal](s S) bool {
	return len(s) > MaxNumberLiteral && len(jsontree.CanonicalNumber(string(s))) > MaxNumberLiteral
}

// numberInRange rejects literals that validators cannot handle safely or
// that PostgreSQL would store many times longer: a magnitude outside
// MaxNumberOrder (which also keeps them within float64 range, and away
// from the huge exponents big.Rat refuses, which then crash the schema
// library), or an absurdly long literal.
func numberInRange[S literal](s S) bool {
	if literalTooLong(s) {
		return false
	}
	d, ok := parseDecimal(s)
	if !ok {
		return false
	}
	order, nonzero := d.order()
	return !nonzero || (order >= -MaxNumberOrder && order <= MaxNumberOrder)
}

// order is the decimal order of magnitude of d's value (the exponent of
// its leading digit: 2 for 123, -3 for 0.001); nonzero is false for zero.
func (d decimal[S]) order() (order int, nonzero bool) {
	ip := d.ip
	for len(ip) > 0 && ip[0] == '0' {
		ip = ip[1:]
	}
	if len(ip) > 0 {
		return len(ip) - 1 + d.exp, true
	}
	for k := 0; k < len(d.fp); k++ {
		if d.fp[k] != '0' {
			return d.exp - (k + 1), true
		}
	}
	return 0, false
}

// isIntegral reports whether a JSON number literal denotes an integer.
func isIntegral(n json.Number) bool {
	d, ok := parseDecimal(string(n))
	return ok && d.integral()
}

// compareNumbers compares two JSON number literals exactly. Malformed
// literals (only possible in hand-built models) compare as zero.
func compareNumbers(a, b json.Number) int {
	da, ok := parseDecimal(string(a))
	if !ok {
		da = decimal[string]{}
	}
	db, ok := parseDecimal(string(b))
	if !ok {
		db = decimal[string]{}
	}
	return cmpDecimal(da, db)
}
