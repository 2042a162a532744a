// Package anthropic is the wire format of Anthropic's Messages API
// (POST /v1/messages), behind wire.Format. Requests go to upstreams with
// api: anthropic byte for byte; nothing is translated between APIs.
//
//   - Keying drops stream and metadata; everything else (and, added by the
//     server, the anthropic-version and anthropic-beta headers and the query
//     string) is part of the key.
//   - A stream (message_start, content_block_start/delta/stop,
//     message_delta, message_stop; ping ignored) is assembled into the
//     Message a non-streaming call returns: text, tool_use (its input from
//     the input_json_delta pieces), thinking with its signature, and blocks
//     of kinds Corral does not know kept as they started. Usage comes from
//     message_start and message_delta, cache read and write tokens
//     included. A stream with an error event, or without message_stop, is
//     never stored.
//   - A stored message is replayed as those events, which the official
//     SDKs' accumulators turn back into the same message.
//   - Errors Corral produces have Anthropic's shape,
//     {"type":"error","error":{"type":"not_found_error","message":"..."}}.
//   - Tokens/min: the estimate is the body at 4 bytes a token plus
//     max_tokens; the actual charge is input + output tokens, cache reads
//     and writes included.
package anthropic
