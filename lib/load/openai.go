package load

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// API names the OpenAI endpoint requests go to.
type API string

const (
	// Completions is POST /completions with a token-id prompt: exact
	// prompt lengths.
	Completions API = "completions"
	// Chat is POST /chat/completions with a text prompt of one word per
	// token: approximate lengths (plus the chat template).
	Chat API = "chat"
)

// Path returns the endpoint's path under the base URL.
func (a API) Path() string {
	if a == Chat {
		return "/chat/completions"
	}
	return "/completions"
}

// Extensions are request fields beyond OpenAI's that a server may reject.
type Extensions struct {
	// IgnoreEOS sends vLLM's min_tokens = max_tokens and ignore_eos, so
	// the server generates exactly the requested number of tokens.
	IgnoreEOS bool
	// Usage sends stream_options.include_usage, so the server reports the
	// token counts it used in the last chunk.
	Usage bool
}

// body appends the JSON request body for a prompt of ids (completions) or
// text (chat) asking for maxTokens tokens.
func appendBody(dst []byte, api API, model []byte, ids []uint32, text []byte, maxTokens int, ext Extensions) []byte {
	dst = append(dst, `{"model":`...)
	dst = append(dst, model...)
	if api == Chat {
		dst = append(dst, `,"messages":[{"role":"user","content":`...)
		dst = appendJSONString(dst, text)
		dst = append(dst, `}]`...)
	} else {
		dst = append(dst, `,"prompt":[`...)
		for i, id := range ids {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = strconv.AppendUint(dst, uint64(id), 10)
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `,"max_tokens":`...)
	dst = strconv.AppendInt(dst, int64(maxTokens), 10)
	dst = append(dst, `,"stream":true`...)
	if ext.Usage {
		dst = append(dst, `,"stream_options":{"include_usage":true}`...)
	}
	if ext.IgnoreEOS {
		dst = append(dst, `,"min_tokens":`...)
		dst = strconv.AppendInt(dst, int64(maxTokens), 10)
		dst = append(dst, `,"ignore_eos":true`...)
	}
	return append(dst, '}')
}

func appendJSONString(dst, s []byte) []byte {
	b, _ := json.Marshal(string(s)) // a string always marshals
	return append(dst, b...)
}

// usage is the token accounting a server reports (OpenAI's usage object;
// cached_tokens is in prompt_tokens_details, which vLLM fills when started
// with --enable-prompt-tokens-details).
type usage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

// chunk is what blis-load reads of one streamed event: whether it carries
// generated text, whether the choice finished, the usage and any error.
type chunk struct {
	Choices []struct {
		Text  *string `json:"text"`
		Delta *struct {
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
			Reasoning        *string `json:"reasoning"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *usage          `json:"usage"`
	Error json.RawMessage `json:"error"`
	// Some servers send a bare {"object":"error","message":...}.
	Object  string `json:"object"`
	Message string `json:"message"`
}

// decoded is one event's meaning.
type decoded struct {
	tokens   bool // carries generated text (content, reasoning or completion text)
	finished bool // a choice reported its finish_reason
	usage    *usage
	errMsg   string // the server reported an error in the stream
	// completion: the event had choices or usage (other JSON objects are
	// ignored during a run; the probe requires completion chunks).
	completion bool
}

// decodeChunk reads one data payload of a completion stream: the common
// shape by scanChunk, the rest by encoding/json.
func decodeChunk(data []byte) (decoded, error) {
	if d, ok := scanChunk(data); ok {
		return d, nil
	}
	return decodeChunkJSON(data)
}

// decodeChunkJSON reads a chunk with encoding/json: what scanChunk leaves.
func decodeChunkJSON(data []byte) (decoded, error) {
	var c chunk
	if err := json.Unmarshal(data, &c); err != nil {
		return decoded{}, fmt.Errorf("not a JSON completion chunk: %v (data %s)", err, clip(data, 120))
	}
	var d decoded
	if len(c.Error) > 0 && !bytes.Equal(c.Error, []byte("null")) {
		d.errMsg = errorText(c.Error)
		return d, nil
	}
	if c.Object == "error" {
		d.errMsg = c.Message
		if d.errMsg == "" {
			d.errMsg = string(clip(data, 200))
		}
		return d, nil
	}
	for _, ch := range c.Choices {
		if ch.Text != nil && *ch.Text != "" {
			d.tokens = true
		}
		if dl := ch.Delta; dl != nil {
			for _, s := range []*string{dl.Content, dl.ReasoningContent, dl.Reasoning} {
				if s != nil && *s != "" {
					d.tokens = true
				}
			}
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			d.finished = true
		}
	}
	d.completion = c.Choices != nil || c.Usage != nil
	d.usage = c.Usage
	return d, nil
}

// errorText extracts a server's error message from an error value or
// body: OpenAI's {"error":{"message":...}}, {"error":"..."}, FastAPI's
// {"detail":...}, {"message":...}, or the text itself.
func errorText(b []byte) string {
	b = bytes.TrimSpace(b)
	var v any
	if json.Unmarshal(b, &v) == nil {
		if s := findMessage(v, 0); s != "" {
			return oneLine(s, 300)
		}
	}
	return oneLine(string(b), 300)
}

func findMessage(v any, depth int) string {
	if depth > 3 {
		return ""
	}
	switch x := v.(type) {
	case string:
		return x
	case map[string]any:
		for _, k := range []string{"message", "error", "detail", "msg"} {
			if s := findMessage(x[k], depth+1); s != "" {
				return s
			}
		}
	case []any:
		if len(x) > 0 {
			return findMessage(x[0], depth+1)
		}
	}
	return ""
}

// oneLine shortens s to at most n bytes on one line (valid UTF-8).
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		s += "…"
	}
	return s
}

func clip(b []byte, n int) []byte {
	if len(b) > n {
		return append(append([]byte(nil), b[:n]...), "..."...)
	}
	return b
}
