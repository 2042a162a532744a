package keying_test

import (
	"fmt"

	"github.com/corralhq/corral/internal/keying"
)

func ExampleName() {
	a, _ := keying.Parse("acme", "/v1/chat/completions",
		[]byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Hi"}],"stream":true}`))
	b, _ := keying.Parse("acme", "/v1/chat/completions",
		[]byte(`{ "messages": [ {"content": " Hi\n", "role": "user"} ], "model": "gpt-4o-mini" }`))

	fmt.Println(a.Hash == b.Hash, a.Model, a.Stream, b.Stream)
	fmt.Println(keying.Name("acme", a.Hash, keying.Response))
	fmt.Println(keying.Name("acme", a.Hash, keying.Lock))
	fmt.Println(keying.TenantPattern("acme"))
	// Output:
	// true gpt-4o-mini true false
	// corral:v1:{acme:a4bf0f75f3ee91db5484b42e6327396bb7351412e67e5cfec6a7c2d72da44c32}:r
	// corral:v1:{acme:a4bf0f75f3ee91db5484b42e6327396bb7351412e67e5cfec6a7c2d72da44c32}:l
	// corral:v1:{acme:*
}

func ExampleCanonical() {
	body, _ := keying.Canonical([]byte(`{"model":"m","temperature":1.0,"seed":1e3,"stream":true,
		"messages":[{"role":"user","content":"  \u0048i  "}]}`))
	fmt.Println(string(body))
	// Output:
	// {"messages":[{"content":"Hi","role":"user"}],"model":"m","seed":1000,"temperature":1}
}
