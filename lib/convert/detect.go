package convert

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"
)

// Detect names the format of an input from its first bytes (the header line
// or the first JSON keys, never the file name alone). Known files that are
// not request traces get a *NotTraceError saying what they are.
func Detect(name string, head []byte, o *Options) (string, error) {
	head = trimBOM(head)
	trimmed := bytes.TrimLeft(head, " \t\r\n")
	if o != nil && o.Generic.TimeCol != "" {
		if len(trimmed) > 0 && trimmed[0] == '{' {
			return "jsonl", nil
		}
		return "csv", nil
	}
	if len(trimmed) == 0 {
		return "", usageErr("%s: empty input: expected a trace", name)
	}
	if isArrowBytes(trimmed) {
		return "arrow", nil
	}
	if what := compression(head); what != "" {
		return "", usageErr("%s: %s-compressed input: decompress it first (only gzip is read directly)", name, what)
	}
	if trimmed[0] == '[' && isInferencePerf(trimmed) {
		return "inference-perf", nil
	}
	if trimmed[0] == '{' || trimmed[0] == '[' {
		return detectJSON(name, trimmed)
	}
	return detectCSV(name, head)
}

// compression names a compressed format by its magic bytes (gzip is
// undone before detection).
func compression(b []byte) string {
	for _, m := range []struct{ magic, name string }{
		{"\x28\xb5\x2f\xfd", "zstd"}, {"BZh", "bzip2"}, {"\xfd7zXZ\x00", "xz"}, {"PK\x03\x04", "zip"},
		{"\x04\x22\x4d\x18", "lz4"}, {"7z\xbc\xaf\x27\x1c", "7z"},
	} {
		if bytes.HasPrefix(b, []byte(m.magic)) {
			return m.name
		}
	}
	return ""
}

// shorten quotes a header line for a message, cut at n bytes.
func shorten(b []byte, n int) string {
	if len(b) > n {
		return fmt.Sprintf("%q…", b[:n])
	}
	return fmt.Sprintf("%q", b)
}

func keySet(keys []string) map[string]bool {
	m := map[string]bool{}
	for _, k := range keys {
		m[k] = true
	}
	return m
}

func detectJSON(name string, b []byte) (string, error) {
	line := b
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		line = b[:i]
	}
	var first map[string]json.RawMessage
	if json.Unmarshal(bytes.TrimSpace(line), &first) == nil {
		keys := make([]string, 0, len(first))
		for k := range first {
			keys = append(keys, k)
		}
		k := keySet(keys)
		switch {
		case k["chat_id"] && k["input_length"]:
			return "qwen", nil
		case k["arrival_time"] && (k["first_token_ts"] || k["queued_ts"]):
			return "llmservingsim", nil
		case k["input_length"] && k["output_length"] && (k["timestamp"] || k["session_id"]):
			return "mooncake", nil
		}
		// One object on the first line may also be a one-line JSON document.
		if f, ok := detectDoc(k); ok {
			return f, nil
		} else if f != "" {
			return "", docNotTrace(name, f)
		}
		sort.Strings(keys)
		return "", usageErr("%s: unrecognised JSON lines with keys %s; give --format, or map columns with --time-col, --input-col, --output-col and --time-unit", name, strings.Join(keys, ", "))
	}
	keys := topKeys(b)
	if f, ok := detectDoc(keySet(keys)); ok {
		return f, nil
	} else if f != "" {
		return "", docNotTrace(name, f)
	}
	if len(keys) > 8 {
		keys = append(keys[:8], "…")
	}
	return "", usageErr("%s: unrecognised JSON document with keys %s; give --format (see blis-convert --help)", name, strings.Join(keys, ", "))
}

