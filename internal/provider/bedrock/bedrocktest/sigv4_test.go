package bedrocktest_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/corralhq/corral/internal/provider/bedrock/bedrocktest"
)

// TestSigV4Checks: the fake refuses a signed request whose body, signed
// header or path changed after signing, one signed for another region
// or too long ago, and one with no signature; the untouched request
// passes.
func TestSigV4Checks(t *testing.T) {
	fake := bedrocktest.New(t, bedrocktest.Options{})
	body := `{"anthropic_version":"bedrock-2023-05-31","max_tokens":8,"messages":[{"role":"user","content":"x"}]}`
	signed := func(t *testing.T, region string, at time.Time) *http.Request {
		req, _ := http.NewRequest(http.MethodPost, fake.URL+"/model/"+profileID+"/invoke", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		sum := sha256.Sum256([]byte(body))
		creds := aws.Credentials{AccessKeyID: bedrocktest.DefaultAccessKeyID, SecretAccessKey: bedrocktest.DefaultSecretAccessKey}
		if err := v4.NewSigner().SignHTTP(t.Context(), creds, req, hex.EncodeToString(sum[:]), "bedrock", region, at); err != nil {
			t.Fatal(err)
		}
		return req
	}
	tests := []struct {
		name     string
		give     func(t *testing.T) *http.Request
		want     int
		wantType string
	}{
		{"as signed", func(t *testing.T) *http.Request { return signed(t, "us-east-1", time.Now()) }, 200, ""},
		{"body changed", func(t *testing.T) *http.Request {
			r := signed(t, "us-east-1", time.Now())
			nb := strings.Replace(body, `"max_tokens":8`, `"max_tokens":9`, 1)
			r.Body, r.ContentLength = io.NopCloser(strings.NewReader(nb)), int64(len(nb))
			return r
		}, 403, "InvalidSignatureException"},
		{"signed header changed", func(t *testing.T) *http.Request {
			r := signed(t, "us-east-1", time.Now())
			r.Header.Set("Content-Type", "text/plain")
			return r
		}, 403, "InvalidSignatureException"},
		{"path changed", func(t *testing.T) *http.Request {
			r := signed(t, "us-east-1", time.Now())
			r.URL.Path = strings.Replace(r.URL.Path, "v1:0", "v2:0", 1)
			return r
		}, 403, "InvalidSignatureException"},
		{"other region", func(t *testing.T) *http.Request { return signed(t, "eu-west-1", time.Now()) }, 403, "InvalidSignatureException"},
		{"signed 10 minutes ago", func(t *testing.T) *http.Request { return signed(t, "us-east-1", time.Now().Add(-10*time.Minute)) }, 403, "InvalidSignatureException"},
		{"unsigned", func(t *testing.T) *http.Request {
			r, _ := http.NewRequest(http.MethodPost, fake.URL+"/model/"+profileID+"/invoke", strings.NewReader(body))
			return r
		}, 403, "MissingAuthenticationTokenException"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := http.DefaultClient.Do(tt.give(t))
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			_, _ = b.ReadFrom(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want || (tt.wantType != "" && !strings.HasPrefix(resp.Header.Get("X-Amzn-Errortype"), tt.wantType+":")) {
				t.Errorf("%d %s %s; want %d %s", resp.StatusCode, resp.Header.Get("X-Amzn-Errortype"), b.String(), tt.want, tt.wantType)
			}
			if tt.want == 403 && !strings.HasPrefix(b.String(), `{"message":"`) {
				t.Errorf("body %s; want Bedrock's {\"message\":...}", b.String())
			}
		})
	}
}
