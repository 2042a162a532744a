package bedrocktest_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	sdkbedrock "github.com/anthropics/anthropic-sdk-go/v2/bedrock"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/tidwall/gjson"

	"github.com/corralhq/corral/internal/provider/bedrock/bedrocktest"
)

// These tests hold the fake to anthropic-sdk-go's own Bedrock client:
// what the SDK sends, the fake accepts and answers in a shape the SDK
// reads; a request signed with another secret is refused as Bedrock
// refuses it.

const (
	profileID = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
	arnID     = "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc123"
)

// sdkClient is anthropic-sdk-go's Bedrock client with static credentials
// (secret, token), pointed at fake.
func sdkClient(t *testing.T, fake *bedrocktest.Server, secret, token string) anthropic.Client {
	t.Helper()
	t.Setenv("AWS_BEARER_TOKEN_BEDROCK", "") // the SDK would prefer it to the signature
	cfg := aws.Config{Region: bedrocktest.DefaultRegion,
		Credentials: credentials.NewStaticCredentialsProvider(bedrocktest.DefaultAccessKeyID, secret, token)}
	return anthropic.NewClient(sdkbedrock.WithConfig(cfg), option.WithBaseURL(fake.URL), option.WithMaxRetries(0))
}

func sdkContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func params(model, text string) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(text))}}
}

// TestSDKInvokeModel: the SDK's Messages.New succeeds through the fake for
// an inference profile id (':' in the path) and an ARN ('/' escaped in
// it), each signed over the path escaped twice; the fake saw the SDK's
// envelope (model in the path, anthropic_version in the body).
func TestSDKInvokeModel(t *testing.T) {
	fake := bedrocktest.New(t, bedrocktest.Options{SessionToken: "fake-session-token"})
	c := sdkClient(t, fake, bedrocktest.DefaultSecretAccessKey, "fake-session-token")
	for i, id := range []string{profileID, arnID} {
		m, err := c.Messages.New(sdkContext(t), params(id, "hello bedrock"))
		if err != nil {
			t.Fatalf("Messages.New(%s): %v", id, err)
		}
		if len(m.Content) != 1 || m.Content[0].Text != "bedrock reply to: hello bedrock" || m.Model != "claude-sonnet-4-5-20250929" {
			t.Errorf("Messages.New(%s) = %s", id, m.RawJSON())
		}
		call := fake.Calls()[i]
		if call.Model != id || !strings.HasSuffix(call.Path, "/invoke") || call.Stream {
			t.Errorf("call %d = %s %s (model %q)", i, call.Method, call.Path, call.Model)
		}
		if gjson.GetBytes(call.Body, "model").Exists() || !gjson.GetBytes(call.Body, "anthropic_version").Exists() {
			t.Errorf("call %d body = %s", i, call.Body)
		}
	}
	if got := fake.Calls()[1].Path; got != "/model/arn:aws:bedrock:us-east-1:123456789012:application-inference-profile%2Fabc123/invoke" {
		t.Errorf("ARN path on the wire = %s", got)
	}
}

// TestSDKStream: the SDK's NewStreaming reads the fake's event stream
// (which the SDK decodes with AWS's eventstream package) into the whole
// message.
func TestSDKStream(t *testing.T) {
	fake := bedrocktest.New(t, bedrocktest.Options{})
	c := sdkClient(t, fake, bedrocktest.DefaultSecretAccessKey, "")
	s := c.Messages.NewStreaming(sdkContext(t), params(profileID, "stream me please"))
	var m anthropic.Message
	n := 0
	for s.Next() {
		n++
		if err := m.Accumulate(s.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 6 || len(m.Content) != 1 || m.Content[0].Text != "bedrock reply to: stream me please" || m.StopReason != "end_turn" || m.Usage.OutputTokens == 0 {
		t.Errorf("%d events; message = %+v", n, m)
	}
	if call := fake.Calls()[0]; !call.Stream || !strings.HasSuffix(call.Path, "/invoke-with-response-stream") || gjson.GetBytes(call.Body, "stream").Exists() {
		t.Errorf("call = %s %s", call.Path, call.Body)
	}
}

// TestSDKRefused: a signature made with another secret, or a session
// token the fake does not know, is Bedrock's 403 to the SDK, with the
// exception named in x-amzn-ErrorType.
func TestSDKRefused(t *testing.T) {
	fake := bedrocktest.New(t, bedrocktest.Options{SessionToken: "fake-session-token"})
	tests := []struct {
		name, secret, token, wantType string
	}{
		{"wrong secret", "not-the-secret", "fake-session-token", "InvalidSignatureException"},
		{"wrong token", bedrocktest.DefaultSecretAccessKey, "other-token", "UnrecognizedClientException"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := sdkClient(t, fake, tt.secret, tt.token)
			_, err := c.Messages.New(sdkContext(t), params(profileID, "hi"))
			var aerr *anthropic.Error
			if !errors.As(err, &aerr) || aerr.StatusCode != http.StatusForbidden {
				t.Fatalf("err = %v; want a 403", err)
			}
			if got := aerr.Response.Header.Get("X-Amzn-Errortype"); !strings.HasPrefix(got, tt.wantType+":") {
				t.Errorf("x-amzn-ErrorType = %q; want %s", got, tt.wantType)
			}
		})
	}
}

// TestSDKBearer: a Bedrock API key in AWS_BEARER_TOKEN_BEDROCK is what the
// SDK sends instead of a signature; the fake takes the key it knows and
// refuses another.
func TestSDKBearer(t *testing.T) {
	fake := bedrocktest.New(t, bedrocktest.Options{APIKey: "bedrock-api-key-1"})
	cfg := aws.Config{Region: bedrocktest.DefaultRegion}
	for _, tt := range []struct {
		key  string
		want int
	}{{"bedrock-api-key-1", 200}, {"bedrock-api-key-2", 403}} {
		t.Setenv("AWS_BEARER_TOKEN_BEDROCK", tt.key)
		c := anthropic.NewClient(sdkbedrock.WithConfig(cfg), option.WithBaseURL(fake.URL), option.WithMaxRetries(0))
		_, err := c.Messages.New(sdkContext(t), params(profileID, "hi"))
		var aerr *anthropic.Error
		switch {
		case tt.want == 200 && err != nil:
			t.Errorf("key %s: %v", tt.key, err)
		case tt.want == 403 && (!errors.As(err, &aerr) || aerr.StatusCode != 403):
			t.Errorf("key %s: err = %v; want a 403", tt.key, err)
		}
	}
}

// TestSDKStreamException: an exception frame mid-stream reaches the SDK
// as a stream error carrying the exception's name, as the SDK reads
// Bedrock's own.
func TestSDKStreamException(t *testing.T) {
	fake := bedrocktest.New(t, bedrocktest.Options{Reply: func(bedrocktest.Call) bedrocktest.Reply {
		return bedrocktest.Reply{Exception: "modelStreamErrorException", ExceptionAfter: 3}
	}})
	c := sdkClient(t, fake, bedrocktest.DefaultSecretAccessKey, "")
	s := c.Messages.NewStreaming(sdkContext(t), params(profileID, "break"))
	n := 0
	for s.Next() {
		n++
	}
	if err := s.Err(); n != 3 || err == nil || !strings.Contains(err.Error(), "modelStreamErrorException") {
		t.Errorf("%d events, err = %v; want 3 then modelStreamErrorException", n, err)
	}
}