// detectDoc recognises a whole JSON document by its top-level keys. ok is
// false with a non-empty name for known non-trace documents.
func detectDoc(k map[string]bool) (string, bool) {
	switch {
	case k["requests"] && (k["block_size"] || k["hash_id_scope"]):
		return "weka", true
	case k["input_lens"] && (k["ttfts"] || k["output_lens"]):
		return "vllm-bench", true
	case k["spans"]:
		return "otel", true
	case k["trajectory"]:
		return "swe-agent", false
	}
	numeric := len(k) > 0
	for key := range k {
		if strings.Trim(key, "0123456789") != "" {
			numeric = false
		}
	}
	if numeric {
		return "servegen-dataset", false
	}
	return "", false
}

func docNotTrace(name, kind string) error {
	switch kind {
	case "swe-agent":
		return &NotTraceError{Path: name, What: "a SWE-agent trajectory",
			Why: "its steps record actions, observations and execution times but no token counts or request times; it can inform tool latencies in a blis-synth agentic workload"}
	case "servegen-dataset":
		return &NotTraceError{Path: name, What: "a ServeGen length-distribution file (per-window token-count histograms)",
			Why: "it describes distributions, not individual requests; use it as blis-synth input"}
	}
	return &NotTraceError{Path: name, What: kind, Why: "it has no per-request records"}
}

// topKeys lists the top-level keys of a (possibly truncated) JSON object.
func topKeys(b []byte) []string {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var keys []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			break
		}
		k, ok := t.(string)
		if !ok {
			break
		}
		keys = append(keys, k)
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			break
		}
	}
	return keys
}

func detectCSV(name string, head []byte) (string, error) {
	line := head
	if i := bytes.IndexByte(head, '\n'); i >= 0 {
		line = head[:i]
	}
	line = bytes.TrimRight(line, "\r")
	if !utf8.Valid(line) || bytes.IndexByte(line, 0) >= 0 {
		return "", usageErr("%s: unrecognised input: binary data, neither a CSV header nor JSON (starts %s)", name, shorten(line, 16))
	}
	fields, err := splitCSV(nil, line)
	if err != nil {
		return "", usageErr("%s: unrecognised input: the first line is neither JSON nor a CSV header", name)
	}
	cols := map[string]bool{}
	for _, f := range fields {
		cols[strings.ToLower(strings.TrimSpace(string(f)))] = true
	}
	switch {
	case cols["timestamp"] && cols["contexttokens"] && cols["generatedtokens"]:
		return "azure", nil
	case cols["timestamp"] && cols["request tokens"] && cols["response tokens"]:
		return "burstgpt", nil
	case cols["arrived_at"] && cols["num_prefill_tokens"] && cols["num_decode_tokens"]:
		return "vidur", nil
	case cols["num_prefill_tokens"] && cols["num_decode_tokens"]:
		return "", errLengthsOnly(name)
	case cols["arrival_timestamp"] && cols["prompt_size"] && cols["token_size"]:
		return "splitwise", nil
	case cols["window_start_s"] && cols["rate_rps"], isServeGenWindow(fields):
		return "", &NotTraceError{Path: name, What: "a ServeGen rate-window file (window start, rate, CV, inter-arrival distribution and its parameters)",
			Why: "it describes arrival processes per 10-minute window, not individual requests; use it as blis-synth input"}
	case cols["arrival_time"] || cols["running"] && cols["waiting"]:
		return "", &NotTraceError{Path: name, What: "an engine time series", Why: "it samples queue lengths over time rather than listing requests"}
	}
	return "", usageErr("%s: unrecognised CSV header %s; give --format, or map columns with --format csv --time-col C --input-col C --output-col C --time-unit s|ms|us|ns|iso", name, shorten(line, 200))
}

// isServeGenWindow recognises ServeGen's headerless
// "start,rate,cv,distribution,shape,scale" rows.
func isServeGenWindow(f [][]byte) bool {
	if len(f) != 6 {
		return false
	}
	for _, i := range []int{0, 1, 2, 4, 5} {
		if _, ok := parseScaled(f[i], 1); !ok {
			return false
		}
	}
	d := string(f[3])
	return d == "" || strings.Trim(d, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") == ""
}
