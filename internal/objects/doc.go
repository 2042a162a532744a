// Package objects keeps tenants out of each other's stored objects.
//
// Every tenant behind Corral shares Corral's upstream accounts, so every
// object an upstream stores (a file, a batch, a stored response or chat
// completion, a conversation, a vector store, an assistant or thread, a
// fine-tuning job, a container, an eval, a video) is visible to every
// tenant that knows or guesses its id. This package owns the one fact that
// closes that hole: which tenant created which object, through which
// upstream.
//
// It has three parts, all free of HTTP:
//
//   - Route classifies a request path: does it create objects, list them,
//     or act on one named by its id (route.go).
//   - Refs finds every object id (and nested model) a request body names
//     where its endpoint's schema puts them, in JSON, form and multipart
//     bodies (refs.go, positions.go); BatchLine does the same for one line
//     of a batch's input file; Created finds the ids an
//     upstream answer created (created.go); FilterList keeps only the
//     caller's objects in a list page (list.go).
//   - Registry records and answers ownership over a Store: Redis in
//     distributed mode, a bbolt file in embedded mode, memory in tests
//     (registry.go, redis.go, bolt.go, memory.go).
//
// The rule the server enforces with them is simple and fails closed: a
// request that names an object id this tenant does not own is answered 404
// without being forwarded, whether the id belongs to another tenant, was
// created outside Corral, or does not exist at all; the three cases are
// indistinguishable from outside. Children of an object (a thread's
// messages, a vector store's files, a conversation's items) are reached
// only through their parent's path, which the upstream scopes, so owning
// the parent is what counts.
package objects
