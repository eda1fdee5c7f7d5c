package trace

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// Every row of an in-memory table decodes as the streaming reader decodes
// it, across batch boundaries, in IPC files and streams; a bad row names
// its row in the table.
func TestRequestTableRowsMatchReader(t *testing.T) {
	dir := t.TempDir()
	n := 2*BatchRows + 7
	for _, ext := range []string{".arrows", ".arrow"} {
		p := filepath.Join(dir, "t"+ext)
		if err := writeAll(t, p, n, false); err != nil {
			t.Fatal(err)
		}
		src, err := Open(p, nil)
		if err != nil {
			t.Fatal(err)
		}
		want, err := ReadAllRequests(src)
		src.Close()
		if err != nil {
			t.Fatal(err)
		}
		src, err = Open(p, nil)
		if err != nil {
			t.Fatal(err)
		}
		tab, err := ReadRequestTable(src)
		if err != nil {
			t.Fatal(err)
		}
		if tab.Len() != n || len(want) != n {
			t.Fatalf("%s: table of %d rows, reader %d, want %d", ext, tab.Len(), len(want), n)
		}
		var r Request
		for _, i := range []int{0, 1, BatchRows - 1, BatchRows, BatchRows + 1, 2 * BatchRows, n - 1} {
			if err := tab.Row(i, &r); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(r, want[i]) {
				t.Fatalf("%s row %d: table %+v, reader %+v", ext, i, r, want[i])
			}
		}
		tab.Release()
		src.Close()
	}

	bad := sampleRequests(40)
	bad[33].OutputTokens = -1
	p := filepath.Join(dir, "bad.arrows")
	f, err := Create(p, nil, RequestsSchema(NewMeta()))
	if err != nil {
		t.Fatal(err)
	}
	w := NewRequestWriter(f, RequestsSchema(NewMeta()))
	for i := range bad {
		w.Write(&bad[i])
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	src, err := Open(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	tab, err := ReadRequestTable(src)
	if err != nil {
		t.Fatal(err)
	}
	var r Request
	err = tab.Row(33, &r)
	var re *RowError
	if !errors.As(err, &re) || re.Row != 34 || !strings.Contains(err.Error(), "bad.arrows: row 34 (request "+bad[33].ID) || !strings.Contains(err.Error(), "output_tokens") {
		t.Fatalf("row 34: got %v", err)
	}
}
