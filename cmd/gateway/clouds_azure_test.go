package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	officialopenai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	goopenai "github.com/sashabaranov/go-openai"

	"github.com/corralhq/corral/internal/objects/objectstest"
	"github.com/corralhq/corral/internal/provider/azure/azuretest"
	"github.com/corralhq/corral/internal/redistest"
)

// Azure OpenAI behind Corral, with clients unchanged: the v1 API (the
// alias replaces only the model string) and the classic API (deployment
// in the path, api-version in the query) with an api-key, and Entra ID
// tokens from azidentity's default chain against the fake token endpoint;
// several real gateway processes on one real redis-server. No Azure key,
// client secret or Entra token appears in any log line, /metrics or Redis
// key or value.
func TestAzureThroughCorral(t *testing.T) {
	bin := buildGateway(t)
	// A redis-server each: the fakes' object ids repeat from one fake to
	// the next, and ownership is kept in Redis.
	t.Run("v1", func(t *testing.T) { testAzureV1(t, bin, redistest.Start(t)) })
	t.Run("classic", func(t *testing.T) { testAzureClassic(t, bin, redistest.Start(t)) })
	t.Run("entra", func(t *testing.T) { testAzureEntra(t, bin, redistest.Start(t)) })
	t.Run("entra-refresh", func(t *testing.T) { testAzureEntraRefresh(t, bin, redistest.Start(t)) })
	t.Run("entra-refused", func(t *testing.T) { testAzureEntraRefused(t, bin, redistest.Start(t)) })
}

// azureV1Upstream is the v1 resource with the right key, and the same
// resource with a key it refuses for the model "badkey" (second in
// priority, so calls naming no model, file uploads, go to the first).
func azureV1Upstream(fake *azuretest.Server) string {
	return "  - name: azure-v1\n    api: openai\n    provider: azure\n    url: " + fake.V1URL() +
		"\n    auth: api-key\n    api_key_env: AZURE_TEST_KEY\n    aliases: {\"gpt-4o*\": gpt-4o, \"ghost\": ghost-deployment}\n" +
		"  - name: azure-badkey\n    api: openai\n    provider: azure\n    url: " + fake.V1URL() +
		"\n    api_key_env: AZURE_BAD_KEY\n    priority: 1\n    aliases: {\"badkey\": gpt-4o}\n"
}

const azureBadKey = "bad-azure-key-5150"

func azureChatBody(prompt string, stream bool) string {
	s := ""
	if stream {
		s = `"stream":true,`
	}
	return `{"model":"gpt-4o-mini",` + s + `"messages":[{"role":"user","content":"` + prompt + `"}]}`
}

