package convert

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"os"
	"strings"
	"testing"
)

func TestParseTimestamp(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"2023-11-16 18:17:03.9799600", 1700158623979960, true},
		{"2024-05-10 00:00:00.009930+00:00", 1715299200009930, true},
		{"2024-05-10 00:00:00+00:00", 1715299200000000, true},
		{"2024-10-15T12:00:00.269Z", 1728993600269000, true},
		{"2024-10-15T14:00:00.269+02:00", 1728993600269000, true},
		{"2024-10-15T07:30:00-0430", 1728993600000000, true},
		{"1970-01-01 00:00:00", 0, true},
		{"2024-02-29 00:00:00", 1709164800000000, true},
		{"2023-02-29 00:00:00", 0, false},
		{"2023-11-16 24:00:00", 0, false},
		{"2023-11-16 18:17:03.", 0, false},
		{"2023-11-16 18:17:03+05:3", 0, false},
		{"2023-11-16", 0, false},
		{"16/11/2023 18:17:03", 0, false},
	}
	for _, c := range cases {
		got, ok := parseTimestamp([]byte(c.in))
		if ok != c.ok || (ok && got != c.want) {
			t.Errorf("parseTimestamp(%q) = %d, %v; want %d, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestParseScaled(t *testing.T) {
	cases := []struct {
		in   string
		mult int64
		want int64
		ok   bool
	}{
		{"4.314579", 1e6, 4314579, true},
		{"19440110.0", 1e6, 19440110000000, true},
		{"0.0000005", 1e6, 1, true}, // rounds half up
		{"0.0000004", 1e6, 0, true},
		{"-3.5", 1e6, -3500000, true},
		{"1e3", 1000, 1000000, true},
		{" 12 ", 1000, 12000, true},
		{"", 1, 0, false},
		{".", 1, 0, false},
		{"1.2.3", 1, 0, false},
		{"NaN", 1, 0, false},
		{"99999999999999999999", 1, 0, false},
	}
	for _, c := range cases {
		got, ok := parseScaled([]byte(c.in), c.mult)
		if ok != c.ok || (ok && got != c.want) {
			t.Errorf("parseScaled(%q, %d) = %d, %v; want %d, %v", c.in, c.mult, got, ok, c.want, c.ok)
		}
	}
}

func TestParseInt(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "42": 42, "42.0": 42, " 7 ": 7, "-3": -3} {
		if got, ok := parseInt([]byte(in)); !ok || got != want {
			t.Errorf("parseInt(%q) = %d, %v", in, got, ok)
		}
	}
	for _, in := range []string{"", "-", "4.5", "x", "9223372036854775808", "1e3"} {
		if _, ok := parseInt([]byte(in)); ok {
			t.Errorf("parseInt(%q) accepted", in)
		}
	}
}

func TestSplitCSV(t *testing.T) {
	cases := map[string][]string{
		"a,b,c":                 {"a", "b", "c"},
		"a,,c":                  {"a", "", "c"},
		`1,"Conversation, log"`: {"1", "Conversation, log"},
		`"a ""q""",b`:           {`a "q"`, "b"},
		"":                      {""},
	}
	for in, want := range cases {
		got, err := splitCSV(nil, []byte(in))
		if err != nil {
			t.Errorf("splitCSV(%q): %v", in, err)
			continue
		}
		var s []string
		for _, f := range got {
			s = append(s, string(f))
		}
		if strings.Join(s, "|") != strings.Join(want, "|") {
			t.Errorf("splitCSV(%q) = %q, want %q", in, s, want)
		}
	}
	if _, err := splitCSV(nil, []byte(`"open`)); err == nil {
		t.Error("unterminated quote accepted")
	}
}

func TestLineReaderLongLines(t *testing.T) {
	long := strings.Repeat("x", 100_000)
	lr := newLineReader(bufio.NewReaderSize(strings.NewReader("a\r\n"+long+"\nlast"), 16))
	for i, want := range []string{"a", long, "last"} {
		got, err := lr.next()
		if err != nil || string(got) != want || lr.line != int64(i+1) {
			t.Fatalf("line %d: %d bytes, %v", i+1, len(got), err)
		}
	}
	if _, err := lr.next(); err == nil {
		t.Error("expected EOF")
	}
}

func TestGzipInput(t *testing.T) {
	raw, err := os.ReadFile("testdata/azure2023_code.head12.csv")
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	w.Write(raw)
	w.Close()
	a, _, err := convertFiles(t, Options{Inputs: []string{"testdata/azure2023_code.head12.csv"}})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if _, err := Convert(Options{Inputs: []string{"-"}}, "-", &gz, &b); err != nil {
		t.Fatal(err)
	}
	if rowsOf(dump(t, a)) != strings.ReplaceAll(rowsOf(dump(t, b.Bytes())), "stdin:", "azure2023_code.head12.csv:") {
		t.Error("gzip input converts differently")
	}
}
