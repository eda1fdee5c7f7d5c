package sweep

import (
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// elem is one step of an axis path: a mapping key or a sequence index.
type elem struct {
	key   string
	index int
	isIdx bool
}

func (e elem) String() string {
	if e.isIdx {
		return "[" + strconv.Itoa(e.index) + "]"
	}
	return e.key
}

// parsePath reads a dotted path with [i] indices: router.routing,
// deployments[0].pools[1].replicas, workload.clients[2].rate_fraction.
func parsePath(s string) ([]elem, error) {
	if s == "" {
		return nil, fmt.Errorf("empty key")
	}
	var out []elem
	i := 0
	for i < len(s) {
		// a key
		j := i
		for j < len(s) && s[j] != '.' && s[j] != '[' {
			c := s[j]
			if !(c == '_' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
				return nil, fmt.Errorf("key %q: unexpected %q at offset %d (keys are letters, digits, _ and -, joined by dots, with [i] indices)", s, string(c), j)
			}
			j++
		}
		if j == i {
			return nil, fmt.Errorf("key %q: empty name at offset %d", s, i)
		}
		out = append(out, elem{key: s[i:j]})
		i = j
		for i < len(s) && s[i] == '[' {
			k := strings.IndexByte(s[i:], ']')
			if k < 0 {
				return nil, fmt.Errorf("key %q: [ without ]", s)
			}
			n, err := strconv.Atoi(s[i+1 : i+k])
			if err != nil || n < 0 || n > 1<<20 {
				return nil, fmt.Errorf("key %q: index %q: expected a non-negative integer", s, s[i+1:i+k])
			}
			out = append(out, elem{index: n, isIdx: true})
			i += k + 1
		}
		if i < len(s) {
			if s[i] != '.' {
				return nil, fmt.Errorf("key %q: unexpected %q at offset %d", s, string(s[i]), i)
			}
			i++
			if i == len(s) {
				return nil, fmt.Errorf("key %q: ends with a dot", s)
			}
		}
	}
	return out, nil
}

func pathString(p []elem) string {
	var b strings.Builder
	for i, e := range p {
		if i > 0 && !e.isIdx {
			b.WriteByte('.')
		}
		b.WriteString(e.String())
	}
	return b.String()
}

// mapGet returns the value node of key in mapping m, or nil.
func mapGet(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func mapSet(m *yaml.Node, key string, v *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content[i+1] = v
			return
		}
	}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, v)
}

func newMap() *yaml.Node { return &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"} }

// setPath sets the node at p under root (a mapping) to v, creating missing
// mappings on the way. An index must name an existing element.
func setPath(root *yaml.Node, p []elem, v *yaml.Node) error {
	n := root
	for i, e := range p {
		last := i == len(p)-1
		if e.isIdx {
			if n.Kind != yaml.SequenceNode {
				return fmt.Errorf("%s is not a list", pathString(p[:i]))
			}
			if e.index >= len(n.Content) {
				return fmt.Errorf("%s has %d element(s): no index %d", pathString(p[:i]), len(n.Content), e.index)
			}
			if last {
				n.Content[e.index] = v
				return nil
			}
			n = n.Content[e.index]
			continue
		}
		if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
			// key: (empty) in the file: make it a mapping
			*n = *newMap()
		}
		if n.Kind != yaml.MappingNode {
			return fmt.Errorf("%s is not a mapping", pathString(p[:i]))
		}
		if last {
			mapSet(n, e.key, v)
			return nil
		}
		next := mapGet(n, e.key)
		if next == nil {
			if p[i+1].isIdx {
				return fmt.Errorf("%s is not in the file: an index needs an existing list", pathString(p[:i+1]))
			}
			next = newMap()
			mapSet(n, e.key, next)
		}
		n = next
	}
	return nil
}

// getPath returns the node at p under root, or nil.
func getPath(root *yaml.Node, p []elem) *yaml.Node {
	n := root
	for _, e := range p {
		if n == nil {
			return nil
		}
		if e.isIdx {
			if n.Kind != yaml.SequenceNode || e.index >= len(n.Content) {
				return nil
			}
			n = n.Content[e.index]
			continue
		}
		n = mapGet(n, e.key)
	}
	return n
}

// cloneNode deep-copies a YAML tree (aliases are copied by value).
func cloneNode(n *yaml.Node) *yaml.Node {
	if n == nil {
		return nil
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		return cloneNode(n.Alias)
	}
	c := *n
	c.Anchor = ""
	c.HeadComment, c.LineComment, c.FootComment = "", "", ""
	if len(n.Content) > 0 {
		c.Content = make([]*yaml.Node, len(n.Content))
		for i, k := range n.Content {
			c.Content[i] = cloneNode(k)
		}
	}
	return &c
}

// docRoot returns the top node of a parsed document.
func docRoot(n *yaml.Node) *yaml.Node {
	if n != nil && n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		return n.Content[0]
	}
	return n
}

// encodeNode renders a node as YAML (deterministic for the same tree).
func encodeNode(n *yaml.Node) ([]byte, error) {
	var b strings.Builder
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return []byte(b.String()), nil
}

// flowString renders a value for a table cell: a scalar as written, a list
// or mapping in YAML flow style on one line.
func flowString(n *yaml.Node) string {
	if n == nil {
		return ""
	}
	if n.Kind == yaml.ScalarNode {
		return n.Value
	}
	c := cloneNode(n)
	setFlow(c)
	b, err := encodeNode(c)
	if err != nil {
		return fmt.Sprint(n.Value)
	}
	return strings.TrimSpace(string(b))
}

func setFlow(n *yaml.Node) {
	n.Style |= yaml.FlowStyle
	for _, c := range n.Content {
		setFlow(c)
	}
}

// ValueString renders an axis value as the summary tables show it.
func ValueString(n *yaml.Node) string { return flowString(n) }
