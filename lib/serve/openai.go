package serve

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
)

// body is what blis-serve reads of a completion request. Fields it does
// not know (temperature, top_p, …) are accepted and ignored: the
// simulator has no sampling.
type body struct {
	Model               string          `json:"model"`
	Prompt              json.RawMessage `json:"prompt"`
	Messages            []message       `json:"messages"`
	MaxTokens           *int64          `json:"max_tokens"`
	MaxCompletionTokens *int64          `json:"max_completion_tokens"`
	MinTokens           *int64          `json:"min_tokens"`
	IgnoreEOS           *bool           `json:"ignore_eos"`
	Stream              bool            `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	N *int64 `json:"n"`
}

type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// parsed is a request as the simulator sees it.
type parsed struct {
	chat   bool
	model  string
	input  int32
	output int32
	hashes []uint64
	stream bool
	usage  bool // stream_options.include_usage
}

// badRequest is a 400 with its message.
type badRequest struct{ msg string }

func (e *badRequest) Error() string { return e.msg }

func bad(format string, args ...any) error { return &badRequest{fmt.Sprintf(format, args...)} }

// maxPrompt bounds a prompt's tokens (int32 in the tables).
const maxPrompt = 1 << 30

// parse reads a request body. blockSize is the tokens per prefix hash;
// defaultMax the output length without max_tokens.
func parse(data []byte, chat bool, blockSize int, defaultMax int64) (*parsed, error) {
	var b body
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, jsonError(err)
	}
	p := &parsed{chat: chat, model: b.Model, stream: b.Stream}
	if b.Model == "" {
		return nil, bad("field model: required (GET /v1/models lists the models served)")
	}
	if b.N != nil && *b.N != 1 {
		return nil, bad("field n: expected 1 (one completion per request), found %d", *b.N)
	}
	if b.StreamOptions != nil {
		p.usage = b.StreamOptions.IncludeUsage
	}
	out, field := b.MaxTokens, "max_tokens"
	if out == nil && b.MaxCompletionTokens != nil {
		out, field = b.MaxCompletionTokens, "max_completion_tokens"
	}
	n := defaultMax
	if out != nil {
		n = *out
		if n < 1 || n > maxPrompt {
			return nil, bad("field %s: expected an integer from 1 to %d, found %d", field, maxPrompt, n)
		}
	}
	if b.MinTokens != nil && (*b.MinTokens < 0 || *b.MinTokens > n) {
		return nil, bad("field min_tokens: expected 0 to %s (%d), found %d", field, n, *b.MinTokens)
	}
	p.output = int32(n)
	var toks []uint64
	var err error
	if chat {
		if b.Prompt != nil {
			return nil, bad("field prompt: not a field of chat completions (use messages, or POST /v1/completions)")
		}
		toks, err = chatTokens(b.Messages)
	} else {
		if b.Messages != nil {
			return nil, bad("field messages: not a field of completions (use prompt, or POST /v1/chat/completions)")
		}
		toks, err = promptTokens(b.Prompt)
	}
	if err != nil {
		return nil, err
	}
	if len(toks) > maxPrompt {
		return nil, bad("prompt: %d tokens, at most %d", len(toks), maxPrompt)
	}
	p.input = int32(len(toks))
	p.hashes = blockHashes(toks, blockSize)
	return p, nil
}

// jsonError names the field of a decoding error.
func jsonError(err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		if te.Field != "" {
			return bad("field %s: expected %s, found %s", te.Field, jsonType(te.Type.String()), te.Value)
		}
		return bad("request body: expected a JSON object, found %s", te.Value)
	case errors.As(err, &se):
		return bad("request body: invalid JSON at byte %d: %v", se.Offset, err)
	}
	return bad("request body: %v", err)
}

func jsonType(t string) string {
	switch {
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "*int"):
		return "an integer"
	case t == "bool", t == "*bool":
		return "true or false"
	case t == "string":
		return "a string"
	case strings.HasPrefix(t, "[]"):
		return "an array"
	}
	return t
}

// promptTokens reads a completions prompt: a list of token ids (exact: as
// blis-load sends them), or text (one token per whitespace-separated
// word: what blis-load's chat prompts are made of). A batch of one prompt
// is that prompt; larger batches are refused.
func promptTokens(raw json.RawMessage) ([]uint64, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, bad("field prompt: required")
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return textTokens(nil, s, "prompt")
	}
	var ids []int64
	if json.Unmarshal(raw, &ids) == nil {
		return idTokens(ids)
	}
	var batchIDs [][]int64
	if json.Unmarshal(raw, &batchIDs) == nil {
		if len(batchIDs) != 1 {
			return nil, bad("field prompt: a batch of %d prompts; blis-serve takes one prompt per request", len(batchIDs))
		}
		return idTokens(batchIDs[0])
	}
	var batch []string
	if json.Unmarshal(raw, &batch) == nil {
		if len(batch) != 1 {
			return nil, bad("field prompt: a batch of %d prompts; blis-serve takes one prompt per request", len(batch))
		}
		return textTokens(nil, batch[0], "prompt")
	}
	return nil, bad("field prompt: expected a string, a list of token ids, or a batch of one of them")
}

func idTokens(ids []int64) ([]uint64, error) {
	if len(ids) == 0 {
		return nil, bad("field prompt: expected at least one token id, found []")
	}
	t := make([]uint64, len(ids))
	for i, id := range ids {
		if id < 0 {
			return nil, bad("field prompt: token %d: expected a non-negative id, found %d", i, id)
		}
		t[i] = uint64(id)
	}
	return t, nil
}

// textTokens appends one token per word of s: the word's hash (equal words,
// equal tokens, so a shared text prefix is a shared token prefix).
func textTokens(dst []uint64, s, field string) ([]uint64, error) {
	for _, w := range strings.Fields(s) {
		h := fnv.New64a()
		h.Write([]byte(w))
		dst = append(dst, h.Sum64()|1<<63) // clear of token ids
	}
	if len(dst) == 0 && field != "" {
		return nil, bad("field %s: expected text, found an empty prompt", field)
	}
	return dst, nil
}

// chatTokens counts the words of every message's text (a string content,
// or the text parts of a list), in order. The chat template's own tokens
// are not counted: blis-load's chat prompts are one word per token, so the
// simulated prompt is exactly the table's input_tokens.
func chatTokens(msgs []message) ([]uint64, error) {
	if len(msgs) == 0 {
		return nil, bad("field messages: expected at least one message")
	}
	var t []uint64
	for i, m := range msgs {
		c := bytes.TrimSpace(m.Content)
		if len(c) == 0 || bytes.Equal(c, []byte("null")) {
			continue
		}
		var s string
		if json.Unmarshal(c, &s) == nil {
			t, _ = textTokens(t, s, "")
			continue
		}
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal(c, &parts); err != nil {
			return nil, bad("field messages[%d].content: expected a string or a list of content parts", i)
		}
		for _, p := range parts {
			if p.Type == "text" {
				t, _ = textTokens(t, p.Text, "")
			}
		}
	}
	if len(t) == 0 {
		return nil, bad("field messages: no text in any message")
	}
	return t, nil
}

// blockHashes derives prefix hashes the way vLLM keys its prefix cache:
// one per full block of blockSize tokens, each chained on the previous
// one, so two prompts share their first k hashes exactly when they share
// their first k blocks token for token. blis-load builds each block of a
// prompt from one prefix hash of the table, so the sharing the table
// describes comes back here (the hash values differ; the engine only
// compares them).
func blockHashes(toks []uint64, blockSize int) []uint64 {
	if blockSize < 1 || len(toks) < blockSize {
		return nil
	}
	out := make([]uint64, 0, len(toks)/blockSize)
	var prev uint64
	var buf [8]byte
	for i := 0; i+blockSize <= len(toks); i += blockSize {
		h := fnv.New64a()
		binary.LittleEndian.PutUint64(buf[:], prev)
		h.Write(buf[:])
		for _, t := range toks[i : i+blockSize] {
			binary.LittleEndian.PutUint64(buf[:], t)
			h.Write(buf[:])
		}
		prev = h.Sum64()
		out = append(out, prev)
	}
	return out
}

// errorJSON is an OpenAI-style error body.
func errorJSON(code int, typ, msg string) []byte {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": msg, "type": typ, "param": nil, "code": code,
	}})
	return b
}

// tokenText is the text of output token k: words, so clients that count
// words or tokens see one per chunk.
var tokenText = [...]string{" the", " of", " and", " to", " in", " is", " was", " for"}

func appendUsage(dst []byte, in, out, cached int32) []byte {
	dst = append(dst, `"usage":{"prompt_tokens":`...)
	dst = strconv.AppendInt(dst, int64(in), 10)
	dst = append(dst, `,"completion_tokens":`...)
	dst = strconv.AppendInt(dst, int64(out), 10)
	dst = append(dst, `,"total_tokens":`...)
	dst = strconv.AppendInt(dst, int64(in)+int64(out), 10)
	dst = append(dst, `,"prompt_tokens_details":{"cached_tokens":`...)
	dst = strconv.AppendInt(dst, int64(cached), 10)
	return append(dst, `}}`...)
}

// chunkHead appends the fields every chunk of a stream starts with.
func (c *call) chunkHead(dst []byte) []byte {
	dst = append(dst, `data: {"id":"`...)
	dst = append(dst, c.id...)
	if c.p.chat {
		dst = append(dst, `","object":"chat.completion.chunk","created":`...)
	} else {
		dst = append(dst, `","object":"text_completion","created":`...)
	}
	dst = strconv.AppendInt(dst, c.created, 10)
	dst = append(dst, `,"model":`...)
	dst = append(dst, c.modelJSON...)
	return dst
}

// appendTokenChunk appends the event of output token k (0-based); last
// says it carries the finish reason.
func (c *call) appendTokenChunk(dst []byte, k int32, last bool, usage []byte) []byte {
	dst = c.chunkHead(dst)
	text := tokenText[k%int32(len(tokenText))]
	if c.p.chat {
		dst = append(dst, `,"choices":[{"index":0,"delta":{`...)
		if k == 0 {
			dst = append(dst, `"role":"assistant",`...)
		}
		dst = append(dst, `"content":"`...)
		dst = append(dst, text...)
		dst = append(dst, `"},"logprobs":null,"finish_reason":`...)
	} else {
		dst = append(dst, `,"choices":[{"index":0,"text":"`...)
		dst = append(dst, text...)
		dst = append(dst, `","logprobs":null,"finish_reason":`...)
	}
	if last {
		dst = append(dst, `"length"}]`...)
	} else {
		dst = append(dst, `null}]`...)
	}
	if usage != nil {
		dst = append(dst, ',')
		dst = append(dst, usage...)
	}
	return append(dst, "}\n\n"...)
}

// appendUsageChunk appends OpenAI's usage chunk (stream_options.include_usage):
// no choices, the token counts.
func (c *call) appendUsageChunk(dst, usage []byte) []byte {
	dst = c.chunkHead(dst)
	dst = append(dst, `,"choices":[],`...)
	dst = append(dst, usage...)
	return append(dst, "}\n\n"...)
}

// fullResponse is the body of a non-streamed completion.
func (c *call) fullResponse(gen, cached int32) []byte {
	var text strings.Builder
	for k := int32(0); k < gen; k++ {
		text.WriteString(tokenText[k%int32(len(tokenText))])
	}
	tj, _ := json.Marshal(text.String())
	var dst []byte
	dst = append(dst, `{"id":"`...)
	dst = append(dst, c.id...)
	if c.p.chat {
		dst = append(dst, `","object":"chat.completion","created":`...)
	} else {
		dst = append(dst, `","object":"text_completion","created":`...)
	}
	dst = strconv.AppendInt(dst, c.created, 10)
	dst = append(dst, `,"model":`...)
	dst = append(dst, c.modelJSON...)
	if c.p.chat {
		dst = append(dst, `,"choices":[{"index":0,"message":{"role":"assistant","content":`...)
		dst = append(dst, tj...)
		dst = append(dst, `},"logprobs":null,"finish_reason":"length"}],`...)
	} else {
		dst = append(dst, `,"choices":[{"index":0,"text":`...)
		dst = append(dst, tj...)
		dst = append(dst, `,"logprobs":null,"finish_reason":"length"}],`...)
	}
	dst = appendUsage(dst, c.p.input, gen, cached)
	return append(dst, "}\n"...)
}
