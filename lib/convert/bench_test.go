package convert

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"syscall"
	"testing"
	"time"
)

// azureLike generates n rows in the Azure 2023 format whose inter-arrival
// gaps and (context, generated) pairs are drawn from the real file's slice.
func azureLike(tb testing.TB, n int) []byte {
	f, err := os.Open("testdata/azure2023_code.head2000.csv")
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	lr := newLineReader(bufio.NewReader(f))
	lr.next() // header
	var (
		gaps  []int64
		pairs [][2][]byte
		prev  int64 = -1
	)
	for {
		line, err := lr.next()
		if err == io.EOF {
			break
		}
		fs, _ := splitCSV(nil, line)
		t, _ := parseTimestamp(fs[0])
		if prev >= 0 {
			gaps = append(gaps, t-prev)
		}
		prev = t
		pairs = append(pairs, [2][]byte{append([]byte(nil), fs[1]...), append([]byte(nil), fs[2]...)})
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var buf bytes.Buffer
	buf.WriteString("TIMESTAMP,ContextTokens,GeneratedTokens\n")
	t := time.Date(2023, 11, 16, 18, 17, 3, 979960000, time.UTC)
	for i := 0; i < n; i++ {
		if i > 0 {
			t = t.Add(time.Duration(gaps[rng.IntN(len(gaps))]) * time.Microsecond)
		}
		p := pairs[rng.IntN(len(pairs))]
		fmt.Fprintf(&buf, "%s%07d,%s,%s\n", t.Format("2006-01-02 15:04:05."), t.Nanosecond()/100, p[0], p[1])
	}
	return buf.Bytes()
}

// BenchmarkConvertAzure1M converts a generated 1,000,000-row Azure CSV to an
// Arrow stream (discarded) on one goroutine.
func BenchmarkConvertAzure1M(b *testing.B) {
	const rows = 1_000_000
	data := azureLike(b, rows)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		st, err := Convert(Options{Format: "azure"}, "-", bytes.NewReader(data), io.Discard)
		if err != nil {
			b.Fatal(err)
		}
		if st.Written != rows {
			b.Fatalf("wrote %d rows", st.Written)
		}
	}
	b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	// On a shared machine wall time includes waiting for a CPU; rows per
	// CPU-second is the single-core figure.
	b.ReportMetric(float64(rows)*float64(b.N)/(cpuTime()-cpu0).Seconds(), "rows/cpu-s")
}

// cpuTime is the process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
