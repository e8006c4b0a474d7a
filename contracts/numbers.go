package contracts

import (
	"encoding/json"
	"strconv"
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

// numberInRange rejects literals that validators cannot handle safely:
// beyond float64 range, with huge exponents (big.Rat refuses them and the
// schema library then crashes) or absurdly long.
func numberInRange[S literal](s S) bool {
	if len(s) > 512 {
		return false
	}
	hasExp := false
	for i := 0; i < len(s); i++ {
		if s[i] == 'e' || s[i] == 'E' {
			hasExp = true
			break
		}
	}
	// Short literals without exponent always fit a float64.
	if len(s) < 300 && !hasExp {
		return validNumberLiteral(s)
	}
	d, ok := parseDecimal(s)
	if !ok || d.exp > 1000 || d.exp < -1000 {
		return false
	}
	_, err := strconv.ParseFloat(string(s), 64)
	return err == nil
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