func testAzureV1(t *testing.T, bin string, rs *redistest.Server) {
	fake := azuretest.New(t, azuretest.Options{})
	e := newAzureEnv(t, bin, rs, fake, azureV1Upstream(fake), 3, "AZURE_BAD_KEY="+azureBadKey)

	// The alias replaces only the model string: every other byte arrives
	// as the client sent it, an odd number literal and an unknown field
	// included.
	body := `{"model":"gpt-4o-mini", "messages":[{"role":"user","content":"bytes as sent"}],"x_unknown":{"n":1.50e+00},"temperature":0.70}`
	code, h, got := postAs(t, e.bases[0], "/v1/chat/completions", "sk-az-a", body)
	if code != 200 || h.Get("X-Corral-Upstream") != "azure-v1" || !strings.Contains(got, `"model":"gpt-4o-2024-08-06"`) {
		t.Fatalf("chat = %d %v %s", code, h, got)
	}
	calls := fake.CallsTo("/openai/v1/chat/completions")
	want := strings.Replace(body, `"model":"gpt-4o-mini"`, `"model":"gpt-4o"`, 1)
	if len(calls) != 1 || string(calls[0].Body) != want || calls[0].RawQuery != "" || calls[0].Header.Get("Api-Key") != fake.Options().APIKey ||
		calls[0].Header.Get("Authorization") != "" {
		t.Fatalf("Azure got %d calls: %+v; want body %s", len(calls), calls, want)
	}

	// openai-go and go-openai through Corral, streamed and not: Azure's
	// answers (its first stream chunk has no choices) read as OpenAI's.
	oc := officialopenai.NewClient(option.WithBaseURL(e.bases[1]+"/v1"), option.WithAPIKey("sk-az-a"), option.WithMaxRetries(0))
	ctx := context.Background()
	r, err := oc.Chat.Completions.New(ctx, officialopenai.ChatCompletionNewParams{Model: "gpt-4o-mini",
		Messages: []officialopenai.ChatCompletionMessageParamUnion{officialopenai.UserMessage("from openai-go")}})
	if err != nil || r.Choices[0].Message.Content != "Azure gpt-4o-2024-08-06 says: from openai-go" || r.Model != "gpt-4o-2024-08-06" {
		t.Errorf("openai-go chat = %+v, %v", r, err)
	}
	st := oc.Chat.Completions.NewStreaming(ctx, officialopenai.ChatCompletionNewParams{Model: "gpt-4o-mini",
		Messages: []officialopenai.ChatCompletionMessageParamUnion{officialopenai.UserMessage("openai-go streams")}})
	var acc officialopenai.ChatCompletionAccumulator
	for st.Next() {
		acc.AddChunk(st.Current())
	}
	if err := st.Err(); err != nil || len(acc.Choices) == 0 || acc.Choices[0].Message.Content != "Azure gpt-4o-2024-08-06 says: openai-go streams" {
		t.Errorf("openai-go stream = %+v, %v", acc.Choices, err)
	}
	cfg := goopenai.DefaultConfig("sk-az-a")
	cfg.BaseURL = e.bases[2] + "/v1"
	gc := goopenai.NewClientWithConfig(cfg)
	gr, err := gc.CreateChatCompletion(ctx, goopenai.ChatCompletionRequest{Model: "gpt-4o-mini",
		Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "from go-openai"}}})
	if err != nil || gr.Choices[0].Message.Content != "Azure gpt-4o-2024-08-06 says: from go-openai" {
		t.Errorf("go-openai chat = %+v, %v", gr, err)
	}
	gs, err := gc.CreateChatCompletionStream(ctx, goopenai.ChatCompletionRequest{Model: "gpt-4o-mini", Stream: true,
		Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "go-openai streams"}}})
	if err != nil {
		t.Fatalf("go-openai stream: %v", err)
	}
	var text strings.Builder
	for {
		ch, err := gs.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("go-openai stream: %v", err)
		}
		for _, c := range ch.Choices {
			text.WriteString(c.Delta.Content)
		}
	}
	gs.Close()
	if text.String() != "Azure gpt-4o-2024-08-06 says: go-openai streams" {
		t.Errorf("go-openai stream text = %q", text.String())
	}

	// 30 identical requests over 3 instances: one call to Azure.
	var wg sync.WaitGroup
	answers := make([]string, 30)
	for i := range answers {
		wg.Go(func() {
			code, _, got := postAs(t, e.bases[i%3], "/v1/chat/completions", "sk-az-a", azureChatBody("thirty as one", i%2 == 0))
			if code != 200 {
				t.Errorf("request %d = %d %s", i, code, got)
			}
			answers[i] = got
		})
	}
	wg.Wait()
	n := 0
	for _, c := range fake.CallsTo("/openai/v1/chat/completions") {
		if strings.Contains(string(c.Body), "thirty as one") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("30 identical requests over 3 instances made %d Azure calls; want 1", n)
	}
	for i, a := range answers {
		if i%2 == 0 && (azureSSEText(a) != "Azure gpt-4o-2024-08-06 says: thirty as one" || !strings.HasSuffix(a, "data: [DONE]\n\n")) ||
			i%2 == 1 && !strings.Contains(a, `"content":"Azure gpt-4o-2024-08-06 says: thirty as one"`) {
			t.Errorf("answer %d = %s", i, a)
		}
	}
	// A stream's answer stored from Azure's chunks (the first has no id,
	// model or choices) is a whole completion when a later request hits it.
	postAs(t, e.bases[0], "/v1/chat/completions", "sk-az-a", azureChatBody("streamed first", true))
	code, h, got = postAs(t, e.bases[1], "/v1/chat/completions", "sk-az-a", azureChatBody("streamed first", false))
	var hit struct {
		ID, Model string
		Choices   []struct {
			Message struct{ Content string }
		}
	}
	if json.Unmarshal([]byte(got), &hit) != nil || code != 200 || h.Get("X-Corral-Cache") != "HIT" || hit.ID == "" ||
		hit.Model != "gpt-4o-2024-08-06" || len(hit.Choices) != 1 || hit.Choices[0].Message.Content != "Azure gpt-4o-2024-08-06 says: streamed first" {
		t.Errorf("hit after a stream = %d %s %s", code, h.Get("X-Corral-Cache"), got)
	}

	testAzureErrors(t, e)
	testAzureFiles(t, e, "/openai/v1/files")
	// Files, batches and stored responses (streamed too) made through
	// Corral on Azure are their tenant's; every request of another tenant
	// naming them is Corral's 404 and never reaches Azure.
	owned := objectstest.CreateAsOwner(t, e.bases, "sk-az-a")
	objectstest.CheckOthersRefused(t, e.bases[1], "sk-az-b", owned, func(id string) int {
		n := 0
		for _, c := range fake.Calls() {
			if strings.Contains(c.EscapedPath+"?"+c.RawQuery+" "+string(c.Body), id) {
				n++
			}
		}
		return n
	})
	e.checkNoSecrets(t, fake.Options().APIKey, azureBadKey)
}

