package yamlcheck

import (
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

type inner struct {
	Rate float64 `yaml:"rate"`
}

type base struct {
	Seed uint64 `yaml:"seed"`
}

type doc struct {
	base     `yaml:",inline"`
	Name     string            `yaml:"name"`
	Replicas int               `yaml:"replicas"`
	Inner    *inner            `yaml:"inner"`
	List     []inner           `yaml:"list"`
	Labels   map[string]string `yaml:"labels"`
	Untagged bool
	Skipped  string `yaml:"-"`
}

func TestDecodeNamesKeysNotGoTypes(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"replica: 2\n", "f.yaml:1: replica: unknown key; did you mean replicas? (expected one of seed, name, replicas, inner, list, labels, untagged)"},
		{"nmae: x\n", "f.yaml:1: nmae: unknown key; did you mean name?"}, // a swap
		{"inner: {rat: 1}\n", "f.yaml:1: inner.rat: unknown key; did you mean rate? (expected one of rate)"},
		{"list:\n  - rate: 1\n  - rte: 2\n", "f.yaml:3: list[1].rte: unknown key; did you mean rate?"},
		{"replicas: many\n", `f.yaml:1: replicas: expected an integer, found "many"`},
		{"seed: -1\n", `f.yaml:1: seed: expected a non-negative integer, found "-1"`},
		{"inner: 3\n", `f.yaml:1: inner: expected a mapping of keys (rate), found "3"`},
		{"list: {rate: 1}\n", "f.yaml:1: list: expected a list, found a mapping"},
		{"untagged: maybe\n", `f.yaml:1: untagged: expected true or false, found "maybe"`},
		{"skipped: x\n", "f.yaml:1: skipped: unknown key"},
		{"name: [\n", "f.yaml:"},
	} {
		var d doc
		err := Decode("f.yaml", []byte(tc.in), &d)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.in, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "yamlcheck.") {
			t.Errorf("%q: names a Go type: %v", tc.in, err)
		}
	}
}

func TestDecodeGood(t *testing.T) {
	var d doc
	err := Decode("f.yaml", []byte("seed: 3\nname: a\nreplicas: 2\ninner: {rate: .inf}\nlist: [{rate: 1}]\nlabels: {x: y}\nuntagged: true\n"), &d)
	if err != nil {
		t.Fatal(err)
	}
	if d.Seed != 3 || d.Replicas != 2 || d.Inner == nil || !d.Untagged || d.Labels["x"] != "y" {
		t.Fatalf("decoded %+v", d)
	}
	if err := Decode("f.yaml", []byte("# nothing\n"), &d); !errors.Is(err, io.EOF) {
		t.Fatalf("empty document: %v, want io.EOF", err)
	}
}

func TestCleanWordsGoTypes(t *testing.T) {
	var v struct {
		N uint64 `yaml:"n"`
	}
	err := yaml.Unmarshal([]byte("n: abc\n"), &v)
	if got, want := Clean("s.yaml", err).Error(), `s.yaml:1: expected a non-negative integer, found "abc"`; got != want {
		t.Fatalf("Clean = %q, want %q", got, want)
	}
}

func TestSuggest(t *testing.T) {
	keys := []string{"model", "gpu", "replicas", "kv_blocks"}
	for word, want := range map[string]string{"modle": "model", "replica": "replicas", "kv_blokcs": "kv_blocks", "gpus": "gpu", "zzz": ""} {
		if got := Suggest(word, keys); got != want {
			t.Errorf("Suggest(%q) = %q, want %q", word, got, want)
		}
	}
}

func FuzzCheck(f *testing.F) {
	f.Add([]byte("replicas: 2\ninner: {rate: 1}\nlist: [{rate: 1}]\n"))
	f.Add([]byte("a: &x {b: *x}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var n yaml.Node
		if yaml.Unmarshal(data, &n) != nil {
			return
		}
		Check("f.yaml", &n, reflect.TypeOf(doc{}))
	})
}
