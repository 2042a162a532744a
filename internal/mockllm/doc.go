// Package mockllm is a deterministic, OpenAI-compatible fake model.
//
// Corral's demo mode runs it in-process as the upstream, the tests run it as
// an httptest server, and the benchmarks run it as a separate process
// (cmd/mockllm). It exists so that the gateway can be exercised end to end
// (streaming, error classification, cancellation, coalescing) with no
// network, no account and no cost, and so that a test can check that the
// answer a client got is byte for byte the answer the upstream produced.
//
// # Endpoints
//
//	POST /v1/chat/completions   chat, streaming or not, n choices
//	POST /v1/completions        legacy completions, streaming or not
//	POST /v1/embeddings         deterministic vectors
//	POST /v1/responses          the Responses API, streaming (typed events) or not
//	POST /v1/messages           Anthropic's Messages API, streaming or not
//	POST /v1/messages/count_tokens  {"input_tokens": words of system and messages}
//	GET  /v1/models             Options.Models
//	GET  /v1/models/{id}        one model (a listed one, or its -tool variant),
//	                            or 404 model_not_found
//	GET  /mock/stats            Stats as JSON
//	POST /mock/reset            Reset, answers 204
//
// With an anthropic-version header (Anthropic's SDKs and Claude Code send
// it) the models answer in Anthropic's shapes: the list is a page,
// {"data":[{"type":"model","id":...,"display_name":...,"created_at":...}],
// "has_more":...,"first_id":...,"last_id":...}, of limit models (1 to
// 1000, default 20) after after_id or before before_id; one model is
// {"type":"model",...}, display_name as Anthropic writes it ("Claude
// Sonnet 5.5" for claude-sonnet-5-5); an unknown one is Anthropic's 404
// not_found_error. DefaultModels lists current Claude ids
// (claude-sonnet-5-5, claude-opus-5-5, claude-haiku-5-5) and older ones
// (claude-sonnet-4-5, ...), so clients that look a model up before using
// it find the ones the README names.
//
// Any other path is a 404 with an OpenAI-shaped error body. The mock never
// checks Authorization; tests inspect it through Options.OnRequest.
//
// # Replies
//
// Replies are derived from the request, so the same body always gets the
// same answer:
//
//   - chat: "mock reply to: " + the text of the last user message (a string,
//     or the "text" fields of a content-part array joined by a space);
//   - completions: "mock reply to: " + the prompt, one choice per prompt when
//     prompt is an array of strings (token arrays are used as their JSON text);
//   - embeddings: one unit vector per input, derived from sha256 of the input,
//     of length "dimensions" (default 8); "encoding_format": "base64" gives
//     little-endian float32s in base64 as OpenAI does.
//
// The id is a hash of the body without stream and stream_options
// ("chatcmpl-<hex>", "cmpl-<hex>"), so a streamed and a plain answer to one
// prompt share it, as they share content and usage; created is a fixed
// timestamp, model echoes the request and usage counts words:
// prompt_tokens is the number of words in all the prompt text (at least 1),
// completion_tokens the number of words in the reply times the number of
// choices.
//
// A streamed reply ("stream": true) is, in order: one chunk per choice with
// delta.role "assistant" (chat only); the reply split into StreamChunks pieces
// on rune boundaries (fewer when the reply has fewer runes), one chunk per
// piece and choice, whose concatenation is exactly the non-streamed content;
// one chunk per choice with an empty delta and finish_reason "stop"; when
// stream_options.include_usage is true a chunk with "choices": [] and usage
// (and "usage": null in every earlier chunk, as OpenAI does); and finally
// "data: [DONE]". Every event is flushed as it is written. ChunkDelay is
// waited before each content chunk, so a stream lasts about
// Latency + StreamChunks*ChunkDelay.
//
// A Responses API answer ("resp_<hex>", one message item "msg_<hex>" with one
// output_text part, usage in input/output tokens) replies to the last user
// message of "input" (a string, or an item list whose content is a string or
// parts with "text"). Streamed, it is response.created, response.in_progress,
// response.output_item.added, response.content_part.added, one
// response.output_text.delta per piece, response.output_text.done,
// response.content_part.done, response.output_item.done and
// response.completed, each "event: <type>" + "data: {...}" with increasing
// sequence_number and no [DONE]; a cut ends it before response.completed.
//
// A Messages answer ("msg_<hex>", one text block, stop_reason "end_turn",
// usage in input/output tokens with zero cache tokens) replies to the last
// user message; max_tokens is required, as Anthropic requires it. Streamed,
// it is message_start, content_block_start, ping, one content_block_delta
// (text_delta) per piece, content_block_stop, message_delta (stop reason,
// output tokens) and message_stop. Errors on these paths have Anthropic's
// shape, {"type":"error","error":{"type":"not_found_error","message":...}},
// and mock-529 answers Anthropic's 529 overloaded_error.
//
// # Models with special behaviour
//
// Any model name is accepted and echoed. These names inject behaviour, on
// every POST endpoint:
//
//	mock-400 mock-401 mock-403 mock-404 mock-408 mock-409 mock-422
//	mock-429 mock-500 mock-502 mock-503
//	    the status in the name with an OpenAI error body
//	    {"error":{"message":...,"type":...,"param":null,"code":...}};
//	    404 has code model_not_found, 401 invalid_api_key and 429
//	    rate_limit_exceeded plus Retry-After: 1 and retry-after-ms: 1000
//	mock-slow   a normal answer after Options.SlowLatency
//	mock-hang   never answers; returns when the client goes away
//	mock-stall  answers 200 with its headers (text/event-stream for a
//	            stream, else application/json), flushed, then sends no
//	            byte more; returns when the client goes away
//	mock-cut    a stream ends abruptly after half of its content chunks,
//	            with no finish_reason and no [DONE]; a non-streamed body is
//	            cut in the middle (Content-Length promises more)
//	mock-tool   (or any name ending in -tool, e.g. claude-sonnet-5-5-tool)
//	            a tool call instead of text; see "Tool calls" below
//
// # Tool calls
//
// A tool-calling model answers a chat, Responses or Messages request with
// one call to the first tool in the request's "tools" that has a name
// (chat's function.name, or name), or to "mock_tool" when there is none,
// unless the conversation ends in a tool's result: then it answers with
// text, "mock reply to: " + the result's text, as a model does once it has
// what it asked for, so an agent's loop ends after one call. The result is
// last when the last chat message has role "tool" (or "function"), the
// last Responses input item is a function_call_output or
// custom_tool_call_output (output a string or parts with "text"), or the
// last Messages message is a user message whose last content block is a
// tool_result (content a string or text blocks). A message after the
// result (the user asking more) gets a call again.
// Its arguments are the JSON object {"input": <the last user text>}, and
// its id derives from the body hash, so the same request always gets the
// same call, streamed or not:
//
//   - chat: message.content null, tool_calls [{id "call_<hex>", type
//     "function", function {name, arguments}}] in every choice, finish_reason
//     "tool_calls". Streamed: a chunk with the role, the call's index, id,
//     type, name and empty arguments, then the arguments in StreamChunks
//     fragments ({"tool_calls":[{"index":0,"function":{"arguments":...}}]}),
//     then the finish chunk, usage and [DONE] as for text;
//   - Responses: one output item {type "function_call", id "fc_<hex>",
//     call_id "call_<hex>", name, arguments, status}. Streamed:
//     response.created, response.in_progress, response.output_item.added
//     (in_progress, arguments ""), one response.function_call_arguments.delta
//     per fragment, response.function_call_arguments.done,
//     response.output_item.done and response.completed;
//   - Messages: one block {type "tool_use", id "toolu_<hex>", name, input},
//     stop_reason "tool_use". Streamed: content_block_start with the block
//     and input {}, one input_json_delta per fragment of the input, then
//     content_block_stop and message_delta as for text.
//
// The call's arguments (chat's arguments, the Responses item's arguments,
// the tool_use block's input) are a value of the tool's input schema
// (chat's function.parameters, parameters, input_schema; see "Structured
// output"); a tool whose schema names no property (none, or
// {"type":"object"}) gets {"input": <the last user text>}.
//
// Overrides apply as for text (chunks, delays, cuts); "reply" does not
// change the call.
//
// # Structured output
//
// A request that asks for JSON gets JSON as its text, streamed in pieces
// like any text: chat's response_format, the Responses API's text.format
// (echoed in the answer's text.format) and Messages' output_config.format
// (or the beta's output_format). {"type":"json_object"} gets {"reply":
// "mock reply to: ..."}; {"type":"json_schema"} gets a value of the
// schema, the same for the same schema: the const, the first enum member,
// the first branch of anyOf and oneOf, allOf's branches merged, $ref
// followed within the document ($defs, definitions, any JSON pointer);
// an object has its required properties and, near the top, its optional
// ones (minProperties met from additionalProperties); an array has its
// prefixItems and items up to minItems (one near the top), each a
// different variant for uniqueItems; a string is "mock" or an example of
// its format (date-time, date, email, uri, uuid, ipv4, ...), padded to
// minLength and cut to maxLength; a number meets minimum, maximum (and
// their exclusive forms) and multipleOf. pattern, not, if/then/else and
// the like are not read. Deep in the value a choice prefers a branch
// without $ref, and optional members are left out, so recursive schemas
// end. The generator is bounded for any schema: 24 levels of nesting or
// $ref, 4096 values and 64 KiB of strings per answer; a schema that needs
// more (minItems: 1000000) gets a value cut at the bounds, which it does
// not accept. A -tool model's call wins over the format, except after a
// tool's result.
//
// A cut is made with panic(http.ErrAbortHandler), which net/http servers
// (and so httptest) turn into an aborted connection or HTTP/2 stream reset.
// Anything that calls ServeHTTP directly must be ready for that panic.
//
// # Per-request overrides
//
// The gateway forwards bodies untouched, so a test can steer the mock through
// the gateway with an extra body field (all members optional):
//
//	"mock": {
//	  "latency_ms":     N,  // replaces the latency before the first byte
//	  "chunks":         N,  // content chunks in a streamed reply
//	  "chunk_delay_ms": N,  // delay before each content chunk
//	  "status":         N,  // answer with this error status (400-599)
//	  "cut_after":      N,  // stream: end abruptly after N content chunks;
//	                        // non-stream: cut the body in the middle
//	  "reply":          "text" // the exact reply content
//	}
//
// Overrides win over the model name's behaviour and over Options, except
// that mock-hang always hangs and mock-stall always stalls. An invalid override is a 400.
//
// # Counting and waiting
//
// Stats counts API requests (total, per path, per model), those in flight,
// those cancelled (the request context ended before the mock finished
// writing its answer: this is how gateway tests check that a client
// disconnect cancels the upstream call), streams, error answers and cuts.
// Wait and WaitCancelled block on a channel until the counters reach a
// condition, so tests never sleep to synchronise.
package mockllm
