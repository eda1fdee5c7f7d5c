package sweep

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The keys an axis may name come from the Go types the real parsers decode
// into (their yaml tags), so a key added to the cluster config or the
// workload spec is sweepable at once, and a typo is caught before any run
// with the valid keys at that level. Values are still checked by the real
// parsers. Reflection runs once per axis at plan time, never per run.

var unmarshalerType = reflect.TypeOf((*yaml.Unmarshaler)(nil)).Elem()

// fieldsOf lists the yaml keys of struct type t with their types.
func fieldsOf(t reflect.Type) (names []string, types map[string]reflect.Type) {
	types = map[string]reflect.Type{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			tag := f.Tag.Get("yaml")
			name, opts, _ := strings.Cut(tag, ",")
			if name == "-" {
				continue
			}
			if strings.Contains(opts, "inline") {
				ft := f.Type
				for ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if ft.Kind() == reflect.Struct {
					walk(ft)
				}
				continue
			}
			if name == "" {
				name = strings.ToLower(f.Name)
			}
			if _, dup := types[name]; !dup {
				names = append(names, name)
			}
			types[name] = f.Type
		}
	}
	walk(t)
	return names, types
}

// opaque reports whether values of t decode themselves from a scalar (a
// duration): keys below them are the parser's business. A struct that
// decodes itself (to fill defaults, or to accept a bare number too) still
// has its tagged fields as keys.
func opaque(t reflect.Type) bool {
	if t.Kind() == reflect.Struct {
		return false
	}
	return t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) || t.Implements(oldUnmarshalerType) || reflect.PointerTo(t).Implements(oldUnmarshalerType)
}

// oldUnmarshalerType is yaml's function-style decoder hook (synth.Dist).
var oldUnmarshalerType = reflect.TypeOf((*interface {
	UnmarshalYAML(func(any) error) error
})(nil)).Elem()

// checkKeys walks path p over the schema of type t and the document doc (the
// base file, for list lengths). It returns the Go type at the end of the
// path (nil when a part of the path is decoded by a custom parser), or an
// error naming the first key that does not exist, with a suggestion.
func checkKeys(t reflect.Type, doc *yaml.Node, p []elem, what string) (reflect.Type, error) {
	for i, e := range p {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if opaque(t) {
			return nil, nil
		}
		here := pathString(p[:i])
		if here == "" {
			here = what
		}
		switch t.Kind() {
		case reflect.Struct:
			if e.isIdx {
				return nil, fmt.Errorf("%s is a mapping, not a list: [%d] cannot index it", here, e.index)
			}
			names, types := fieldsOf(t)
			ft, ok := types[e.key]
			if !ok {
				return nil, unknownKey(e.key, here, names)
			}
			t = ft
		case reflect.Map:
			if e.isIdx {
				return nil, fmt.Errorf("%s is a mapping, not a list: [%d] cannot index it", here, e.index)
			}
			t = t.Elem()
		case reflect.Slice, reflect.Array:
			if !e.isIdx {
				return nil, fmt.Errorf("%s is a list: name an element with [i] before .%s", here, e.key)
			}
			n := getPath(doc, p[:i])
			if n == nil || n.Kind != yaml.SequenceNode {
				return nil, fmt.Errorf("%s[%d]: the base file has no %s list to index", here, e.index, here)
			}
			if e.index >= len(n.Content) {
				return nil, fmt.Errorf("%s[%d]: the base file's %s has %d element(s) (indices 0..%d)", here, e.index, here, len(n.Content), len(n.Content)-1)
			}
			t = t.Elem()
		case reflect.Interface:
			return nil, nil
		default:
			return nil, fmt.Errorf("%s is a single value (%s): it has no key %s", here, kindName(t), e)
		}
	}
	return t, nil
}

func kindName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	}
	return t.String()
}

// intKind reports whether values at a key of type t must be integers.
func intKind(t reflect.Type) bool {
	if t == nil {
		return false
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if opaque(t) {
		return false
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

func unknownKey(key, where string, valid []string) error {
	sorted := append([]string(nil), valid...)
	sort.Strings(sorted)
	msg := fmt.Sprintf("unknown key %s in %s", key, where)
	if s := suggest(key, valid); s != "" {
		msg += fmt.Sprintf(" (did you mean %s?)", s)
	}
	return fmt.Errorf("%s; valid keys: %s", msg, strings.Join(sorted, ", "))
}
