package mockllm

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// validate checks v against schema with a real JSON Schema validator
// (draft 2020-12 unless the schema says otherwise, formats asserted).
func validate(t *testing.T, schema string, v []byte) error {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatalf("schema %s: %v", schema, err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("mem://schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("mem://schema.json")
	if err != nil {
		t.Fatalf("compile %s: %v", schema, err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(v))
	if err != nil {
		t.Fatalf("value %s is not JSON: %v", v, err)
	}
	return sch.Validate(inst)
}

// schemaCases are schemas of the shapes clients send: Zod's and
// Pydantic's output, OpenAI's strict mode, the keywords the generator
// reads, and recursive ones.
var schemaCases = []struct{ name, schema string }{
	{"object", `{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},"ok":{"type":"boolean"},"score":{"type":"number"}},"required":["name","age","ok","score"],"additionalProperties":false}`},
	{"zod generateObject", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"recipe":{"type":"object","properties":{"name":{"type":"string"},"ingredients":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"},"amount":{"type":"string"}},"required":["name","amount"],"additionalProperties":false}},"steps":{"type":"array","items":{"type":"string"}}},"required":["name","ingredients","steps"],"additionalProperties":false}},"required":["recipe"],"additionalProperties":false}`},
	{"enum const", `{"type":"object","properties":{"unit":{"enum":["c","f"]},"kind":{"const":"weather"},"n":{"const":3}},"required":["unit","kind","n"]}`},
	{"anyOf nullable", `{"type":"object","properties":{"a":{"anyOf":[{"type":"string"},{"type":"null"}]},"b":{"type":["null","integer"]}},"required":["a","b"]}`},
	{"oneOf", `{"oneOf":[{"type":"object","properties":{"kind":{"const":"a"}},"required":["kind"]},{"type":"string","maxLength":0}]}`},
	{"allOf", `{"allOf":[{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]},{"properties":{"b":{"type":"integer","minimum":5}},"required":["b"]}]}`},
	{"bounds", `{"type":"object","properties":{"i":{"type":"integer","minimum":10,"maximum":20,"multipleOf":7},"x":{"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1},"s":{"type":"string","minLength":12,"maxLength":15},"t":{"type":"string","maxLength":2},"neg":{"type":"integer","maximum":-3}},"required":["i","x","s","t","neg"]}`},
	{"arrays", `{"type":"object","properties":{"tags":{"type":"array","items":{"type":"string"},"minItems":3,"maxItems":5,"uniqueItems":true},"nums":{"type":"array","items":{"type":"integer"},"minItems":2,"uniqueItems":true},"pair":{"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false},"none":{"type":"array","maxItems":0}},"required":["tags","nums","pair","none"]}`},
	{"formats", `{"type":"object","properties":{"at":{"type":"string","format":"date-time"},"d":{"type":"string","format":"date"},"mail":{"type":"string","format":"email"},"u":{"type":"string","format":"uri"},"id":{"type":"string","format":"uuid"},"ip":{"type":"string","format":"ipv4"}},"required":["at","d","mail","u","id","ip"]}`},
	{"defs ref", `{"$defs":{"point":{"type":"object","properties":{"x":{"type":"number"},"y":{"type":"number"}},"required":["x","y"]}},"type":"object","properties":{"from":{"$ref":"#/$defs/point"},"to":{"$ref":"#/$defs/point"}},"required":["from","to"]}`},
	{"definitions ref draft-07", `{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"name":{"type":"string","minLength":1}},"type":"object","properties":{"n":{"$ref":"#/definitions/name"}},"required":["n"]}`},
	{"recursive tree", `{"$defs":{"node":{"type":"object","properties":{"value":{"type":"integer"},"children":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["value","children"],"additionalProperties":false}},"$ref":"#/$defs/node"}`},
	{"recursive required linked list", `{"$defs":{"list":{"type":"object","properties":{"head":{"type":"string"},"tail":{"anyOf":[{"$ref":"#/$defs/list"},{"type":"null"}]}},"required":["head","tail"]}},"$ref":"#/$defs/list"}`},
	{"root recursion", `{"type":"object","properties":{"name":{"type":"string"},"sub":{"type":["array","null"],"items":{"$ref":"#"}}},"required":["name","sub"]}`},
	{"minProperties", `{"type":"object","additionalProperties":{"type":"integer"},"minProperties":3}`},
	{"true and empty", `{"type":"object","properties":{"any":true,"empty":{}},"required":["any","empty"]}`},
	{"no type", `{"properties":{"a":{"type":"string"}},"required":["a"]}`},
	{"array root", `{"type":"array","items":{"type":"object","properties":{"k":{"type":"string"}},"required":["k"]},"minItems":2}`},
	{"pydantic", `{"$defs":{"Color":{"enum":["red","green"],"title":"Color","type":"string"}},"properties":{"color":{"$ref":"#/$defs/Color"},"count":{"default":1,"title":"Count","type":"integer"}},"required":["color"],"title":"Thing","type":"object"}`},
}

// TestSchemaValueValidates: the value made for every schema validates
// against it, and is the same on every call.
func TestSchemaValueValidates(t *testing.T) {
	for _, tt := range schemaCases {
		t.Run(tt.name, func(t *testing.T) {
			v, ok := schemaValue(json.RawMessage(tt.schema))
			if !ok {
				t.Fatalf("schemaValue refused %s", tt.schema)
			}
			if err := validate(t, tt.schema, v); err != nil {
				t.Errorf("value %s does not validate: %v", v, err)
			}
			if again, _ := schemaValue(json.RawMessage(tt.schema)); !bytes.Equal(again, v) {
				t.Errorf("second value %s differs from %s", again, v)
			}
		})
	}
}

// TestSchemaValueBounded: schemas that ask for too much (a huge minItems,
// minLength or minProperties, deep nesting, a $ref cycle with no way out)
// get a value within the bounds, quickly.
func TestSchemaValueBounded(t *testing.T) {
	deep := strings.Repeat(`{"type":"array","minItems":2,"items":`, 200) + `{"type":"string"}` + strings.Repeat(`}`, 200)
	for _, schema := range []string{
		`{"type":"array","items":{"type":"string"},"minItems":1000000000}`,
		`{"type":"string","minLength":1000000000}`,
		`{"type":"array","minItems":1000000000}`,
		`{"type":"number","minimum":1e300,"multipleOf":1e-300}`,
		`{"type":"integer","minimum":1e308,"multipleOf":1e-320}`,
		`{"type":"object","minProperties":1000000000}`,
		`{"allOf":[{"$ref":"#/$defs/a"},{"$ref":"#/$defs/a"}],"$defs":{"a":{"allOf":[{"$ref":"#/$defs/b"},{"$ref":"#/$defs/b"}]},"b":{"allOf":[{"$ref":"#/$defs/a"},{"$ref":"#/$defs/a"}]}}}`,
		`{"type":"object","additionalProperties":{"type":"string","minLength":100000},"minProperties":1000000000}`,
		`{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`,
		`{"$defs":{"n":{"type":"object","properties":{"l":{"$ref":"#/$defs/n"},"r":{"$ref":"#/$defs/n"}},"required":["l","r"]}},"$ref":"#/$defs/n"}`,
		`{"type":"array","minItems":1000,"items":{"type":"array","minItems":1000,"items":{"type":"array","minItems":1000,"items":{"type":"string","minLength":1000}}}}`,
		deep,
	} {
		start := time.Now()
		v, ok := schemaValue(json.RawMessage(schema))
		if !ok || len(v) > 2*maxStringBytes+16*maxValues {
			t.Errorf("schema %.80s: %d bytes, ok %v", schema, len(v), ok)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("schema %.80s took %v", schema, d)
		}
	}
}

// FuzzSchemaValue: any input is refused or gets a JSON value within the
// bounds; nothing panics.
func FuzzSchemaValue(f *testing.F) {
	for _, tt := range schemaCases {
		f.Add(tt.schema)
	}
	f.Add(`{"$ref":"#/a/0/b"}`)
	f.Fuzz(func(t *testing.T, schema string) {
		start := time.Now()
		v, ok := schemaValue(json.RawMessage(schema))
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Errorf("schema %q took %v", schema, d)
		}
		if !ok {
			return
		}
		if !json.Valid(v) || len(v) > 2*maxStringBytes+16*maxValues {
			t.Errorf("schema %q: value %d bytes, valid %v", schema, len(v), json.Valid(v))
		}
	})
}

// TestSchemaNumbers: numbers meet inclusive and exclusive bounds and
// multipleOf, as integers and as numbers.
func TestSchemaNumbers(t *testing.T) {
	for _, schema := range []string{
		`{"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1}`,
		`{"type":"number","minimum":0.5,"maximum":0.75}`,
		`{"type":"integer","exclusiveMinimum":2,"exclusiveMaximum":4}`,
		`{"type":"integer","exclusiveMinimum":2.5}`,
		`{"type":"integer","minimum":10,"maximum":20,"multipleOf":7}`,
		`{"type":"integer","maximum":-3}`,
		`{"type":"number","multipleOf":0.25,"minimum":0.1}`,
		`{"type":"integer","multipleOf":5,"exclusiveMaximum":10,"minimum":3}`,
		`{"type":"array","items":{"type":"integer","minimum":1,"maximum":100},"minItems":3,"uniqueItems":true}`,
	} {
		v, _ := schemaValue(json.RawMessage(schema))
		if err := validate(t, schema, v); err != nil {
			t.Errorf("schema %s: value %s: %v", schema, v, err)
		}
	}
}
