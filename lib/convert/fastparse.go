package convert

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"io"
	"math"
	"strconv"
)

// Hand-rolled parsing for the hot path: encoding/csv allocates a record per
// line and time.Parse costs ~150 ns, which together cap conversion well below
// a million rows per second.

// lineReader returns lines without copying (valid until the next call) and
// counts them from 1.
type lineReader struct {
	r    *bufio.Reader
	line int64
	long []byte // lines longer than the bufio buffer are assembled here
}

func newLineReader(r *bufio.Reader) *lineReader { return &lineReader{r: r} }

// next returns the next line without its terminator ("\n" or "\r\n").
func (l *lineReader) next() ([]byte, error) {
	b, err := l.r.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		l.long = append(l.long[:0], b...)
		for err == bufio.ErrBufferFull {
			b, err = l.r.ReadSlice('\n')
			l.long = append(l.long, b...)
		}
		b = l.long
	}
	if err != nil && err != io.EOF {
		return nil, err
	}
	if len(b) == 0 && err == io.EOF {
		return nil, io.EOF
	}
	l.line++
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	return b, nil
}

// splitCSV splits one CSV line into fields, reusing dst. Lines without a
// quote take the fast path; quoted lines go through encoding/csv (a quoted
// field may not span lines).
func splitCSV(dst [][]byte, line []byte) ([][]byte, error) {
	dst = dst[:0]
	if bytes.IndexByte(line, '"') < 0 {
		for {
			i := bytes.IndexByte(line, ',')
			if i < 0 {
				return append(dst, line), nil
			}
			dst = append(dst, line[:i])
			line = line[i+1:]
		}
	}
	r := csv.NewReader(bytes.NewReader(line))
	r.FieldsPerRecord = -1
	rec, err := r.Read()
	if err != nil {
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			return nil, pe.Err
		}
		return nil, err
	}
	for _, f := range rec {
		dst = append(dst, []byte(f))
	}
	return dst, nil
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// parseInt parses a decimal integer; a ".0" suffix (pandas writes ints as
// floats) is accepted.
func parseInt(b []byte) (int64, bool) {
	b = trimSpace(b)
	if len(b) == 0 {
		return 0, false
	}
	neg := false
	if b[0] == '-' || b[0] == '+' {
		neg = b[0] == '-'
		b = b[1:]
		if len(b) == 0 {
			return 0, false
		}
	}
	var v int64
	i := 0
	for ; i < len(b); i++ {
		c := b[i]
		if c < '0' || c > '9' {
			break
		}
		if v > (math.MaxInt64-9)/10 {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	if i == 0 {
		return 0, false
	}
	if i < len(b) {
		if b[i] != '.' {
			return 0, false
		}
		for _, c := range b[i+1:] {
			if c != '0' {
				return 0, false
			}
		}
	}
	if neg {
		v = -v
	}
	return v, true
}

// parseTokens parses a non-negative token count that fits an int32.
func parseTokens(b []byte) (int32, bool) {
	v, ok := parseInt(b)
	if !ok || v < 0 || v > math.MaxInt32 {
		return 0, false
	}
	return int32(v), true
}

// parseScaled parses a decimal number (optionally with an exponent) and
// returns it multiplied by mult (e.g. 1e6 for seconds → µs), rounded to the
// nearest integer. Plain decimals are parsed exactly with integers so that
// "4.314579" seconds is exactly 4314579 µs.
func parseScaled(b []byte, mult int64) (int64, bool) {
	b = trimSpace(b)
	if len(b) == 0 {
		return 0, false
	}
	if bytes.ContainsAny(b, "eEnN") { // exponent, NaN, Inf: rare, take the slow path
		f, err := strconv.ParseFloat(string(b), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return 0, false
		}
		v := math.Round(f * float64(mult))
		if math.Abs(v) > 9e18 {
			return 0, false
		}
		return int64(v), true
	}
	neg := false
	if b[0] == '-' || b[0] == '+' {
		neg = b[0] == '-'
		b = b[1:]
	}
	var ip int64
	i, digits := 0, 0
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		if ip > (math.MaxInt64/mult-10)/10 { // keeps ip*mult + fraction within int64
			return 0, false
		}
		ip = ip*10 + int64(b[i]-'0')
		digits++
	}
	v := ip * mult
	if i < len(b) {
		if b[i] != '.' {
			return 0, false
		}
		i++
		scale := mult
		var frac int64
		roundDigit := -1
		for ; i < len(b); i++ {
			c := b[i]
			if c < '0' || c > '9' {
				return 0, false
			}
			digits++
			if scale >= 10 {
				scale /= 10
				frac += int64(c-'0') * scale
			} else if roundDigit < 0 {
				roundDigit = int(c - '0')
			}
		}
		if roundDigit >= 5 {
			frac++
		}
		v += frac
	}
	if digits == 0 {
		return 0, false
	}
	if neg {
		v = -v
	}
	return v, true
}

// parseTimestamp parses "YYYY-MM-DD[ T]HH:MM:SS[.fraction][Z|±HH:MM]" into
// microseconds since the Unix epoch. A timestamp without a zone is taken as
// UTC. Fractions beyond microseconds are truncated.
func parseTimestamp(b []byte) (int64, bool) {
	b = trimSpace(b)
	if len(b) < 19 || b[4] != '-' || b[7] != '-' || (b[10] != ' ' && b[10] != 'T') || b[13] != ':' || b[16] != ':' {
		return 0, false
	}
	d2 := func(p int) (int, bool) {
		c0, c1 := b[p]-'0', b[p+1]-'0'
		if c0 > 9 || c1 > 9 {
			return 0, false
		}
		return int(c0)*10 + int(c1), true
	}
	y1, ok1 := d2(0)
	y2, ok2 := d2(2)
	mo, ok3 := d2(5)
	d, ok4 := d2(8)
	h, ok5 := d2(11)
	mi, ok6 := d2(14)
	s, ok7 := d2(17)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && ok7) || mo < 1 || mo > 12 || d < 1 || d > daysIn(y1*100+y2, mo) || h > 23 || mi > 59 || s > 60 {
		return 0, false
	}
	us := int64(0)
	p := 19
	if p < len(b) && b[p] == '.' {
		p++
		scale := int64(100000)
		start := p
		for ; p < len(b) && b[p] >= '0' && b[p] <= '9'; p++ {
			us += int64(b[p]-'0') * scale
			scale /= 10
		}
		if p == start {
			return 0, false
		}
	}
	var off int64
	switch {
	case p == len(b):
	case b[p] == 'Z' && p+1 == len(b):
	case (b[p] == '+' || b[p] == '-') && (len(b)-p == 6 && b[p+3] == ':' || len(b)-p == 5 && b[p+3] != ':' || len(b)-p == 3):
		sign := int64(1)
		if b[p] == '-' {
			sign = -1
		}
		oh, ok := d2(p + 1)
		if !ok {
			return 0, false
		}
		om := 0
		if len(b)-p > 3 {
			q := p + 3
			if b[q] == ':' {
				q++
			}
			if om, ok = d2(q); !ok {
				return 0, false
			}
		}
		off = sign * int64(oh*3600+om*60)
	default:
		return 0, false
	}
	days := daysFromCivil(int64(y1*100+y2), int64(mo), int64(d))
	secs := days*86400 + int64(h*3600+mi*60+s) - off
	return secs*1_000_000 + us, true
}

func daysIn(y, m int) int {
	switch m {
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// daysFromCivil is Howard Hinnant's algorithm: days since 1970-01-01.
func daysFromCivil(y, m, d int64) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	if y < 0 && y%400 != 0 {
		era--
	}
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}
