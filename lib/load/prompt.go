package load

import (
	"hash/fnv"
	"math/rand/v2"

	"github.com/blis-sim/blis/lib/rng"
	"github.com/blis-sim/blis/lib/trace"
)

// Prompts turns a request row's token count and prefix hashes into a
// prompt: token ids for the completions API, words for chat. Block i of a
// prompt (tokens [iP, (i+1)P), P = BlockSize) with prefix hash h gets ids
// drawn from a stream seeded by (Seed, h): since the hashes are
// prefix-chained, two requests with the same hash at position i share
// their first i+1 blocks token for token, so the server's prefix cache
// sees exactly the sharing the trace describes. Tokens past the hashed
// ones are drawn from a stream seeded by (Seed, request id) and share
// nothing. Changing Seed changes every prompt (a cold cache on a server
// that has seen the previous run).
type Prompts struct {
	Seed      uint64
	BlockSize int    // tokens per prefix_hashes entry (the table's blis.prefix_block_size)
	Lo, Hi    uint32 // token ids are drawn from [Lo, Hi)
}

// DefaultTokenRange avoids the ids where tokenizers keep special and
// control tokens (low ids in SentencePiece vocabularies, the top of
// Llama 3's) and fits every vocabulary of 32,000 or more.
const DefaultTokenLo, DefaultTokenHi = 1000, 30000

// AppendIDs appends r's prompt (r.InputTokens ids) to dst.
func (p *Prompts) AppendIDs(dst []uint32, r *trace.Request) []uint32 {
	return p.appendIDs(dst, int(r.InputTokens), r.PrefixHashes, r.ID)
}

func (p *Prompts) appendIDs(dst []uint32, n int, hashes []uint64, id string) []uint32 {
	span := uint64(p.Hi - p.Lo)
	var pcg rand.PCG
	bs := max(p.BlockSize, 1)
	done := 0
	for i := 0; i < len(hashes) && done < n; i++ {
		pcg.Seed(rng.Mix64(p.Seed^0x5bd1e995), hashes[i])
		r := rand.New(&pcg)
		for k := 0; k < bs && done < n; k++ {
			dst = append(dst, p.Lo+uint32(r.Uint64N(span)))
			done++
		}
	}
	if done < n {
		h := fnv.New64a()
		h.Write([]byte(id))
		pcg.Seed(rng.Mix64(p.Seed^0x27d4eb2f165667c5), h.Sum64())
		r := rand.New(&pcg)
		for ; done < n; done++ {
			dst = append(dst, p.Lo+uint32(r.Uint64N(span)))
		}
	}
	return dst
}

// words are common English words that BPE and SentencePiece tokenizers of
// current models (Llama 2/3, Mistral, Qwen, GPT-2 family) encode as one
// token each when preceded by a space. A chat prompt of n such words is n
// tokens of content plus the chat template's own tokens; the server's
// usage report says exactly how many it counted.
var words = [...]string{
	"the", "of", "and", "to", "in", "is", "was", "for", "on", "that", "with", "as", "by", "at", "from", "his",
	"it", "an", "were", "are", "which", "this", "be", "or", "has", "had", "not", "but", "their", "first", "one", "they",
	"have", "all", "been", "its", "new", "after", "who", "also", "two", "time", "her", "other", "more", "when", "into", "there",
	"year", "would", "some", "out", "can", "most", "three", "only", "over", "many", "may", "city", "between", "about", "up", "world",
	"during", "under", "war", "made", "school", "such", "where", "then", "while", "them", "state", "him", "people", "since", "used", "years",
	"what", "well", "part", "day", "before", "early", "through", "later", "life", "team", "found", "these", "high", "both", "house", "name",
	"family", "work", "any", "each", "group", "line", "long", "film", "game", "music", "water", "area", "book", "home", "power", "case",
	"end", "side", "place", "point", "number", "season", "system", "order", "player", "road", "level", "town", "river", "party", "law", "field",
}

// AppendWords appends r's prompt as text for the chat API: one word per
// token id, so equal ids give equal text and a shared prefix stays
// shared.
func (p *Prompts) AppendWords(dst []byte, ids []uint32) []byte {
	for i, id := range ids {
		if i > 0 {
			dst = append(dst, ' ')
		}
		dst = append(dst, words[id%uint32(len(words))]...)
	}
	return dst
}
