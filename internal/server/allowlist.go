package server

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"

	"github.com/corralhq/corral/internal/keying"
	"github.com/corralhq/corral/internal/objects"
	"github.com/corralhq/corral/internal/tenant"
)

// maxFormModel bounds the model value read from a form body.
const maxFormModel = 256

// checkProxiedModel applies t's model allow-list to a proxied request: the
// model it names (returned) must be allowed, read the way the upstream will
// read it.
//
//   - A JSON body (by Content-Type, or whatever its Content-Type when its
//     first byte after JSON white space is '{') is read with the keying
//     parser, which matches "model" exactly and refuses duplicate and
//     case-variant keys ({"MODEL":...}), so a case-insensitive decoder
//     upstream cannot see a model Corral did not. A body that does not parse,
//     or a "model" that is not a string, is a 400: the upstream might still
//     read a model from it. A byte order mark is refused the same way.
//   - multipart/form-data and application/x-www-form-urlencoded bodies (the
//     audio endpoints) name their model in a "model" field; exactly one is
//     allowed.
//
// Checking only bodies that start with '{' let " {\"model\":...}" through,
// and so did "MODEL" (issue 13, fault 3).
func checkProxiedModel(t *tenant.Tenant, r *http.Request, body []byte) (model string, aerr *apiError) {
	if t.Models == nil || len(body) == 0 {
		return "", nil
	}
	media, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch {
	case media == "multipart/form-data":
		if model, aerr = multipartModel(body, params["boundary"]); aerr != nil {
			return "", aerr
		}
	case media == "application/x-www-form-urlencoded":
		vals, err := url.ParseQuery(string(body))
		if err != nil || len(vals["model"]) > 1 {
			return "", errInvalidRequest("The form body must be valid and name at most one model.", "model")
		}
		model = vals.Get("model")
	case media == "application/json" || strings.HasSuffix(media, "+json") || looksLikeJSONObject(body):
		req, err := keying.Parse(t.ID, "", body)
		if err != nil {
			return "", errBadBody(err)
		}
		if req.HasModel && req.Model == "" {
			return "", errInvalidRequest("The model parameter must be a non-empty string.", "model")
		}
		model = req.Model
	}
	if model != "" && !t.Allows(model) {
		return model, errModelNotAllowed(model)
	}
	return model, nil
}

// looksLikeJSONObject reports whether body, after a byte order mark and
// JSON white space, starts an object.
func looksLikeJSONObject(body []byte) bool {
	body = bytes.TrimPrefix(body, []byte("\xef\xbb\xbf"))
	body = bytes.TrimLeft(body, " \t\r\n")
	return len(body) > 0 && body[0] == '{'
}

// multipartModel returns the value of the one "model" field of a
// multipart/form-data body ("" when there is none).
func multipartModel(body []byte, boundary string) (string, *apiError) {
	bad := errInvalidRequest("The multipart body must be valid and name at most one model.", "model")
	if boundary == "" {
		return "", bad
	}
	mr := multipart.NewReader(bytes.NewReader(body), boundary)
	model, seen := "", false
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return model, nil
		}
		if err != nil {
			return "", bad
		}
		if p.FormName() != "model" {
			continue
		}
		v, err := io.ReadAll(io.LimitReader(p, maxFormModel+1))
		if seen || err != nil || len(v) > maxFormModel {
			return "", bad
		}
		model, seen = string(v), true
	}
}

// checkNamedModels applies t's model allow-list to the models a body names
// below its top level, where its endpoint's schema puts them (a Message
// Batch's requests[*].params.model, a realtime session's model, a
// grader's model, an eval run's data_source.model): each must be allowed,
// as the top-level one must. Fine-tuned ones are also object references,
// owned by their job's tenant (guardObjects checks that).
func checkNamedModels(t *tenant.Tenant, found objects.Body) *apiError {
	for _, m := range found.Models {
		if !t.Allows(m) {
			return errModelNotAllowed(m)
		}
	}
	return nil
}
