package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
)

// DemoKey is the tenant key of -demo mode. It is fixed so the README's curl
// line works as printed; demo mode talks only to the built-in mock model,
// so the key guards nothing of value.
const DemoKey = "sk-corral-demo"

// DemoClaudeModel is the Claude model the demo's banner and the README's
// examples name: the newest Sonnet (anthropic-sdk-go's model constants),
// as current Claude Code calls older ids retired. The mock lists it and
// the older ids alike.
const DemoClaudeModel = "claude-sonnet-5-5"

// DemoTenant is the demo tenant's id.
const DemoTenant = "demo"

// newDemoToken makes the admin token of a demo run without
// CORRAL_ADMIN_TOKEN: random, so a demo left running is not open to
// anyone who read the README.
func newDemoToken() string {
	var b [24]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return "demo-admin-" + hex.EncodeToString(b[:])
}

// printDemo prints the demo's banner; token is the admin token made for
// this run ("" when CORRAL_ADMIN_TOKEN gave one, which is not echoed).
func printDemo(w io.Writer, addr net.Addr, token string) {
	host := addr.String()
	if ta, ok := addr.(*net.TCPAddr); ok && ta.IP.IsUnspecified() {
		host = fmt.Sprintf("localhost:%d", ta.Port)
	}
	shown := token
	if shown == "" {
		shown = "the one in CORRAL_ADMIN_TOKEN"
	}
	fmt.Fprintf(w, `Corral demo: the built-in mock model is the upstream; nothing leaves this machine.
  base URL: http://%[1]s/v1
  API key:  %[2]s
  console:  http://%[1]s/console/  (admin token: %[3]s)

Try it:
  curl -si http://%[1]s/v1/chat/completions -H "Authorization: Bearer %[2]s" -H "Content-Type: application/json" -d '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Hello, Corral"}]}'

Run it twice: the second answer carries X-Corral-Cache: HIT.
The Responses API (/v1/responses) and Anthropic's Messages API (/v1/messages,
key in x-api-key or Authorization) are served by the same mock:
  curl -si http://%[1]s/v1/messages -H "x-api-key: %[2]s" -H "anthropic-version: 2023-06-01" -H "Content-Type: application/json" -d '{"model":"%[4]s","max_tokens":256,"messages":[{"role":"user","content":"Hello, Corral"}]}'
Open the console and sign in with the admin token: after a few curl lines
it shows the requests, the hit rate and the dollars the cache saved.
`, host, DemoKey, shown, DemoClaudeModel)
}
