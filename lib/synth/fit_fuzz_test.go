package synth

import (
	"encoding/binary"
	"strconv"
	"testing"

	"github.com/blis-sim/blis/lib/trace"
)

// FuzzFit: any requests table (rows decoded from the fuzz bytes: arrival,
// lengths, tenant, session, prefix hash) fits to a spec that parses, or
// to an error; never a panic or an invalid spec.
func FuzzFit(f *testing.F) {
	f.Add([]byte("\x00\x00\x10\x00\x20\x01\x00\x00\x00\x05\x00\x40\x00\x10\x02\x01\x00\x00\x00\x09\x00\x30\x00\x90\x01\x00\x00\x00"))
	f.Add([]byte("\x01\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var rows []trace.Request
		var at int64
		for i := 0; len(data) >= 8 && i < 400; i++ {
			r := trace.NewRequest("r" + strconv.Itoa(i))
			at += int64(binary.LittleEndian.Uint16(data[0:2])) * 997
			r.ArrivalUS = at
			r.InputTokens = int32(binary.LittleEndian.Uint16(data[2:4])) + 1
			r.OutputTokens = int32(data[4])
			r.TenantID = []string{"", "a", "a-1", "é,x", "b c", "a_1"}[data[5]%6]
			if data[6]%3 == 1 {
				r.SessionID = "s" + strconv.Itoa(int(data[6]%7))
			}
			if data[7]%2 == 1 {
				r.PrefixHashes = []uint64{uint64(data[7] % 5), uint64(data[6])}
			}
			rows = append(rows, r)
			data = data[8:]
		}
		y, err := FitSpec(rows, "fuzz.arrow")
		if err != nil {
			return
		}
		s, err := Parse([]byte(y), "fitted.yaml", ".")
		if err != nil {
			t.Fatalf("fitted spec does not parse: %v\n%s", err, y)
		}
		s.NumRequests = 200
		if _, err := Generate(s, func(*trace.Request) error { return nil }); err != nil {
			t.Fatal(err)
		}
	})
}
