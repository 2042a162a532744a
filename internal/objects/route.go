package objects

import "strings"

// Op is what a request does to stored objects.
type Op int

const (
	// None: the path is not an object path Corral knows.
	None Op = iota
	// Create makes a new object in a collection (POST /files).
	Create
	// List reads a collection (GET /files); the answer is filtered.
	List
	// Object acts on one object named in the path (GET /files/{id},
	// DELETE /batches/{id}, POST /responses/{id}/cancel, ...).
	Object
	// Action is a POST below a collection that names no object
	// (POST /responses/input_tokens): forwarded after the body check.
	Action
)

// The provider APIs a request may speak. Each has its own collections:
// /files is OpenAI's Files API for an OpenAI client and Anthropic's for a
// request that carries anthropic-version, and an object of one is never
// reached through the other.
const (
	OpenAI    = "openai"
	Anthropic = "anthropic"
)

// Access is Route's verdict on one request.
type Access struct {
	Op Op
	// API is the provider API the request speaks (OpenAI, Anthropic); ""
	// is OpenAI's. Only objects of that API's kinds are reached.
	API string
	// Kind is the collection's object kind ("file", "batch", ...).
	Kind string
	// ID is the object named in the path (Op == Object).
	ID string
	// Delete is true for DELETE on the object itself, whose success
	// removes the ownership record.
	Delete bool
}

// collection is one family of stored objects under /v1.
type collection struct {
	path string // below /v1, without a trailing slash
	kind string
	// actions are second segments that name an operation, not an id, and
	// what a POST to them does.
	actions map[string]Op
}

// collections are the object paths of OpenAI's API that Corral knows.
// Everything below a collection's path that starts with an id segment is
// that object's (or its children's, which the upstream scopes to it).
// Longer paths first, so /chat/completions wins over a shorter prefix.
var collections = []collection{
	{path: "/fine_tuning/jobs", kind: "fine_tuning_job"},
	// ChatKit threads are made by the ChatKit front end at the upstream,
	// never through Corral, so they are nobody's until an operator
	// assigns them: listing or reading them through the shared key would
	// show every tenant's conversations.
	{path: "/chatkit/sessions", kind: "chatkit_session"},
	{path: "/chatkit/threads", kind: "chatkit_thread"},
	{path: "/chat/completions", kind: "chat_completion"},
	{path: "/vector_stores", kind: "vector_store"},
	{path: "/conversations", kind: "conversation"},
	{path: "/responses", kind: "response", actions: map[string]Op{"input_tokens": Action, "compact": Action}},
	{path: "/assistants", kind: "assistant"},
	{path: "/containers", kind: "container"},
	{path: "/batches", kind: "batch"},
	{path: "/threads", kind: "thread", actions: map[string]Op{"runs": Create}},
	{path: "/uploads", kind: "upload"},
	{path: "/videos", kind: "video"},
	{path: "/files", kind: "file"},
	{path: "/evals", kind: "eval"},
	// Fine-tuned models ("ft:...") are their job owner's; other models
	// are everyone's (Route answers None for them).
	{path: "/models", kind: "model"},
}

// anthropicCollections are the object paths of Anthropic's API: its
// Message Batches (their results are every prompt's answers) and its
// Files live on the shared Anthropic account like OpenAI's. Its models
// are everyone's.
var anthropicCollections = []collection{
	{path: "/messages/batches", kind: "message_batch"},
	{path: "/files", kind: "anthropic_file"},
}

// anthropicKinds are the kinds of Anthropic's objects; every other kind is
// OpenAI's.
var anthropicKinds = map[string]bool{"message_batch": true, "anthropic_file": true}

// KindAPI is the API whose objects are of kind.
func KindAPI(kind string) string {
	if anthropicKinds[kind] {
		return Anthropic
	}
	return OpenAI
}

// API is the API the object belongs to.
func (o *Owner) API() string { return KindAPI(o.Kind) }

// IsAPI reports whether api names the same API as want ("" is OpenAI).
func IsAPI(api, want string) bool {
	if api == "" {
		api = OpenAI
	}
	return api == want
}

// Route classifies a request by its method and its path below /v1, for
// the API its path alone says (Anthropic's below /messages, else
// OpenAI's); RouteFor is Route for a request whose API is known.
func Route(method, path string) Access {
	api := OpenAI
	if p := strings.ToLower(path); p == "/messages" || strings.HasPrefix(p, "/messages/") {
		api = Anthropic
	}
	return RouteFor(api, method, path)
}

// RouteFor classifies a request of api by its method and its path below
// /v1 (as the upstream will see it, already percent-decoded). Paths
// outside the API's known collections are None and keep their plain
// pass-through.
//
// Collections match in any letter case (an upstream or a proxy in front of
// it may route /FILES/x as /files/x); the id keeps its own.
func RouteFor(api, method, path string) Access {
	if api == Anthropic {
		acc := route(method, path, anthropicCollections)
		acc.API = Anthropic
		return acc
	}
	return route(method, path, collections)
}

func route(method, path string, collections []collection) Access {
	path = strings.TrimSuffix(path, "/")
	for _, c := range collections {
		if len(path) < len(c.path) || !strings.EqualFold(path[:len(c.path)], c.path) {
			continue
		}
		rest := path[len(c.path):]
		if rest != "" && rest[0] != '/' {
			continue
		}
		if rest == "" {
			switch method {
			case "POST":
				return Access{Op: Create, Kind: c.kind}
			case "GET", "HEAD":
				return Access{Op: List, Kind: c.kind}
			}
			return Access{Op: Action, Kind: c.kind}
		}
		seg, tail, _ := strings.Cut(rest[1:], "/")
		if op, ok := c.actions[strings.ToLower(seg)]; ok {
			if method != "POST" {
				op = Action
			}
			return Access{Op: op, Kind: c.kind} // e.g. POST /threads/runs makes a thread
		}
		if c.kind == "model" && !IsFineTuned(seg) {
			return Access{Op: None}
		}
		return Access{Op: Object, Kind: c.kind, ID: seg, Delete: method == "DELETE" && tail == ""}
	}
	return Access{Op: None}
}
