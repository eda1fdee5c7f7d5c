// Package yamlcheck checks a YAML document against the Go type it will be
// decoded into, so that a mistake is reported in the user's words: the
// file, line and key path, the valid keys with a "did you mean" for a
// likely typo, and what kind of value was expected. yaml.v3's own errors
// name Go types ("field replica not found in type engine.Config").
package yamlcheck

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Scalar is a type written as one scalar (a duration "90s"); YAMLScalar
// describes it for messages ("a duration such as 90s, 10m or 1h").
type Scalar interface{ YAMLScalar() string }

// ScalarForm is a mapping type that also has a one-scalar shorthand (a
// distribution written as a bare number); YAMLScalarForm says what is
// wrong with a scalar it does not accept.
type ScalarForm interface{ YAMLScalarForm(value string) error }

// Check walks node (a document's root mapping) against t, the struct it
// decodes into, and returns the first problem as "name:line: key.path:
// message", and the line of every key path it saw ("engine.kv_blocks",
// "deployments[0].id"). Types with their own UnmarshalYAML are checked as
// structs when written as a mapping and left to themselves otherwise.
func Check(name string, node *yaml.Node, t reflect.Type) (map[string]int, error) {
	w := walker{name: name, lines: map[string]int{}}
	if node.Kind == yaml.DocumentNode {
		if len(node.Content) == 0 {
			return w.lines, nil
		}
		node = node.Content[0]
	}
	w.walk(node, t, "")
	return w.lines, w.err
}

// Keys returns the YAML keys of struct type t, in field order.
func Keys(t reflect.Type) []string { return structKeys(t) }

// walker checks a YAML tree against the Go types it decodes into.
type walker struct {
	name  string
	lines map[string]int
	err   error
}

var (
	unmarshalerType    = reflect.TypeOf((*yaml.Unmarshaler)(nil)).Elem()
	oldUnmarshalerType = reflect.TypeOf((*interface {
		UnmarshalYAML(func(any) error) error
	})(nil)).Elem()
	scalarType     = reflect.TypeOf((*Scalar)(nil)).Elem()
	scalarFormType = reflect.TypeOf((*ScalarForm)(nil)).Elem()
)

func unmarshals(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return p.Implements(unmarshalerType) || p.Implements(oldUnmarshalerType)
}

func (w *walker) fail(line int, path, format string, args ...any) {
	if w.err == nil {
		w.err = fmt.Errorf("%s:%d: %s: %s", w.name, line, path, fmt.Sprintf(format, args...))
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func (w *walker) walk(n *yaml.Node, t reflect.Type, path string) {
	if w.err != nil {
		return
	}
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(scalarType) {
		if n.Kind != yaml.ScalarNode {
			w.fail(n.Line, path, "expected %s, found a %s", reflect.New(t).Interface().(Scalar).YAMLScalar(), kindName(n))
		} else if reflect.PointerTo(t).Implements(scalarFormType) {
			// A scalar type may also refuse some values by key (a negative duration).
			if err := reflect.New(t).Interface().(ScalarForm).YAMLScalarForm(n.Value); err != nil {
				w.fail(n.Line, path, "%v", err)
			}
		}
		return
	}
	if n.Kind == yaml.ScalarNode && reflect.PointerTo(t).Implements(scalarFormType) {
		if err := reflect.New(t).Interface().(ScalarForm).YAMLScalarForm(n.Value); err != nil {
			w.fail(n.Line, path, "%v", err)
		}
		return
	}
	if unmarshals(t) && (t.Kind() != reflect.Struct || n.Kind != yaml.MappingNode) {
		return // the type reads other forms itself (a number for a distribution)
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			w.fail(n.Line, path, "expected a mapping of keys (%s), found %s", strings.Join(structKeys(t), ", "), describe(n))
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			f, ok := fieldByTag(t, k.Value)
			p := join(path, k.Value)
			if !ok {
				keys := structKeys(t)
				msg := fmt.Sprintf("unknown key (expected one of %s)", strings.Join(keys, ", "))
				if s := Suggest(k.Value, keys); s != "" {
					msg = fmt.Sprintf("unknown key; did you mean %s? (expected one of %s)", s, strings.Join(keys, ", "))
				}
				w.fail(k.Line, p, "%s", msg)
				return
			}
			w.lines[p] = k.Line
			w.walk(v, f.Type, p)
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			w.fail(n.Line, path, "expected a list, found %s", describe(n))
			return
		}
		for i, e := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			w.lines[p] = e.Line
			w.walk(e, t.Elem(), p)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			w.fail(n.Line, path, "expected a mapping, found %s", describe(n))
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			p := join(path, n.Content[i].Value)
			w.lines[p] = n.Content[i].Line
			w.walk(n.Content[i+1], t.Elem(), p)
		}
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			w.fail(n.Line, path, "expected a string, found %s", describe(n))
		}
	case reflect.Bool:
		if _, err := strconv.ParseBool(n.Value); n.Kind != yaml.ScalarNode || err != nil {
			w.fail(n.Line, path, "expected true or false, found %s", describe(n))
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if _, err := strconv.ParseInt(n.Value, 0, 64); n.Kind != yaml.ScalarNode || err != nil {
			w.fail(n.Line, path, "expected an integer, found %s", describe(n))
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if _, err := strconv.ParseUint(n.Value, 0, 64); n.Kind != yaml.ScalarNode || err != nil {
			w.fail(n.Line, path, "expected a non-negative integer, found %s", describe(n))
		}
	case reflect.Float32, reflect.Float64:
		_, err := strconv.ParseFloat(n.Value, 64)
		if err != nil && (n.Tag == "!!float" || n.Tag == "!!int") {
			err = nil // YAML's own forms: .inf, 0x1p3, 1_000
		}
		if n.Kind != yaml.ScalarNode || err != nil {
			w.fail(n.Line, path, "expected a number, found %s", describe(n))
		}
	}
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	}
	return "value"
}

