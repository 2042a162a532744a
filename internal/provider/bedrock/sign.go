package bedrock

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/corralhq/corral/internal/upstream"
)

// service is the SigV4 signing name of Bedrock's runtime API.
const service = "bedrock"

// signer is the upstream.Authorizer for auth sigv4: it signs each request
// with the process's AWS credentials (the provider caches them and
// refreshes them before they expire), over the request's final headers
// and its body's SHA-256.
type signer struct {
	creds  aws.CredentialsProvider
	region string
	v4     *v4.Signer
	now    func() time.Time
}

var _ upstream.Authorizer = (*signer)(nil)

func newSigner(creds aws.CredentialsProvider, region string, now func() time.Time) *signer {
	if now == nil {
		now = time.Now
	}
	return &signer{creds: creds, region: region, v4: v4.NewSigner(), now: now}
}

// unsigned are headers left out of the signature, as anthropic-sdk-go
// leaves them: trace context a hop may rewrite without changing the call.
var unsigned = [...]string{"Traceparent", "Tracestate", "Baggage"}

// Authorize signs r. The error names the failing step and the chain's own
// error, never a credential.
func (s *signer) Authorize(ctx context.Context, r *http.Request, body []byte) error {
	creds, err := s.creds.Retrieve(ctx)
	if err != nil {
		return fmt.Errorf("bedrock: AWS credentials: %w", err)
	}
	sum := sha256.Sum256(body)
	var held [len(unsigned)][]string
	for i, k := range unsigned {
		held[i] = r.Header[k]
		delete(r.Header, k)
	}
	err = s.v4.SignHTTP(ctx, creds, r, hex.EncodeToString(sum[:]), service, s.region, s.now())
	for i, k := range unsigned {
		if held[i] != nil {
			r.Header[k] = held[i]
		}
	}
	if err != nil {
		return fmt.Errorf("bedrock: sign: %w", err)
	}
	return nil
}
