// Package responses is the wire format of OpenAI's Responses API
// (POST /v1/responses), behind wire.Format.
//
// What differs from Chat Completions, and why:
//
//   - Keying keeps store and previous_response_id: a stored response and
//     an unstored one are different answers to the tenant (one has an id
//     it can follow up on), and previous_response_id changes the context
//     the model sees. stream, stream_options, user, metadata and
//     client_metadata are dropped, and with store false the ids of input
//     items that carry their whole content (see Policy).
//   - Some requests are never cached or coalesced (Bypass): background
//     runs (their answer is a job, not a result), requests inside a
//     conversation (the conversation changes with every call), and hosted
//     tools (web search, file search, code interpreter, ...: their answers
//     depend on the world, not on the prompt alone).
//   - A stream is typed events ("event: <type>" + "data: {...}" with a
//     sequence_number) and ends with response.completed, whose "response"
//     is the whole answer: that object is what is stored. A stream that
//     ends any other way (response.failed, response.incomplete, error, a
//     cut) stores nothing.
//   - A stored answer is replayed as the event sequence a streaming client
//     expects: response.created, response.in_progress, then per output
//     item its added/delta/done events, and response.completed.
//   - Tokens/min: the estimate is the whole body at 4 bytes a token plus
//     max_output_tokens (256 when absent); the actual charge is usage's
//     input_tokens + output_tokens.
package responses