func describe(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode {
		return strconv.Quote(n.Value)
	}
	return "a " + kindName(n)
}

// key is the YAML key of a field as yaml.v3 names it ("" to skip), and
// whether the field is inlined.
func key(f reflect.StructField) (string, bool) {
	if !f.IsExported() && !f.Anonymous { // yaml.v3 also reads embedded unexported structs
		return "", false
	}
	tag := f.Tag.Get("yaml")
	name, opts, _ := strings.Cut(tag, ",")
	if name == "-" {
		return "", false
	}
	if strings.Contains(","+opts+",", ",inline,") {
		return "", true
	}
	if name == "" {
		name = strings.ToLower(f.Name)
	}
	return name, false
}

func fieldByTag(t reflect.Type, k string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, inline := key(f)
		if inline {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				if g, ok := fieldByTag(ft, k); ok {
					return g, true
				}
			}
			continue
		}
		if name != "" && name == k {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func structKeys(t reflect.Type) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, inline := key(f)
		if inline {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				out = append(out, structKeys(ft)...)
			}
			continue
		}
		if name != "" {
			out = append(out, name)
		}
	}
	return out
}

// Suggest returns the option closest to word when it is close enough to be
// a likely typo ("" otherwise): edit distance at most a third of the
// word's length (at least 1), ties to the first option.
func Suggest(word string, options []string) string {
	best, bd := "", 1<<30
	for _, o := range options {
		if d := editDistance(strings.ToLower(word), strings.ToLower(o)); d < bd {
			best, bd = o, d
		}
	}
	if bd <= max(1, len(word)/3) {
		return best
	}
	return ""
}

// editDistance is the optimal-string-alignment distance: insertions,
// deletions, substitutions and swaps of neighbours ("modle") cost 1.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// Decode checks data against v's type (see Check) and decodes it into v, a
// pointer to a struct, refusing unknown keys. Syntax errors and the
// decoder's own errors are worded like Check's ("name:3: expected a
// number, found \"x\""). An empty document is io.EOF.
func Decode(name string, data []byte, v any) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return Clean(name, err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 || doc.Content[0].Tag == "!!null" {
		return io.EOF
	}
	if _, err := Check(name, &doc, reflect.TypeOf(v).Elem()); err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		return Clean(name, err)
	}
	return nil
}

var (
	lineRE    = regexp.MustCompile(`^line (\d+): `)
	unknownRE = regexp.MustCompile(`field (\S+) not found in type \S+`)
	typeRE    = regexp.MustCompile("cannot unmarshal !!\\w+ `(.*)` into (\\S+)")
)

// goKinds words the Go types yaml.v3 names in its errors.
var goKinds = map[string]string{
	"int": "an integer", "int8": "an integer", "int16": "an integer", "int32": "an integer", "int64": "an integer",
	"uint": "a non-negative integer", "uint8": "a non-negative integer", "uint16": "a non-negative integer",
	"uint32": "a non-negative integer", "uint64": "a non-negative integer",
	"float32": "a number", "float64": "a number", "bool": "true or false", "string": "a string",
}

// Clean rewords a yaml.v3 error: "name:LINE: message" per problem, Go types
// replaced by what the user must write.
func Clean(name string, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: unmarshal errors:\n")
	msg = strings.TrimPrefix(msg, "yaml: ")
	lines := strings.Split(msg, "\n")
	for i, l := range lines {
		l = strings.TrimSpace(l)
		l = unknownRE.ReplaceAllString(l, "unknown key $1")
		l = typeRE.ReplaceAllStringFunc(l, func(m string) string {
			sm := typeRE.FindStringSubmatch(m)
			want, ok := goKinds[sm[2]]
			if !ok {
				if strings.HasPrefix(sm[2], "[]") {
					want = "a list"
				} else {
					want = "a mapping"
				}
			}
			return fmt.Sprintf("expected %s, found %q", want, sm[1])
		})
		if sm := lineRE.FindStringSubmatch(l); sm != nil {
			l = name + ":" + sm[1] + ": " + l[len(sm[0]):]
		} else {
			l = name + ": " + l
		}
		lines[i] = l
	}
	return errors.New(strings.Join(lines, "\n"))
}
