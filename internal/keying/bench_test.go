package keying

import (
	"fmt"
	"strings"
	"testing"
)

// chatBodyOfSize builds a realistic chat request of about size bytes: a
// system prompt and alternating user/assistant turns.
func chatBodyOfSize(size int) []byte {
	var b strings.Builder
	b.WriteString(`{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true},"temperature":0.7,"max_tokens":512,"messages":[`)
	b.WriteString(`{"role":"system","content":"You are a helpful assistant. Answer concisely and cite sources when you can."}`)
	sentence := "The quick brown fox jumps over the lazy dog, and then it asks: \"what's next?\" "
	for i := 0; b.Len() < size-200; i++ {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		text := strings.Repeat(sentence, 1+i%6)
		if b.Len()+len(text)+40 > size-200 {
			text = text[:max(1, size-200-b.Len()-40)]
		}
		fmt.Fprintf(&b, `,{"role":%q,"content":%q}`, role, text)
	}
	b.WriteString(`],"user":"user-1234","seed":12345678901234567890}`)
	return []byte(b.String())
}

func benchmarkParse(b *testing.B, body []byte) {
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := Parse("acme", chatEndpoint, body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParse(b *testing.B) {
	small := []byte(`{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"What is the capital of France? Answer in one word."}],"temperature":0.2,"max_tokens":64,"stream":true,"stream_options":{"include_usage":true},"user":"user-1234","seed":42}`)
	for _, bc := range []struct {
		name string
		body []byte
	}{
		{"small", small},
		{"medium", chatBodyOfSize(4 << 10)},
		{"large", chatBodyOfSize(64 << 10)},
	} {
		b.Run(fmt.Sprintf("%s-%dB", bc.name, len(bc.body)), func(b *testing.B) { benchmarkParse(b, bc.body) })
	}
}

func BenchmarkName(b *testing.B) {
	hash := strings.Repeat("ab", 32)
	b.ReportAllocs()
	for b.Loop() {
		_ = Name("acme", hash, Response)
	}
}

// BenchmarkParseLongNumber shows that numbers cost time linear in their
// length: ns/op grows with size and MB/s stays flat, for a long exponent
// (refused) and a long significand (accepted). Before the exponent bound a
// 1 MiB exponent took seconds and an 8 MiB one minutes.
func BenchmarkParseLongNumber(b *testing.B) {
	for _, size := range []int{64 << 10, 1 << 20, 8 << 20} {
		digits := strings.Repeat("7", size)
		b.Run(fmt.Sprintf("exponent-%dKiB", size>>10), func(b *testing.B) {
			body := []byte(`{"model":"m","seed":1e` + digits + `}`)
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if _, err := Parse("acme", chatEndpoint, body); err == nil {
					b.Fatal("a huge exponent was accepted")
				}
			}
		})
		b.Run(fmt.Sprintf("significand-%dKiB", size>>10), func(b *testing.B) {
			body := []byte(`{"model":"m","seed":` + digits + `e-5}`)
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if _, err := Parse("acme", chatEndpoint, body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
