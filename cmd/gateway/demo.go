package main

import (
	"fmt"
	"io"
	"net"
)

// DemoKey is the tenant key of -demo mode. It is fixed so the README's curl
// line works as printed; demo mode talks only to the built-in mock model,
// so the key guards nothing of value.
const DemoKey = "sk-corral-demo"

// DemoTenant is the demo tenant's id.
const DemoTenant = "demo"

func printDemo(w io.Writer, addr net.Addr) {
	host := addr.String()
	if ta, ok := addr.(*net.TCPAddr); ok && ta.IP.IsUnspecified() {
		host = fmt.Sprintf("localhost:%d", ta.Port)
	}
	fmt.Fprintf(w, `Corral demo: the built-in mock model is the upstream; nothing leaves this machine.
  base URL: http://%[1]s/v1
  API key:  %[2]s

Try it:
  curl -si http://%[1]s/v1/chat/completions -H "Authorization: Bearer %[2]s" -H "Content-Type: application/json" -d '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Hello, Corral"}]}'

Run it twice: the second answer carries X-Corral-Cache: HIT.
The Responses API (/v1/responses) and Anthropic's Messages API (/v1/messages,
key in x-api-key or Authorization) are served by the same mock.
`, host, DemoKey)
}