// azureSSEText is the text of a chat completion stream's deltas.
func azureSSEText(stream string) string {
	var b strings.Builder
	for line := range strings.SplitSeq(stream, "\n") {
		var ch struct {
			Choices []struct {
				Delta struct{ Content string }
			}
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok && json.Unmarshal([]byte(data), &ch) == nil {
			for _, c := range ch.Choices {
				b.WriteString(c.Delta.Content)
			}
		}
	}
	return b.String()
}

// testAzureErrors: Azure's errors reach the client in OpenAI's shape with
// their status and retry headers.
func testAzureErrors(t *testing.T, e *azureEnv) {
	code, _, got := postAs(t, e.bases[0], "/v1/chat/completions", "sk-az-a", `{"model":"ghost","messages":[{"role":"user","content":"x"}]}`)
	var er struct {
		Error struct {
			Type, Code, Message string
			Param               *string
		}
	}
	if json.Unmarshal([]byte(got), &er) != nil || code != 404 || er.Error.Code != "DeploymentNotFound" || er.Error.Type != "invalid_request_error" {
		t.Errorf("unknown deployment = %d %s", code, got)
	}
	code, _, got = postAs(t, e.bases[1], "/v1/chat/completions", "sk-az-a", azureChatBody("FilterMe", false))
	if json.Unmarshal([]byte(got), &er) != nil || code != 400 || er.Error.Code != "content_filter" || er.Error.Param == nil || *er.Error.Param != "prompt" ||
		!strings.Contains(got, `"innererror":{"code":"ResponsibleAIPolicyViolation"`) {
		t.Errorf("content filter = %d %s", code, got)
	}
	// Azure's 429 keeps its retry headers; with no other upstream to fail
	// over to, the body is Corral's own (the server's rule for a rate
	// limited upstream).
	code, h, got := postAs(t, e.bases[2], "/v1/chat/completions", "sk-az-a", azureChatBody("ThrottleMe", false))
	if json.Unmarshal([]byte(got), &er) != nil || code != 429 || er.Error.Code != "rate_limit_exceeded" ||
		h.Get("Retry-After") != "7" || h.Get("Retry-After-Ms") != "7000" {
		t.Errorf("throttled = %d %v %s", code, h, got)
	}
	// Azure refusing Corral's key is Corral's 502, never the client's 401.
	code, _, got = postAs(t, e.bases[0], "/v1/chat/completions", "sk-az-a", `{"model":"badkey","messages":[{"role":"user","content":"x"}]}`)
	if json.Unmarshal([]byte(got), &er) != nil || code != 502 || er.Error.Code != "upstream_auth_error" {
		t.Errorf("refused key = %d %s", code, got)
	}
	// x-ratelimit-* describe Corral's Azure quota: the client sees Corral's
	// own (none here: tenant a has no limits), never Azure's zeros.
	if v := h.Get("X-Ratelimit-Remaining-Requests"); v == "0" {
		t.Errorf("Azure's x-ratelimit-remaining-requests reached the client: %v", h)
	}
}

// testAzureFiles: a file uploaded through Corral goes to Azure (base path
// filesPath) and is the uploading tenant's: it reads it back through
// another instance, another tenant gets Corral's 404 and Azure never hears
// of that request.
func testAzureFiles(t *testing.T, e *azureEnv, filesPath string) {
	ctx := context.Background()
	a := objectstest.SDK(e.bases[0], "sk-az-a")
	f, err := a.Files.New(ctx, officialopenai.FileNewParams{File: officialopenai.File(strings.NewReader(`{"custom_id":"1"}`+"\n"), "in.jsonl", "application/jsonl"),
		Purpose: officialopenai.FilePurposeBatch})
	if err != nil {
		t.Fatalf("Files.New: %v", err)
	}
	if !e.fake.Files().Has(f.ID) || len(e.fake.CallsTo(filesPath)) == 0 {
		t.Fatalf("the file %s never reached Azure at %s", f.ID, filesPath)
	}
	owner := objectstest.SDK(e.bases[1], "sk-az-a")
	if g, err := owner.Files.Get(ctx, f.ID); err != nil || g.Filename != "in.jsonl" {
		t.Errorf("owner's Files.Get = %+v, %v\n%s", g, err, e.logs[1])
	}
	before := len(e.fake.CallsTo(filesPath + "/" + f.ID))
	code, body := objectstest.Call(t, http.MethodGet, e.bases[len(e.bases)-1]+"/v1/files/"+f.ID, "sk-az-b", "")
	if code != 404 || body != objectstest.NotFoundBody(f.ID) {
		t.Errorf("another tenant's GET = %d %s", code, body)
	}
	if after := len(e.fake.CallsTo(filesPath + "/" + f.ID)); after != before {
		t.Errorf("another tenant's GET reached Azure (%d calls, was %d)", after, before)
	}
}

func testAzureClassic(t *testing.T, bin string, rs *redistest.Server) {
	fake := azuretest.New(t, azuretest.Options{})
	up := "  - name: azure-classic\n    api: openai\n    provider: azure\n    url: " + fake.ClassicURL() +
		"\n    api_version: \"2024-10-21\"\n    api_key_env: AZURE_TEST_KEY\n    aliases: {\"gpt-4o*\": gpt-4o}\n"
	e := newAzureEnv(t, bin, rs, fake, up, 2)
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"classic"}],"x_unknown":1.50e+00}`
	code, h, got := postAs(t, e.bases[0], "/v1/chat/completions?trace=1", "sk-az-a", body)
	if code != 200 || h.Get("X-Corral-Upstream") != "azure-classic" {
		t.Fatalf("classic chat = %d %v %s", code, h, got)
	}
	calls := fake.CallsTo("/openai/deployments/gpt-4o/chat/completions")
	if len(calls) != 1 || string(calls[0].Body) != body || calls[0].RawQuery != "api-version=2024-10-21&trace=1" {
		t.Fatalf("Azure got %+v; want the body kept, api-version first", calls)
	}
	oc := officialopenai.NewClient(option.WithBaseURL(e.bases[1]+"/v1"), option.WithAPIKey("sk-az-a"), option.WithMaxRetries(0))
	st := oc.Chat.Completions.NewStreaming(context.Background(), officialopenai.ChatCompletionNewParams{Model: "gpt-4o-mini",
		Messages: []officialopenai.ChatCompletionMessageParamUnion{officialopenai.UserMessage("classic streams")}})
	var acc officialopenai.ChatCompletionAccumulator
	for st.Next() {
		acc.AddChunk(st.Current())
	}
	if err := st.Err(); err != nil || len(acc.Choices) == 0 || acc.Choices[0].Message.Content != "Azure gpt-4o-2024-08-06 says: classic streams" {
		t.Errorf("classic stream = %+v, %v", acc.Choices, err)
	}
	testAzureFiles(t, e, "/openai/files")
	e.checkNoSecrets(t, fake.Options().APIKey)
}

func testAzureEntra(t *testing.T, bin string, rs *redistest.Server) {
	fake := azuretest.New(t, azuretest.Options{})
	up := "  - name: azure-entra\n    api: openai\n    provider: azure\n    url: " + fake.V1URL() +
		"\n    auth: entra\n    aliases: {\"gpt-4o*\": gpt-4o}\n"
	e := newAzureEnv(t, bin, rs, fake, up, 2, fake.Env()...)
	for i, b := range e.bases {
		for j := range 3 {
			code, _, got := postAs(t, b, "/v1/chat/completions", "sk-az-a", azureChatBody("entra "+string(rune('a'+3*i+j)), j == 1))
			if code != 200 {
				t.Fatalf("gateway %d request %d = %d %s\n%s", i, j, code, got, e.logs[i])
			}
		}
	}
	calls := fake.CallsTo("/openai/v1/chat/completions")
	if len(calls) != 6 {
		t.Errorf("Azure calls = %d; want 6", len(calls))
	}
	for _, c := range calls {
		if !strings.HasPrefix(c.Header.Get("Authorization"), "Bearer entra-token-") || c.Header.Get("Api-Key") != "" {
			t.Errorf("call headers = %v", c.Header)
		}
	}
	// One token per process (the start-up check's), reused by its calls.
	if n := fake.TokensIssued(); n != 2 {
		t.Errorf("tokens issued = %d; want 2, one per gateway", n)
	}
	e.checkNoSecrets(t, append(fake.IssuedTokens(), fake.Options().ClientSecret)...)
}

// testAzureEntraRefresh: tokens that live 5 min + 1 s are replaced a
// second after issue (the 5 minutes before expiry MSAL and Corral keep);
// calls keep flowing across the refreshes and none is refused.
func testAzureEntraRefresh(t *testing.T, bin string, rs *redistest.Server) {
	fake := azuretest.New(t, azuretest.Options{TokenLifetime: 5*time.Minute + time.Second})
	up := "  - name: azure-entra\n    api: openai\n    provider: azure\n    url: " + fake.V1URL() +
		"\n    auth: entra\n    aliases: {\"gpt-4o*\": gpt-4o}\n"
	e := newAzureEnv(t, bin, rs, fake, up, 1, fake.Env()...)
	deadline := time.Now().Add(30 * time.Second)
	calls := 0
	for fake.TokensIssued() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d tokens after %d calls", fake.TokensIssued(), calls)
		}
		code, _, got := postAs(t, e.bases[0], "/v1/embeddings", "sk-az-a", `{"model":"gpt-4o","input":"refresh `+strconv.Itoa(calls)+`"}`)
		calls++
		if code != 200 {
			t.Fatalf("call %d across token refreshes = %d %s", calls, code, got)
		}
	}
	if calls < 4 {
		t.Errorf("%d calls for %d tokens: tokens not reused", calls, fake.TokensIssued())
	}
	e.checkNoSecrets(t, append(fake.IssuedTokens(), fake.Options().ClientSecret)...)
}

// testAzureEntraRefused: a client secret Entra ID refuses does not stop
// start-up: the gateway warns (naming the cloud, not the secret) and a
// call fails as a failure of that upstream (502), never reaching Azure.
func testAzureEntraRefused(t *testing.T, bin string, rs *redistest.Server) {
	fake := azuretest.New(t, azuretest.Options{})
	up := "  - name: azure-entra\n    api: openai\n    provider: azure\n    url: " + fake.V1URL() +
		"\n    auth: entra\n    aliases: {\"gpt-4o*\": gpt-4o}\n"
	const wrong = "refused-secret-8086"
	// Only the environment's credential: the managed identity's probe of
	// a metadata endpoint that is not there would only slow the test.
	e := newAzureEnv(t, bin, rs, fake, up, 1, append(fake.Env(), "AZURE_CLIENT_SECRET="+wrong, "AZURE_TOKEN_CREDENTIALS=EnvironmentCredential")...)
	code, _, got := postAs(t, e.bases[0], "/v1/chat/completions", "sk-az-a", azureChatBody("no token", false))
	var er struct{ Error struct{ Code string } }
	if json.Unmarshal([]byte(got), &er) != nil || code != 502 || er.Error.Code != "upstream_error" {
		t.Errorf("call without a token = %d %s", code, got)
	}
	if n := len(fake.Calls()); n != 0 {
		t.Errorf("%d calls reached Azure without a token", n)
	}
	e.checkNoSecrets(t, wrong)
	if l := e.logs[0].String(); !strings.Contains(l, `"msg":"cloud credentials not available yet`) || !strings.Contains(l, `"cloud":"entra"`) {
		t.Errorf("no start-up warning for Entra ID:\n%.3000s", l)
	}
}
