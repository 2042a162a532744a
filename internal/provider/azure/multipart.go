package azure

import (
	"bufio"
	"bytes"
	"mime"
	"net/textproto"
)

// The audio and image-edit endpoints take a multipart form whose "model"
// field names the deployment, as openai-go's azure option reads it.

// multipartModel is the value of the multipart form body's "model"
// field ("" when ct is not multipart/form-data or there is none).
func multipartModel(ct string, body []byte) string {
	start, end, ok := modelPart(ct, body)
	if !ok {
		return ""
	}
	return string(body[start:end])
}

// replaceMultipartModel is body with its "model" field's value replaced
// by model; every other byte (other fields, the file, the boundaries)
// stays as the client sent it.
func replaceMultipartModel(ct string, body []byte, model string) ([]byte, bool) {
	start, end, ok := modelPart(ct, body)
	if !ok {
		return nil, false
	}
	out := make([]byte, 0, len(body)-(end-start)+len(model))
	out = append(out, body[:start]...)
	out = append(out, model...)
	return append(out, body[end:]...), true
}

// modelPart finds the "model" field of a multipart/form-data body: the
// offsets of its value in body.
func modelPart(ct string, body []byte) (start, end int, ok bool) {
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return 0, 0, false
	}
	delim := []byte("--" + params["boundary"])
	// Each part starts after a delimiter line and ends at CRLF + the next
	// delimiter (RFC 7578 / RFC 2046 §5.1.1).
	i := bytes.Index(body, delim)
	for i >= 0 {
		lineEnd := bytes.Index(body[i:], []byte("\r\n"))
		if lineEnd < 0 {
			return 0, 0, false
		}
		partStart := i + lineEnd + 2
		next := bytes.Index(body[partStart:], append([]byte("\r\n"), delim...))
		if next < 0 {
			return 0, 0, false
		}
		partEnd := partStart + next
		part := body[partStart:partEnd]
		hdrEnd := bytes.Index(part, []byte("\r\n\r\n"))
		if hdrEnd >= 0 {
			h, err := textproto.NewReader(bufio.NewReader(bytes.NewReader(part[:hdrEnd+4]))).ReadMIMEHeader()
			if err == nil {
				if _, p, err := mime.ParseMediaType(h.Get("Content-Disposition")); err == nil && p["name"] == "model" {
					return partStart + hdrEnd + 4, partEnd, true
				}
			}
		}
		i = partEnd + 2
	}
	return 0, 0, false
}
