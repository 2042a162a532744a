package bedrocktest

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
	"strings"
)

// This file writes AWS's event stream (application/vnd.amazon.eventstream)
// as Bedrock's runtime sends InvokeModelWithResponseStream's answer, from
// the format's description rather than the SDK's encoder, so that the
// decoder under test meets an independent writer:
//
//	total length   uint32, big-endian, the whole frame
//	headers length uint32
//	prelude CRC    uint32, CRC-32 (IEEE) of the 8 bytes above
//	headers        name length uint8, name, value type uint8 (7 = string),
//	               value length uint16, value; repeated
//	payload        the rest
//	message CRC    uint32, CRC-32 of every byte before it

// frame is one event stream message with string headers, in order.
func frame(headers [][2]string, payload []byte) []byte {
	var h []byte
	for _, kv := range headers {
		h = append(h, byte(len(kv[0])))
		h = append(h, kv[0]...)
		h = append(h, 7)
		h = binary.BigEndian.AppendUint16(h, uint16(len(kv[1])))
		h = append(h, kv[1]...)
	}
	total := 12 + len(h) + len(payload) + 4
	b := make([]byte, 0, total)
	b = binary.BigEndian.AppendUint32(b, uint32(total))
	b = binary.BigEndian.AppendUint32(b, uint32(len(h)))
	b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
	b = append(b, h...)
	b = append(b, payload...)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
}

// chunkFrame is the chunk event carrying one Anthropic event, as Bedrock
// sends it: {"bytes":"<base64 of the event>","p":"<padding>"}. The "p"
// field pads frames to hide the length of the text (Bedrock's own
// mitigation of length side channels); its length varies with n.
func chunkFrame(event []byte, n int) []byte {
	payload, _ := json.Marshal(struct {
		Bytes string `json:"bytes"`
		P     string `json:"p"`
	}{base64.StdEncoding.EncodeToString(event), strings.Repeat("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0", 1)[:1+n%50]})
	return frame([][2]string{
		{":event-type", "chunk"},
		{":content-type", "application/json"},
		{":message-type", "event"},
	}, payload)
}

// exceptionFrame is the exception message Bedrock ends a stream with:
// :exception-type names it (camel case, "throttlingException"), the
// payload is {"message":"..."}.
func exceptionFrame(name, message string) []byte {
	payload, _ := json.Marshal(struct {
		Message string `json:"message"`
	}{message})
	return frame([][2]string{
		{":exception-type", name},
		{":content-type", "application/json"},
		{":message-type", "exception"},
	}, payload)
}
