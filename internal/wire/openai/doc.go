// Package openai is OpenAI's wire format for Chat Completions, legacy
// Completions and Embeddings, behind wire.Format: the keying policy
// (ChatPolicy and keying.OpenAI), the facts and token estimate of a body, rebuilding a
// stored completion from a stream's chunks (Assembler) and rendering one
// back as a stream (Replay), the usage chunk a follower did not ask for,
// and OpenAI's error object, as a body and as a stream's last event.
//
// Assembler and Replay are each other's inverse on what clients read, so
// a streaming miss serves a later non-streaming hit and the other way
// round. Both are hand-written over raw bytes (jsonstr for strings)
// because they run once per chunk of every stream.
package openai
